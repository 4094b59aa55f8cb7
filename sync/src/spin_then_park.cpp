// spin_then_park.cpp - the timed wait of SpinThenParkEvent (the untimed one is inline).
#include "uvhost/sync/spin_then_park.h"

#include <chrono>

namespace uvhost::sync {

bool SpinThenParkEvent::wait_for(int64_t timeout_ns, SpinPolicy policy) noexcept {
  for (uint32_t i = 0; i < policy.spin_iterations; ++i) {
    if (is_set()) return true;
    cpu_relax();
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::nanoseconds(timeout_ns);
  for (;;) {
    uint32_t state = word_.load(std::memory_order_acquire);
    if (state == kSet) return true;
    if (state == kUnset &&
        !word_.compare_exchange_strong(state, kParked, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
      if (state == kSet) return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now()).count();
    if (left <= 0) return is_set();
    futex_wait_for(word_, kParked, left);
  }
}

}  // namespace uvhost::sync
