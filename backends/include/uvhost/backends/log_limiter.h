// log_limiter.h - "log this at most once per interval" for errors that can repeat at
// packet rate (a tap write failing with an unexpected errno), from any thread.
//
// Contract
// --------
//  - allow() returns true at most once per `interval` (steady clock), to exactly one
//    of the threads that call it concurrently; every other call returns false and is
//    counted. When it returns true, `suppressed` is the number of calls that returned
//    false since the previous true (to be mentioned in the log line).
//  - Lock-free: one relaxed load when suppressing (plus a relaxed fetch_add), one CAS
//    when allowing. Relaxed orders throughout: the limiter only decides whether to
//    log; it publishes no data.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace uvhost::backends {

class LogLimiter {
 public:
  explicit LogLimiter(std::chrono::nanoseconds interval = std::chrono::seconds(1)) noexcept
      : interval_ns_(interval.count()) {}

  bool allow(uint64_t& suppressed) noexcept {
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    int64_t next = next_ns_.load(std::memory_order_relaxed);
    if (now >= next && next_ns_.compare_exchange_strong(next, now + interval_ns_, std::memory_order_relaxed)) {
      suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
      return true;
    }
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

 private:
  const int64_t interval_ns_;
  std::atomic<int64_t> next_ns_{0};
  std::atomic<uint64_t> suppressed_{0};
};

}  // namespace uvhost::backends
