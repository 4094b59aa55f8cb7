// work_list_spinlock.h - the lock that guards WorkQueue's FIFO list.
//
// Contract:
//  - lock()/unlock() give mutual exclusion; unlock() happens-before the next
//    lock() that acquires (release/acquire on one word), so writes made inside
//    one critical section are visible inside the next.
//  - Not fair, not recursive; try_lock() never blocks.
//  - Progress: blocking (a preempted holder stalls every waiter). Use it only for
//    critical sections of a few instructions, as WorkQueue does.
//
// Design note: this is the userspace stand-in for the kernel's
// spin_lock_irqsave(&dev->work_lock) in vhost_work_queue(), the lock the Linux patch
// "vhost: reduce spin_lock race in vhost_work_queue" (2013) shortened. It is a test-and-test-and-set lock: waiters spin on a plain load
// (the cache line stays shared while the lock is held) and only try the
// exchange when the lock looks free, with exponential backoff between tries to
// spread out the stampede at release. The kernel disables preemption while the
// lock is held; userspace cannot, so on an oversubscribed machine (256 producers
// on 2 cores) the holder can be descheduled mid-section. A waiter that has spun
// through its whole backoff budget therefore yields its CPU (sched_yield) so the
// holder can run; without that, spinners burn whole time slices behind a holder
// that is not running. The yield changes only how waiters
// wait, not what the lock guarantees.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

#include "uvhost/sync/cpu_relax.h"

namespace uvhost::sync {

class WorkListSpinLock {
 public:
  WorkListSpinLock() = default;
  WorkListSpinLock(const WorkListSpinLock&) = delete;
  WorkListSpinLock& operator=(const WorkListSpinLock&) = delete;

  bool try_lock() noexcept {
    // relaxed load: only a hint to skip a doomed exchange (keeps the line shared).
    // acquire on the exchange: pairs with unlock()'s release, so the previous
    // holder's writes are visible in our critical section.
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }

  void lock() noexcept {
    if (try_lock()) return;
    lock_slow();
  }

  void unlock() noexcept {
    // release: publishes the critical section's writes to the next acquirer.
    locked_.store(false, std::memory_order_release);
  }

 private:
  static constexpr uint32_t kMaxBackoffPauses = 1024;

  void lock_slow() noexcept {
    uint32_t backoff = 4;
    for (;;) {
      // relaxed: we only wait for the word to look free; try_lock() acquires.
      while (locked_.load(std::memory_order_relaxed)) {
        for (uint32_t i = 0; i < backoff; ++i) cpu_relax();
        if (backoff < kMaxBackoffPauses) {
          backoff *= 2;
        } else {
          sched_yield();  // the holder may be preempted: let it run (see design note)
        }
      }
      if (try_lock()) return;
    }
  }

  std::atomic<bool> locked_{false};
};

}  // namespace uvhost::sync
