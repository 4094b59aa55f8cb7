// rw_semaphore.h - a writer-preferring reader-writer lock that sleeps (rwsem-like).
//
// Contract
// --------
//  - Readers share: any number of threads may hold it shared at once while no writer
//    holds it. A writer holds it alone.
//  - Writer preference: once a writer is waiting (or holds the lock), new readers
//    wait, even though readers hold it now. Readers already inside finish; the last
//    one lets the writer in. Consequences: a steady stream of writers can starve
//    readers (fine for read-mostly data: writes are rare), and a thread that takes the
//    lock shared *recursively* can deadlock against a waiting writer (do not nest
//    lock_shared()).
//  - Memory order: unlock() and unlock_shared() release; lock(), lock_shared() and
//    successful try_*() acquire, on the same state word. A writer sees everything done
//    by earlier writers and readers; a reader sees everything done by earlier writers.
//  - SharedLockable: lock/unlock/try_lock/lock_shared/unlock_shared/try_lock_shared;
//    works with std::unique_lock and std::shared_lock. Not recursive. The thread that
//    locks should be the one that unlocks (not checked).
//  - Waiting: spin briefly (kSpins pauses, re-checking), then sleep on a futex.
//    Uncontended lock/unlock = one CAS / one atomic RMW, no system call. An unlock
//    makes a futex_wake system call only when a thread actually sleeps.
//  - Progress: blocking. try_lock()/try_lock_shared() never block (a try_lock_shared
//    fails while a writer waits, consistent with writer preference).
//  - Misuse (debug builds, UVHOST_MISUSE_CHECK): unlock() when no writer holds it
//    ("rwsem: unlock without holding the write lock"), unlock_shared() with no reader
//    ("rwsem: unlock_shared with no readers"), destruction while held or waited on
//    ("rwsem: destroyed while held").
//
// When to use it: read-mostly data where read sections are long enough (microseconds)
// that readers sharing matters, and writers must not starve. For nanosecond-long read
// sections the shared counter's cache line bounces between reader cores and a plain
// mutex costs about the same (the vfio mutex -> rwsem experiment: no gain); RCU-style
// readers (ReadMostly with GuardPolicy::kRcu) avoid the shared write entirely.
//
// Design note
// -----------
// state_ (one 32-bit word, all decisions are RMWs on it):
//     bits  0..19  active readers
//     bits 20..30  waiting writers (count; non-zero blocks new readers)
//     bit  31      a writer holds the lock
// A reader enters with CAS(s -> s + 1) when neither "writer holds" nor "writers
// waiting" is set. A writer enters with CAS(0 -> held) on the fast path; otherwise it
// registers as waiting (+1 waiting) and later enters with CAS(s -> s - waiting + held)
// once no reader and no writer is inside.
//
// Sleeping uses two futex words, reader_seq_ and writer_seq_, and two sleeper counts.
// A waiter: ++sleepers; seq = load(seq_word); re-check state; futex_wait(seq_word,
// seq); --sleepers. A waker: change state (RMW); if sleepers != 0: ++seq_word;
// futex_wake. All of these are seq_cst, which rules out the lost wake-up: if the waker
// reads sleepers == 0, the waiter's increment comes later in the single total order,
// so its re-check sees the new state; if the waker bumps seq after the waiter read it,
// futex_wait sees a changed word (or is woken).
// Who wakes whom: the last reader out wakes one writer; a writer leaving wakes one
// writer if writers wait, else all readers.
#pragma once

#include <atomic>
#include <cstdint>

#include "uvhost/sync/cpu_relax.h"
#include "uvhost/sync/futex.h"
#include "uvhost/sync/misuse.h"

namespace uvhost::sync {

class RwSemaphore {
 public:
  static constexpr const char* kName = "rwsem";
  // Pauses a waiter spends re-checking before it sleeps.
  static constexpr uint32_t kSpins = 256;

  RwSemaphore() noexcept = default;
  RwSemaphore(const RwSemaphore&) = delete;
  RwSemaphore& operator=(const RwSemaphore&) = delete;
  ~RwSemaphore() {
    // relaxed: a destructor racing with users is already undefined; this is a check.
    UVHOST_MISUSE_CHECK(state_.load(std::memory_order_relaxed) == 0, "rwsem: destroyed while held");
  }

  // ---- shared (reader) side ----
  void lock_shared() noexcept {
    if (try_lock_shared()) return;
    lock_shared_slow();
  }

