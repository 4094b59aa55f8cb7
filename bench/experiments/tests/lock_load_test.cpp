// lock_load: each load generator, under a queued lock and the delegation lock, runs
// every thread at least once, keeps its structure's invariants (it would throw) and
// returns counts that add up.
#include "uvhost/experiments/lock_load.h"

#include <gtest/gtest.h>

#include <string_view>

namespace uvhost::experiments {
namespace {

const NamedSectionLock& lock_named(std::string_view name) {
  for (const auto& lock : section_lock_set())
    if (name == lock.name) return lock;
  throw std::invalid_argument("no such lock");
}

constexpr LoadShape kShape{3, 10, 8, 16};

TEST(LockLoad, RunThreadsForTimesEveryThreadAndItsCpu) {
  std::atomic<bool> stop{false};
  std::vector<int64_t> cpu_ns;
  std::atomic<int> ran{0};
  const int64_t wall = run_threads_for(3, 5, stop, cpu_ns, [&](std::size_t) {
    while (!stop.load(std::memory_order_relaxed)) {
    }
    ran.fetch_add(1);
  });
  EXPECT_EQ(ran.load(), 3);
  EXPECT_GE(wall, 5'000'000);
  ASSERT_EQ(cpu_ns.size(), 3u);
  for (int64_t ns : cpu_ns) EXPECT_GT(ns, 0);
}

TEST(LockLoad, SlabLoadRunsEveryThread) {
  const LoadCounts c = run_slab_load<DelegationAsyncRunner>({kShape, 1 << 12, 32});
  EXPECT_GE(c.min_ops, 2u);
  EXPECT_GE(c.ops, 3 * c.min_ops);
  EXPECT_GT(c.cpu_ns, 0);
  EXPECT_GT(c.wall_ns, 0);
}

TEST(LockLoad, PoolLoadCountsSectionsAndBuffers) {
  for (const char* name : {"std::mutex", "delegation"}) {
    const LoadCounts c = run_pool_load({kShape, 64, 16, 2048}, lock_named(name));
    EXPECT_GE(c.min_ops, 1u) << name;
    EXPECT_GE(c.items, 3u * 64) << name;  // at least one full ring per thread
  }
}

TEST(LockLoad, TxqLoadAgreesWithTheQueue) {
  for (const char* name : {"std::mutex", "delegation"}) {
    const LoadCounts c = run_txq_load({kShape, 32, 16, 2}, lock_named(name));
    EXPECT_GE(c.bursts, 3u) << name;
    EXPECT_EQ(c.offered, c.bursts * kShape.batch) << name;
    EXPECT_EQ(c.queue.accepted, c.items) << name;
    EXPECT_EQ(c.queue.accepted + c.queue.dropped, c.offered) << name;
    EXPECT_EQ(c.queue.push_bursts, c.ops) << name;
  }
}

}  // namespace
}  // namespace uvhost::experiments
