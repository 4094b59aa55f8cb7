// qspinlock.h - a 4-byte queued spinlock in the style of Linux's qspinlock.
//
// Contract
// --------
//  - Mutual exclusion: at most one thread is between a successful lock()/try_lock()
//    and the matching unlock().
//  - Memory order: unlock() is a release and every successful lock()/try_lock() is an
//    acquire on the same lock word, so everything the previous holder wrote inside its
//    critical section is visible to the next holder. Nothing more is promised (it is
//    not a full fence).
//  - Size: sizeof(QSpinLock) == 4; it can be embedded next to the data it protects.
//  - BasicLockable + try_lock (works with std::lock_guard, std::unique_lock,
//    std::scoped_lock). Not recursive. unlock() may be called from any thread (like
//    the kernel's), but the usual discipline is that the locking thread unlocks.
//  - Progress: lock() is blocking (it spins; it never sleeps in the kernel). Up to two
//    threads may compete "unfairly" (the fast-path CAS and the pending bit); every
//    further contender waits in FIFO order in an MCS queue, spinning only on its own
//    queue node, so contention traffic stays off the lock word's cache line.
//    try_lock() and unlock() are wait-free (one CAS / one atomic RMW).
//  - Misuse (debug builds, UVHOST_MISUSE_CHECK): unlock() of a lock that is not locked
//    aborts with "qspinlock: unlock of an unlocked lock".
//
// When to use it: very short critical sections (tens to hundreds of nanoseconds) on a
// machine that is not heavily oversubscribed, where a 4-byte footprint matters (one
// lock per virtqueue or per table bucket). For long critical sections, or when
// threads outnumber cores by a lot, a parking lock (std::mutex, RwSemaphore) wastes
// less CPU: this lock only yields, never sleeps.
//
// Design note
// -----------
// The lock word (little-endian bit numbers):
//
//     bits  0..7   locked byte   (kLockedVal = 1 when held)
//     bit   8      pending       (one waiter that is not queued)
//     bits  9..15  unused (always 0)
//     bits 16..17  tail: index of the queue node inside its thread's node array
//     bits 18..31  tail: thread index + 1 (0 = queue empty)
//
//  1. Fast path: CAS 0 -> locked. Uncontended cost = one locked instruction.
//  2. First contender: if neither pending nor tail is set, it sets pending (fetch_or)
//     and spins on the lock word until the locked byte clears, then turns
//     "pending" into "locked" with one RMW. It needs no queue node: the common case of
//     two threads never touches the MCS machinery.
//  3. Further contenders (pending or tail already set): each takes one of its thread's
//     queue nodes, swaps its encoded tail into the lock word (CAS loop that preserves
//     the locked and pending bits) and, if there was a previous tail, links itself
//     behind it (prev->next = me) and spins on its *own* node's `locked` flag.
//  4. The queue head (the node with no predecessor, or whose predecessor handed over)
//     spins on the lock word until both locked and pending are clear, then takes the
//     lock: if it is still the tail it CASes the word to "locked, empty queue" and is
//     done; otherwise it sets the locked byte, waits for its successor to finish
//     linking (next != nullptr) and hands queue headship to it (next->locked = 1).
//  5. unlock(): atomic subtract of kLockedVal (release). The kernel stores a byte; C++
//     cannot mix access sizes on one atomic object, so we use an RMW on the word.
//
// Userspace differences from the kernel
// -------------------------------------
//  * Per-CPU nodes -> per-thread nodes. A thread gets a small index from a registry
//    (kMaxQueuedThreads of them, recycled when a thread exits) and owns
//    kNodesPerThread thread_local queue nodes (nesting: a signal handler that takes a
//    qspinlock while its thread is queued on another). The registry maps index ->
//    node array so a waiter can find its predecessor from the tail bits. A queue node
//    is only touched while its owner is inside lock(), so a thread can exit (and its
//    index be recycled) whenever it is not in lock().
//  * Past the limits (more than kMaxQueuedThreads threads alive that contend, or more
//    than kNodesPerThread nested acquisitions), a thread cannot queue. It then waits
//    without a queue node: it spins (with the same yield concession) until the word
//    is completely free (no holder, no pending, no queue) and CASes it to locked.
//    Mutual exclusion is unaffected; only FIFO order and the local-spinning property
//    are lost for that thread, and it may wait behind newly queued threads.
//  * Preemption. Kernel waiters run with preemption disabled; ours can be descheduled,
//    and a FIFO queue whose next owner is not running stalls everyone behind it (64
//    threads on 2 cores). Concession: every spin loop calls sched_yield() once every
//    kSpinsBeforeYield pauses, so a descheduled holder or queue successor gets CPU.
//    It costs nothing while the lock is handed over quickly.
#pragma once

