// daemon_test.cpp - serve::Daemon in process, over real Unix sockets in a temporary
// directory, with our embedded Frontend (connect_frontend / listen_frontend) as the VM
// and raw Connections as hostile peers: what each port carries (its totals), socket
// permissions and cleanup, client-mode reconnects, one port's trouble kept from the
// others, busy ports, a frontend that reconnects at once, stopping with a frontend
// attached, start() failures, fd hygiene.
//
// The daemon's counters are read through reports() after request_stop() + wait() (the
// port threads own them while they run). Waits are bounded and generous (sanitizers,
// two shared cores); nothing is checked by sleeping a fixed time.
#include "uvhost/serve/daemon.h"

#include "serve_test_support.h"
#include "uvhost/virtio/net_features.h"

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/testing/fds.h"
#include "uvhost/testing/frames.h"
#include "uvhost/vhost_user/connection.h"
#include "uvhost/vhost_user/frontend.h"
#include "uvhost/vhost_user/message.h"

namespace uvhost::serve {
namespace {

using namespace uvhost::serve::testing;

// Sends `frames` on `pair` of a loopback port and checks each comes back, in order,
// MACs swapped, on the same pair. In batches well under the ring size: the loopback
// drops what finds no receive buffer, and buffers are reposted only when received.
void expect_echo(Frontend& frontend, const std::vector<std::vector<std::byte>>& frames, uint32_t pair = 0) {
  constexpr size_t kBatch = 32;
  for (size_t first = 0; first < frames.size(); first += kBatch) {
    const size_t last = std::min(frames.size(), first + kBatch);
    const std::vector<std::vector<std::byte>> batch(frames.begin() + static_cast<std::ptrdiff_t>(first),
                                                    frames.begin() + static_cast<std::ptrdiff_t>(last));
    ASSERT_TRUE(send_all(frontend, batch, pair)) << frontend.error();
    const auto got = receive(frontend, batch.size(), kPatience, pair);
    ASSERT_EQ(got.size(), batch.size()) << "pair " << pair << ": " << frontend.error();
    for (size_t i = 0; i < batch.size(); ++i) {
      EXPECT_EQ(got[i], reflected(batch[i])) << "pair " << pair << " #" << first + i;
    }
  }
  ASSERT_TRUE(wait_tx_done(frontend, pair)) << frontend.error();
}

// A raw peer on a port's socket, for the hostile tests: waits until the daemon closes
// its end (EOF, or ECONNRESET when the daemon left our bytes unread). true if it did.
bool closed_by_daemon(Connection& peer) {
  if (!peer.wait_readable(kPatience)) return false;
  const auto got = peer.receive();
  return got.status != ReceiveStatus::kMessage;
}

// ------------------------------------------------------------------ server mode

TEST(DaemonTest, ServerSinkCountsEveryFrameAndByte) {
  TempDir dir;
  const std::string path = dir.file("sink.sock");
  Daemon daemon({port("sink", path)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;

  auto frontend = connect(path, error);
  ASSERT_NE(frontend, nullptr) << error;
  // More frames than the ring holds (256), of every size.
  const auto frames = make_frames(700, 0);
  ASSERT_TRUE(send_all(*frontend, frames)) << frontend->error();
  ASSERT_TRUE(wait_tx_done(*frontend)) << frontend->error();
  ASSERT_TRUE(frontend->stop()) << frontend->error();

  const auto reports = stop_and_report(daemon);
  ASSERT_EQ(reports.size(), 1u);
  const PortTotals& t = reports[0].totals;
  EXPECT_EQ(reports[0].spec.name, "sink");
  EXPECT_EQ(t.connections, 1u);
  EXPECT_EQ(t.from_guest_packets, frames.size());
  EXPECT_EQ(t.from_guest_bytes, total_bytes(frames));
  EXPECT_EQ(t.to_guest_packets, 0u);
  EXPECT_EQ(t.to_guest_bytes, 0u);
  EXPECT_EQ(t.rejected, 0u);
  EXPECT_EQ(t.protocol_errors, 0u);
  EXPECT_EQ(t.broken_queues, 0u);

  const nlohmann::json json = to_json(reports);
  ASSERT_EQ(json["ports"].size(), 1u);
  EXPECT_EQ(json["ports"][0]["name"], "sink");
  EXPECT_EQ(json["ports"][0]["socket"], path);
  EXPECT_EQ(json["ports"][0]["backend"], "sink");
  EXPECT_EQ(json["ports"][0]["client"], false);
  EXPECT_EQ(json["ports"][0]["rx_packets"], frames.size());
  EXPECT_EQ(json["ports"][0]["rx_bytes"], total_bytes(frames));
  EXPECT_EQ(json["ports"][0]["connections"], 1u);
}

TEST(DaemonTest, SocketModeIsHonouredAndTheSocketGoesWithTheDaemon) {
  TempDir dir;
  const std::string plain = dir.file("plain.sock");
  const std::string shared = dir.file("shared.sock");
  PortSpec shared_spec = port("shared", shared);
  shared_spec.socket_mode = 0660;
  {
    Daemon daemon({port("plain", plain), shared_spec});
    std::string error;
    ASSERT_TRUE(daemon.start(error)) << error;
    EXPECT_EQ(socket_mode(plain), 0600);
    EXPECT_EQ(socket_mode(shared), 0660);
    // Stopping does not remove them yet: the daemon's destructor does.
    daemon.request_stop();
    daemon.wait();
    EXPECT_TRUE(exists(plain));
    EXPECT_TRUE(exists(shared));
  }
  EXPECT_FALSE(exists(plain));
  EXPECT_FALSE(exists(shared));

  // Destroyed while running (no request_stop): it stops, joins and cleans up by itself.
  {
    Daemon daemon({port("plain", plain)});
    std::string error;
    ASSERT_TRUE(daemon.start(error)) << error;
    EXPECT_TRUE(exists(plain));
  }
  EXPECT_FALSE(exists(plain));
}

TEST(DaemonTest, LoopbackReflectsOnEachQueuePair) {
  TempDir dir;
  const std::string path = dir.file("loop.sock");
  DaemonOptions options;
  options.stats_interval = 20ms;  // the periodic log line runs too
  Daemon daemon({port("loop", path, BackendKind::kLoopback, 2)}, options);
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;

  FrontendOptions frontend_options;
  frontend_options.queue_pairs = 2;
  auto frontend = connect(path, error, frontend_options);
  ASSERT_NE(frontend, nullptr) << error;
  ASSERT_EQ(frontend->queue_pairs(), 2u);

  const auto on_one = make_frames(40, 100);
  expect_echo(*frontend, on_one, 1);
  EXPECT_TRUE(receive(*frontend, 1, 20ms, 0).empty());  // nothing crossed over to pair 0
  const auto on_zero = make_frames(300, 500);  // more than the ring: refilled on the way
  expect_echo(*frontend, on_zero, 0);
  EXPECT_TRUE(receive(*frontend, 1, 20ms, 1).empty());
  ASSERT_TRUE(frontend->stop()) << frontend->error();

  const auto reports = stop_and_report(daemon);
  ASSERT_EQ(reports.size(), 1u);
  const PortTotals& t = reports[0].totals;
  EXPECT_EQ(t.connections, 1u);
  EXPECT_EQ(t.from_guest_packets, on_one.size() + on_zero.size());
  EXPECT_EQ(t.from_guest_bytes, total_bytes(on_one) + total_bytes(on_zero));
  EXPECT_EQ(t.to_guest_packets, on_one.size() + on_zero.size());
  EXPECT_EQ(t.to_guest_bytes, total_bytes(on_one) + total_bytes(on_zero));
  EXPECT_EQ(t.to_guest_dropped, 0u);
  EXPECT_GT(t.calls, 0u);
  EXPECT_EQ(t.protocol_errors, 0u);
}

// ------------------------------------------------------------------ client mode

TEST(DaemonTest, ClientPortFindsItsFrontendAndFindsItAgain) {
  TempDir dir;
  const std::string path = dir.file("frontend.sock");
  // The daemon starts first: nobody listens yet, the port keeps trying.
  Daemon daemon({client_port("client", path, BackendKind::kLoopback)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  EXPECT_FALSE(exists(path));  // a client port binds nothing

  auto first = vhost_user::listen_frontend(path, FrontendOptions{}, kPatience, error);
  ASSERT_NE(first, nullptr) << error;
  const auto frames_one = make_frames(50, 0);
  expect_echo(*first, frames_one);
  ASSERT_TRUE(first->stop()) << first->error();
  first.reset();

  // The frontend went away (its socket too); a new one at the same path is found again
  // (the port retries with backoff, at most a second apart).
  auto second = vhost_user::listen_frontend(path, FrontendOptions{}, kPatience, error);
  ASSERT_NE(second, nullptr) << error;
  const auto frames_two = make_frames(30, 1000);
  expect_echo(*second, frames_two);
  ASSERT_TRUE(second->stop()) << second->error();
  second.reset();

  const auto reports = stop_and_report(daemon);
  ASSERT_EQ(reports.size(), 1u);
  const PortTotals& t = reports[0].totals;
  EXPECT_TRUE(reports[0].spec.client);
  EXPECT_EQ(t.connections, 2u);
  EXPECT_EQ(t.from_guest_packets, frames_one.size() + frames_two.size());
  EXPECT_EQ(t.from_guest_bytes, total_bytes(frames_one) + total_bytes(frames_two));
  EXPECT_EQ(t.to_guest_packets, frames_one.size() + frames_two.size());
  EXPECT_EQ(t.protocol_errors, 0u);
}

TEST(DaemonTest, StopWhileAClientPortWaitsForItsFrontend) {
  TempDir dir;
  Daemon daemon({client_port("nobody", dir.file("nobody.sock"))});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  // Let the backoff grow past its first steps: the port is asleep between attempts.
  std::this_thread::sleep_for(50ms);
  const auto begin = Clock::now();
  const auto reports = stop_and_report(daemon);
  EXPECT_LT(Clock::now() - begin, 5s);  // the backoff sleep ends with the stop, not later
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].totals.connections, 0u);
}

// ------------------------------------------------------------------ isolation

TEST(DaemonTest, AHostilePeerOnOnePortLeavesTheOthersAlone) {
  TempDir dir;
  const std::string path_a = dir.file("a.sock");
  const std::string path_b = dir.file("b.sock");
  Daemon daemon({port("a", path_a), port("b", path_b, BackendKind::kLoopback)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;

  auto good_b = connect(path_b, error);
  ASSERT_NE(good_b, nullptr) << error;
  uint32_t seq = 0;
  size_t sent_b = 0;
  auto traffic_on_b = [&] {
    const auto frames = make_frames(20, seq);
    seq += 20;
    sent_b += frames.size();
    expect_echo(*good_b, frames);
  };
  traffic_on_b();

  // 1. A header announcing a payload far beyond the protocol's limit, then junk.
  {
    auto peer = vhost_user::connect_unix(path_a, error);
    ASSERT_TRUE(peer) << error;
    std::vector<std::byte> garbage(64, std::byte{0xA5});
    const uint32_t header[3] = {1, vhost_user::kVersion1, 0x00FFFFFF};
    std::memcpy(garbage.data(), header, sizeof(header));
    ASSERT_TRUE(peer->send(garbage).ok);
    EXPECT_TRUE(closed_by_daemon(*peer));
  }
  traffic_on_b();

  // 2. A well-framed but malformed message: GET_FEATURES carries no payload.
  {
    auto peer = vhost_user::connect_unix(path_a, error);
    ASSERT_TRUE(peer) << error;
    ASSERT_TRUE(peer->send(vhost_user::encode(Request::kGetFeatures, 0, uint64_t{42})).ok);
    EXPECT_TRUE(closed_by_daemon(*peer));
  }
  traffic_on_b();

  // 3. A request nobody knows.
  {
    auto peer = vhost_user::connect_unix(path_a, error);
    ASSERT_TRUE(peer) << error;
    ASSERT_TRUE(peer->send(vhost_user::encode(static_cast<Request>(0xDEAD), 0, vhost_user::Payload{})).ok);
    EXPECT_TRUE(closed_by_daemon(*peer));
  }
  traffic_on_b();

  // Port A then serves a well-behaved frontend.
  auto good_a = connect(path_a, error);
  ASSERT_NE(good_a, nullptr) << error;
  const auto frames_a = make_frames(100, 7000);
  ASSERT_TRUE(send_all(*good_a, frames_a)) << good_a->error();
  ASSERT_TRUE(wait_tx_done(*good_a)) << good_a->error();
  ASSERT_TRUE(good_a->stop()) << good_a->error();
  traffic_on_b();

  EXPECT_FALSE(good_b->broken()) << good_b->error();
  ASSERT_TRUE(good_b->stop()) << good_b->error();

  const auto reports = stop_and_report(daemon);
  ASSERT_EQ(reports.size(), 2u);
  const PortTotals& a = reports[0].totals;
  const PortTotals& b = reports[1].totals;
  EXPECT_EQ(a.connections, 4u);
  EXPECT_EQ(a.protocol_errors, 3u);
  EXPECT_EQ(a.rejected, 0u);
  EXPECT_EQ(a.from_guest_packets, frames_a.size());
  EXPECT_EQ(a.from_guest_bytes, total_bytes(frames_a));
  EXPECT_EQ(b.connections, 1u);
  EXPECT_EQ(b.protocol_errors, 0u);
  EXPECT_EQ(b.rejected, 0u);
  EXPECT_EQ(b.from_guest_packets, sent_b);
  EXPECT_EQ(b.to_guest_packets, sent_b);
  EXPECT_EQ(b.to_guest_dropped, 0u);
}

TEST(DaemonTest, ASecondFrontendOnABusyPortIsTurnedAway) {
  TempDir dir;
  const std::string path = dir.file("busy.sock");
  Daemon daemon({port("busy", path)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;

  auto first = connect(path, error);
  ASSERT_NE(first, nullptr) << error;
  const auto before = make_frames(50, 0);
  ASSERT_TRUE(send_all(*first, before)) << first->error();

  std::string second_error;
  auto second = connect(path, second_error);
  EXPECT_EQ(second, nullptr);
  EXPECT_FALSE(second_error.empty());

  // The first goes on as if nothing happened.
  const auto after = make_frames(50, 50);
  ASSERT_TRUE(send_all(*first, after)) << first->error();
  ASSERT_TRUE(wait_tx_done(*first)) << first->error();
  EXPECT_FALSE(first->broken()) << first->error();
  ASSERT_TRUE(first->stop()) << first->error();

  const auto reports = stop_and_report(daemon);
  ASSERT_EQ(reports.size(), 1u);
  const PortTotals& t = reports[0].totals;
  EXPECT_EQ(t.connections, 1u);
  EXPECT_EQ(t.rejected, 1u);
  EXPECT_EQ(t.protocol_errors, 0u);
  EXPECT_EQ(t.from_guest_packets, before.size() + after.size());
  EXPECT_EQ(t.from_guest_bytes, total_bytes(before) + total_bytes(after));
}

// A guest that closes its connection and connects again at once (a restarted VM, the
// soak's churn) is served: its old connection's hang-up is seen before the new
// connection is taken for a second frontend, whichever way the old one ended.
TEST(DaemonTest, AFrontendThatReconnectsAtOnceIsServedNotTurnedAway) {
  TempDir dir;
  const std::string path = dir.file("again.sock");
  Daemon daemon({port("again", path)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;

  constexpr uint32_t kConnections = 40, kFrames = 10;
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < kConnections; ++i) {
    auto frontend = connect(path, error);
    ASSERT_NE(frontend, nullptr) << "connection " << i + 1 << ": " << error;
    const auto frames = make_frames(kFrames, i * kFrames);
    bytes += total_bytes(frames);
    ASSERT_TRUE(send_all(*frontend, frames)) << frontend->error();
    ASSERT_TRUE(wait_tx_done(*frontend)) << frontend->error();
    if (i % 2 == 0) {
      ASSERT_TRUE(frontend->stop()) << frontend->error();
    }  // else: just closed by the destructor
  }

  const auto reports = stop_and_report(daemon);
  ASSERT_EQ(reports.size(), 1u);
  const PortTotals& t = reports[0].totals;
  EXPECT_EQ(t.connections, kConnections);
  EXPECT_EQ(t.rejected, 0u);
  EXPECT_EQ(t.protocol_errors, 0u);
  EXPECT_EQ(t.from_guest_packets, uint64_t{kConnections} * kFrames);
  EXPECT_EQ(t.from_guest_bytes, bytes);
}

// ------------------------------------------------------------------ features

// The names in reply["ports"][0]["features"][which].
std::vector<std::string> feature_list(const nlohmann::json& reply, const char* which) {
  return reply.at("ports").at(0).at("features").at(which).get<std::vector<std::string>>();
}
bool has_name(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST(DaemonTest, ListShowsOfferedAndNegotiatedFeaturesByName) {
  TempDir dir;
  const std::string path = dir.file("feat.sock");
  Daemon daemon({port("feat", path, BackendKind::kSink)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  // The sink offers the transmit-side offloads on top of the base set; nothing is
  // negotiated before a frontend comes.
  nlohmann::json list = daemon.control({{"cmd", "list"}});
  const auto offered = feature_list(list, "offered");
  for (const char* name : {"CSUM", "HOST_TSO4", "HOST_TSO6", "HOST_ECN", "HOST_UFO", "HOST_USO", "VERSION_1",
                           "MRG_RXBUF", "PROTOCOL_FEATURES"}) {
    EXPECT_TRUE(has_name(offered, name)) << name;
  }
  EXPECT_FALSE(has_name(offered, "GUEST_CSUM"));  // the sink hands the guest nothing
  EXPECT_TRUE(feature_list(list, "negotiated").empty());

  // A frontend that asks for checksum offload and TSO4 gets them, and list says so.
  FrontendOptions options;
  options.features |= virtio::net_feature::mask(virtio::net_feature::kCsum) |
                      virtio::net_feature::mask(virtio::net_feature::kHostTso4);
  auto frontend = connect(path, error, options);
  ASSERT_NE(frontend, nullptr) << error;
  list = daemon.control({{"cmd", "list"}});
  const auto negotiated = feature_list(list, "negotiated");
  EXPECT_TRUE(has_name(negotiated, "CSUM"));
  EXPECT_TRUE(has_name(negotiated, "HOST_TSO4"));
  EXPECT_TRUE(has_name(negotiated, "VERSION_1"));
  EXPECT_FALSE(has_name(negotiated, "HOST_TSO6"));  // not asked for
  EXPECT_EQ(daemon.control({{"cmd", "stats"}}).at("ports").at(0).at("features").at("negotiated"),
            list.at("ports").at(0).at("features").at("negotiated"));
  ASSERT_TRUE(frontend->stop()) << frontend->error();
  frontend.reset();
  // Gone with the connection.
  const auto deadline = Clock::now() + 5s;
  while (!feature_list(daemon.control({{"cmd", "list"}}), "negotiated").empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(feature_list(daemon.control({{"cmd", "list"}}), "negotiated").empty());
  (void)stop_and_report(daemon);
}

// ------------------------------------------------------------------ stopping

TEST(DaemonTest, StopWithAFrontendAttachedClosesItsConnection) {
  TempDir dir;
  const std::string path = dir.file("stop.sock");
  Daemon daemon({port("stop", path, BackendKind::kLoopback)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;

  auto frontend = connect(path, error);
  ASSERT_NE(frontend, nullptr) << error;
  const auto frames = make_frames(64, 0);
  expect_echo(*frontend, frames);
  // More in flight when the stop comes (the backend may or may not take them).
  ASSERT_TRUE(send_all(*frontend, make_frames(16, 64))) << frontend->error();

  const auto begin = Clock::now();
  const auto reports = stop_and_report(daemon);
  EXPECT_LT(Clock::now() - begin, 5s);

  // The daemon closed the connection: the frontend's next request fails (at once, not
  // after its reply timeout).
  const auto stop_begin = Clock::now();
  EXPECT_FALSE(frontend->stop());
  EXPECT_TRUE(frontend->broken());
  EXPECT_LT(Clock::now() - stop_begin, 4s);  // under the 5 s reply timeout: it saw the close

  ASSERT_EQ(reports.size(), 1u);
  const PortTotals& t = reports[0].totals;
  EXPECT_EQ(t.connections, 1u);
  EXPECT_EQ(t.protocol_errors, 0u);  // a stop is not the frontend's fault
  EXPECT_GE(t.from_guest_packets, frames.size());
  EXPECT_LE(t.from_guest_packets, frames.size() + 16);
  EXPECT_GE(t.to_guest_packets, frames.size());
}

TEST(DaemonTest, StopWhileAPeerStallsMidMessage) {
  TempDir dir;
  const std::string path = dir.file("stall.sock");
  Daemon daemon({port("stall", path)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;

  auto peer = vhost_user::connect_unix(path, error);
  ASSERT_TRUE(peer) << error;
  // One whole request answered: the port serves this peer now.
  const auto message = vhost_user::encode(Request::kGetFeatures, 0, vhost_user::Payload{});
  ASSERT_TRUE(peer->send(message).ok);
  ASSERT_TRUE(peer->wait_readable(kPatience));
  const auto reply = peer->receive();
  ASSERT_EQ(reply.status, ReceiveStatus::kMessage) << reply.error;
  // Then half a header: the port reads it and waits (bounded) for the rest.
  ASSERT_TRUE(peer->send(std::span<const std::byte>(message.data(), 6)).ok);

  const auto begin = Clock::now();
  const auto reports = stop_and_report(daemon);
  EXPECT_LT(Clock::now() - begin, 5s);  // at most the continuation timeout (1 s)
  EXPECT_TRUE(closed_by_daemon(*peer));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].totals.connections, 1u);
}

// ------------------------------------------------------------------ start() failures

TEST(DaemonTest, StartFailsForASocketInAMissingDirectory) {
  TempDir dir;
  const std::string good = dir.file("good.sock");
  const std::string bad = dir.file("missing/bad.sock");
  {
    Daemon daemon({port("good", good), port("bad", bad)});
    std::string error;
    EXPECT_FALSE(daemon.start(error));
    EXPECT_NE(error.find("bad"), std::string::npos) << error;
    EXPECT_FALSE(exists(good));  // the port opened before the failure was closed again
    EXPECT_FALSE(exists(bad));
  }
  // Nothing was left bound: another daemon can take the good path.
  Daemon again({port("good", good)});
  std::string error;
  ASSERT_TRUE(again.start(error)) << error;
  auto frontend = connect(good, error);
  ASSERT_NE(frontend, nullptr) << error;
  ASSERT_TRUE(frontend->stop()) << frontend->error();
}

// cpus= and sched= put the port's worker thread on those CPUs under that policy (as
// the kernel reports them for that thread); a CPU the machine does not have fails
// the start, naming the port.
TEST(DaemonTest, CpusAndSchedPlaceThePortsWorkerAndAMissingCpuFailsTheStart) {
  TempDir dir;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  std::optional<size_t> last;
  for (size_t cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) last = cpu;
  }
  ASSERT_TRUE(last.has_value());
  PortSpec pinned = port("pinned", dir.file("pinned.sock"));
  std::string error;
  pinned.placement.cpus = *datapath::parse_cpu_list(std::to_string(*last), error);
  pinned.placement.scheduler = datapath::WorkerScheduler::kBatch;
  {
    Daemon daemon({pinned});
    ASSERT_TRUE(daemon.start(error)) << error;
    std::string cpus_of_worker;
    int policy_of_worker = -1;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      std::getline(comm, name);
      if (name != "pinned.w0") continue;
      std::ifstream status(task.path() / "status");
      for (std::string line; std::getline(status, line);) {
        if (line.rfind("Cpus_allowed_list:", 0) == 0) cpus_of_worker = line.substr(line.find_last_of(" \t") + 1);
      }
      policy_of_worker = ::sched_getscheduler(static_cast<pid_t>(std::stol(task.path().filename().string())));
    }
    EXPECT_EQ(cpus_of_worker, std::to_string(*last));
    EXPECT_EQ(policy_of_worker, SCHED_BATCH);
  }
  PortSpec missing = port("far", dir.file("far.sock"));
  missing.placement.cpus = *datapath::parse_cpu_list("1023", error);
  const long cpus_here = ::sysconf(_SC_NPROCESSORS_CONF);
  if (cpus_here >= 1024) GTEST_SKIP() << "CPU 1023 exists here";
  Daemon daemon({port("good", dir.file("good.sock")), missing});
  EXPECT_FALSE(daemon.start(error));
  EXPECT_NE(error.find("far: cannot run on CPUs 1023"), std::string::npos) << error;
  EXPECT_FALSE(exists(dir.file("good.sock")));
}

namespace {

// The Cpus_allowed_list of this process's thread named `name`, or "" when none is.
std::string cpus_of_thread(const std::string& name) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    std::getline(comm, line);
    if (line != name) continue;
    std::ifstream status(task.path() / "status");
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) return line.substr(line.find_last_of(" \t") + 1);
    }
  }
  return "";
}

}  // namespace

// cpus=frontend: when a process connects, the port's worker moves to the CPUs that
// process may run on (here a child pinned to one CPU, as taskset or libvirt pins QEMU).
TEST(DaemonTest, CpusFrontendMovesTheWorkerToTheConnectedProcesssCpus) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "one CPU allowed: the worker could not be seen to move";
  size_t target = 0;
  while (!CPU_ISSET(target, &allowed)) ++target;
  TempDir dir;
  PortSpec spec = port("follow", dir.file("follow.sock"));
  spec.placement.follow_frontend = true;
  Daemon daemon({spec});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  const std::string before = cpus_of_thread("follow.w0");
  ASSERT_NE(before, std::to_string(target));  // the daemon's CPUs until a frontend connects

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // only async-signal-safe calls: the parent has threads
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(target, &one);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string path = dir.file("follow.sock");
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (::sched_setaffinity(0, sizeof(one), &one) != 0 || fd < 0 ||
        ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
      ::_exit(1);
    }
    char byte = 0;
    (void)::read(fd, &byte, 1);  // until the test kills us (or the port hangs up)
    ::_exit(0);
  }
  std::string after;
  for (int i = 0; i < 500 && after != std::to_string(target); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    after = cpus_of_thread("follow.w0");
  }
  ::kill(child, SIGKILL);
  int status = 0;
  (void)::waitpid(child, &status, 0);
  EXPECT_EQ(after, std::to_string(target)) << "before: " << before;
}

TEST(DaemonTest, StartFailsForAPathNoSocketCanHave) {
  TempDir dir;
  const std::string good = dir.file("good.sock");
  const std::string too_long = dir.file(std::string(200, 'x') + ".sock");  // sun_path holds 107
  for (const bool client : {false, true}) {
    PortSpec bad = port("long", too_long);
    bad.client = client;
    Daemon daemon({port("good", good), bad});
    std::string error;
    EXPECT_FALSE(daemon.start(error)) << (client ? "client" : "server");
    EXPECT_NE(error.find("long"), std::string::npos) << error;
    EXPECT_FALSE(exists(good));
  }
}

TEST(DaemonTest, StartFailsForASocketServedByALiveListener) {
  TempDir dir;
  const std::string good = dir.file("good.sock");
  const std::string taken = dir.file("taken.sock");
  std::string error;
  auto live = vhost_user::Listener::bind(taken, error);
  ASSERT_TRUE(live) << error;
  {
    Daemon daemon({port("good", good), port("taken", taken)});
    EXPECT_FALSE(daemon.start(error));
    EXPECT_NE(error.find("taken"), std::string::npos) << error;
    EXPECT_FALSE(exists(good));
  }
  // The live socket is untouched: still there, still answering.
  EXPECT_TRUE(exists(taken));
  {
    auto probe = vhost_user::connect_unix(taken, error);
    EXPECT_TRUE(probe) << error;
  }
  // And the good path is free for the next daemon.
  Daemon again({port("good", good)});
  ASSERT_TRUE(again.start(error)) << error;
  EXPECT_TRUE(exists(good));
}

TEST(DaemonTest, AStaleSocketFileIsReplaced) {
  TempDir dir;
  const std::string path = dir.file("stale.sock");
  {
    // A socket file whose process is gone: bound, never unlinked, nobody listens.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0) << std::strerror(errno);
    ::close(fd);
  }
  ASSERT_TRUE(exists(path));
  Daemon daemon({port("stale", path)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto frontend = connect(path, error);
  ASSERT_NE(frontend, nullptr) << error;
  ASSERT_TRUE(frontend->stop()) << frontend->error();
}

TEST(DaemonTest, StartingTwiceIsRefused) {
  TempDir dir;
  Daemon daemon({port("once", dir.file("once.sock"))});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  EXPECT_FALSE(daemon.start(error));
  EXPECT_FALSE(error.empty());
  // The first start is unharmed.
  auto frontend = connect(dir.file("once.sock"), error);
  ASSERT_NE(frontend, nullptr) << error;
  ASSERT_TRUE(frontend->stop()) << frontend->error();
}

// ------------------------------------------------------------------ fd hygiene

TEST(DaemonTest, NoDescriptorOutlivesTheDaemon) {
  TempDir dir;
  const std::string server = dir.file("server.sock");
  const std::string client = dir.file("client.sock");
  const int before = count_open_fds();
  ASSERT_GT(before, 0);
  {
    Daemon daemon({port("server", server, BackendKind::kLoopback, 2),
                   client_port("client", client, BackendKind::kLoopback)});
    std::string error;
    ASSERT_TRUE(daemon.start(error)) << error;

    FrontendOptions two_pairs;
    two_pairs.queue_pairs = 2;
    auto on_server = connect(server, error, two_pairs);
    ASSERT_NE(on_server, nullptr) << error;
    expect_echo(*on_server, make_frames(20, 0), 0);
    expect_echo(*on_server, make_frames(20, 20), 1);

    auto on_client = vhost_user::listen_frontend(client, FrontendOptions{}, kPatience, error);
    ASSERT_NE(on_client, nullptr) << error;
    expect_echo(*on_client, make_frames(20, 40));

    // A hostile peer and a rejected frontend leave nothing behind either.
    {
      auto peer = vhost_user::connect_unix(server, error);
      ASSERT_TRUE(peer) << error;
      ASSERT_TRUE(closed_by_daemon(*peer));  // the busy port turned it away
    }
    ASSERT_TRUE(on_client->stop()) << on_client->error();
    // One frontend stays connected through the stop: the daemon closes everything.
    daemon.request_stop();
    daemon.wait();
    EXPECT_FALSE(on_server->stop());
    const auto reports = daemon.reports();
    ASSERT_EQ(reports.size(), 2u);
    EXPECT_EQ(reports[0].totals.rejected, 1u);
  }
  EXPECT_EQ(count_open_fds(), before);
  EXPECT_FALSE(exists(server));
}

}  // namespace
}  // namespace uvhost::serve
