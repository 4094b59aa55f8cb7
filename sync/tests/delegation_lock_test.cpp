// delegation_lock_test.cpp - DelegationLock: results, exceptions, move-only results,
// async completions, statistics and misuse checks. Contention tests live in
// delegation_lock_stress_test.cpp.
#include "uvhost/sync/delegation_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace uvhost::sync {
namespace {

using namespace std::chrono_literals;

TEST(DelegationLock, RunReturnsResult) {
  DelegationLock lock;
  int counter = 0;
  EXPECT_EQ(lock.run([&] { return ++counter; }), 1);
  EXPECT_EQ(lock.run([&] { return ++counter; }), 2);
  EXPECT_EQ(lock.run([] { return std::string("abc"); }), "abc");
}

TEST(DelegationLock, TryRunOnlyWhenFree) {
  DelegationLock lock;
  int counter = 0;
  EXPECT_TRUE(lock.try_run([&] { ++counter; }));
  EXPECT_EQ(counter, 1);
  std::atomic<bool> inside{false};
  std::atomic<bool> release{false};
  std::thread holder([&] {
    lock.run([&] {
      inside.store(true);
      while (!release.load()) std::this_thread::yield();
    });
  });
  while (!inside.load()) std::this_thread::yield();
  EXPECT_FALSE(lock.try_run([&] { ++counter; }));
  release.store(true);
  holder.join();
  EXPECT_EQ(counter, 1);
  EXPECT_TRUE(lock.try_run([&] { ++counter; }));
  EXPECT_EQ(counter, 2);
  EXPECT_EQ(lock.stats().own_ops, 3u);  // two try_runs and the holder's run
}

TEST(DelegationLock, RunVoidAndReference) {
  DelegationLock lock;
  int value = 0;
  lock.run([&] { value = 7; });
  EXPECT_EQ(value, 7);
  int& ref = lock.run([&]() -> int& { return value; });
  EXPECT_EQ(&ref, &value);
}

TEST(DelegationLock, RunMoveOnlyResult) {
  DelegationLock lock;
  std::unique_ptr<int> p = lock.run([] { return std::make_unique<int>(42); });
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 42);
}

TEST(DelegationLock, ExceptionReachesCallerAndLockStaysUsable) {
  DelegationLock lock;
  EXPECT_THROW(lock.run([]() -> int { throw std::runtime_error("boom"); }), std::runtime_error);
  EXPECT_EQ(lock.run([] { return 5; }), 5);
}

// Exceptions thrown in a section that a combiner runs for another thread arrive in
// the owner's thread. A blocker holds the lock until the other thread is queued.
TEST(DelegationLock, DelegatedExceptionReachesOwner) {
  DelegationLock lock;
  std::atomic<bool> release{false};
  std::atomic<bool> holding{false};
  std::thread blocker([&] {
    lock.run([&] {
      holding.store(true);
      while (!release.load()) std::this_thread::yield();
    });
  });
  while (!holding.load()) std::this_thread::yield();
  std::atomic<bool> caught{false};
  std::thread owner([&] {
    try {
      lock.run([]() -> int { throw std::logic_error("delegated"); });
    } catch (const std::logic_error& e) {
      caught.store(std::string(e.what()) == "delegated");
    }
  });
  std::this_thread::sleep_for(20ms);  // let owner enqueue (the test holds either way)
  release.store(true);
  blocker.join();
  owner.join();
  EXPECT_TRUE(caught.load());
}

TEST(DelegationLock, StatsCountOwnOps) {
  DelegationLock lock;
  for (int i = 0; i < 10; ++i) lock.run([] {});
  DelegationLockStats s = lock.stats();
  EXPECT_EQ(s.own_ops, 10u);
  EXPECT_EQ(s.delegated_ops, 0u);
  EXPECT_EQ(s.handoffs, 0u);
}

TEST(DelegationLock, OptionsAreKept) {
  DelegationLockOptions o;
  o.spin_iterations = 3;
  o.max_combined_ops = 5;
  o.max_combine_ns = 1234;
  DelegationLock lock(o);
  EXPECT_EQ(lock.options().spin_iterations, 3u);
  EXPECT_EQ(lock.options().max_combined_ops, 5u);
  EXPECT_EQ(lock.options().max_combine_ns, 1234);
}

