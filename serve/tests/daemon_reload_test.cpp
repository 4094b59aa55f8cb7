// daemon_reload_test.cpp - Daemon::reload() in process, over real Unix sockets, with our
// embedded frontend as the guest: a kept port's connection and traffic go on through a
// reload, removed ports lose their socket, added ports listen, changed ports restart
// with their new keys, a bad set changes nothing, a switch appears when the first
// switch port does, control requests run during reloads, and no descriptor or worker
// is left behind.
#include "uvhost/serve/daemon.h"

#include "serve_test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace uvhost::serve {
namespace {

using namespace uvhost::serve::testing;

// Sends `frames` on a loopback port in small batches and checks each comes back.
void expect_echo(Frontend& frontend, const std::vector<std::vector<std::byte>>& frames) {
  constexpr size_t kBatch = 32;
  for (size_t first = 0; first < frames.size(); first += kBatch) {
    const size_t last = std::min(frames.size(), first + kBatch);
    const std::vector<std::vector<std::byte>> batch(frames.begin() + static_cast<std::ptrdiff_t>(first),
                                                    frames.begin() + static_cast<std::ptrdiff_t>(last));
    ASSERT_TRUE(send_all(frontend, batch)) << frontend.error();
    const auto got = receive(frontend, batch.size(), kPatience);
    ASSERT_EQ(got.size(), batch.size()) << frontend.error();
    for (size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(got[i], reflected(batch[i])) << "frame " << first + i;
  }
}

const PortReport* report_of(const std::vector<PortReport>& reports, const std::string& name) {
  for (const PortReport& report : reports) {
    if (report.spec.name == name) return &report;
  }
  return nullptr;
}

std::vector<std::string> names_of(const std::vector<PortReport>& reports) {
  std::vector<std::string> names;
  for (const PortReport& report : reports) names.push_back(report.spec.name);
  return names;
}

// Waits until the daemon sees `connected` frontends.
bool wait_connected(const Daemon& daemon, size_t connected) {
  const auto deadline = Clock::now() + kPatience;
  while (daemon.status().connected != connected) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST(DaemonReloadTest, AKeptPortsConnectionAndTrafficGoOn) {
  TempDir dir;
  const std::string a = dir.file("a.sock");
  const std::string b = dir.file("b.sock");
  const std::string c = dir.file("c.sock");
  Daemon daemon({port("a", a, BackendKind::kLoopback), port("b", b)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto frontend = connect(a, error);
  ASSERT_NE(frontend, nullptr) << error;
  const auto before = make_frames(100, 0);
  expect_echo(*frontend, before);

  ReloadPlan plan;
  ASSERT_TRUE(daemon.reload({port("a", a, BackendKind::kLoopback), port("c", c)}, error, &plan)) << error;
  EXPECT_EQ(plan.kept, std::vector<std::string>{"a"});
  EXPECT_EQ(plan.added, std::vector<std::string>{"c"});
  EXPECT_EQ(plan.removed, std::vector<std::string>{"b"});
  EXPECT_FALSE(exists(b));
  EXPECT_EQ(socket_mode(c), 0600);
  EXPECT_EQ(daemon.status().ports, 2u);

  // The same connection carries on; the new port serves a frontend of its own.
  const auto after = make_frames(100, 100);
  expect_echo(*frontend, after);
  auto on_c = connect(c, error);
  ASSERT_NE(on_c, nullptr) << error;
  ASSERT_TRUE(wait_connected(daemon, 2));
  ASSERT_TRUE(send_all(*on_c, make_frames(10, 0)));
  ASSERT_TRUE(wait_tx_done(*on_c));
  ASSERT_TRUE(on_c->stop()) << on_c->error();
  ASSERT_TRUE(frontend->stop()) << frontend->error();

  const auto reports = stop_and_report(daemon);
  EXPECT_EQ(names_of(reports), (std::vector<std::string>{"a", "c"}));
  const PortReport* on_a = report_of(reports, "a");
  ASSERT_NE(on_a, nullptr);
  EXPECT_EQ(on_a->totals.connections, 1u);  // never dropped
  EXPECT_EQ(on_a->totals.from_guest_packets, before.size() + after.size());
  EXPECT_EQ(on_a->totals.to_guest_packets, before.size() + after.size());
  EXPECT_EQ(on_a->totals.from_guest_bytes, total_bytes(before) + total_bytes(after));
  EXPECT_EQ(report_of(reports, "c")->totals.from_guest_packets, 10u);
}

TEST(DaemonReloadTest, AChangedPortRestartsWithItsNewKeys) {
  TempDir dir;
  const std::string a = dir.file("a.sock");
  Daemon daemon({port("a", a, BackendKind::kLoopback, 1)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto old_frontend = connect(a, error);
  ASSERT_NE(old_frontend, nullptr) << error;
  ASSERT_TRUE(wait_connected(daemon, 1));

  ReloadPlan plan;
  ASSERT_TRUE(daemon.reload({port("a", a, BackendKind::kLoopback, 2)}, error, &plan)) << error;
  EXPECT_EQ(plan.restarted, std::vector<std::string>{"a"});
  EXPECT_FALSE(old_frontend->stop());  // its connection was closed by the restart

  FrontendOptions two_pairs;
  two_pairs.queue_pairs = 2;
  auto frontend = connect(a, error, two_pairs);
  ASSERT_NE(frontend, nullptr) << error;
  EXPECT_EQ(frontend->queue_pairs(), 2u);
  expect_echo(*frontend, make_frames(20, 0));
  ASSERT_TRUE(frontend->stop()) << frontend->error();
  const auto reports = stop_and_report(daemon);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].spec.queue_pairs, 2u);
  EXPECT_EQ(reports[0].totals.connections, 1u);  // the restarted port's own count
}

TEST(DaemonReloadTest, ABadSetChangesNothing) {
  TempDir dir;
  const std::string a = dir.file("a.sock");
  const std::string b = dir.file("b.sock");
  Daemon daemon({port("a", a, BackendKind::kLoopback), port("b", b)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto frontend = connect(a, error);
  ASSERT_NE(frontend, nullptr) << error;
  expect_echo(*frontend, make_frames(10, 0));

  // Two ports on one socket; no ports at all; a new port that cannot bind (the old
  // ones must not have been stopped for it).
  EXPECT_FALSE(daemon.reload({port("a", a, BackendKind::kLoopback), port("c", a)}, error));
  EXPECT_NE(error.find("socket"), std::string::npos) << error;
  EXPECT_FALSE(daemon.reload({}, error));
  ReloadPlan untouched;
  EXPECT_FALSE(daemon.reload({port("a", a, BackendKind::kLoopback), port("c", dir.file("missing/c.sock"))}, error,
                             &untouched));
  EXPECT_NE(error.find("c"), std::string::npos) << error;
  EXPECT_TRUE(untouched.changes_nothing());  // nothing was applied
  EXPECT_TRUE(exists(b));
  EXPECT_EQ(daemon.status().ports, 2u);

  expect_echo(*frontend, make_frames(10, 10));
  ASSERT_TRUE(frontend->stop()) << frontend->error();
  const auto reports = stop_and_report(daemon);
  EXPECT_EQ(names_of(reports), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(reports[0].totals.connections, 1u);
  EXPECT_EQ(reports[0].totals.from_guest_packets, 20u);
}

TEST(DaemonReloadTest, ANewPortMayTakeARemovedPortsSocket) {
  TempDir dir;
  const std::string a = dir.file("a.sock");
  Daemon daemon({port("old", a)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  ReloadPlan plan;
  ASSERT_TRUE(daemon.reload({port("new", a, BackendKind::kLoopback)}, error, &plan)) << error;
  EXPECT_EQ(plan.removed, std::vector<std::string>{"old"});
  EXPECT_EQ(plan.added, std::vector<std::string>{"new"});
  auto frontend = connect(a, error);
  ASSERT_NE(frontend, nullptr) << error;
  expect_echo(*frontend, make_frames(10, 0));
  ASSERT_TRUE(frontend->stop()) << frontend->error();
  EXPECT_EQ(names_of(stop_and_report(daemon)), std::vector<std::string>{"new"});
}

TEST(DaemonReloadTest, TheFirstSwitchPortBringsTheSwitch) {
  TempDir dir;
  DaemonOptions options;
  options.control_path = dir.file("ctl.sock");
  Daemon daemon({port("s", dir.file("s.sock"))}, options);
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  EXPECT_FALSE(daemon.control({{"cmd", "stats"}}).contains("switch"));
  ASSERT_TRUE(daemon.reload({port("s", dir.file("s.sock")), port("w1", dir.file("w1.sock"), BackendKind::kSwitch),
                             port("w2", dir.file("w2.sock"), BackendKind::kSwitch)},
                            error))
      << error;
  const nlohmann::json stats = daemon.control({{"cmd", "stats"}});
  ASSERT_TRUE(stats.contains("switch")) << stats.dump();

  // A frame from one switch port floods to the other.
  auto one = connect(dir.file("w1.sock"), error);
  ASSERT_NE(one, nullptr) << error;
  auto two = connect(dir.file("w2.sock"), error);
  ASSERT_NE(two, nullptr) << error;
  const auto frames = make_frames(1, 0);
  ASSERT_TRUE(send_all(*one, frames));
  EXPECT_EQ(receive(*two, 1, kPatience).size(), 1u);
  // And the switch port that goes keeps the other one working.
  ASSERT_TRUE(daemon.reload({port("s", dir.file("s.sock")), port("w2", dir.file("w2.sock"), BackendKind::kSwitch)},
                            error))
      << error;
  EXPECT_FALSE(one->stop());
  ASSERT_TRUE(two->stop()) << two->error();
  EXPECT_EQ(names_of(stop_and_report(daemon)), (std::vector<std::string>{"s", "w2"}));
}

TEST(DaemonReloadTest, ControlRequestsDuringReloads) {
  TempDir dir;
  Daemon daemon({port("a", dir.file("a.sock"))});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  std::atomic<bool> done{false};
  std::atomic<int> answered{0};
  std::thread control([&] {
    while (!done.load()) {
      const auto list = daemon.control({{"cmd", "list"}});
      const auto stats = daemon.control({{"cmd", "stats"}});
      (void)daemon.control({{"cmd", "set"}, {"port", "b"}, {"poll", "busy"}});  // b comes and goes
      if (list.value("ok", false) && stats.value("ok", false)) answered.fetch_add(1);
    }
  });
  // At least 20 reloads, and on until the control thread has been answered once while
  // they go on (20 reloads can end before that thread is first scheduled).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
  for (int i = 0; i < 20 || (answered.load() == 0 && std::chrono::steady_clock::now() < deadline); ++i) {
    std::vector<PortSpec> next = {port("a", dir.file("a.sock"))};
    if (i % 2 == 0) next.push_back(port("b", dir.file("b.sock"), BackendKind::kSink));
    if (i % 3 == 0) {
      next.push_back(port("p", dir.file("p.sock")));
      next.back().workers = datapath::WorkerMapping::kQueuePair;
    }
    ASSERT_TRUE(daemon.reload(next, error)) << error;
  }
  done.store(true);
  control.join();
  EXPECT_GT(answered.load(), 0);
  stop_and_report(daemon);
}

TEST(DaemonReloadTest, NoDescriptorOrWorkerOutlivesItsPort) {
  TempDir dir;
  Daemon daemon({port("a", dir.file("a.sock"))});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto worker_count = [&] { return daemon.control({{"cmd", "stats"}})["workers"].size(); };
  const size_t workers = worker_count();
  const auto fds = uvhost::testing::open_fds();
  for (int i = 0; i < 5; ++i) {
    PortSpec paired = port("b", dir.file("b.sock"), BackendKind::kLoopback, 2);
    paired.workers = datapath::WorkerMapping::kQueuePair;
    ASSERT_TRUE(daemon.reload({port("a", dir.file("a.sock")), paired}, error)) << error;
    EXPECT_EQ(worker_count(), workers + 2);
    auto frontend = connect(dir.file("b.sock"), error);
    ASSERT_NE(frontend, nullptr) << error;
    ASSERT_TRUE(daemon.reload({port("a", dir.file("a.sock"))}, error)) << error;
    EXPECT_EQ(worker_count(), workers);
  }
  const auto after = uvhost::testing::open_fds();
  EXPECT_EQ(after.size(), fds.size()) << "before:\n"
                                      << uvhost::testing::describe_fds(fds) << "after:\n"
                                      << uvhost::testing::describe_fds(after);
  EXPECT_FALSE(exists(dir.file("b.sock")));
  stop_and_report(daemon);
}

TEST(DaemonReloadTest, ReloadBeforeStartIsRefused) {
  TempDir dir;
  Daemon daemon({port("a", dir.file("a.sock"))});
  std::string error;
  EXPECT_FALSE(daemon.reload({port("a", dir.file("a.sock"))}, error));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace uvhost::serve
