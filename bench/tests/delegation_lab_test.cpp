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

TEST(DelegationLab, UnknownLockIsAnError) {
  DelegationLabOptions options;
  options.locks = {"no-such-lock"};
  EXPECT_THROW(run_delegation_lab(options, nullptr), std::runtime_error);
}

}  // namespace
}  // namespace uvhost::bench::lab
