// run_point_e2e_test.cpp - run_point() end to end against a real `uvhost serve` (the
// uvhost binary of this build, UVHOST_BINARY): every workload, small and 64 KiB
// frames, several sessions and queue pairs. Asserts invariants, never speeds: traffic
// flowed, bytes == packets * size, every rr answer matched (run_point throws
// otherwise), CPU counted on both sides with the backend's worker among its threads.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "uvhost/bench/workload.h"

namespace uvhost::bench {
namespace {

RunOptions quick_options() {
  RunOptions options;
  options.seconds = 0.3;
  options.warmup_seconds = 0.1;
  options.pin = false;  // the test machine is shared: let the scheduler place us
  options.uvhost_binary = UVHOST_BINARY;
  return options;
}

bool is_backend_worker(const ThreadCpu& t) {
  // Datapath worker threads are named after their worker, <port>.w<i> (the port is
  // "bench").
  return t.side == "backend" && t.name.rfind("bench.w", 0) == 0;
}

void check_invariants(const Point& point, const RunResult& r) {
  SCOPED_TRACE(std::string(to_string(point.workload)) + " size " + std::to_string(point.size) + " sessions " +
               std::to_string(point.sessions));
  EXPECT_GT(r.seconds, 0.25);
  EXPECT_GT(r.packets, 0u);
  EXPECT_EQ(r.bytes, r.packets * point.size);
  if (point.workload == Workload::kRr) {
    EXPECT_EQ(r.transactions, r.packets);
    EXPECT_GT(r.p50_us, 0);
    EXPECT_LE(r.p50_us, r.p99_us);
    EXPECT_LE(r.p99_us, r.p999_us);
  } else {
    EXPECT_EQ(r.transactions, 0u);
    EXPECT_EQ(r.p50_us, 0);
  }
  double frontend = 0, backend_workers = 0, sum = 0;
  for (const ThreadCpu& t : r.threads) {
    EXPECT_GE(t.cpu_seconds, 0) << t.name;
    sum += t.cpu_seconds;
    if (t.side == "frontend") frontend += t.cpu_seconds;
    if (is_backend_worker(t)) backend_workers += t.cpu_seconds;
  }
  EXPECT_GT(frontend, 0);
  EXPECT_GT(backend_workers, 0) << "no backend worker thread with CPU time";
  EXPECT_NEAR(r.cpu_seconds, sum, 1e-9);
  EXPECT_GT(r.normalized(point.workload), 0);
}

class RunPointE2e : public ::testing::TestWithParam<Point> {};

TEST_P(RunPointE2e, InvariantsHold) {
  const Point point = GetParam();
  const RunResult r = run_point(Config{}, point, quick_options());
  check_invariants(point, r);
}

INSTANTIATE_TEST_SUITE_P(Workloads, RunPointE2e,
                         ::testing::Values(Point{Workload::kRr, 64, 1}, Point{Workload::kRr, 1500, 4},
                                           Point{Workload::kRr, 65535, 2}, Point{Workload::kStreamTx, 64, 1},
                                           Point{Workload::kStreamTx, 65535, 1}, Point{Workload::kStreamRx, 64, 1},
                                           Point{Workload::kStreamRx, 1500, 1}),
                         [](const ::testing::TestParamInfo<Point>& param_info) {
                           std::string name = std::string(to_string(param_info.param.workload)) + "_" +
                                              std::to_string(param_info.param.size) + "_x" +
                                              std::to_string(param_info.param.sessions);
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

TEST(RunPointE2eMore, TwoQueuePairsPortKeysAndSpin) {
  std::string error;
  const std::optional<Config> config = parse_config("workers=pair,poll=busy,busy_us=20,spin_ns=200", error);
  ASSERT_TRUE(config) << error;
  RunOptions options = quick_options();
  options.queue_pairs = 2;
  for (Workload w : {Workload::kRr, Workload::kStreamTx}) {
    const Point point{w, 128, 4};
    const RunResult r = run_point(*config, point, options);
    check_invariants(point, r);
  }
}

TEST(RunPointE2eMore, GivenWorkDirKeepsTheLog) {
  const std::string given = ::testing::TempDir() + "uvhost-bench-given";
  std::filesystem::remove_all(given);
  RunOptions options = quick_options();
  options.work_dir = given;
  (void)run_point(Config{}, Point{Workload::kRr, 64, 1}, options);
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(given) / "backend.log"));
  std::filesystem::remove_all(given);
}

TEST(RunPointE2eMore, FailuresCarryTheBackendLog) {
  // A flag `uvhost serve` refuses: it exits before its socket appears.
  Config config;
  config.serve_args = {"--no-such-flag"};
  try {
    (void)run_point(config, Point{Workload::kRr, 64, 1}, quick_options());
    FAIL() << "run_point succeeded with a bad daemon flag";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no-such-flag"), std::string::npos) << what;
  }
}

// Open-loop rr: the frontend sends on the schedule, so what comes back is what was
// offered while the backend keeps up, and less (with growing latency) when it cannot.
TEST(RunPointE2eOpenLoop, AnswersWhatWasOfferedWhileTheBackendKeepsUp) {
  RunOptions options = quick_options();
  options.seconds = 0.5;
  for (const Arrivals arrivals : {Arrivals::kFixed, Arrivals::kPoisson}) {
    const Point point{Workload::kRr, 64, 8, 4000, arrivals};
    SCOPED_TRACE(describe(point));
    const RunResult r = run_point(Config{}, point, options);
    check_invariants(point, r);
    // 4000/s over the window (Poisson's own spread is about 2% here; on a loaded
    // machine a backlog from the warm-up may drain inside the window, hence 35%), far
    // from a closed loop's hundreds of thousands.
    EXPECT_NEAR(r.tps(), 4000.0, 1400.0) << r.transactions << " in " << r.seconds << " s";
  }
}

TEST(RunPointE2eOpenLoop, AnOfferBeyondTheBackendQueuesAndChargesTheWait) {
  // One session and far more arrivals than one request at a time can carry: every
  // arrival waits for the session, and its latency counts from its scheduled time.
  const Point point{Workload::kRr, 64, 1, 50'000'000, Arrivals::kFixed};
  const RunResult r = run_point(Config{}, point, quick_options());
  check_invariants(point, r);
  EXPECT_LT(r.tps(), 25'000'000.0);
  // By the window's end the backlog is most of the run long: the median waited far
  // longer than any round trip (tens of microseconds at most).
  EXPECT_GT(r.p50_us, 10'000.0);
}

TEST(RunPointE2eOpenLoop, RatesAreForRrOnly) {
  EXPECT_THROW((void)run_point(Config{}, Point{Workload::kStreamTx, 64, 1, 1000}, quick_options()),
               std::runtime_error);
}

// The idle window: warm up with traffic, then measure the backend with its guest silent.
TEST(RunPointE2eIdle, NotifySleepsAlwaysSpins) {
  RunOptions options = quick_options();
  options.idle_window = true;
  std::string error;
  double worker_cores[2] = {0, 0};
  int i = 0;
  for (const char* mode : {"poll=notify", "poll=always"}) {
    const std::optional<Config> config = parse_config(mode, error);
    ASSERT_TRUE(config) << error;
    const RunResult r = run_point(*config, Point{Workload::kRr, 64, 1}, options);
    EXPECT_EQ(r.packets, 0u) << mode;
    EXPECT_EQ(r.transactions, 0u) << mode;
    EXPECT_GT(r.seconds, 0.25) << mode;
    for (const ThreadCpu& t : r.threads) {
      if (is_backend_worker(t)) worker_cores[i] += t.cpu_seconds / r.seconds;
    }
    ++i;
  }
  EXPECT_LT(worker_cores[0], 0.05) << "notify's worker should sleep while the guest is silent";
  EXPECT_GT(worker_cores[1], 0.3) << "always's worker should spin while the guest is silent";
}

// Interleaved runs (one backend, A and B switched live in slices): both sides measured
// for their full time, every invariant of a plain run holds for each.
// A spends nothing extra, B 20 us of frontend work per packet: B moves far fewer
// packets, in either order; both sides measured for their own time.
template <typename PairRun>
void expect_spin_slows_only_its_side(PairRun pair_run) {
  std::string error;
  const std::optional<Config> a = parse_config("poll=always", error);
  const std::optional<Config> b = parse_config("poll=always,spin_ns=20000", error);
  ASSERT_TRUE(a && b) << error;
  const Point point{Workload::kStreamTx, 64, 1};
  for (const bool a_first : {true, false}) {
    SCOPED_TRACE(a_first ? "A first" : "B first");
    const auto [ra, rb] = pair_run(*a, *b, a_first, point, quick_options());
    check_invariants(point, ra);
    check_invariants(point, rb);
    EXPECT_LT(ra.seconds, 0.5);
    EXPECT_LT(rb.seconds, 0.5);
    EXPECT_LT(rb.packets * 2, ra.packets) << "A " << ra.packets << " B " << rb.packets;
  }
}

TEST(RunPointE2eInterleaved, FrontendSpinSlowsOnlyItsOwnSide) {
  expect_spin_slows_only_its_side(run_point_interleaved);
}

TEST(RunPointE2eInterleaved, BackendKeysSwitchThroughTheControlSocket) {
  // Every switch is a control request the daemon must accept (a refusal fails the run).
  std::string error;
  const std::optional<Config> a = parse_config("poll=notify", error);
  const std::optional<Config> b = parse_config("poll=busy,busy_us=30,exit=any,memory=mutex,enqueue=locked_wake", error);
  ASSERT_TRUE(a && b) << error;
  const Point point{Workload::kRr, 64, 2};
  const auto [ra, rb] = run_point_interleaved(*a, *b, false, point, quick_options());
  check_invariants(point, ra);
  check_invariants(point, rb);
}

TEST(RunPointE2eInterleaved, RestartKeysAreRefused) {
  std::string error;
  const std::optional<Config> a = parse_config("workers=pair", error);
  ASSERT_TRUE(a) << error;
  try {
    (void)run_point_interleaved(*a, Config{}, true, Point{Workload::kRr, 64, 1}, quick_options());
    FAIL() << "configs that need a restart shared a run";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot share a run"), std::string::npos) << e.what();
  }
}

// Side-by-side runs (two backend processes, the frontend alternating between them,
// the idle one paused): each side measured for its full time from its own process.
TEST(RunPointE2eSideBySide, FrontendSpinSlowsOnlyItsOwnSide) {
  expect_spin_slows_only_its_side(run_point_side_by_side);
}

// Each side's backend CPU comes from its own process: A's two pair workers, B's one
// device worker.
TEST(RunPointE2eSideBySide, EachSideCountsItsOwnBackend) {
  std::string error;
  const std::optional<Config> a = parse_config("workers=pair", error);
  const std::optional<Config> b = parse_config("workers=device", error);
  ASSERT_TRUE(a && b) << error;
  RunOptions options = quick_options();
  options.queue_pairs = 2;
  const Point point{Workload::kRr, 64, 4};  // two requests in flight per pair, read before each pause
  const auto [ra, rb] = run_point_side_by_side(*a, *b, true, point, options);
  check_invariants(point, ra);
  check_invariants(point, rb);
  auto workers = [](const RunResult& r) {
    size_t n = 0;
    for (const ThreadCpu& t : r.threads) {
      if (is_backend_worker(t) && t.cpu_seconds > 0) ++n;
    }
    return n;
  };
  EXPECT_EQ(workers(ra), 2u);
  EXPECT_EQ(workers(rb), 1u);
}

// The side not being driven is paused: with both backends polling on one CPU, each
// still gets that CPU to itself while it is measured (unpaused, they would share it).
TEST(RunPointE2eSideBySide, TheIdleSideIsPaused) {
  std::string error;
  const std::optional<Config> a = parse_config("poll=always", error);
  const std::optional<Config> b = parse_config("poll=always,workers=device", error);
  ASSERT_TRUE(a && b) << error;
  RunOptions options = quick_options();
  options.pin = true;  // frontend on CPU 0, both backends on CPU 1
  const Point point{Workload::kStreamTx, 1500, 1};
  const auto sides = run_point_side_by_side(*a, *b, false, point, options);
  for (const RunResult& r : sides) {
    double worker = 0;
    for (const ThreadCpu& t : r.threads) worker += is_backend_worker(t) ? t.cpu_seconds : 0;
    EXPECT_GT(worker / r.seconds, 0.75) << "the measured backend's poller had CPU 1 to itself only part of the time";
  }
}

// Each side's sub-windows are recorded in the order they ran (B A A B ... when B is
// first), adding up to the side's totals, each with the machine's steal over it.
TEST(RunPointE2eSideBySide, EverySliceIsRecordedInOrder) {
  std::string error;
  const std::optional<Config> b = parse_config("workers=device", error);
  ASSERT_TRUE(b) << error;
  RunOptions options = quick_options();  // 0.3 s per side in 0.05 s slices
  const Point point{Workload::kStreamTx, 64, 1};
  const auto [ra, rb] = run_point_side_by_side(Config{}, *b, false, point, options);
  ASSERT_EQ(ra.slices.size(), 6u);
  ASSERT_EQ(rb.slices.size(), 6u);
  for (const RunResult* r : {&ra, &rb}) {
    double seconds = 0, packets = 0;
    for (const SliceResult& s : r->slices) {
      EXPECT_GT(s.seconds, 0.02);
      EXPECT_GE(s.steal_seconds, 0) << "/proc/stat's steal was not read";
      seconds += s.seconds;
      packets += s.throughput * s.seconds;
    }
    EXPECT_NEAR(seconds, r->seconds, 1e-9);
    EXPECT_NEAR(packets, static_cast<double>(r->packets), 1.0);
  }
  // B A A B per quad: B's 2k-th slice first, then A's 2k-th and 2k+1-th, then B's 2k+1-th.
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(rb.slices[2 * k].start_seconds < ra.slices[2 * k].start_seconds, true) << k;
    EXPECT_LT(ra.slices[2 * k].start_seconds, ra.slices[2 * k + 1].start_seconds) << k;
    EXPECT_LT(ra.slices[2 * k + 1].start_seconds, rb.slices[2 * k + 1].start_seconds) << k;
  }
  EXPECT_EQ(rb.slices[0].start_seconds, 0.0);
}

TEST(RunPointE2eSideBySide, ARunningBackendCannotTakePart) {
  Config running;
  running.backend = BackendKind::kSocket;
  running.socket = ::testing::TempDir() + "uvhost-bench-nobody.sock";
  try {
    (void)run_point_side_by_side(Config{}, running, true, Point{Workload::kRr, 64, 1}, quick_options());
    FAIL() << "a running backend took part in a side-by-side run";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("socket="), std::string::npos) << e.what();
  }
}

TEST(RunPointE2eMore, NothingListeningFailsClearly) {
  Config config;
  config.backend = BackendKind::kSocket;
  config.socket = ::testing::TempDir() + "uvhost-bench-nobody.sock";
  RunOptions options = quick_options();
  EXPECT_THROW((void)run_point(config, Point{Workload::kRr, 64, 1}, options), std::runtime_error);
}

}  // namespace
}  // namespace uvhost::bench
