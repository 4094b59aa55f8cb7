// sync_test_support.h - checks shared by the sync layer's tests (not a test binary).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace uvhost::sync::testing {

template <class Lock>
constexpr bool kHasTryLock = requires(Lock& l) { l.try_lock(); };

// `threads` threads each take `lock` `iterations` times and increment a plain counter
// inside; an `inside` counter catches two holders at once. When the lock has
// try_lock() and try_every > 0, every try_every-th acquisition (staggered per thread)
// spins on try_lock() instead of lock(). Fails the test on overlap or a lost increment.
template <class Lock>
void expect_mutual_exclusion(Lock& lock, int threads, int iterations, int try_every = 0) {
  uint64_t counter = 0;
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < iterations; ++i) {
        if constexpr (kHasTryLock<Lock>) {
          if (try_every > 0 && (i + t) % try_every == 0) {
            while (!lock.try_lock()) std::this_thread::yield();
          } else {
            lock.lock();
          }
        } else {
          (void)t;  // staggers try_lock() only; clang: -Wunused-lambda-capture
          lock.lock();
        }
        if (inside.fetch_add(1, std::memory_order_relaxed) != 0) overlap.store(true);
        ++counter;
        inside.fetch_sub(1, std::memory_order_relaxed);
        lock.unlock();
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(counter, static_cast<uint64_t>(threads) * static_cast<uint64_t>(iterations));
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
