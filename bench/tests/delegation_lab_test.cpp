// Runs the delegation lab on a tiny configuration with every lock: each lock must
// keep the pool's invariants (the lab throws otherwise) and produce sane figures.
#include "uvhost/bench/lab/delegation_lab.h"

#include <gtest/gtest.h>

#include <sstream>

namespace uvhost::bench::lab {
namespace {

TEST(DelegationLab, EveryLockRunsAndKeepsInvariants) {
  DelegationLabOptions options;
  options.threads = {1, 3, 8};
  options.runs = 2;
  options.duration_ms = 20;
  const auto report = run_delegation_lab(options, nullptr);
  const auto locks = delegation_lab_locks();
  ASSERT_EQ(report.points.size(), locks.size() * options.threads.size());
  for (const auto& p : report.points) {
    EXPECT_EQ(p.ops_per_s.size(), 2u) << p.lock;
    EXPECT_GT(p.ops_per_s_summary.mean, 0) << p.lock << " threads=" << p.threads;
    EXPECT_GE(p.fairness_summary.mean, 0) << p.lock;  // 0: a thread never got the lock (possible in 20 ms)
    EXPECT_LE(p.fairness_summary.mean, 1.0 + 1e-9) << p.lock;
    EXPECT_GT(p.vs_mutex.value, 0) << p.lock;
  }
  std::ostringstream table;
  print_delegation_table(report, table);
  for (const auto& name : locks) EXPECT_NE(table.str().find(name), std::string::npos) << name;
  const auto json = to_json(report);
  EXPECT_EQ(json["points"].size(), report.points.size());
}

DelegationPoint synthetic_point(const std::string& lock, int threads, std::vector<double> ops) {
  DelegationPoint p;
  p.lock = lock;
  p.threads = threads;
  p.ops_per_s = std::move(ops);
  p.ops_per_s_summary = summarize(p.ops_per_s);
  return p;
}

// Made-up runs with a known answer against std::mutex: twice its ops/s is better,
// half is worse, the same runs are noise; the mutex row is the baseline.
TEST(DelegationLab, VerdictsFollowTheRatioCiAgainstStdMutex) {
  DelegationLabReport report;
  report.options.threads = {4};
  report.points = {synthetic_point("std::mutex", 4, {1e6, 1.01e6, 0.99e6}),
                   synthetic_point("delegation", 4, {2e6, 2.02e6, 1.98e6}),
                   synthetic_point("qspinlock", 4, {0.5e6, 0.51e6, 0.49e6}),
                   synthetic_point("ck-ticket", 4, {1e6, 1.01e6, 0.99e6})};
  std::vector<DelegationPoint*> points;
  for (auto& p : report.points) points.push_back(&p);
  set_vs_mutex(points);
  EXPECT_EQ(report.points[1].vs_mutex.verdict, Verdict::kBetter);
  EXPECT_NEAR(report.points[1].vs_mutex.value, 2.0, 1e-9);
  EXPECT_EQ(report.points[2].vs_mutex.verdict, Verdict::kWorse);
  EXPECT_EQ(report.points[3].vs_mutex.verdict, Verdict::kNoise);

  std::ostringstream table;
  print_delegation_table(report, table);
  for (const char* word : {"verdict", "better", "worse", "noise", "baseline", "higher is better"})
    EXPECT_NE(table.str().find(word), std::string::npos) << word << "\n" << table.str();
  const auto json = to_json(report);
  EXPECT_EQ(json["points"][1]["vs_mutex"]["verdict"], "better");
  EXPECT_EQ(json["points"][2]["vs_mutex"]["verdict"], "worse");
  EXPECT_EQ(json["points"][3]["vs_mutex"]["verdict"], "noise");
  EXPECT_NEAR(json["points"][1]["vs_mutex"]["ratio"].get<double>(), 2.0, 1e-9);

  const auto charts = delegation_charts(report);
  ASSERT_EQ(charts.size(), 2u);  // ops/s, CPU ns per CS
  EXPECT_EQ(charts[0].groups, std::vector<std::string>{"4 threads"});
  ASSERT_EQ(charts[0].series.size(), 4u);
  EXPECT_EQ(charts[0].series[1].name, "delegation");
  EXPECT_NEAR(charts[0].series[1].mean[0], 2e6, 1);

  // Without std::mutex among the locks there is nothing to judge against.
  DelegationPoint alone = synthetic_point("delegation", 4, {2e6, 2.1e6});
  set_vs_mutex({&alone});
  EXPECT_EQ(alone.vs_mutex.verdict, Verdict::kInvalid);
}

TEST(DelegationLab, UnknownLockIsAnError) {
  DelegationLabOptions options;
  options.locks = {"no-such-lock"};
  EXPECT_THROW(run_delegation_lab(options, nullptr), std::runtime_error);
}

}  // namespace
}  // namespace uvhost::bench::lab
