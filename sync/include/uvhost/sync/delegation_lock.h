// delegation_lock.h - a lock that runs critical sections instead of being held
// (delegation / combining lock, after Ling Ma's alispinlock: lock(lock, fn, arg)).
//
// CONTRACT
//
//   DelegationLock lock;
//   int n = lock.run([&] { return ++shared_counter; });      // synchronous
//   Completion<int> c = lock.submit([&] { return pool.refill(); });  // asynchronous
//   ... other work ...
//   int got = c.get();
//
//  - Mutual exclusion: the critical sections passed to run(), try_run() and submit() of
//    one lock run one at a time, in a total order. Each one happens-after the one before it
//    (everything written inside a critical section is visible to the next one and, once
//    run() returns or the Completion is ready, to the caller). Memory order: acquire /
//    release, as for a mutex.
//  - A critical section may run on ANOTHER thread: the thread that holds the lock (the
//    "combiner") runs the queued sections of waiting threads on their behalf. So fn
//    must not depend on thread identity (thread_local, thread ids, per-thread errno)
//    and must not block for long. Its result is handed back by value/reference; an
//    exception thrown by fn is rethrown in the caller's thread (run() or get()).
//  - run(fn) returns only after fn has run. It may also run other callers' sections
//    before returning (bounded, see below). No heap allocation on this path.
//  - submit(fn) never waits for the lock. If the lock is free it runs fn inline and
//    returns a ready Completion (no allocation); otherwise it queues a heap copy of fn
//    (one allocation) and returns at once; the combiner runs it later.
//  - FIFO: sections run in the order their callers were enqueued (one atomic exchange).
//  - Bounded combining: a combiner runs at most options.max_combined_ops sections
//    (its own included) or for at most options.max_combine_ns, then hands the combiner
//    role to the next SYNCHRONOUS waiter in the queue. Asynchronous requests have no
//    thread behind them, so they are never handed the role: a combiner that finds only
//    async requests after its budget runs them too, until it reaches a sync waiter or
//    the queue is empty. The overrun is therefore bounded by the number of async
//    requests queued back to back, which callers control.
//  - Progress: blocking (it is a lock), starvation-free for run(): FIFO order plus the
//    hand-off bound means each waiter's section runs after at most the sections queued
//    ahead of it, and each thread's stint as combiner is bounded as above.
//  - Waiting is spin-then-park: a waiter spins up to options.spin_iterations pause
//    instructions on its own node (a private cache line, no global traffic), then
//    sleeps on a futex. With options.adaptive_spin (the default) the lock learns how
//    long to spin from its waits, down to a few pauses when threads outnumber cores.
//  - Not recursive: run() (or Completion::wait()) on the same lock from inside one of
//    its critical sections would deadlock; debug builds abort with a message.
//  - Destroying the lock while a section runs or requests are queued is misuse
//    (checked in debug builds). A pending Completion keeps its request alive, not the
//    lock: wait for (or drop) it and let the queue drain before destroying the lock.
//    Dropping a pending Completion is fine: its section still runs exactly once.
//
// When to use it: a short critical section on data that many threads hit (a shared
// pool, a counter block), where the cost is the lock word and the data bouncing between
// caches. Delegation keeps the data in the combiner's cache. Do not use it for long
// or blocking critical sections, or where fn needs the caller's thread.
//
// DESIGN NOTE
//
// Algorithm: an MCS-style queue of request nodes with combining (close to CC-Synch,
// Fatourou & Kallimanis 2012, but with nodes owned by their callers instead of recycled
// between threads, so a node can live on the caller's stack). A node holds {next, a
// status word, invoke fn pointer}. A caller appends its node with tail.exchange(node);
// if the old tail was null the lock was free and the caller is the combiner, otherwise
// it links itself behind the old tail and waits on its own status word.
//
// The combiner runs its own fn directly (the uncontended path is: one exchange, fn,
// one load of node.next, one CAS tail->null: the same two atomic RMWs as a mutex
// lock + unlock), then walks the queue: for each successor it runs invoke(node),
// learns the successor's successor, and only then marks the node kDone (the owner may
// return and pop its stack frame the instant it sees kDone, so that store is the last
// touch of the node). If there is no successor it CASes the tail from its last node
// to null, which releases the lock; a failed CAS means an arrival swapped the tail and
// is about to link itself, and the combiner waits (spin, then yield) for the link.
//
// Why this and not flat combining: flat combining scans a publication list of all
// threads each pass (cost grows with threads, not with waiters) and needs per-thread
// records; the queue touches only actual waiters, gives FIFO order, and lets each
// waiter spin on its own line. Why not CC-Synch's node recycling: it forces nodes to
// be heap/thread-local objects; stack nodes need the "learn next before kDone" rule
// above instead, which costs nothing extra on the fast path.
//
// Hand-off: when the budget is spent and the next node is synchronous, the combiner
// sets it kCombine instead of running it: that owner returns from its wait as the new
// combiner, runs its own fn and continues the walk. An async node's owner may be gone
// (or busy elsewhere), so it is never chosen; the combiner runs it and looks further.
//
// Waking parked owners: a waiter that parked costs the combiner a futex wake (a system
// call) once its section is done. The combiner marks the node kDone at once but keeps
// the wake for later: it wakes every parked owner of its session in one go after it has
// released the lock or handed it off, so no system call runs while the lock is held and
// the next combiner can start on another core meanwhile (the same reasoning as waking
// outside the list lock in the Linux patch "vhost: reduce spin_lock race in
// vhost_work_queue"). A bounded list (kMaxDeferredWakes) is woken early if a session
// outgrows it. The owner sees kDone before the wake only if it has not slept yet, in
// which case it never sleeps; otherwise it sleeps a little longer: the price of a
// shorter hold.
//
// How long to spin: a waiter that spins on an oversubscribed machine steals the CPU
// the combiner needs, one that parks at once on an idle core pays a sleep and a wake
// for a section that would have been done in a microsecond. Neither a constant nor the
// caller can know which case holds, so the lock learns it (adaptive_spin): one budget
// per lock, read by each waiter before it waits. A wait that ended while spinning
// raises the budget to at least twice the pauses it took (plus detail::kMinAdaptiveSpin);
// a wait that parked halves it, down to that floor, so a probe still spins and
// notices when the waits get short again. The budget is stored only when it changes:
// in either steady state (every wait parks, every wait ends spinning) nobody writes
// it. glibc's PTHREAD_MUTEX_ADAPTIVE_NP learns a spin count the same way from its
// successful spins but never shortens it when spinning fails, which is the
// oversubscribed case here. Hence spin-then-park with a configurable spin. The combiner's own
// run() returns later than a mutex would (it pays for others' sections): that is the
// price of keeping the data in one cache, and the reason the budget exists.
// The futex wake after marking a stack node kDone may target a frame that has just
// been popped; waking an address that nobody waits on is harmless (a spurious wake at
// worst, which every futex waiter tolerates), and no memory is read or written there.
//
// Statistics are plain relaxed counters updated by the combiner while it holds the
// lock (load + store, no RMW: combining sessions are ordered by the lock itself), except
// `parks`, a relaxed fetch_add by a waiter just before it sleeps (the slow path anyway).
//
// Lifetime: after its releasing CAS or its hand-off a combiner never touches the lock
// object again, so, as with a mutex, the lock may be destroyed by any thread as soon as
// its own run() has returned and no request is queued.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <new>
#include <type_traits>
#include <utility>

