// section_lock_test.cpp - SectionLock over each kind of lock it adapts: run() is
// mutually exclusive, try_run() runs when the lock is free and refuses without running
// when another thread holds it (or, for a lock without a try, waits and runs), and
// make_section_lock(kind) gives the lock a daemon setting names.
#include "uvhost/sync/section_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "uvhost/sync/baseline_locks.h"
#include "uvhost/sync/qspinlock.h"
#include "sanitized_build.h"

namespace uvhost::sync {
namespace {

// Holds `lock` from another thread (inside a section) until release() or destruction.
class HeldElsewhere {
 public:
  explicit HeldElsewhere(SectionLock& lock) {
    thread_ = std::thread([this, &lock] {
      lock.run([this] {
        inside_.store(true);
        while (!release_.load()) std::this_thread::yield();
      });
    });
    while (!inside_.load()) std::this_thread::yield();
  }
  ~HeldElsewhere() { release(); }
  void release() {
    release_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> inside_{false};
  std::atomic<bool> release_{false};
  std::thread thread_;
};

template <class L>
class SectionLockOfEach : public ::testing::Test {};
using Locks = ::testing::Types<StdMutexLock, DelegationLock, QSpinLock, CkClhLock>;
TYPED_TEST_SUITE(SectionLockOfEach, Locks);

TYPED_TEST(SectionLockOfEach, RunIsMutuallyExclusive) {
  auto lock = make_section_lock<TypeParam>();
  constexpr int kThreads = 4;  // spinlocks: more than cores, few enough that preempted holders stay rare
  constexpr int kSections = testing_support::kSanitized ? 1000 : 5000;
  uint64_t counter = 0;  // plain: only sections touch it
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kSections; ++i) lock->run([&] { ++counter; });
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(counter, uint64_t{kThreads} * kSections);
}

TYPED_TEST(SectionLockOfEach, TryRunRunsOnAFreeLock) {
  auto lock = make_section_lock<TypeParam>();
  int runs = 0;
  EXPECT_TRUE(lock->try_run([&] { ++runs; }));
  EXPECT_TRUE(lock->try_run([&] { ++runs; }));
  EXPECT_EQ(runs, 2);
}

TYPED_TEST(SectionLockOfEach, TryRunOnAHeldLockRefusesOrWaits) {
  auto lock = make_section_lock<TypeParam>();
  std::atomic<int> runs{0};
  if constexpr (std::is_same_v<TypeParam, CkClhLock>) {
    // No try: try_run() waits for the holder, then runs.
    HeldElsewhere held(*lock);
    std::thread trier([&] { EXPECT_TRUE(lock->try_run([&] { runs.fetch_add(1); })); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(runs.load(), 0);  // still behind the holder
    held.release();
    trier.join();
    EXPECT_EQ(runs.load(), 1);
  } else {
    HeldElsewhere held(*lock);
    EXPECT_FALSE(lock->try_run([&] { runs.fetch_add(1); }));
    held.release();
    EXPECT_EQ(runs.load(), 0);  // refused: never run, not even later
    EXPECT_TRUE(lock->try_run([&] { runs.fetch_add(1); }));
    EXPECT_EQ(runs.load(), 1);
  }
}

TEST(SectionLockKind, NamesAndMadeLocks) {
  EXPECT_EQ(base::join_names(kSectionLockKindNames, ","), "mutex,delegation");
  EXPECT_STREQ(make_section_lock(SectionLockKind::kMutex)->name(), "std::mutex");
  EXPECT_STREQ(make_section_lock(SectionLockKind::kDelegation)->name(), "delegation");
  EXPECT_EQ(base::parse_enum<SectionLockKind>("delegation"), SectionLockKind::kDelegation);
  EXPECT_FALSE(base::parse_enum<SectionLockKind>("spin").has_value());
}

}  // namespace
}  // namespace uvhost::sync