#include <atomic>
#include <cstdint>

#include "uvhost/sync/misuse.h"

namespace uvhost::sync {

class QSpinLock {
 public:
  static constexpr const char* kName = "qspinlock";
  // Userspace concession: pauses between two sched_yield() calls in every spin loop.
  // A few microseconds of PAUSE-spinning before giving the core away.
  static constexpr uint32_t kSpinsBeforeYield = 128;

  // Threads that can be queued at once (indices are recycled when threads exit).
  // The tail encoding has room for 2^14 - 1; this bound keeps the registry small.
  static constexpr uint32_t kMaxQueuedThreads = 1024;
  // Queue nodes per thread: nested slow-path acquisitions (signal handlers).
  static constexpr uint32_t kNodesPerThread = 4;

  QSpinLock() noexcept = default;
  QSpinLock(const QSpinLock&) = delete;
  QSpinLock& operator=(const QSpinLock&) = delete;

  void lock() noexcept {
    uint32_t expected = 0;
    // acquire on success: pairs with the release in unlock() of the previous holder.
    // relaxed on failure: the slow path re-reads the word with the orders it needs.
    if (word_.compare_exchange_strong(expected, kLockedVal, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      return;
    }
    lock_slow(expected);
  }

  bool try_lock() noexcept {
    // relaxed pre-check: avoids a failing locked instruction on a busy lock; the CAS
    // below is what decides.
    uint32_t expected = word_.load(std::memory_order_relaxed);
    if (expected != 0) return false;
    // acquire on success (as in lock()); relaxed on failure: we return without reading
    // anything the lock protects.
    return word_.compare_exchange_strong(expected, kLockedVal, std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }

  void unlock() noexcept {
    // release: publishes the critical section to the next acquirer's acquire.
    [[maybe_unused]] uint32_t previous = word_.fetch_sub(kLockedVal, std::memory_order_release);
    UVHOST_MISUSE_CHECK((previous & kLockedMask) == kLockedVal,
                        "qspinlock: unlock of an unlocked lock");
  }

  // For tests: how many thread indices the registry has ever handed out (it reuses
  // the indices of exited threads before handing out new ones).
  static uint32_t thread_indices_high_water() noexcept;

  // Snapshot for tests and statistics; no ordering (relaxed).
  bool is_locked() const noexcept {
    return (word_.load(std::memory_order_relaxed) & kLockedMask) != 0;
  }

  // Layout constants (public for tests and the design note).
  static constexpr uint32_t kLockedVal = 1u;
  static constexpr uint32_t kLockedMask = 0xffu;
  static constexpr uint32_t kPendingVal = 1u << 8;
  static constexpr uint32_t kTailIdxShift = 16;
  static constexpr uint32_t kTailIdxMask = 0x3u << kTailIdxShift;
  static constexpr uint32_t kTailThreadShift = 18;
  static constexpr uint32_t kTailMask = 0xffff0000u;

 private:
  void lock_slow(uint32_t seen) noexcept;
  void lock_unqueued() noexcept;

  std::atomic<uint32_t> word_{0};
};

static_assert(sizeof(QSpinLock) == 4, "the qspinlock word is 4 bytes");
static_assert(QSpinLock::kMaxQueuedThreads < (1u << 14), "thread index + 1 must fit 14 bits");
static_assert(QSpinLock::kNodesPerThread <= 4, "node index must fit 2 bits");

}  // namespace uvhost::sync