#include "uvhost/base/single_writer_counter.h"
#include "uvhost/sync/delegation_completion.h"
#include "uvhost/sync/misuse.h"

namespace uvhost::sync {

namespace detail {

// The adaptive spin's floor: pauses a waiter spins even after many waits parked.
inline constexpr uint32_t kMinAdaptiveSpin = 16;

// The budget after a wait that had `budget` and spun `spun` pauses (kWaitParked: it
// slept), never above `cap` (options.spin_iterations): see the design note.
constexpr uint32_t next_spin_budget(uint32_t budget, uint32_t spun, uint32_t cap) noexcept {
  const uint32_t wanted = spun == kWaitParked ? std::max(kMinAdaptiveSpin, budget / 2)
                                              : std::max(budget, 2 * std::min(spun, cap) + kMinAdaptiveSpin);
  return std::min(cap, wanted);
}

}  // namespace detail

struct DelegationLockOptions {
  // Most pause instructions a waiter spins on its own node before it parks on a futex.
  // 0 parks at once (best when runnable threads outnumber cores).
  uint32_t spin_iterations = 256;
  // Learn the spin from the waits (see the design note): a wait that ended while
  // spinning keeps the budget above twice what it needed, one that had to park halves
  // it; false: always spin_iterations.
  bool adaptive_spin = true;
  // A combiner runs at most this many critical sections per session (its own included)
  // before it hands the role to a waiting thread. At least 1.
  uint32_t max_combined_ops = 64;
  // ... and spends at most this long running other callers' sections.
  int64_t max_combine_ns = 50'000;
};

struct DelegationLockStats {
  uint64_t own_ops = 0;        // sections run by their own caller (= combining sessions)
  uint64_t delegated_ops = 0;  // sections a combiner ran on behalf of another caller
  uint64_t async_ops = 0;      // of all sections, those that came from submit()
  uint64_t handoffs = 0;       // budget spent: the combiner role passed to a waiter
  uint64_t parks = 0;          // times a waiter (run() or Completion::wait) slept on its futex
  uint32_t spin_budget = 0;    // pauses a waiter spins now before it parks (adaptive_spin)
};

class DelegationLock {
 public:
  explicit DelegationLock(DelegationLockOptions options = {}) noexcept;
  ~DelegationLock();
  DelegationLock(const DelegationLock&) = delete;
  DelegationLock& operator=(const DelegationLock&) = delete;

