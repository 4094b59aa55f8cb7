// qspinlock_test.cpp - QSpinLock: mutual exclusion under oversubscription, try_lock,
// layout, thread-index recycling, misuse.
#include "uvhost/sync/qspinlock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "sync_test_support.h"

namespace uvhost::sync {
namespace {

// Mutual exclusion under `threads` threads; the lock must end up free.
void stress(QSpinLock& lock, int threads, int iterations, bool use_try_lock = false) {
  testing::expect_mutual_exclusion(lock, threads, iterations, use_try_lock ? 2 : 0);
  EXPECT_FALSE(lock.is_locked());
}

TEST(QSpinLock, IsFourBytesAndNamed) {
  static_assert(sizeof(QSpinLock) == 4);
  EXPECT_STREQ(QSpinLock::kName, "qspinlock");
}

TEST(QSpinLock, TryLockFailsWhileHeld) {
  QSpinLock lock;
  EXPECT_TRUE(lock.try_lock());
  EXPECT_TRUE(lock.is_locked());
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
  EXPECT_FALSE(lock.is_locked());
  std::lock_guard<QSpinLock> guard(lock);  // BasicLockable
  EXPECT_TRUE(lock.is_locked());
}

TEST(QSpinLock, MutualExclusion2Threads) {
  QSpinLock lock;
  stress(lock, 2, 20000);
}

TEST(QSpinLock, MutualExclusion16Threads) {
  QSpinLock lock;
  stress(lock, 16, 2000);
}

TEST(QSpinLock, MutualExclusion64Threads) {
  QSpinLock lock;
  stress(lock, 64, 300);
}

TEST(QSpinLock, MixedLockAndTryLock16Threads) {
  QSpinLock lock;
  stress(lock, 16, 1000, /*use_try_lock=*/true);
}

// Holding one qspinlock while queuing on another (the tail of each lock names nodes of
// different threads; one thread's node may be queued on a lock while it holds another).
TEST(QSpinLock, HoldOneWhileContendingForAnother) {
  QSpinLock outer;
  QSpinLock inner;
  uint64_t counter = 0;
  std::vector<std::thread> pool;
  for (int t = 0; t < 8; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        if (i % 2 == 0) {
          std::lock_guard<QSpinLock> a(outer);
          std::lock_guard<QSpinLock> b(inner);
          ++counter;
        } else {
          std::lock_guard<QSpinLock> b(inner);
          ++counter;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(counter, 8u * 500u);
}

// Thread indices are recycled: many short-lived contending threads do not exhaust the
// registry (otherwise every later thread would fall back to unqueued waiting).
TEST(QSpinLock, ThreadIndicesAreRecycled) {
  QSpinLock lock;
  constexpr int kBatches = 150;
  constexpr int kThreadsPerBatch = 8;
  for (int b = 0; b < kBatches; ++b) stress(lock, kThreadsPerBatch, 40);
  // 1200 threads contended; at most a few batches' worth of indices are ever live.
  EXPECT_LE(QSpinLock::thread_indices_high_water(), 8u * kThreadsPerBatch + 64u);
  EXPECT_LT(QSpinLock::thread_indices_high_water(), QSpinLock::kMaxQueuedThreads);
}

#if UVHOST_MISUSE_CHECKS_ENABLED
TEST(QSpinLockDeathTest, UnlockOfUnlockedLockAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  QSpinLock lock;
  EXPECT_DEATH(lock.unlock(), "qspinlock: unlock of an unlocked lock");
}
#endif

}  // namespace
}  // namespace uvhost::sync
