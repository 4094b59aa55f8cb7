// spin_then_park.h - waiting that spins briefly, then sleeps in the kernel.
//
// Why: on an idle core, a short spin catches a hand-off that arrives within
// microseconds without paying for a futex sleep and wake (several microseconds
// each way). On an oversubscribed machine (64 threads on 2 cores) a waiter that
// only spins burns the time slice the thread it waits for needs; so after a
// bounded spin every waiter parks on a futex. The spin budget is the knob.
//
// Contract of SpinThenParkEvent (a one-shot, resettable binary event):
//  - set() happens-before every wait()/is_set() that observes it (release/acquire):
//    whatever the setter wrote before set() is visible to the waiter after wait().
//  - wait() returns only after set(); it never misses a set() (no lost wake-up, see
//    the state machine below); it may spin up to `spin_iterations` pauses first.
//  - One or more waiters; any number of set() calls (idempotent until reset()).
//  - reset() must not race with set() or wait(): the owner calls it between uses.
//  - Progress: set() is wait-free (one atomic exchange, plus a futex wake only
//    when a waiter actually parked).
//
// State machine of the word:  kUnset --(waiter about to park: CAS)--> kParked
//                              kUnset/kParked --(set: exchange)--> kSet
// set() learns from the exchange whether anyone parked; a waiter parks only with
// futex_wait(word, kParked), which the kernel refuses if set() already ran. Both
// transitions are RMWs on one word, so they are totally ordered: either the CAS
// wins (then set() sees kParked and wakes) or set() wins (then the CAS fails).
#pragma once

#include <atomic>
#include <cstdint>

#include "uvhost/sync/cpu_relax.h"
#include "uvhost/sync/futex.h"

namespace uvhost::sync {

struct SpinPolicy {
  // Pause instructions before parking. 0 parks at once (best when oversubscribed).
  uint32_t spin_iterations = 512;
};

class SpinThenParkEvent {
 public:
  SpinThenParkEvent() = default;
  SpinThenParkEvent(const SpinThenParkEvent&) = delete;
  SpinThenParkEvent& operator=(const SpinThenParkEvent&) = delete;

  void set() noexcept {
    // release: publishes the setter's writes to the waiter's acquire load.
    uint32_t previous = word_.exchange(kSet, std::memory_order_acq_rel);
    if (previous == kParked) futex_wake_all(word_);
  }

  bool is_set() const noexcept { return word_.load(std::memory_order_acquire) == kSet; }

  void wait(SpinPolicy policy = {}) noexcept {
    for (uint32_t i = 0; i < policy.spin_iterations; ++i) {
      if (is_set()) return;
      cpu_relax();
    }
    for (;;) {
      uint32_t state = word_.load(std::memory_order_acquire);
      if (state == kSet) return;
      if (state == kUnset &&
          !word_.compare_exchange_strong(state, kParked, std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
        if (state == kSet) return;
      }
      futex_wait(word_, kParked);
    }
  }

  // Waits at most timeout_ns (after the spin). Returns is_set().
  bool wait_for(int64_t timeout_ns, SpinPolicy policy = {}) noexcept;

  void reset() noexcept { word_.store(kUnset, std::memory_order_relaxed); }

 private:
  static constexpr uint32_t kUnset = 0;
  static constexpr uint32_t kParked = 1;
  static constexpr uint32_t kSet = 2;
  std::atomic<uint32_t> word_{kUnset};
};

}  // namespace uvhost::sync