// --- asynchronous form -----------------------------------------------------------

TEST(DelegationLockAsync, FreeLockRunsInlineAndIsReady) {
  DelegationLock lock;
  int x = 0;
  Completion<int> c = lock.submit([&] { return ++x; });
  EXPECT_EQ(x, 1);  // ran inline: the lock was free
  EXPECT_TRUE(c.valid());
  EXPECT_TRUE(c.ready());
  EXPECT_EQ(c.get(), 1);
  EXPECT_FALSE(c.valid());
  EXPECT_EQ(lock.stats().async_ops, 1u);
}

TEST(DelegationLockAsync, VoidAndMoveOnly) {
  DelegationLock lock;
  int x = 0;
  Completion<void> v = lock.submit([&] { x = 3; });
  v.get();
  EXPECT_EQ(x, 3);
  auto up = std::make_unique<int>(9);
  Completion<std::unique_ptr<int>> m = lock.submit([p = std::move(up)]() mutable { return std::move(p); });
  std::unique_ptr<int> got = m.get();
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(*got, 9);
}

TEST(DelegationLockAsync, ExceptionViaGet) {
  DelegationLock lock;
  Completion<int> c = lock.submit([]() -> int { throw std::runtime_error("async boom"); });
  EXPECT_TRUE(c.ready());
  EXPECT_THROW(c.get(), std::runtime_error);
}

// Holds the lock on a helper thread until release() is called, so submissions queue.
class Holder {
 public:
  explicit Holder(DelegationLock& lock) : thread_([this, &lock] {
    lock.run([this] {
      holding_.store(true);
      while (!release_.load()) std::this_thread::sleep_for(100us);
    });
  }) {
    while (!holding_.load()) std::this_thread::yield();
  }
  void release() {
    release_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  ~Holder() { release(); }

 private:
  std::atomic<bool> holding_{false};
  std::atomic<bool> release_{false};
  std::thread thread_;
};

TEST(DelegationLockAsync, PendingWhileHeldThenDoneByCombiner) {
  DelegationLock lock;
  int x = 0;
  Holder holder(lock);
  Completion<int> c = lock.submit([&] { return ++x; });
  EXPECT_FALSE(c.ready());
  EXPECT_FALSE(c.wait_for(2ms));  // timeout while the lock is held
  holder.release();               // the holder's combiner runs our section
  c.wait();
  EXPECT_TRUE(c.ready());
  EXPECT_EQ(c.get(), 1);
  EXPECT_EQ(lock.stats().delegated_ops, 1u);
}

TEST(DelegationLockAsync, WaitForSucceedsOnceRun) {
  DelegationLock lock;
  Holder holder(lock);
  Completion<int> c = lock.submit([] { return 11; });
  std::thread releaser([&] {
    std::this_thread::sleep_for(5ms);
    holder.release();
  });
  EXPECT_TRUE(c.wait_for(10s));  // parks, woken by the combiner
  EXPECT_EQ(c.get(), 11);
  releaser.join();
}

TEST(DelegationLockAsync, ExceptionViaGetWhenDelegated) {
  DelegationLock lock;
  Holder holder(lock);
  Completion<int> c = lock.submit([]() -> int { throw std::out_of_range("late"); });
  holder.release();
  EXPECT_THROW(c.get(), std::out_of_range);
}

TEST(DelegationLockAsync, ManyOutstandingFromOneThreadRunInOrder) {
  DelegationLock lock;
  std::vector<int> order;
  std::vector<Completion<int>> pending;
  {
    Holder holder(lock);
    for (int i = 0; i < 1000; ++i) {
      pending.push_back(lock.submit([&order, i] {
        order.push_back(i);
        return i * 2;
      }));
    }
  }  // release: combiner runs all 1000 (async nodes are never handed the role)
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(pending[static_cast<size_t>(i)].get(), i * 2);
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);  // FIFO
  EXPECT_EQ(lock.stats().async_ops, 1000u);
}

