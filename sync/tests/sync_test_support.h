// sync_test_support.h - checks shared by the sync layer's tests (not a test binary).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

namespace uvhost::sync::testing {

template <class Lock>
constexpr bool kHasTryLock = requires(Lock& l) { l.try_lock(); };

// How long expect_mutual_exclusion() keeps starting new acquisitions. A pure-spinning
// FIFO lock (ticket, MCS, CLH) with far more threads than cores can collapse: a
// descheduled next-in-line stalls every hand-off for a scheduler time slice, and on a
// loaded machine the quota then takes minutes. Mutual exclusion is what the check is
// for, and it is just as checked on the acquisitions made before the budget ran out.
inline constexpr std::chrono::seconds kMutualExclusionBudget{10};

// `threads` threads each take `lock` up to `iterations` times and increment a plain
// counter inside; an `inside` counter catches two holders at once. When the lock has
// try_lock() and try_every > 0, every try_every-th acquisition (staggered per thread)
// spins on try_lock() instead of lock(). Every thread takes the lock at least once;
// after kMutualExclusionBudget no thread starts another acquisition (it says so).
// Fails the test on overlap, on a lost increment, or on a thread that never got in.
template <class Lock>
void expect_mutual_exclusion(Lock& lock, int threads, int iterations, int try_every = 0) {
  const auto deadline = std::chrono::steady_clock::now() + kMutualExclusionBudget;
  uint64_t counter = 0;
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::vector<uint64_t> acquired(static_cast<size_t>(threads), 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      uint64_t mine = 0;
      for (int i = 0; i < iterations; ++i) {
        if (i > 0 && std::chrono::steady_clock::now() >= deadline) break;
        if constexpr (kHasTryLock<Lock>) {
          if (try_every > 0 && (i + t) % try_every == 0) {
            while (!lock.try_lock()) std::this_thread::yield();
          } else {
            lock.lock();
          }
        } else {
          lock.lock();
        }
        if (inside.fetch_add(1, std::memory_order_relaxed) != 0) overlap.store(true);
        ++counter;
        inside.fetch_sub(1, std::memory_order_relaxed);
        lock.unlock();
        ++mine;
      }
      acquired[static_cast<size_t>(t)] = mine;
    });
  }
  for (auto& th : pool) th.join();
  uint64_t total = 0;
  for (const uint64_t n : acquired) {
    EXPECT_GE(n, 1u);
    total += n;
  }
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(counter, total);
  const uint64_t planned = static_cast<uint64_t>(threads) * static_cast<uint64_t>(iterations);
  if (total < planned) {
    std::printf("[ budget ] %llu of %llu acquisitions in %lld s (%d threads): the lock collapsed under "
                "oversubscription; mutual exclusion checked on those\n",
                static_cast<unsigned long long>(total), static_cast<unsigned long long>(planned),
                static_cast<long long>(kMutualExclusionBudget.count()), threads);
  }
}

// Polls pred() every millisecond until it holds or ~10 s pass; returns pred().
template <class Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 10000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

}  // namespace uvhost::sync::testing