  // Runs fn() under the lock, possibly on another thread, and returns its result
  // (or rethrows its exception). See the contract above.
  template <class F>
  std::invoke_result_t<F&> run(F&& fn);

  // Runs fn() under the lock only if the lock is free: true after fn has run on this
  // thread (then this caller combines, running whatever queued behind it meanwhile, as
  // run() would), false at once when another thread holds it (fn is not run). An
  // exception from fn propagates after the lock is released.
  template <class F>
  bool try_run(F&& fn);

  // Queues fn (or runs it inline if the lock is free) and returns its Completion.
  template <class F>
  Completion<std::invoke_result_t<std::decay_t<F>&>> submit(F&& fn);

  DelegationLockStats stats() const noexcept;
  const DelegationLockOptions& options() const noexcept { return options_; }

 private:
  using Node = detail::DelegationNode;

  // A synchronous request: lives on run()'s stack frame, points at the caller's fn.
  template <class F, class R>
  struct SyncRequest : Node {
    F* fn;
    detail::Outcome<R> outcome;
    explicit SyncRequest(F& f) noexcept : fn(&f) { this->invoke = &SyncRequest::invoke_thunk; }
    static void invoke_thunk(Node* node) noexcept {
      auto* self = static_cast<SyncRequest*>(node);
      self->outcome.capture(*self->fn);
    }
  };

  // The time this thread holds the combiner role: counts its own op on entry and, on
  // exit (normal or by exception from its own fn), runs the queue and releases.
  class Session {
   public:
    Session(DelegationLock& lock, Node* own) noexcept;
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

   private:
    DelegationLock& lock_;
    Node* own_;
#if UVHOST_MISUSE_CHECKS_ENABLED
    detail::CombineFrame frame_;
#endif
  };

  // Owners parked on the nodes of one combining session, woken after the lock is
  // released or handed off (see the design note).
  class DeferredWakes {
   public:
    void add(const void* word) noexcept;  // nullptr: nobody to wake
    void wake_all() noexcept;

   private:
    static constexpr uint32_t kMaxDeferredWakes = 64;
    const void* words_[kMaxDeferredWakes];
    uint32_t count_ = 0;
  };

  uint32_t spin_budget() const noexcept {
    // relaxed: a hint; any recent value will do.
    return spin_budget_.load(std::memory_order_relaxed);
  }
  // After a wait with `budget` that spun `spun` pauses (kWaitParked: it slept).
  void learn_spin(uint32_t budget, uint32_t spun) noexcept;

  void release_or_combine(Node* own) noexcept;
  void combine(Node* own) noexcept;  // slow path: out of line
  // None touches the lock object: they may run after the lock was released.
  // finish_node() marks a node kDone and returns the address its owner sleeps on if it
  // parked (to wake), else nullptr.
  static const void* finish_node(Node* node, const Node* own) noexcept;
  static void wake(const void* word) noexcept;  // nullptr: nothing
  static void hand_off(Node* next) noexcept;
  static Node* await_link(Node* node) noexcept;

