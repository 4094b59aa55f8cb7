// work_queue.h - vhost_work_queue(): work items run by one dedicated worker thread.
//
// Contract:
//  - A WorkQueue owns one worker thread that runs queued WorkItems, one at a time,
//    in the order each enqueue path received them (FIFO per enqueue strategy; no
//    order is promised between items queued with different strategies).
//  - queue(item) is idempotent while the item is pending: an item that is already
//    queued is not queued twice (queue() returns false) and runs once. The worker
//    clears the item's "queued" bit just before running it, so a queue() that
//    races with the run queues it again and it runs again afterwards (the kernel's
//    VHOST_WORK_QUEUED semantics). An item never runs concurrently with itself.
//  - Visibility: everything a thread wrote before queue(item) - even a queue()
//    that returned false - is visible to the item's next run. (The queued bit is
//    only ever changed by acq_rel read-modify-writes, so the worker's clear
//    synchronizes with every producer that touched the bit before it.)
//  - flush() returns once every item whose queue() happened-before the flush()
//    call has run (and finished), whatever strategy queued it.
//  - No lost wake-ups: the worker parks on a futex when both lists are empty, and
//    a queue() that makes work visible either sees the worker parked and wakes it
//    or is seen by the worker's last check before parking. Proven for all three
//    strategies, and for live switching between them, by the Promela model in
//    sync/models/workqueue_wakeup.pml (checked by ctest `workqueue_model`).
//  - set_strategy() may be called at any time, concurrently with producers; each
//    queue() call uses one strategy from start to end.
//  - Lifetime: stop() (also run by the destructor) drains: it runs every item
//    queued before it, then joins the worker. queue() after stop() is misuse.
//    A WorkItem must be neither queued nor running when it is destroyed (flush()
//    first); WorkQueue outlives every item queued on it.
//  - Memory orders: queued bit acq_rel RMWs; lock-free list seq_cst push and
//    acquire take; futex word and stop flag seq_cst (the Dekker pair below).
//  - Progress: with kLockless, queue() is lock-free (one CAS loop) and wait-free
//    when the item is already queued; kLockedWake/kUnlockThenWake take a spinlock.
//    The futex wake syscall is made only when the worker is actually parked.
//  - Misuse detected in debug builds (UVHOST_MISUSE_CHECK): a WorkItem destroyed
//    while queued, queue() on a stopped WorkQueue, flush() from the worker thread
//    (it would wait for itself), work queued concurrently with stop().
//
//  - Idle waiting: by default the idle worker sleeps on a futex. A WorkQueue built
//    with an IdleWaiter sleeps in IdleWaiter::wait_idle() instead (the datapath's
//    workers sleep in epoll_wait on their kick eventfds, like the kernel's vhost
//    worker is woken by the eventfd's wait-queue callback). The same Dekker pair
//    applies: the worker publishes kParked and re-checks the lists before calling
//    wait_idle(); a producer that sees kParked elects itself (CAS to kRunning) and
//    calls wake(), which must make the current or the next wait_idle() return (an
//    eventfd write does: it stays readable until read). wait_idle() may queue()
//    items on this WorkQueue itself (a ready fd's handler); such a queue() from the
//    worker thread changes the word without calling wake() (nobody else sleeps).
//
// When to use: a single consumer that must process events signalled by many
// producers with coalescing (one run per burst of kicks), such as handle_tx/rx
// of a virtqueue. Not a general thread pool.
//
// Design note - the three enqueue strategies (EnqueueStrategy), measured by
// `uvhost lab workqueue` (the question of the Linux patch "vhost: reduce spin_lock
// race in vhost_work_queue", 2013):
//  (a) kLockedWake: spinlock; set queued bit; append to the FIFO list; wake the
//      worker if parked; unlock. The kernel before 2013: the futex syscall runs
//      inside the critical section, so every other producer (and the worker
//      taking its batch) spins behind a syscall.
//  (b) kUnlockThenWake: as (a) but the wake happens after unlock - that 2013
//      patch: wake_up_process() moved out of the work_lock critical section, so
//      other producers no longer spin behind the syscall.
//  (c) kLockless: set queued bit (atomic exchange); push on a lock-free LIFO
//      (CAS on its head); wake if parked. The worker takes the whole stack with
//      one exchange and reverses it to FIFO (Linux today: llist_add,
//      llist_del_all, llist_reverse_order).
// The worker owns both lists and drains both in every loop, so the strategy can
// be switched live: an item sits on exactly one list (its queued bit guards it),
// and flush() puts a marker on each list and waits for both, because a marker is
// only ordered after the items of its own list.
//
// Park/wake protocol (a Dekker pair on two locations, "work visible" and
// state_): the worker stores kParked to state_ (seq_cst), then re-checks both
// lists (the lock-free one with a seq_cst load, the FIFO one under its lock),
// and only then futex_waits on state_ == kParked. A producer publishes its item
// (seq_cst CAS, or inside the lock), then loads state_ (seq_cst); if it sees
// kParked it CASes state_ to kRunning (only one producer wins, so one syscall
// per park) and calls futex_wake. At least one side sees the other's store:
// either the worker finds the item, or the producer finds kParked. A wake that
// lands between the worker's check and its futex_wait is not lost: the kernel
// refuses to sleep because state_ is no longer kParked. Checking the lists
// *before* storing kParked is the 2023 "vhost worker missed wake-up" class of
// bug; the model's buggy variants show the checker catching it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "uvhost/base/name_table.h"
#include "uvhost/base/single_writer_counter.h"
#include "uvhost/sync/thread_annotations.h"
#include "uvhost/sync/work_list_spinlock.h"

