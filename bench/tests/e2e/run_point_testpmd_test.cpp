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

class RunPointTestpmd : public ::testing::TestWithParam<Point> {};

TEST_P(RunPointTestpmd, InvariantsHold) {
  if (!have_testpmd()) GTEST_SKIP() << "dpdk-testpmd not installed";
  const Point point = GetParam();
  Config config;
  config.backend = BackendKind::kTestpmd;
  RunOptions options;
  options.seconds = 0.5;
  options.warmup_seconds = 0.2;
  options.pin = false;
  const RunResult r = run_point(config, point, options);
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