  // The only word every caller writes; alone on its cache line.
  alignas(64) std::atomic<Node*> tail_{nullptr};
  // Read by waiters (spin budget) and the combiner; the budget written only when a
  // wait changes it.
  alignas(64) const DelegationLockOptions options_;
  std::atomic<uint32_t> spin_budget_;
  // Written by the combiner only (plus parks_, see above): sessions are totally ordered
  // by the lock, so their writes never overlap (SingleWriterCounter's condition).
  alignas(64) base::SingleWriterCounter own_ops_;
  base::SingleWriterCounter delegated_ops_;
  base::SingleWriterCounter async_ops_;
  base::SingleWriterCounter handoffs_;
  std::atomic<uint64_t> parks_{0};
};

// ---------------------------------------------------------------------------------
// Implementation (templates and the inline fast path).

inline void DelegationLock::release_or_combine(Node* own) noexcept {
  // acquire: if an arrival linked itself, we read its node's fields next.
  if (own->next.load(std::memory_order_acquire) == nullptr) {
    Node* expected = own;
    // release on success: publishes every critical section of this session to the
    // next caller whose tail.exchange (acquire) reads the null we store.
    // relaxed on failure: we only learn that someone is queued; combine() re-reads
    // own->next with acquire.
    if (tail_.compare_exchange_strong(expected, nullptr, std::memory_order_release,
                                      std::memory_order_relaxed)) {
      if (own->is_async) wake(finish_node(own, own));
      return;
    }
  }
  combine(own);
}

inline DelegationLock::Session::Session(DelegationLock& lock, Node* own) noexcept
    : lock_(lock), own_(own) {
#if UVHOST_MISUSE_CHECKS_ENABLED
  frame_.lock = &lock;
  frame_.prev = detail::combine_frames();
  detail::combine_frames() = &frame_;
#endif
  lock_.own_ops_.add();  // we hold the lock: see the counters' comment
}

inline DelegationLock::Session::~Session() {
  lock_.release_or_combine(own_);
#if UVHOST_MISUSE_CHECKS_ENABLED
  detail::combine_frames() = frame_.prev;
#endif
}

template <class F>
std::invoke_result_t<F&> DelegationLock::run(F&& fn) {
  using R = std::invoke_result_t<F&>;
  UVHOST_MISUSE_CHECK(!detail::this_thread_combines(this),
                      "DelegationLock::run() called inside a critical section of the same lock "
                      "(self-deadlock)");
  SyncRequest<std::remove_reference_t<F>, R> request(fn);
  // acq_rel: acquire so that, if the lock was free (nullptr), we see every earlier
  // critical section (pairs with the release CAS that stored nullptr); release so that
  // our node's initialised fields are visible to the arrival that gets our node as its
  // predecessor and writes request.next.
  Node* prev = tail_.exchange(&request, std::memory_order_acq_rel);
  if (prev != nullptr) {
    // release: the combiner loads prev->next with acquire before calling our invoke.
    prev->next.store(&request, std::memory_order_release);
    const uint32_t budget = spin_budget();
    uint32_t spun = 0;
    const uint32_t state = detail::await_node(request, budget, -1, &parks_, &spun);
    learn_spin(budget, spun);
    if (state == detail::kNodeDone) return request.outcome.take();
    // kNodeCombine: the previous combiner handed us the role; our fn has not run.
  }
  Session session(*this, &request);
  return std::invoke(fn);  // the Session's destructor runs the queue after this
}

template <class F>
bool DelegationLock::try_run(F&& fn) {
  UVHOST_MISUSE_CHECK(!detail::this_thread_combines(this),
                      "DelegationLock::try_run() called inside a critical section of the same lock "
                      "(self-deadlock)");
  Node own;
  Node* expected = nullptr;
  // acq_rel on success, relaxed on failure: as in submit().
  if (!tail_.compare_exchange_strong(expected, &own, std::memory_order_acq_rel, std::memory_order_relaxed))
    return false;
  Session session(*this, &own);
  std::invoke(fn);
  return true;
}

template <class F>
Completion<std::invoke_result_t<std::decay_t<F>&>> DelegationLock::submit(F&& fn) {
  using Fn = std::decay_t<F>;
  using R = std::invoke_result_t<Fn&>;
  Completion<R> result;  // the one return object (NRVO: never moved)
  // Free lock: take it with a stack node and run fn inline; no allocation.
  Node stack_node;
  Node* expected = nullptr;
  // acq_rel on success: acquire as in run(); release publishes stack_node's fields to
  // the next arrival. relaxed on failure: we then enqueue with exchange (acq_rel).
  if (tail_.compare_exchange_strong(expected, &stack_node, std::memory_order_acq_rel,
                                    std::memory_order_relaxed)) {
    {
      Session session(*this, &stack_node);
      async_ops_.add();
      result.inline_.capture(fn);
    }
    result.inline_ready_ = true;
    return result;
  }
  auto* request = new detail::AsyncRequest<Fn, R>(std::forward<F>(fn));
  request->spin_iterations = spin_budget();
  request->lock = this;
  request->park_counter = &parks_;
  result.node_ = request;
  Node* prev = tail_.exchange(request, std::memory_order_acq_rel);  // as in run()
  if (prev != nullptr) {
    prev->next.store(request, std::memory_order_release);  // as in run()
    return result;
  }
  // The lock became free between the CAS and the exchange: we are the combiner.
  Session session(*this, request);
  async_ops_.add();
  request->invoke(request);
  return result;  // the Session marks the node kDone before the caller sees it
}

}  // namespace uvhost::sync
