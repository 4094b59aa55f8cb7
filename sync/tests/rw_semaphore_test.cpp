// rw_semaphore_test.cpp - RwSemaphore: readers share, writers exclude, writer
// preference, sleeping under oversubscription, misuse.
#include "sync_test_support.h"
#include "uvhost/sync/rw_semaphore.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

namespace uvhost::sync {
namespace {

using namespace std::chrono_literals;

using testing::eventually;

TEST(RwSemaphore, ReadersShare) {
  RwSemaphore sem;
  constexpr int kReaders = 8;
  std::atomic<int> inside{0};
  std::atomic<bool> release{false};
  std::vector<std::thread> pool;
  for (int i = 0; i < kReaders; ++i) {
    pool.emplace_back([&] {
      std::shared_lock<RwSemaphore> guard(sem);
      inside.fetch_add(1);
      while (!release.load()) std::this_thread::sleep_for(100us);
    });
  }
  // All readers are inside at the same time.
  EXPECT_TRUE(eventually([&] { return inside.load() == kReaders; }));
  EXPECT_EQ(sem.readers(), static_cast<uint32_t>(kReaders));
  EXPECT_FALSE(sem.try_lock());
  release.store(true);
  for (auto& th : pool) th.join();
  EXPECT_EQ(sem.readers(), 0u);
  EXPECT_TRUE(sem.try_lock());
  EXPECT_FALSE(sem.try_lock_shared());
  sem.unlock();
}

TEST(RwSemaphore, WaitingWriterBlocksNewReaders) {
  RwSemaphore sem;
  sem.lock_shared();  // reader R1 (this thread)

  std::atomic<bool> writer_in{false};
  std::atomic<bool> writer_release{false};
  std::thread writer([&] {
    sem.lock();
    writer_in.store(true);
    while (!writer_release.load()) std::this_thread::sleep_for(100us);
    sem.unlock();
  });
  ASSERT_TRUE(eventually([&] { return sem.waiting_writers() == 1; }));

  // Writer preference: a new reader may not join R1 while the writer waits.
  std::atomic<bool> reader2_in{false};
  std::thread reader2([&] {
    EXPECT_FALSE(sem.try_lock_shared());
    sem.lock_shared();
    reader2_in.store(true);
    // The writer was first and has left by now.
    EXPECT_TRUE(writer_in.load());
    EXPECT_FALSE(sem.writer_holds());
    sem.unlock_shared();
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(reader2_in.load());
  EXPECT_FALSE(writer_in.load());

  sem.unlock_shared();  // R1 leaves: the writer goes first
  ASSERT_TRUE(eventually([&] { return writer_in.load(); }));
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(reader2_in.load());  // still excluded while the writer holds it
  writer_release.store(true);
  writer.join();
  reader2.join();
  EXPECT_TRUE(reader2_in.load());
  EXPECT_EQ(sem.readers(), 0u);
  EXPECT_EQ(sem.waiting_writers(), 0u);
}

// Readers check that a pair written by writers is never torn; writers check they are
// alone. Threads outnumber the 2 cores: waiters must sleep, not spin forever.
void stress(int threads, int iterations) {
  RwSemaphore sem;
  uint64_t a = 0;
  uint64_t b = 0;
  std::atomic<int> readers_inside{0};
  std::atomic<int> writers_inside{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < iterations; ++i) {
        if ((i + t) % 8 == 0) {
          std::unique_lock<RwSemaphore> guard(sem);
          if (writers_inside.fetch_add(1) != 0 || readers_inside.load() != 0) failed.store(true);
          ++a;
          ++b;
          writers_inside.fetch_sub(1);
        } else {
          std::shared_lock<RwSemaphore> guard(sem);
          readers_inside.fetch_add(1);
          if (writers_inside.load() != 0 || a != b) failed.store(true);
          readers_inside.fetch_sub(1);
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(a, b);
  EXPECT_EQ(sem.readers(), 0u);
  EXPECT_EQ(sem.waiting_writers(), 0u);
  EXPECT_FALSE(sem.writer_holds());
}

TEST(RwSemaphore, Stress2Threads) { stress(2, 20000); }
TEST(RwSemaphore, Stress16Threads) { stress(16, 2000); }
TEST(RwSemaphore, Stress64Threads) { stress(64, 400); }

TEST(RwSemaphore, WritersOnlyMutualExclusion) {
  RwSemaphore sem;
  uint64_t counter = 0;
  std::vector<std::thread> pool;
  for (int t = 0; t < 16; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        std::lock_guard<RwSemaphore> guard(sem);
        ++counter;
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(counter, 16u * 1000u);
}

#if UVHOST_MISUSE_CHECKS_ENABLED
TEST(RwSemaphoreDeathTest, UnlockWithoutHoldingAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  RwSemaphore sem;
  EXPECT_DEATH(sem.unlock(), "rwsem: unlock without holding the write lock");
}

TEST(RwSemaphoreDeathTest, UnlockSharedWithNoReadersAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  RwSemaphore sem;
  EXPECT_DEATH(sem.unlock_shared(), "rwsem: unlock_shared with no readers");
}

TEST(RwSemaphoreDeathTest, DestroyedWhileHeldAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        RwSemaphore sem;
        sem.lock_shared();
      },
      "rwsem: destroyed while held");
}
#endif

}  // namespace
}  // namespace uvhost::sync
