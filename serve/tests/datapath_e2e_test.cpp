// datapath_e2e_test.cpp - the datapath through the daemon, end to end: our embedded
// Frontend as the VM, `Daemon` as `uvhost serve` runs it, the control requests as
// `uvhost ctl` sends them. Every poll mode carries traffic; switching modes under load
// loses nothing; two frontends talk through the switch; the worker mappings; a guest
// that stops reading its receive ring costs it drops (counted) and nobody else
// anything; frames refused by a receive queue that is not running are counted apart
// from an overflow; the counters add up (sent = taken + dropped, taken = delivered +
// dropped).
#include <sys/eventfd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve_test_support.h"
#include "uvhost/serve/daemon.h"

namespace uvhost::serve {
namespace {

using namespace uvhost::serve::testing;
using datapath::PollMode;

nlohmann::json stats(Daemon& daemon) {
  nlohmann::json reply = daemon.control({{"cmd", "stats"}});
  EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
  return reply;
}

const nlohmann::json& queue_of(const nlohmann::json& stats, size_t port, size_t index) {
  return stats.at("ports").at(port).at("queues").at(index);
}

// Sends and echoes `frames` in batches (the loopback drops what finds no receive
// buffer, so a batch stays well under the ring); returns how many came back intact.
size_t echo_all(Frontend& frontend, const std::vector<std::vector<std::byte>>& frames, uint32_t pair = 0) {
  constexpr size_t kBatch = 32;
  size_t good = 0;
  for (size_t first = 0; first < frames.size(); first += kBatch) {
    const size_t last = std::min(frames.size(), first + kBatch);
    const std::vector<std::vector<std::byte>> batch(frames.begin() + static_cast<std::ptrdiff_t>(first),
                                                    frames.begin() + static_cast<std::ptrdiff_t>(last));
    if (!send_all(frontend, batch, pair)) return good;
    const auto got = receive(frontend, batch.size(), kPatience, pair);
    for (size_t i = 0; i < got.size() && i < batch.size(); ++i) {
      if (got[i] == reflected(batch[i])) ++good;
    }
    if (got.size() != batch.size()) return good;
  }
  return good;
}

class PollModeTest : public ::testing::TestWithParam<PollMode> {};

TEST_P(PollModeTest, SinkTakesEveryFrameAndCountsAddUp) {
  TempDir dir;
  PortSpec spec = port("sink", dir.file("s.sock"));
  spec.poll.mode = GetParam();
  Daemon daemon({spec});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto frontend = connect(dir.file("s.sock"), error);
  ASSERT_NE(frontend, nullptr) << error;
  const auto frames = make_frames(5000, 1);
  ASSERT_TRUE(send_all(*frontend, frames)) << frontend->error();
  ASSERT_TRUE(wait_tx_done(*frontend)) << frontend->error();

  const nlohmann::json s = stats(daemon);
  const auto& tx = queue_of(s, 0, 1);  // the guest's transmit vring: rx, from the guest
  EXPECT_EQ(tx.at("direction"), "rx");
  EXPECT_EQ(tx.at("poll").at("mode"), std::string(datapath::to_string(GetParam())));
  EXPECT_EQ(tx.at("packets").get<uint64_t>(), frames.size());
  EXPECT_EQ(tx.at("bytes").get<uint64_t>(), total_bytes(frames));
  EXPECT_EQ(tx.at("dropped").get<uint64_t>(), 0u);
  EXPECT_EQ(s.at("ports").at(0).at("backend_stats").at("frames").get<uint64_t>(), frames.size());
  if (GetParam() == PollMode::kBusy || GetParam() == PollMode::kAdaptive) {
    // Every busy poll ended for exactly one reason (one may still be running: the
    // counters are read while the worker polls).
    uint64_t exits = 0;
    for (const auto& [reason, count] : tx.at("poll_exits").items()) exits += count.get<uint64_t>();
    const uint64_t polls = tx.at("polls").get<uint64_t>();
    EXPECT_LE(exits, polls);
    EXPECT_GE(exits + 1, polls);
  }
  frontend.reset();
  const auto reports = stop_and_report(daemon);
  EXPECT_EQ(reports[0].totals.from_guest_packets, frames.size());
  EXPECT_EQ(reports[0].totals.from_guest_dropped, 0u);
}

TEST_P(PollModeTest, LoopbackEchoesEveryFrame) {
  TempDir dir;
  PortSpec spec = port("loop", dir.file("l.sock"), BackendKind::kLoopback);
  spec.poll.mode = GetParam();
  Daemon daemon({spec});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto frontend = connect(dir.file("l.sock"), error);
  ASSERT_NE(frontend, nullptr) << error;
  const auto frames = make_frames(2000, 7);
  EXPECT_EQ(echo_all(*frontend, frames), frames.size()) << frontend->error();
  frontend.reset();
  const auto reports = stop_and_report(daemon);
  EXPECT_EQ(reports[0].totals.from_guest_packets, frames.size());
  EXPECT_EQ(reports[0].totals.to_guest_packets, frames.size());
  EXPECT_EQ(reports[0].totals.to_guest_dropped, 0u);
}

// At-most-once transmit copies each frame out and completes its chain before the
// backend sends the copy: every frame still comes back intact, none twice.
TEST(DatapathE2E, AtMostOnceDeliveryEchoesEveryFrameIntact) {
  TempDir dir;
  PortSpec spec = port("loop", dir.file("l.sock"), BackendKind::kLoopback);
  spec.tx_delivery = datapath::TxDelivery::kAtMostOnce;
  Daemon daemon({spec});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto frontend = connect(dir.file("l.sock"), error);
  ASSERT_NE(frontend, nullptr) << error;
  const auto frames = make_frames(2000, 9);
  EXPECT_EQ(echo_all(*frontend, frames), frames.size()) << frontend->error();
  frontend.reset();
  const auto reports = stop_and_report(daemon);
  EXPECT_EQ(reports[0].totals.from_guest_packets, frames.size());
  EXPECT_EQ(reports[0].totals.to_guest_packets, frames.size());
}

INSTANTIATE_TEST_SUITE_P(EveryMode, PollModeTest,
                         ::testing::Values(PollMode::kNotify, PollMode::kBusy, PollMode::kAlways, PollMode::kAdaptive),
                         [](const ::testing::TestParamInfo<PollMode>& mode) { return std::string(datapath::to_string(mode.param)); });

// The control thread flips the port's poll mode every millisecond while the frontend
// sends; the ring accepted every frame, so the sink must count every frame.
TEST(DatapathE2E, SwitchingPollModesUnderLoadLosesNothing) {
  TempDir dir;
  Daemon daemon({port("sink", dir.file("s.sock")), port("loop", dir.file("l.sock"), BackendKind::kLoopback)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto sink = connect(dir.file("s.sock"), error);
  ASSERT_NE(sink, nullptr) << error;
  auto loop = connect(dir.file("l.sock"), error);
  ASSERT_NE(loop, nullptr) << error;

  std::atomic<bool> done{false};
  std::atomic<uint64_t> switches{0};
  std::thread switcher([&] {
    const char* modes[] = {"busy", "always", "notify", "adaptive"};
    for (size_t i = 0; !done.load(); ++i) {
      for (const char* name : {"sink", "loop"}) {
        const auto reply =
            daemon.control({{"cmd", "set"}, {"port", name}, {"poll", modes[i % 4]}, {"busy_us", 20 + i % 50}});
        EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
      }
      switches.fetch_add(1);
      std::this_thread::sleep_for(1ms);
    }
  });
  const auto frames = make_frames(20000, 3);
  const bool sent = send_all(*sink, frames) && wait_tx_done(*sink);
  const auto echo_frames = make_frames(3000, 11);
  const size_t echoed = echo_all(*loop, echo_frames);
  done.store(true);
  switcher.join();
  ASSERT_TRUE(sent) << sink->error();
  EXPECT_EQ(echoed, echo_frames.size()) << loop->error();
  EXPECT_GT(switches.load(), 10u);
  sink.reset();
  loop.reset();
  const auto reports = stop_and_report(daemon);
  EXPECT_EQ(reports[0].totals.from_guest_packets, frames.size());
  EXPECT_EQ(reports[1].totals.to_guest_packets, echo_frames.size());
}

// Two guests on switch ports: a broadcast from B floods to A (and teaches the switch
// where B is); A's unicast to B then goes to B alone. With each MAC-learning lock the
// daemon can be told to use (switch_learning_lock).
class SwitchLearningLock : public ::testing::TestWithParam<sync::SectionLockKind> {};
INSTANTIATE_TEST_SUITE_P(Each, SwitchLearningLock, ::testing::ValuesIn(base::values_of(sync::kSectionLockKindNames)),
                         [](const ::testing::TestParamInfo<sync::SectionLockKind>& kind) {
                           return std::string(to_string(kind.param));
                         });

TEST_P(SwitchLearningLock, TwoFrontendsTalkThroughTheSwitch) {
  TempDir dir;
  DaemonOptions options;
  options.switch_learning_lock = GetParam();
  Daemon daemon({port("a", dir.file("a.sock"), BackendKind::kSwitch), port("b", dir.file("b.sock"), BackendKind::kSwitch),
                 port("c", dir.file("c.sock"), BackendKind::kSwitch)},
                options);
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto a = connect(dir.file("a.sock"), error);
  ASSERT_NE(a, nullptr) << error;
  auto b = connect(dir.file("b.sock"), error);
  ASSERT_NE(b, nullptr) << error;
  auto c = connect(dir.file("c.sock"), error);
  ASSERT_NE(c, nullptr) << error;

  const std::array<uint8_t, 6> mac_a{0x02, 0xaa, 0, 0, 0, 1};
  const std::array<uint8_t, 6> mac_b{0x02, 0xbb, 0, 0, 0, 2};
  auto frame = [](const std::array<uint8_t, 6>& dst, const std::array<uint8_t, 6>& src, uint32_t seq) {
    auto f = make_frame(128, seq);
    std::memcpy(f.data(), dst.data(), 6);
    std::memcpy(f.data() + 6, src.data(), 6);
    return f;
  };
  const std::array<uint8_t, 6> broadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  // b announces itself; a and c both see the broadcast.
  const auto hello = frame(broadcast, mac_b, 1);
  ASSERT_TRUE(send_all(*b, {hello}));
  auto at_a = receive(*a, 1, kPatience);
  auto at_c = receive(*c, 1, kPatience);
  ASSERT_EQ(at_a.size(), 1u);
  ASSERT_EQ(at_c.size(), 1u);
  EXPECT_EQ(at_a[0], hello);
  // a -> b, unicast, 200 frames: b gets them all, c none.
  std::vector<std::vector<std::byte>> unicast;
  for (uint32_t i = 0; i < 200; ++i) unicast.push_back(frame(mac_b, mac_a, 100 + i));
  std::vector<std::vector<std::byte>> got;
  for (size_t first = 0; first < unicast.size(); first += 32) {
    const std::vector<std::vector<std::byte>> batch(unicast.begin() + static_cast<std::ptrdiff_t>(first),
                                                    unicast.begin() + static_cast<std::ptrdiff_t>(std::min(first + 32, unicast.size())));
    ASSERT_TRUE(send_all(*a, batch));
    auto part = receive(*b, batch.size(), kPatience);
    got.insert(got.end(), part.begin(), part.end());
  }
  EXPECT_EQ(got, unicast);
  EXPECT_TRUE(receive(*c, 1, 100ms).empty());
  const nlohmann::json s = stats(daemon);
  ASSERT_TRUE(s.contains("switch")) << s.dump();
  const std::string lock_name = GetParam() == sync::SectionLockKind::kDelegation ? "delegation" : "std::mutex";
  EXPECT_EQ(s["switch"]["table"]["writer_lock"], lock_name);
  EXPECT_EQ(s["switch"]["table"]["learned"], 2u) << s["switch"].dump();  // mac_b, then mac_a
  a.reset();
  b.reset();
  c.reset();
  const auto reports = stop_and_report(daemon);
  EXPECT_EQ(reports[1].totals.to_guest_packets, 200u);  // b: the unicast frames
  EXPECT_EQ(reports[2].totals.to_guest_packets, 1u);    // c: only the broadcast
  EXPECT_EQ(reports[0].totals.to_guest_packets, 1u);    // a: only the broadcast
}

// Each mapping puts the two pairs' vrings where it says, and traffic flows on both.
TEST(DatapathE2E, WorkerMappingsPlaceQueuesAndCarryTraffic) {
  for (const auto mapping : {datapath::WorkerMapping::kDevice, datapath::WorkerMapping::kQueuePair,
                             datapath::WorkerMapping::kPool}) {
    SCOPED_TRACE(std::string(datapath::to_string(mapping)));
    TempDir dir;
    PortSpec spec = port("m", dir.file("m.sock"), BackendKind::kLoopback, 2);
    spec.workers = mapping;
    DaemonOptions options;
    options.pool_workers = 2;
    Daemon daemon({spec}, options);
    std::string error;
    ASSERT_TRUE(daemon.start(error)) << error;
    FrontendOptions frontend_options;
    frontend_options.queue_pairs = 2;
    auto frontend = connect(dir.file("m.sock"), error, frontend_options);
    ASSERT_NE(frontend, nullptr) << error;
    for (uint32_t pair = 0; pair < 2; ++pair) {
      const auto frames = make_frames(500, 1000 * pair);
      EXPECT_EQ(echo_all(*frontend, frames, pair), frames.size()) << frontend->error();
    }
    const nlohmann::json s = stats(daemon);
    std::map<uint32_t, std::string> worker_of;
    for (const auto& q : s.at("ports").at(0).at("queues")) worker_of[q.at("index")] = q.at("worker");
    EXPECT_EQ(worker_of[0], worker_of[1]);  // a pair's vrings share a worker
    EXPECT_EQ(worker_of[2], worker_of[3]);
    switch (mapping) {
      case datapath::WorkerMapping::kDevice: EXPECT_EQ(worker_of[0], worker_of[2]); break;
      case datapath::WorkerMapping::kQueuePair:
      case datapath::WorkerMapping::kPool: EXPECT_NE(worker_of[0], worker_of[2]); break;
    }
    if (mapping == datapath::WorkerMapping::kPool) {
      EXPECT_EQ(worker_of[0].rfind("pool.", 0), 0u);
    }
    uint64_t items = 0;
    for (const auto& w : s.at("workers")) items += w.at("items_run").get<uint64_t>();
    EXPECT_GT(items, 0u);
    frontend.reset();
    (void)stop_and_report(daemon);
  }
}

// A guest that never reads its receive ring: what is reflected to it piles up, then
// is dropped and counted; its transmit ring keeps moving, and another port's traffic
// is unaffected.
TEST(DatapathE2E, AGuestThatStopsReadingCostsOnlyItsOwnDrops) {
  TempDir dir;
  Daemon daemon({port("loop", dir.file("l.sock"), BackendKind::kLoopback), port("sink", dir.file("s.sock"))});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto deaf = connect(dir.file("l.sock"), error);
  ASSERT_NE(deaf, nullptr) << error;
  auto other = connect(dir.file("s.sock"), error);
  ASSERT_NE(other, nullptr) << error;
  const auto frames = make_frames(6000, 5);
  ASSERT_TRUE(send_all(*deaf, frames)) << deaf->error();  // never polls its RX ring
  ASSERT_TRUE(wait_tx_done(*deaf)) << deaf->error();
  const auto other_frames = make_frames(3000, 9);
  ASSERT_TRUE(send_all(*other, other_frames) && wait_tx_done(*other)) << other->error();
  deaf.reset();
  other.reset();
  const auto reports = stop_and_report(daemon);
  const PortTotals& loop = reports[0].totals;
  EXPECT_EQ(loop.from_guest_packets, frames.size());
  EXPECT_GT(loop.to_guest_dropped, 0u);
  EXPECT_EQ(loop.to_guest_packets + loop.to_guest_dropped, frames.size());  // each frame delivered or dropped, once
  EXPECT_EQ(reports[1].totals.from_guest_packets, other_frames.size());
}

// Frames switched to a port whose receive queue is not running yet (no frontend) are
// refused and counted as inject_stopped; once its guest is there but reads nothing,
// the overflow is counted in inject_dropped only.
TEST(DatapathE2E, RefusalsOfAQueueNotRunningAreCountedApartFromOverflow) {
  TempDir dir;
  Daemon daemon({port("a", dir.file("a.sock"), BackendKind::kSwitch), port("b", dir.file("b.sock"), BackendKind::kSwitch)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto a = connect(dir.file("a.sock"), error);
  ASSERT_NE(a, nullptr) << error;
  auto broadcasts = make_frames(3000, 1);
  for (auto& frame : broadcasts) std::memset(frame.data(), 0xff, 6);
  const std::vector<std::vector<std::byte>> first(broadcasts.begin(), broadcasts.begin() + 1);
  ASSERT_TRUE(send_all(*a, first) && wait_tx_done(*a)) << a->error();
  nlohmann::json s = stats(daemon);
  const nlohmann::json& b_rx_before = queue_of(s, 1, 0);
  ASSERT_EQ(b_rx_before.at("direction"), "tx") << b_rx_before.dump();  // to the guest
  EXPECT_EQ(b_rx_before.at("inject_stopped").get<uint64_t>(), 1u) << b_rx_before.dump();
  EXPECT_EQ(b_rx_before.at("inject_dropped").get<uint64_t>(), 1u) << b_rx_before.dump();
  EXPECT_EQ(b_rx_before.at("dropped").get<uint64_t>(), 1u) << b_rx_before.dump();

  auto b = connect(dir.file("b.sock"), error);  // never polls its receive ring
  ASSERT_NE(b, nullptr) << error;
  // More than its ring and the inbound frame ring hold together.
  ASSERT_TRUE(send_all(*a, broadcasts) && wait_tx_done(*a)) << a->error();
  s = stats(daemon);
  const nlohmann::json& b_rx = queue_of(s, 1, 0);
  EXPECT_EQ(b_rx.at("inject_stopped").get<uint64_t>(), 1u) << b_rx.dump();
  EXPECT_GT(b_rx.at("inject_dropped").get<uint64_t>(), 1u) << b_rx.dump();
  a.reset();
  b.reset();
  (void)stop_and_report(daemon);
}

// Two busy queue pairs on one worker with a small weight: turns end by the weight
// (the other queue gets the worker), and both pairs' traffic arrives.
TEST(DatapathE2E, WeightsShareOneWorkerBetweenQueues) {
  TempDir dir;
  PortSpec spec = port("w", dir.file("w.sock"), BackendKind::kSink, 2);
  spec.weight_packets = 8;
  spec.burst = 4;
  Daemon daemon({spec});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  FrontendOptions options;
  options.queue_pairs = 2;
  auto frontend = connect(dir.file("w.sock"), error, options);
  ASSERT_NE(frontend, nullptr) << error;
  // Fill both TX rings before either is drained much: enqueue without flushing, then flush both.
  const auto frames = make_frames(4000, 2);
  for (size_t i = 0; i < frames.size(); i += 128) {
    for (uint32_t pair = 0; pair < 2; ++pair) {
      for (size_t j = i; j < std::min(frames.size(), i + 128); ++j) {
        while (!frontend->enqueue_tx(frames[j], pair)) ASSERT_TRUE(frontend->wait_tx_space(kPatience, pair, frames[j].size()));
      }
    }
    frontend->flush_tx(0);
    frontend->flush_tx(1);
  }
  ASSERT_TRUE(wait_tx_done(*frontend, 0) && wait_tx_done(*frontend, 1)) << frontend->error();
  const nlohmann::json s = stats(daemon);
  uint64_t yields = 0;
  for (const auto& q : s.at("ports").at(0).at("queues")) yields += q.at("weight_yields").get<uint64_t>();
  EXPECT_GT(yields, 0u);
  frontend.reset();
  const auto reports = stop_and_report(daemon);
  EXPECT_EQ(reports[0].totals.from_guest_packets, 2 * frames.size());
}

// Adaptive polling with several queues on one worker: the guest keeps both transmit
// rings busy, so a poll that drains one meets the other's work and steps aside
// (other_queue exits) instead of sleeping; every frame is taken; once the guest goes
// quiet every poll ends (its budget runs out, or none starts once the queue has
// learned that gaps are long) and the worker stops spending CPU.
// The queues start polling while the frontend is still setting up; on a loaded
// machine those first polls time out and teach the queues that gaps are long (no
// polling at all) until enough short gaps pull the average back down. So the guest
// sends rounds of traffic until a poll has stepped aside, a bounded number of them.
TEST(DatapathE2E, AdaptivePollsOnOneWorkerStepAsideAndStopWhenTheGuestIsQuiet) {
  TempDir dir;
  PortSpec spec = port("a", dir.file("a.sock"), BackendKind::kSink, 2);
  spec.workers = datapath::WorkerMapping::kDevice;
  spec.poll.mode = PollMode::kAdaptive;
  // A budget far above the frontend's pace between its batches, even under the
  // sanitizers: polls end by work or by the other queue, not by timing out.
  spec.poll.busy_us = 5000;
  Daemon daemon({spec});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  FrontendOptions options;
  options.queue_pairs = 2;
  auto frontend = connect(dir.file("a.sock"), error, options);
  ASSERT_NE(frontend, nullptr) << error;
  const auto frames = make_frames(6000, 5);
  auto poll_exits = [](const nlohmann::json& s, const char* exit) {
    uint64_t sum = 0;
    for (const size_t guest_tx : {size_t{1}, size_t{3}}) {  // the guest's transmit queues
      sum += queue_of(s, 0, guest_tx).at("poll_exits").at(exit).get<uint64_t>();
    }
    return sum;
  };
  constexpr int kMaxRounds = 8;
  int rounds = 0;
  nlohmann::json after_traffic;
  do {
    for (size_t i = 0; i < frames.size(); i += 16) {
      for (uint32_t pair = 0; pair < 2; ++pair) {
        for (size_t j = i; j < std::min(frames.size(), i + 16); ++j) {
          while (!frontend->enqueue_tx(frames[j], pair)) {
            ASSERT_TRUE(frontend->wait_tx_space(kPatience, pair, frames[j].size())) << frontend->error();
          }
        }
        frontend->flush_tx(pair);
      }
    }
    ASSERT_TRUE(wait_tx_done(*frontend, 0) && wait_tx_done(*frontend, 1)) << frontend->error();
    ++rounds;
    after_traffic = stats(daemon);
  } while (poll_exits(after_traffic, "other_queue") == 0 && rounds < kMaxRounds);
  EXPECT_GT(poll_exits(after_traffic, "other_queue"), 0u)
      << "no poll met the other queue's work in " << rounds << " rounds: " << after_traffic.dump();
  auto worker_cpu_ns = [&](const nlohmann::json& s) { return s.at("workers").at(0).at("cpu_ns").get<uint64_t>(); };
  // A poll counts when it starts and its exit when it ends: none is running when the
  // two agree on both transmit queues. On a loaded machine that may take a while.
  auto polls_running = [](const nlohmann::json& s) {
    uint64_t running = 0;
    for (const size_t guest_tx : {size_t{1}, size_t{3}}) {
      const nlohmann::json& q = queue_of(s, 0, guest_tx);
      uint64_t ended = 0;
      for (const auto& [exit, count] : q.at("poll_exits").items()) ended += count.get<uint64_t>();
      running += q.at("polls").get<uint64_t>() - ended;
    }
    return running;
  };
  nlohmann::json quiet = stats(daemon);
  for (const auto give_up = std::chrono::steady_clock::now() + kPatience;
       polls_running(quiet) != 0 && std::chrono::steady_clock::now() < give_up;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    quiet = stats(daemon);
  }
  EXPECT_EQ(polls_running(quiet), 0u) << "a dry spell never ended: " << quiet.dump();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const uint64_t spent_ns = worker_cpu_ns(stats(daemon)) - worker_cpu_ns(quiet);
  EXPECT_LT(spent_ns, 30'000'000u) << "the worker kept polling a quiet guest: " << spent_ns << " ns in 300 ms";
  frontend.reset();
  const auto reports = stop_and_report(daemon);
  EXPECT_EQ(reports[0].totals.from_guest_packets, 2 * frames.size() * static_cast<uint64_t>(rounds));
}

TEST(DatapathE2E, SourceFillsTheGuestsReceiveRing) {
  TempDir dir;
  PortSpec spec = port("src", dir.file("src.sock"), BackendKind::kSource);
  spec.source_frame_size = 128;
  spec.source_rate_pps = 0;
  Daemon daemon({spec});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto frontend = connect(dir.file("src.sock"), error);
  ASSERT_NE(frontend, nullptr) << error;
  const auto got = receive(*frontend, 3000, kPatience);
  ASSERT_GE(got.size(), 3000u) << frontend->error();
  for (const auto& frame : got) EXPECT_EQ(frame.size(), 128u);
  frontend.reset();
  const auto reports = stop_and_report(daemon);
  EXPECT_GE(reports[0].totals.to_guest_packets, 3000u);
}

// A frontend that goes away in the middle of traffic (no GET_VRING_BASE, just gone),
// then a new one: the port serves it, and the totals add up over both.
TEST(DatapathE2E, AFrontendVanishingMidTrafficLeavesThePortWorking) {
  TempDir dir;
  PortSpec spec = port("loop", dir.file("l.sock"), BackendKind::kLoopback);
  spec.poll.mode = PollMode::kBusy;
  Daemon daemon({spec});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  {
    auto first = connect(dir.file("l.sock"), error);
    ASSERT_NE(first, nullptr) << error;
    const auto frames = make_frames(300, 1);
    for (const auto& f : frames) (void)first->send(f);  // whatever fits; then vanish
  }
  // The port serves one frontend at a time: wait until it noticed the first is gone.
  const auto deadline = Clock::now() + kPatience;
  while (daemon.control({{"cmd", "list"}}).at("ports").at(0).at("connected").get<bool>()) {
    ASSERT_LT(Clock::now(), deadline);
    std::this_thread::sleep_for(1ms);
  }
  auto second = connect(dir.file("l.sock"), error);
  ASSERT_NE(second, nullptr) << error;
  const auto frames = make_frames(1000, 50);
  EXPECT_EQ(echo_all(*second, frames), frames.size()) << second->error();
  second.reset();
  const auto reports = stop_and_report(daemon);
  EXPECT_EQ(reports[0].totals.connections, 2u);
  EXPECT_EQ(reports[0].totals.to_guest_packets + reports[0].totals.to_guest_dropped, reports[0].totals.from_guest_packets);
}

// A guest that kicks as fast as it can (both rings, nothing behind the kicks): its
// worker reads the eventfds and finds empty rings - counted kicks, no other effect:
// the same port still carries traffic afterwards and another port all along.
TEST(DatapathE2E, AKickFloodIsCountedAndHarmsNoOne) {
  TempDir dir;
  PortSpec flooded = port("flood", dir.file("f.sock"));
  flooded.workers = datapath::WorkerMapping::kPool;
  PortSpec neighbour = port("calm", dir.file("c.sock"));
  neighbour.workers = datapath::WorkerMapping::kPool;  // the same (single) pool worker
  DaemonOptions options;
  options.pool_workers = 1;
  Daemon daemon({flooded, neighbour}, options);
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto flooder = connect(dir.file("f.sock"), error);
  ASSERT_NE(flooder, nullptr) << error;
  auto calm = connect(dir.file("c.sock"), error);
  ASSERT_NE(calm, nullptr) << error;
  const int rx_kick = flooder->kick_fd(0);
  const int tx_kick = flooder->kick_fd(1);
  ASSERT_GE(rx_kick, 0);
  ASSERT_GE(tx_kick, 0);
  std::atomic<bool> done{false};
  std::atomic<uint64_t> writes{0};
  std::thread flood([&] {
    while (!done.load(std::memory_order_relaxed)) {
      (void)::eventfd_write(tx_kick, 1);
      (void)::eventfd_write(rx_kick, 1);
      writes.fetch_add(2, std::memory_order_relaxed);
    }
  });
  const auto frames = make_frames(20000, 4);
  const bool sent = send_all(*calm, frames) && wait_tx_done(*calm);
  done.store(true);
  flood.join();
  ASSERT_TRUE(sent) << calm->error();
  // The flooded port still works.
  const auto after = make_frames(1000, 77);
  ASSERT_TRUE(send_all(*flooder, after) && wait_tx_done(*flooder)) << flooder->error();
  const nlohmann::json s = stats(daemon);
  const uint64_t kicks = queue_of(s, 0, 1).at("kicks").get<uint64_t>() + queue_of(s, 0, 0).at("kicks").get<uint64_t>();
  EXPECT_GT(kicks, 0u);
  EXPECT_LE(kicks, writes.load() + 2000);  // eventfds coalesce: at most one read per write
  flooder.reset();
  calm.reset();
  const auto reports = stop_and_report(daemon);
  EXPECT_EQ(reports[0].totals.from_guest_packets, after.size());
  EXPECT_EQ(reports[1].totals.from_guest_packets, frames.size());
  EXPECT_EQ(reports[0].totals.protocol_errors + reports[1].totals.protocol_errors, 0u);
}

TEST(DatapathE2E, ControlRequestsAreCheckedAndApplied) {
  TempDir dir;
  Daemon daemon({port("p", dir.file("p.sock"), BackendKind::kSink, 2)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto bad = [&](nlohmann::json request) {
    const auto reply = daemon.control(request);
    EXPECT_FALSE(reply.value("ok", true)) << request.dump();
    EXPECT_TRUE(reply.contains("error")) << reply.dump();
  };
  bad({{"cmd", "nope"}});
  bad({{"nocmd", 1}});
  bad({{"cmd", "set"}, {"port", "missing"}, {"poll", "busy"}});
  bad({{"cmd", "set"}, {"port", "p"}, {"poll", "sometimes"}});
  bad({{"cmd", "set"}, {"port", "p"}, {"queue", 4}, {"poll", "busy"}});
  bad({{"cmd", "set"}, {"port", "p"}, {"busy_us", -1}});
  bad({{"cmd", "set"}, {"port", "p"}, {"memory", "spinlock"}});
  bad({{"cmd", "set"}, {"enqueue", "fast"}});
  bad({{"cmd", "set"}, {"port", "p"}, {"color", "red"}});
  bad({{"cmd", "set"}});

  auto ok = daemon.control({{"cmd", "set"}, {"port", "p"}, {"queue", 3}, {"poll", "busy"}, {"busy_us", 77}, {"exit", "any"}});
  ASSERT_TRUE(ok.value("ok", false)) << ok.dump();
  const nlohmann::json s = stats(daemon);
  EXPECT_EQ(queue_of(s, 0, 3).at("poll").at("mode"), "busy");
  EXPECT_EQ(queue_of(s, 0, 3).at("poll").at("busy_us"), 77);
  EXPECT_EQ(queue_of(s, 0, 3).at("poll").at("exit"), "any");
  EXPECT_EQ(queue_of(s, 0, 1).at("poll").at("mode"), "notify");  // only queue 3 changed
  ok = daemon.control({{"cmd", "set"}, {"port", "p"}, {"memory", "rwsem"}});
  ASSERT_TRUE(ok.value("ok", false)) << ok.dump();
  ok = daemon.control({{"cmd", "set"}, {"enqueue", "locked_wake"}});
  ASSERT_TRUE(ok.value("ok", false)) << ok.dump();
  const nlohmann::json after = stats(daemon);
  EXPECT_EQ(after.at("ports").at(0).at("memory"), "rwsem");
  for (const auto& w : after.at("workers")) EXPECT_EQ(w.at("enqueue"), "locked_wake");
  const auto list = daemon.control({{"cmd", "list"}});
  EXPECT_EQ(list.at("ports").at(0).at("queue_pairs"), 2);
  // The new guard applies to the next frontend, which still gets its traffic through.
  FrontendOptions options;
  options.queue_pairs = 2;
  auto frontend = connect(dir.file("p.sock"), error, options);
  ASSERT_NE(frontend, nullptr) << error;
  const auto frames = make_frames(500, 1);
  ASSERT_TRUE(send_all(*frontend, frames) && wait_tx_done(*frontend)) << frontend->error();
  frontend.reset();
  const auto reports = stop_and_report(daemon);
  EXPECT_EQ(reports[0].totals.from_guest_packets, frames.size());
}

}  // namespace
}  // namespace uvhost::serve
