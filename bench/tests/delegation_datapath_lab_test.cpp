// Runs the datapath delegation lab (pool, txq and learning) on tiny configurations with every
// lock it knows: each run must keep the structure's invariants (the lab throws
// otherwise) and produce sane figures; the table and the JSON name the structure.
#include "uvhost/bench/lab/delegation_lab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <sstream>

#include "uvhost/experiments/shared_tx_queue.h"
#include "uvhost/sync/baseline_locks.h"

namespace uvhost::bench::lab {
namespace {

DelegationLabConfig tiny(LockStructure structure) {
  DelegationLabConfig o;
  o.structure = structure;
  o.threads = {1, 3, 6};
  o.runs = 2;
  o.duration_ms = 15;
  o.ring = 64;
  o.cache_capacity = 16;
  o.txq_capacity = 32;  // small: some bursts are dropped
  return o;
}

void expect_sane(const DelegationLabResult& report) {
  const auto locks = delegation_lab_locks(report.config.structure);
  ASSERT_EQ(report.cells.size(), locks.size() * report.config.threads.size());
  for (const auto& p : report.cells) {
    EXPECT_EQ(p.samples.size(), 2u) << p.lock;
    EXPECT_GT(p.ops_per_s.mean, 0) << p.lock << " threads=" << p.threads;
    EXPECT_GT(p.items_per_s.mean, 0) << p.lock << " threads=" << p.threads;
    EXPECT_GE(p.drop_ratio.mean, 0) << p.lock;
    EXPECT_LE(p.drop_ratio.mean, 1) << p.lock;
    EXPECT_GE(p.fairness.mean, 0) << p.lock;
    EXPECT_LE(p.fairness.mean, 1.0 + 1e-9) << p.lock;
    EXPECT_GT(p.vs_mutex.value, 0) << p.lock;
    // Two runs each, std::mutex among the locks: every point has a verdict word.
    EXPECT_NE(p.vs_mutex.verdict, Verdict::kInvalid) << p.lock;
    if (p.lock == "std::mutex") {
      EXPECT_EQ(p.vs_mutex.verdict, Verdict::kNoise);
    }
  }
  const auto json = delegation_lab_json(report);
  for (const auto& point : json["points"]) {
    const std::string verdict = point["vs_mutex"]["verdict"];
    EXPECT_TRUE(verdict == "better" || verdict == "worse" || verdict == "noise") << verdict;
  }
  const auto charts = delegation_charts(report);
  ASSERT_EQ(charts.size(), 2u);
  EXPECT_EQ(charts[0].groups.size(), report.config.threads.size());
  EXPECT_EQ(charts[0].series.size(), locks.size());
  EXPECT_EQ(charts[0].title.rfind(to_string(report.config.structure), 0), 0u) << charts[0].title;
}

TEST(DelegationDatapathLab, PoolRunsEveryLockAndKeepsInvariants) {
  const auto report = run_delegation_lab(tiny(LockStructure::kPool), {});
  expect_sane(report);
  for (const auto& p : report.cells) EXPECT_EQ(p.drop_ratio.mean, 0) << p.lock;
  std::ostringstream table;
  print_delegation_table(report, table);
  EXPECT_NE(table.str().find("PacketPool"), std::string::npos);
  for (const auto& name : delegation_lab_locks(LockStructure::kPool)) EXPECT_NE(table.str().find(name), std::string::npos) << name;
  const auto json = delegation_lab_json(report);
  EXPECT_EQ(json["structure"], "pool");
  EXPECT_EQ(json["points"].size(), report.cells.size());
}

TEST(DelegationDatapathLab, TxqRunsEveryLockAndKeepsInvariants) {
  const auto report = run_delegation_lab(tiny(LockStructure::kTxq), {});
  expect_sane(report);
  std::ostringstream table;
  print_delegation_table(report, table);
  EXPECT_NE(table.str().find("SharedTxQueue"), std::string::npos);
  EXPECT_NE(table.str().find("dropped"), std::string::npos);
  const auto json = delegation_lab_json(report);
  EXPECT_EQ(json["structure"], "txq");
  EXPECT_EQ(json["options"]["txq_capacity"], 32);
}

TEST(DelegationDatapathLab, TxqTryPushLeavesTheRestWithTheCaller) {
  using experiments::TxDescriptor;
  experiments::SharedTxQueue q(4, sync::make_section_lock<sync::StdMutexLock>());
  std::array<TxDescriptor, 3> burst{};
  for (std::size_t i = 0; i < burst.size(); ++i) burst[i].cookie = i;
  EXPECT_EQ(q.try_push_burst(burst), 3u);
  EXPECT_EQ(q.try_push_burst(burst), 1u);  // 2 refused: still the caller's, not dropped
  auto s = q.stats();
  EXPECT_EQ(s.accepted, 4u);
  EXPECT_EQ(s.refused, 2u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(s.full, 1u);
  std::array<TxDescriptor, 4> out{};
  EXPECT_EQ(q.pop_burst(out), 4u);
  EXPECT_EQ(q.push_burst(std::span<const TxDescriptor>(burst).subspan(1)), 2u);  // the retry fits
  EXPECT_EQ(q.push_burst(burst), 2u);  // the last try drops what does not fit
  s = q.stats();
  EXPECT_EQ(s.accepted, 8u);
  EXPECT_EQ(s.dropped, 1u);
  EXPECT_EQ(s.full, 2u);
  EXPECT_EQ(s.push_bursts, 4u);
}

// The txq workload must time the lock, not the drop path: with several producers and
// the default queue, consumer burst and retries, a clear majority of bursts goes
// through whole, and the counts add up (the queue's own accepted + dropped == what
// the workers offered).
TEST(DelegationDatapathLab, TxqAcceptsMostBurstsWithSeveralProducers) {
  DelegationLabConfig o;
  o.structure = LockStructure::kTxq;
  o.threads = {4};
  o.runs = 2;
  o.duration_ms = 40;
  o.locks = {"std::mutex", "delegation"};
  const auto report = run_delegation_lab(o, {});
  ASSERT_EQ(report.cells.size(), 2u);
  for (const auto& dp : report.cells) {
    const auto& lock = dp.lock;
    ASSERT_EQ(dp.samples.size(), 2u) << lock;
    for (const auto& sample : dp.samples) {
      const TxqRunCounts& k = sample.counts;
      EXPECT_GT(k.bursts, 0u) << lock;
      EXPECT_EQ(k.offered, k.bursts * o.batch) << lock;
      EXPECT_EQ(k.accepted + k.dropped, k.offered) << lock;
      EXPECT_GE(k.pushes, k.bursts) << lock;
      EXPECT_LE(k.full, k.pushes) << lock;
      EXPECT_LE(k.dropped_bursts, k.bursts) << lock;
      // A clear majority of bursts accepted whole, and of descriptors.
      EXPECT_LT(3 * k.dropped_bursts, k.bursts) << lock << ": " << k.dropped_bursts << " of " << k.bursts;
      EXPECT_GT(3 * k.accepted, 2 * k.offered) << lock << ": " << k.accepted << " of " << k.offered;
    }
    EXPECT_LT(dp.burst_drop_ratio.mean, 1.0 / 3) << lock;
    EXPECT_GT(dp.items_per_s.mean, 0) << lock;
    EXPECT_GT(dp.items_vs_mutex.value, 0) << lock;
  }
  const auto json = delegation_lab_json(report);
  EXPECT_EQ(json["options"]["txq_retries"], o.txq_retries);
  for (const auto& point : json["points"]) {
    EXPECT_TRUE(point.contains("full_ratio"));
    EXPECT_TRUE(point.contains("items_vs_mutex"));
    EXPECT_EQ(point["samples"]["counts"].size(), 2u);
  }
  std::ostringstream table;
  print_delegation_table(report, table);
  EXPECT_NE(table.str().find("retries/burst"), std::string::npos);
}

TEST(DelegationDatapathLab, LockListIsTheSlabLabsLessTheAsyncVariant) {
  const auto slab = delegation_lab_locks(LockStructure::kSlab);
  const auto datapath = delegation_lab_locks(LockStructure::kTxq);
  EXPECT_EQ(delegation_lab_locks(LockStructure::kPool), datapath);
  EXPECT_EQ(datapath.size() + 1, slab.size());
  EXPECT_EQ(datapath.front(), "std::mutex");
  EXPECT_EQ(std::count(datapath.begin(), datapath.end(), "delegation"), 1);
  EXPECT_EQ(std::count(datapath.begin(), datapath.end(), "delegation-async"), 0);
  EXPECT_EQ(delegation_lab_locks(LockStructure::kLearning), datapath);
  EXPECT_EQ(base::join_names(kLockStructureNames, ","), "slab,pool,txq,learning");
}

// The switch's MAC table under MAC flapping, with each lock as its writers' lock: the
// table's counters must agree with the ports' (the load throws otherwise), and learns
// write (expect_sane: items, the writes, above 0).
TEST(DelegationDatapathLab, LearningRunsEveryLockOnTheSwitchTable) {
  const auto report = run_delegation_lab(tiny(LockStructure::kLearning), {});
  expect_sane(report);
  std::ostringstream table;
  print_delegation_table(report, table);
  EXPECT_NE(table.str().find("writes/s"), std::string::npos);
  EXPECT_NE(table.str().find("MAC learning"), std::string::npos);
  const auto json = delegation_lab_json(report);
  EXPECT_EQ(json["structure"], "learning");
  EXPECT_EQ(json["options"]["flapping_macs"], 8);
  EXPECT_TRUE(json["points"][0].contains("items_per_s"));
}

TEST(DelegationDatapathLab, BadRequestsAreErrors) {
  auto o = tiny(LockStructure::kPool);
  o.locks = {"no-such-lock"};
  EXPECT_THROW(run_delegation_lab(o, {}), std::runtime_error);
  o = tiny(LockStructure::kPool);
  o.locks = {"delegation-async"};  // slab only: nothing left to run
  EXPECT_THROW(run_delegation_lab(o, {}), std::runtime_error);
  o = tiny(LockStructure::kPool);
  o.cache_capacity = 4;  // smaller than the batch
  EXPECT_THROW(run_delegation_lab(o, {}), std::runtime_error);
  o = tiny(LockStructure::kTxq);
  o.consumer_burst = 0;
  EXPECT_THROW(run_delegation_lab(o, {}), std::runtime_error);
  o = tiny(LockStructure::kLearning);
  o.flapping_macs = 0;
  EXPECT_THROW(run_delegation_lab(o, {}), std::runtime_error);
}

}  // namespace
}  // namespace uvhost::bench::lab