namespace uvhost::sync {

using base::to_string;

enum class EnqueueStrategy : uint8_t {
  kLockedWake,      // (a) wake-up while holding the list spinlock (pre-2013 kernel)
  kUnlockThenWake,  // (b) wake-up after unlocking (the 2013 vhost_work_queue patch)
  kLockless,        // (c) lock-free LIFO + per-item queued bit (Linux today)
};

// The one spelling of each strategy: printing, parsing and choice lists come from here.
inline constexpr auto kEnqueueStrategyNames =
    base::name_table<EnqueueStrategy>({{EnqueueStrategy::kLockedWake, "locked_wake"},
                                       {EnqueueStrategy::kUnlockThenWake, "unlock_wake"},
                                       {EnqueueStrategy::kLockless, "lockless"}});

constexpr const auto& enum_names(EnqueueStrategy) noexcept { return kEnqueueStrategyNames; }

inline constexpr auto kAllEnqueueStrategies = base::values_of(kEnqueueStrategyNames);

class WorkQueue;

// Replaces the futex sleep of an idle worker (see "Idle waiting" above).
class IdleWaiter {
 public:
  virtual ~IdleWaiter() = default;
  // Worker thread, with the queue parked and seen empty. Sleeps until wake() was
  // called (since the last return) or something of the waiter's own happened; it may
  // queue() items on the WorkQueue. Spurious returns are allowed.
  virtual void wait_idle() noexcept = 0;
  // Any thread: makes the current or the next wait_idle() return.
  virtual void wake() noexcept = 0;
};

// A unit of work (struct vhost_work). Owned by the caller; it must outlive every
// run it is queued for. Not copyable or movable: the worker holds its address.
// `fn` runs on the worker thread; it must not throw (the worker would terminate)
// and may queue items, including its own.
class WorkItem {
 public:
  explicit WorkItem(std::function<void()> fn);
  ~WorkItem();
  WorkItem(const WorkItem&) = delete;
  WorkItem& operator=(const WorkItem&) = delete;

  // True from a successful queue() until the worker takes it for a run. A hint
  // for tests and assertions; it may change right after the call.
  bool is_queued() const noexcept { return queued_.load(std::memory_order_acquire); }

 private:
  friend class WorkQueue;
  std::function<void()> fn_;
  // The queued bit. Changed only with acq_rel RMWs (see the visibility contract).
  std::atomic<bool> queued_{false};
  // Link in whichever list holds the item; owned by the thread that won the
  // queued bit until the list is published, then by the worker.
  WorkItem* next_ = nullptr;
  // flush()'s markers: run like any item but not counted in items_run.
  bool flush_marker_ = false;
};

// Counters for measurement. Monotonic; read with WorkQueue::stats().
struct WorkQueueStats {
  uint64_t items_run = 0;  // WorkItem runs completed (flush markers excluded)
  uint64_t wakeups = 0;    // wakes issued by producers (and stop()): futex wakes, or IdleWaiter::wake() calls
  uint64_t parks = 0;      // times the worker went to sleep on its futex
  int64_t worker_cpu_ns = 0;  // CPU time consumed by the worker thread so far
};

class WorkQueue {
 public:
  // Starts the worker thread.
  explicit WorkQueue(EnqueueStrategy strategy = EnqueueStrategy::kLockless);
  // The idle worker sleeps in waiter->wait_idle(); `waiter` outlives the WorkQueue.
  // `thread_name` names the worker thread (what top, /proc and `uvhost bench` show;
  // the kernel keeps the first 15 bytes).
  WorkQueue(EnqueueStrategy strategy, IdleWaiter* waiter, std::string thread_name = "uvhost-worker");
  // stop(): runs what is queued, then joins.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `item` unless it is already queued. Returns true if this call queued it.
  bool queue(WorkItem& item) noexcept;
  // Waits until every item queued before this call has run. Not from the worker.
  void flush();
  // Runs everything queued so far, then joins the worker. Idempotent. Must not
  // race with queue() (stop producers first) or with stats().
  void stop() UVHOST_EXCLUDES(lifecycle_mutex_);

