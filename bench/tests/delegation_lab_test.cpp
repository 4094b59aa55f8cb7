// Runs the delegation lab's slab structure on a tiny configuration with every lock:
// each lock must keep the pool's invariants (the lab throws otherwise) and produce sane
// figures; made-up runs check the verdicts against std::mutex.
#include "uvhost/bench/lab/delegation_lab.h"

#include <gtest/gtest.h>

#include <sstream>

namespace uvhost::bench::lab {
namespace {

TEST(DelegationLab, EveryLockRunsAndKeepsInvariants) {
  DelegationLabConfig config;
  config.threads = {1, 3, 8};
  config.runs = 2;
  config.duration_ms = 20;
  const auto result = run_delegation_lab(config, {});
  const auto locks = delegation_lab_locks();
  ASSERT_EQ(result.cells.size(), locks.size() * config.threads.size());
  for (const auto& p : result.cells) {
    EXPECT_EQ(p.samples.size(), 2u) << p.lock;
    EXPECT_GT(p.ops_per_s.mean, 0) << p.lock << " threads=" << p.threads;
    EXPECT_GE(p.fairness.mean, 0) << p.lock;  // 0: a thread never got the lock (possible in 20 ms)
    EXPECT_LE(p.fairness.mean, 1.0 + 1e-9) << p.lock;
    EXPECT_GT(p.vs_mutex.value, 0) << p.lock;
  }
  std::ostringstream table;
  print_delegation_table(result, table);
  for (const auto& name : locks) EXPECT_NE(table.str().find(name), std::string::npos) << name;
  const auto json = delegation_lab_json(result);
  EXPECT_EQ(json["points"].size(), result.cells.size());
  EXPECT_EQ(json["structure"], "slab");
  EXPECT_EQ(json["points"][0]["samples"]["ops_per_s"].size(), 2u);
  EXPECT_FALSE(json["points"][0].contains("items_per_s"));  // slab reports its own figures only
}

DelegationCell synthetic_cell(const std::string& lock, int threads, const std::vector<double>& ops) {
  DelegationCell cell;
  cell.lock = lock;
  cell.threads = threads;
  for (double v : ops) cell.samples.emplace_back().ops_per_s = v;
  cell.ops_per_s = summarize(ops);
  return cell;
}

// Made-up runs with a known answer against std::mutex: twice its ops/s is better,
// half is worse, the same runs are noise; the mutex row is the baseline.
TEST(DelegationLab, VerdictsFollowTheRatioCiAgainstStdMutex) {
  DelegationLabResult result;
  result.config.threads = {4};
  result.cells = {synthetic_cell("std::mutex", 4, {1e6, 1.01e6, 0.99e6}),
                  synthetic_cell("delegation", 4, {2e6, 2.02e6, 1.98e6}),
                  synthetic_cell("qspinlock", 4, {0.5e6, 0.51e6, 0.49e6}),
                  synthetic_cell("ck-ticket", 4, {1e6, 1.01e6, 0.99e6})};
  set_vs_mutex(result);
  EXPECT_EQ(result.cells[1].vs_mutex.verdict, Verdict::kBetter);
  EXPECT_NEAR(result.cells[1].vs_mutex.value, 2.0, 1e-9);
  EXPECT_EQ(result.cells[2].vs_mutex.verdict, Verdict::kWorse);
  EXPECT_EQ(result.cells[3].vs_mutex.verdict, Verdict::kNoise);

  std::ostringstream table;
  print_delegation_table(result, table);
  for (const char* word : {"verdict", "better", "worse", "noise", "baseline", "higher is better"})
    EXPECT_NE(table.str().find(word), std::string::npos) << word << "\n" << table.str();
  const auto json = delegation_lab_json(result);
  EXPECT_EQ(json["points"][1]["vs_mutex"]["verdict"], "better");
  EXPECT_EQ(json["points"][2]["vs_mutex"]["verdict"], "worse");
  EXPECT_EQ(json["points"][3]["vs_mutex"]["verdict"], "noise");
  EXPECT_NEAR(json["points"][1]["vs_mutex"]["ratio"].get<double>(), 2.0, 1e-9);

  const auto charts = delegation_charts(result);
  ASSERT_EQ(charts.size(), 2u);  // ops/s, CPU ns per CS
  EXPECT_EQ(charts[0].groups, std::vector<std::string>{"4 threads"});
  ASSERT_EQ(charts[0].series.size(), 4u);
  EXPECT_EQ(charts[0].series[1].name, "delegation");
  EXPECT_NEAR(charts[0].series[1].mean[0], 2e6, 1);

  // Without std::mutex among the locks there is nothing to judge against.
  DelegationLabResult alone;
  alone.cells = {synthetic_cell("delegation", 4, {2e6, 2.1e6})};
  set_vs_mutex(alone);
  EXPECT_EQ(alone.cells[0].vs_mutex.verdict, Verdict::kInvalid);
}

TEST(DelegationLab, UnknownLockIsAnError) {
  DelegationLabConfig config;
  config.locks = {"no-such-lock"};
  EXPECT_THROW(run_delegation_lab(config, {}), std::runtime_error);
}

}  // namespace
}  // namespace uvhost::bench::lab
