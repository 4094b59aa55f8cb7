// work_queue.cpp - WorkQueue: enqueue strategies, the worker loop, flush, stop.
// The protocol and its proof obligations are in work_queue.h's design note.
#include "uvhost/sync/work_queue.h"

#include <pthread.h>
#include <time.h>

#include <mutex>
#include <utility>

#include "uvhost/sync/futex.h"
#include "uvhost/sync/misuse.h"
#include "uvhost/sync/spin_then_park.h"

namespace uvhost::sync {

WorkItem::WorkItem(std::function<void()> fn) : fn_(std::move(fn)) {
  UVHOST_MISUSE_CHECK(static_cast<bool>(fn_), "WorkItem constructed without a function");
}

WorkItem::~WorkItem() {
  // acquire: if the worker took the item, its clear is visible and we do not
  // report a false positive for an item that has already been dequeued.
  UVHOST_MISUSE_CHECK(!queued_.load(std::memory_order_acquire),
                      "WorkItem destroyed while queued (flush() the WorkQueue first)");
}

WorkQueue::WorkQueue(EnqueueStrategy strategy) : WorkQueue(strategy, nullptr) {}

WorkQueue::WorkQueue(EnqueueStrategy strategy, IdleWaiter* waiter, std::string thread_name)
    : strategy_(strategy),
      idle_waiter_(waiter),
      thread_name_(std::move(thread_name)),
      worker_([this] { worker_main(); }) {}

WorkQueue::~WorkQueue() {
  UVHOST_MISUSE_CHECK(!on_worker_thread(), "WorkQueue destroyed from its own worker thread");
  stop();
}

namespace {
// The WorkQueue whose worker is the calling thread. Set by the worker itself, so the
// check never reads worker_ (which the constructor may still be writing when the new
// thread first asks, e.g. from an IdleWaiter).
thread_local const WorkQueue* current_worker_queue = nullptr;
}  // namespace

bool WorkQueue::on_worker_thread() const noexcept { return current_worker_queue == this; }

// ---- Producers -------------------------------------------------------------

bool WorkQueue::queue(WorkItem& item) noexcept {
  // relaxed: a best-effort misuse check; stop() must not race with queue().
  UVHOST_MISUSE_CHECK(!stop_requested_.load(std::memory_order_relaxed),
                      "queue() on a stopped WorkQueue");
  switch (strategy()) {
    case EnqueueStrategy::kLockedWake: return queue_locked(item, /*wake_inside_lock=*/true);
    case EnqueueStrategy::kUnlockThenWake: return queue_locked(item, /*wake_inside_lock=*/false);
    case EnqueueStrategy::kLockless: return queue_lockless(item);
  }
  return false;
}

bool WorkQueue::queue_locked(WorkItem& item, bool wake_inside_lock) noexcept {
  fifo_lock_.lock();
  // acq_rel: acquire pairs with the worker's clear, so the worker is done with
  // item.next_ before we overwrite it; release makes our earlier writes visible
  // to the run (the visibility contract, also when the item was already queued).
  if (item.queued_.exchange(true, std::memory_order_acq_rel)) {
    fifo_lock_.unlock();
    return false;
  }
  append_to_fifo(item);
  if (wake_inside_lock) {
    wake_if_parked();  // (a): the syscall runs inside the critical section
    fifo_lock_.unlock();
  } else {
    fifo_lock_.unlock();
    wake_if_parked();  // (b): the wake-up moved out of the lock, as vhost_work_queue()'s in 2013
  }
  return true;
}

void WorkQueue::append_to_fifo(WorkItem& item) noexcept {
  item.next_ = nullptr;
  if (fifo_tail_ == nullptr) {
    fifo_head_ = &item;
  } else {
    fifo_tail_->next_ = &item;
  }
  fifo_tail_ = &item;
}

bool WorkQueue::queue_lockless(WorkItem& item) noexcept {
  // acq_rel: as in queue_locked().
  if (item.queued_.exchange(true, std::memory_order_acq_rel)) return false;
  push_lockless(item);
  wake_if_parked();
  return true;
}

void WorkQueue::push_lockless(WorkItem& item) noexcept {
  // relaxed: the CAS below re-reads the head; a stale value only costs a retry.
  WorkItem* head = lockless_head_.load(std::memory_order_relaxed);
  do {
    item.next_ = head;  // we own item.next_: we won its queued bit
    // seq_cst on success: release publishes item.next_ and everything written
    // before queue() to the worker's acquire exchange (later pushes are RMWs and
    // extend this release sequence); seq_cst also places the push in the single
    // total order of the Dekker pair with the worker (see wake_if_parked()).
  } while (!lockless_head_.compare_exchange_weak(head, &item, std::memory_order_seq_cst,
                                                 std::memory_order_relaxed));
}

void WorkQueue::wake_if_parked() noexcept {
  // seq_cst: the producer half of the Dekker pair. Our item was published before
  // this load - by a seq_cst CAS (lockless) or inside the list lock - and the
  // worker stores kParked (seq_cst) before it looks at the lists.
  //  - lockless: all four accesses are seq_cst, so in their single total order
  //    either our push precedes the worker's seq_cst peek at the list (it sees
  //    the item) or the worker's store precedes this load (we see kParked).
  //  - FIFO list: if the worker's check took the lock after our unlock, it sees
  //    the item; otherwise its unlock happens-before our lock, so its earlier
  //    kParked store happens-before this load, which sees it (or a later kRunning
  //    written by another waker).
  // (We use seq_cst operations rather than seq_cst fences: same cost on x86, and
  // ThreadSanitizer understands them.)
  if (state_.load(std::memory_order_seq_cst) != kParked) return;
  uint32_t expected = kParked;
  // relaxed: the CAS only elects one waker per park; the item itself is handed
  // over by the list (lock or acquire exchange), not by this word.
  if (state_.compare_exchange_strong(expected, kRunning, std::memory_order_relaxed)) {
    // relaxed: a statistics counter, read only for reporting.
    if (idle_waiter_ == nullptr) {
      wakeups_.fetch_add(1, std::memory_order_relaxed);
      futex_wake_one(state_);
    } else if (!on_worker_thread()) {
      // (On the worker thread we are inside wait_idle(): the CAS alone ends the park.)
      wakeups_.fetch_add(1, std::memory_order_relaxed);
      idle_waiter_->wake();
    }
  }
}

// ---- Worker ----------------------------------------------------------------

bool WorkQueue::has_pending() noexcept {
  // seq_cst: the worker's side of the Dekker pair (see wake_if_parked()); the
  // items themselves are taken later with an acquire exchange.
  if (lockless_head_.load(std::memory_order_seq_cst) != nullptr) return true;
  std::lock_guard<WorkListSpinLock> guard(fifo_lock_);
  return fifo_head_ != nullptr;
}

bool WorkQueue::drain_once() {
  WorkItem* fifo_batch = nullptr;
  {
    std::lock_guard<WorkListSpinLock> guard(fifo_lock_);
    fifo_batch = fifo_head_;
    fifo_head_ = nullptr;
    fifo_tail_ = nullptr;
  }
  WorkItem* lifo_batch = nullptr;
  // relaxed peek: skips the RMW (and the cache-line transfer) when empty.
  if (lockless_head_.load(std::memory_order_relaxed) != nullptr) {
    // acquire: pairs with the pushers' release CAS (llist_del_all).
    lifo_batch = lockless_head_.exchange(nullptr, std::memory_order_acquire);
  }
  // Reverse the LIFO into push order (llist_reverse_order).
  WorkItem* fifo_from_lifo = nullptr;
  while (lifo_batch != nullptr) {
    WorkItem* next = lifo_batch->next_;
    lifo_batch->next_ = fifo_from_lifo;
    fifo_from_lifo = lifo_batch;
    lifo_batch = next;
  }
  bool ran = fifo_batch != nullptr || fifo_from_lifo != nullptr;
  run_chain(fifo_batch, fifo_from_lifo);
  run_chain(fifo_from_lifo, nullptr);
  return ran;
}

void WorkQueue::run_chain(WorkItem* first, WorkItem* after) {
  for (WorkItem* item = first; item != nullptr;) {
    // Read everything we need before clearing the bit: after the clear a
    // producer may re-queue the item (rewriting next_), and after fn_() a flush
    // marker may already be gone.
    WorkItem* next = item->next_;
    bool counted = !item->flush_marker_;
    // acq_rel: acquire synchronizes with every producer RMW on the bit since the
    // item was queued (visibility contract); release orders our reads of the item
    // before a re-queuer's writes to it.
    item->queued_.exchange(false, std::memory_order_acq_rel);
    batch_rest_ = next != nullptr ? next : after;
    item->fn_();
    if (counted) {
      // relaxed: only the worker writes it. Counted right after each run, not once
      // per chain: a flush marker later in this chain releases its waiter, and
      // stats() read after flush() must include every run before the marker (the
      // marker's release/acquire hand-off carries this store with it).
      items_run_.add();
    }
    item = next;
  }
  batch_rest_ = nullptr;
}

void WorkQueue::worker_main() {
  // Linux refuses names over 15 bytes (ERANGE): keep the first 15.
  pthread_setname_np(pthread_self(), thread_name_.substr(0, 15).c_str());
  current_worker_queue = this;
  for (;;) {
    if (drain_once()) continue;
    // acquire: items queued before stop() are then visible to has_pending().
    if (stop_requested_.load(std::memory_order_acquire) && !has_pending()) break;
    // Announce the sleep, THEN look for work (see the design note).
    // seq_cst: the worker half of the Dekker pair in wake_if_parked().
    state_.store(kParked, std::memory_order_seq_cst);
    // seq_cst stop load: the same Dekker pair with stop()'s seq_cst store.
    if (has_pending() || stop_requested_.load(std::memory_order_seq_cst)) {
      // relaxed: only this thread and wakers write the word, all write kRunning.
      state_.store(kRunning, std::memory_order_relaxed);
      continue;
    }
    parks_.add();  // worker-only statistics counter
    // acquire: not needed for data (the lists carry it); it keeps the re-check of
    // the word cheap and ordered before the next drain.
    while (state_.load(std::memory_order_acquire) == kParked) {
      if (idle_waiter_ != nullptr) {
        idle_waiter_->wait_idle();
      } else {
        futex_wait(state_, kParked);
      }
    }
  }
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  // relaxed: read after join() (which synchronizes) or as a fallback estimate.
  final_worker_cpu_ns_.store(now.tv_sec * 1'000'000'000LL + now.tv_nsec, std::memory_order_relaxed);
}

// ---- flush, stop, stats ------------------------------------------------------

void WorkQueue::flush() {
  UVHOST_MISUSE_CHECK(!on_worker_thread(), "flush() called from the worker thread (it would wait for itself)");
  // acquire: pairs with stop(); after stop() nothing can be pending.
  if (stop_requested_.load(std::memory_order_acquire)) return;
  // One marker per list: a marker runs after the items ahead of it on its own
  // list only, and an item queued before us may sit on either list.
  SpinThenParkEvent fifo_done;
  SpinThenParkEvent lockless_done;
  WorkItem fifo_marker([&fifo_done] { fifo_done.set(); });
  WorkItem lockless_marker([&lockless_done] { lockless_done.set(); });
  fifo_marker.flush_marker_ = true;
  lockless_marker.flush_marker_ = true;
  queue_locked(fifo_marker, /*wake_inside_lock=*/false);
  queue_lockless(lockless_marker);
  fifo_done.wait();
  lockless_done.wait();
  // Both markers ran, so their queued bits were cleared before their functions
  // ran: destroying them here passes WorkItem's misuse check.
}

void WorkQueue::stop() {
  UVHOST_MISUSE_CHECK(!on_worker_thread(), "stop() called from the worker thread (it would join itself)");
  MutexLock guard(lifecycle_mutex_);
  if (!worker_.joinable()) return;
  // seq_cst: stop is announced like an item (wake_if_parked's seq_cst load
  // follows), so the worker either sees it in its pre-park check or gets woken.
  stop_requested_.store(true, std::memory_order_seq_cst);
  wake_if_parked();
  worker_.join();
  // relaxed: after join() the worker's writes are visible; any item found here
  // was queued concurrently with stop() and will never run.
  bool empty = fifo_head_ == nullptr && lockless_head_.load(std::memory_order_relaxed) == nullptr;
  UVHOST_MISUSE_CHECK(empty, "work queued concurrently with stop(); it will never run");
  (void)empty;
}

int64_t WorkQueue::read_worker_cpu_ns() const noexcept {
  timespec now{};
  if (on_worker_thread()) {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return now.tv_sec * 1'000'000'000LL + now.tv_nsec;
  }
  MutexLock guard(lifecycle_mutex_);
  if (worker_.joinable()) {
    clockid_t clock{};
    // pthread_t is valid until join, which the mutex excludes; the clock read
    // fails once the thread has exited, then the final value below is exact.
    if (pthread_getcpuclockid(const_cast<std::thread&>(worker_).native_handle(), &clock) == 0 &&
        clock_gettime(clock, &now) == 0) {
      return now.tv_sec * 1'000'000'000LL + now.tv_nsec;
    }
  }
  // relaxed: written by the worker just before it exits; after join() it is
  // exact, and a failed clock read means the thread is already past that store.
  return final_worker_cpu_ns_.load(std::memory_order_relaxed);
}

WorkQueueStats WorkQueue::stats() const {
  WorkQueueStats s;
  // relaxed: independent monotonic counters, read for reporting only.
  s.items_run = items_run_.get();
  s.wakeups = wakeups_.load(std::memory_order_relaxed);
  s.parks = parks_.get();
  s.worker_cpu_ns = read_worker_cpu_ns();
  return s;
}

}  // namespace uvhost::sync