  bool try_lock_shared() noexcept {
    // relaxed: the CAS decides and carries the acquire.
    uint32_t s = state_.load(std::memory_order_relaxed);
    while ((s & kReaderBlockers) == 0) {
      // acquire on success: pairs with the release of the last writer's unlock().
      if (state_.compare_exchange_weak(s, s + kReader, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  void unlock_shared() noexcept {
    // release: our reads happen-before the next writer's critical section.
    // seq_cst (stronger than release): the lost-wake-up argument in the design note
    // needs this RMW and the sleeper-count load below in one total order.
    const uint32_t previous = state_.fetch_sub(kReader, std::memory_order_seq_cst);
    UVHOST_MISUSE_CHECK((previous & kReaderMask) != 0, "rwsem: unlock_shared with no readers");
    // Last reader out while writers wait: let one in.
    if ((previous & kReaderMask) == kReader && (previous & kWaitingMask) != 0) wake_writer();
  }

  // ---- exclusive (writer) side ----
  void lock() noexcept {
    uint32_t expected = 0;
    // acquire on success: pairs with the release of the previous unlock/unlock_shared.
    if (state_.compare_exchange_strong(expected, kWriterHeld, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
      return;
    }
    lock_slow();
  }

  bool try_lock() noexcept {
    uint32_t expected = 0;
    // As in lock(). Fails when anyone (reader, writer, waiting writer) is there.
    return state_.compare_exchange_strong(expected, kWriterHeld, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }

  void unlock() noexcept {
    // release: publishes the critical section. seq_cst: see unlock_shared().
    const uint32_t previous = state_.fetch_and(~kWriterHeld, std::memory_order_seq_cst);
    UVHOST_MISUSE_CHECK((previous & kWriterHeld) != 0, "rwsem: unlock without holding the write lock");
    if ((previous & kWaitingMask) != 0) {
      wake_writer();
    } else {
      wake_readers();
    }
  }

  // Snapshots for tests (relaxed: no ordering promised).
  uint32_t readers() const noexcept { return state_.load(std::memory_order_relaxed) & kReaderMask; }
  uint32_t waiting_writers() const noexcept {
    return (state_.load(std::memory_order_relaxed) & kWaitingMask) >> kWaitingShift;
  }
  bool writer_holds() const noexcept { return (state_.load(std::memory_order_relaxed) & kWriterHeld) != 0; }

 private:
  static constexpr uint32_t kReader = 1u;
  static constexpr uint32_t kReaderMask = (1u << 20) - 1;
  static constexpr uint32_t kWaitingShift = 20;
  static constexpr uint32_t kWaitingWriter = 1u << kWaitingShift;
  static constexpr uint32_t kWaitingMask = ((1u << 11) - 1) << kWaitingShift;
  static constexpr uint32_t kWriterHeld = 1u << 31;
  static constexpr uint32_t kReaderBlockers = kWriterHeld | kWaitingMask;

  // The waiter's side of the design note, for readers and writers alike: spins
  // kSpins pauses retrying try_enter(), then sleeps on `seq` (counted in
  // `sleepers`) unless the state no longer has any of the `blockers` bits; returns
  // once try_enter() succeeds.
  template <class TryEnter>
  void wait_to_enter(TryEnter try_enter, uint32_t blockers, std::atomic<uint32_t>& sleepers,
                     std::atomic<uint32_t>& seq) noexcept {
    for (;;) {
      for (uint32_t i = 0; i < kSpins; ++i) {
        if (try_enter()) return;
        cpu_relax();
      }
      // seq_cst: see the design note for the orders.
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      const uint32_t seen = seq.load(std::memory_order_seq_cst);
      if ((state_.load(std::memory_order_seq_cst) & blockers) != 0) futex_wait(seq, seen);
      sleepers.fetch_sub(1, std::memory_order_relaxed);  // relaxed: only a wake hint
    }
  }

  // Sleeps until a writer leaves.
  void lock_shared_slow() noexcept {
    wait_to_enter([this] { return try_lock_shared(); }, kReaderBlockers, reader_sleepers_, reader_seq_);
  }

  void lock_slow() noexcept {
    // Announce ourselves: from now on new readers wait. relaxed: the announcement
    // orders nothing we read; entry below is an acquire CAS.
    state_.fetch_add(kWaitingWriter, std::memory_order_relaxed);
    wait_to_enter([this] { return try_enter_as_waiting_writer(); }, kWriterHeld | kReaderMask, writer_sleepers_,
                  writer_seq_);
  }

  bool try_enter_as_waiting_writer() noexcept {
    uint32_t s = state_.load(std::memory_order_relaxed);  // relaxed: the CAS decides
    while ((s & (kWriterHeld | kReaderMask)) == 0) {
      // acquire: pairs with the release of the previous holder's unlock.
      if (state_.compare_exchange_weak(s, s - kWaitingWriter + kWriterHeld, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  void wake_writer() noexcept {
    // seq_cst: the load must be ordered after our state RMW (see the design note).
    if (writer_sleepers_.load(std::memory_order_seq_cst) == 0) return;
    writer_seq_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_one(writer_seq_);
  }

  void wake_readers() noexcept {
    if (reader_sleepers_.load(std::memory_order_seq_cst) == 0) return;
    reader_seq_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(reader_seq_);
  }

  std::atomic<uint32_t> state_{0};
  std::atomic<uint32_t> reader_sleepers_{0};
  std::atomic<uint32_t> writer_sleepers_{0};
  std::atomic<uint32_t> reader_seq_{0};
  std::atomic<uint32_t> writer_seq_{0};
};

}  // namespace uvhost::sync
