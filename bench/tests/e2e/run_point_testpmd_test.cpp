// run_point_testpmd_test.cpp - run_point() against DPDK's testpmd (vhost PMD): rxonly
// for stream-tx, txonly for stream-rx, macswap for rr. Label `interop` (release CI
// stage only); skipped when dpdk-testpmd is not installed. Invariants, never speeds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "uvhost/bench/workload.h"

namespace uvhost::bench {
namespace {

bool have_testpmd() { return std::system("command -v dpdk-testpmd >/dev/null 2>&1") == 0; }

Config testpmd_config() {
  Config config;
  config.backend = BackendKind::kTestpmd;
  return config;
}

RunOptions quick_options() {
  RunOptions options;
  options.seconds = 0.5;
  options.warmup_seconds = 0.2;
  options.pin = false;
  options.uvhost_binary = UVHOST_BINARY;
  return options;
}

class RunPointTestpmd : public ::testing::TestWithParam<Point> {};

TEST_P(RunPointTestpmd, InvariantsHold) {
  if (!have_testpmd()) GTEST_SKIP() << "dpdk-testpmd not installed";
  const Point point = GetParam();
  const RunResult r = run_point(testpmd_config(), point, quick_options());
  EXPECT_GT(r.packets, 0u);
  EXPECT_EQ(r.bytes, r.packets * point.size);
  if (point.workload == Workload::kRr) {
    EXPECT_EQ(r.transactions, r.packets);
    EXPECT_GT(r.p50_us, 0);
    EXPECT_LE(r.p50_us, r.p99_us);
  }
  double frontend = 0, backend = 0;
  for (const ThreadCpu& t : r.threads) (t.side == "frontend" ? frontend : backend) += t.cpu_seconds;
  EXPECT_GT(frontend, 0);
  EXPECT_GT(backend, 0);  // testpmd's forwarding lcore polls the whole window
}

// testpmd and uvhost side by side in one round, as `bench compare --a backend=testpmd
// --b ...` runs them: every answer matched on both connections (drained before each
// pause), each side's CPU from its own backend process.
TEST(RunPointTestpmdSideBySide, BothBackendsAnswerEveryRequest) {
  if (!have_testpmd()) GTEST_SKIP() << "dpdk-testpmd not installed";
  const Point point{Workload::kRr, 64, 4};
  for (const bool a_first : {true, false}) {
    SCOPED_TRACE(a_first ? "testpmd first" : "uvhost first");
    const auto [rt, ru] = run_point_side_by_side(testpmd_config(), Config{}, a_first, point, quick_options());
    for (const RunResult* r : {&rt, &ru}) {
      EXPECT_GT(r->transactions, 0u);
      EXPECT_EQ(r->transactions, r->packets);
      EXPECT_GT(r->seconds, 0.45);
      EXPECT_LT(r->seconds, 0.7);
    }
    bool testpmd_lcore = false, uvhost_worker = false;
    for (const ThreadCpu& t : rt.threads) testpmd_lcore |= t.side == "backend" && t.name.rfind("bench.w", 0) != 0;
    for (const ThreadCpu& t : ru.threads) uvhost_worker |= t.name.rfind("bench.w", 0) == 0 && t.cpu_seconds > 0;
    for (const ThreadCpu& t : rt.threads) EXPECT_NE(t.name.rfind("bench.w", 0), 0u) << "a uvhost thread on testpmd's side";
    EXPECT_TRUE(testpmd_lcore);
    EXPECT_TRUE(uvhost_worker);
  }
}

INSTANTIATE_TEST_SUITE_P(Workloads, RunPointTestpmd,
                         ::testing::Values(Point{Workload::kRr, 64, 4}, Point{Workload::kStreamTx, 64, 1},
                                           Point{Workload::kStreamRx, 1500, 1}),
                         [](const ::testing::TestParamInfo<Point>& param_info) {
                           std::string name = std::string(to_string(param_info.param.workload)) + "_" +
                                              std::to_string(param_info.param.size);
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace uvhost::bench