TEST(DelegationLockAsync, DroppingPendingCompletionStillRunsSection) {
  DelegationLock lock;
  int x = 0;
  {
    Holder holder(lock);
    {
      Completion<int> dropped = lock.submit([&] { return ++x; });
      Completion<int> thrower = lock.submit([]() -> int { throw std::runtime_error("ignored"); });
    }  // both destroyed while pending: defined, the lock still owns the nodes
  }
  EXPECT_EQ(lock.run([&] { return x; }), 1);
}

TEST(DelegationLockAsync, MoveCompletion) {
  DelegationLock lock;
  Holder holder(lock);
  Completion<int> a = lock.submit([] { return 1; });
  Completion<int> b = std::move(a);
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): testing the moved-from state
  Completion<int> c;
  c = std::move(b);
  holder.release();
  EXPECT_EQ(c.get(), 1);
}

TEST(DelegationLockAsync, SubmitInsideCriticalSectionRunsLater) {
  DelegationLock lock;
  std::vector<int> order;
  Completion<void> inner;
  lock.run([&] {
    order.push_back(1);
    inner = lock.submit([&] { order.push_back(2); });  // queued behind us: no deadlock
    order.push_back(3);
  });
  inner.get();
  EXPECT_EQ(order, (std::vector<int>{1, 3, 2}));
}

// --- misuse -----------------------------------------------------------------------

#if UVHOST_MISUSE_CHECKS_ENABLED
TEST(DelegationLockDeathTest, RecursiveRunAborts) {
  EXPECT_DEATH(
      {
        DelegationLock lock;
        lock.run([&] { lock.run([] {}); });
      },
      "run\\(\\) called inside a critical section of the same lock");
}

TEST(DelegationLockDeathTest, WaitInsideSameLockAborts) {
  EXPECT_DEATH(
      {
        DelegationLock lock;
        lock.run([&] {
          Completion<void> c = lock.submit([] {});
          c.wait();
        });
      },
      "wait\\(\\) inside a critical section of the same DelegationLock");
}

TEST(DelegationLockDeathTest, DestroyWhileHeldAborts) {
  EXPECT_DEATH(
      {
        alignas(DelegationLock) unsigned char storage[sizeof(DelegationLock)];
        auto* lock = new (storage) DelegationLock();
        lock->run([&] { lock->~DelegationLock(); });
      },
      "DelegationLock destroyed while");
}

TEST(DelegationLockDeathTest, GetTwiceAborts) {
  EXPECT_DEATH(
      {
        DelegationLock lock;
        Completion<int> c = lock.submit([] { return 1; });
        (void)c.get();
        (void)c.get();
      },
      "get\\(\\) on an empty Completion");
}

TEST(DelegationLockDeathTest, ZeroOpBudgetAborts) {
  DelegationLockOptions o;
  o.max_combined_ops = 0;
  EXPECT_DEATH({ DelegationLock lock(o); }, "max_combined_ops must be >= 1");
}
#endif

// The adaptive spin's rule, exactly: a wait that parked halves the budget down to the
// floor; one that ended while spinning raises it to twice its pauses plus the floor,
// never lowers it; the cap (spin_iterations) bounds both, and a cap of 0 never spins.
TEST(DelegationLock, SpinBudgetRule) {
  using detail::kMinAdaptiveSpin;
  using detail::kWaitParked;
  using detail::next_spin_budget;
  EXPECT_EQ(next_spin_budget(256, kWaitParked, 256), 128u);
  EXPECT_EQ(next_spin_budget(20, kWaitParked, 256), kMinAdaptiveSpin);
  EXPECT_EQ(next_spin_budget(kMinAdaptiveSpin, kWaitParked, 256), kMinAdaptiveSpin);
  EXPECT_EQ(next_spin_budget(16, 10, 256), 2 * 10 + kMinAdaptiveSpin);
  EXPECT_EQ(next_spin_budget(200, 10, 256), 200u);  // a short wait does not shorten the spin
  EXPECT_EQ(next_spin_budget(200, 200, 256), 256u);  // capped
  EXPECT_EQ(next_spin_budget(0, kWaitParked, 0), 0u);
  EXPECT_EQ(next_spin_budget(0, 0, 0), 0u);
}

}  // namespace
}  // namespace uvhost::sync