  void set_strategy(EnqueueStrategy strategy) noexcept {
    // relaxed: any strategy is safe at any moment (the worker drains both lists);
    // there is nothing else to publish with it.
    strategy_.store(strategy, std::memory_order_relaxed);
  }
  EnqueueStrategy strategy() const noexcept { return strategy_.load(std::memory_order_relaxed); }

  WorkQueueStats stats() const;
  // True if an item (or a flush marker) is queued and not yet taken by the worker.
  // A hint: it may change right after the call. (The busy-polling datapath asks it
  // to decide whether to stop polling: ExitPolicy::kAnyWork, the exit before the Linux
  // patch "vhost: make busyloop_intr more accurate".)
  bool has_pending() noexcept;
  // Worker thread only (from inside a WorkItem): has_pending(), or items of the batch
  // being run that come after the current one. A handler that polls without end (a
  // PMD-style loop) asks this one, or it could starve the rest of its own batch.
  bool has_other_work() noexcept { return batch_rest_ != nullptr || has_pending(); }
  // True when called on the worker thread (e.g. from inside a WorkItem).
  bool on_worker_thread() const noexcept;

 private:
  // Values of state_, the futex word.
  static constexpr uint32_t kRunning = 0;
  static constexpr uint32_t kParked = 1;

  bool queue_locked(WorkItem& item, bool wake_inside_lock) noexcept;
  bool queue_lockless(WorkItem& item) noexcept;
  void append_to_fifo(WorkItem& item) noexcept;  // caller holds fifo_lock_
  void push_lockless(WorkItem& item) noexcept;
  void wake_if_parked() noexcept;
  bool drain_once();  // runs one batch from each list; true if anything ran
  // Runs `first` and its successors; `after` is the chain that runs next (for
  // has_other_work()).
  void run_chain(WorkItem* first, WorkItem* after);
  void worker_main();
  int64_t read_worker_cpu_ns() const noexcept UVHOST_EXCLUDES(lifecycle_mutex_);

  std::atomic<EnqueueStrategy> strategy_;

  // Worker thread only: the items still to run in the current batch after the one
  // running now (nullptr outside run_chain).
  WorkItem* batch_rest_ = nullptr;

  // (a)/(b): intrusive FIFO list, guarded by fifo_lock_.
  WorkListSpinLock fifo_lock_;
  WorkItem* fifo_head_ = nullptr;
  WorkItem* fifo_tail_ = nullptr;

  // (c): lock-free LIFO (llist); the worker takes it whole.
  alignas(64) std::atomic<WorkItem*> lockless_head_{nullptr};

  // Futex word: kRunning or kParked (see the protocol in the design note).
  alignas(64) std::atomic<uint32_t> state_{kRunning};
  std::atomic<bool> stop_requested_{false};

  // Statistics. Worker-owned counters are written by the worker only.
  alignas(64) base::SingleWriterCounter items_run_;
  base::SingleWriterCounter parks_;
  std::atomic<int64_t> final_worker_cpu_ns_{0};
  alignas(64) std::atomic<uint64_t> wakeups_{0};

  // Guards worker_ against join() racing a CPU-clock read in stats().
  mutable Mutex lifecycle_mutex_;
  IdleWaiter* const idle_waiter_;  // nullptr: futex; set before the thread starts
  const std::string thread_name_;  // set before the thread starts
  std::thread worker_ UVHOST_GUARDED_BY(lifecycle_mutex_);  // started by the constructor
};

}  // namespace uvhost::sync
