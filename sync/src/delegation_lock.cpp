// delegation_lock.cpp - the slow paths of DelegationLock: walking the queue as
// combiner, handing the role over, waiting on a node, waking a parked owner.
#include "uvhost/sync/delegation_lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <thread>

#include "uvhost/sync/cpu_relax.h"
#include "uvhost/sync/futex.h"

namespace uvhost::sync {
namespace {

int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Wakes the owner parked on a node's status word. Takes the address as a plain
// pointer: for a stack node the frame may already be gone (see the design note); the
// kernel only uses the address as a key and nothing is dereferenced here.
void wake_address(const void* word) noexcept {
  (void)syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

namespace detail {

const CombineFrame*& combine_frames() noexcept {
  thread_local const CombineFrame* innermost = nullptr;
  return innermost;
}

bool this_thread_combines(const DelegationLock* lock) noexcept {
#if UVHOST_MISUSE_CHECKS_ENABLED
  for (const CombineFrame* f = combine_frames(); f != nullptr; f = f->prev) {
    if (f->lock == lock) return true;
  }
#else
  (void)lock;
#endif
  return false;
}

uint32_t await_node(DelegationNode& node, uint32_t spin_iterations, int64_t timeout_ns,
                    std::atomic<uint64_t>* parks, uint32_t* spun) noexcept {
  uint32_t spun_ignored = 0;
  if (spun == nullptr) spun = &spun_ignored;
  // acquire (every load below): pairs with the combiner's release exchange of kDone or
  // kCombine; after it we may read the result or continue the combiner's work.
  for (uint32_t i = 0; i < spin_iterations; ++i) {
    uint32_t state = node.state.load(std::memory_order_acquire);
    if (state >= kNodeDone) {
      *spun = i;
      return state;
    }
    cpu_relax();
  }
  *spun = spin_iterations;
  const int64_t deadline = timeout_ns < 0 ? 0 : now_ns() + timeout_ns;
  for (;;) {
    uint32_t state = node.state.load(std::memory_order_acquire);
    if (state >= kNodeDone) return state;
    if (state == kNodePending) {
      // Announce that we sleep. Both this CAS and the combiner's exchange are RMWs on
      // one word, so they are ordered: either the combiner sees kParked and wakes us,
      // or our CAS fails and we see its value (acquire on failure, as above). Success
      // needs no ordering of its own: we publish nothing.
      if (!node.state.compare_exchange_strong(state, kNodeParked, std::memory_order_acquire,
                                              std::memory_order_acquire)) {
        if (state >= kNodeDone) return state;
      } else {
        *spun = kWaitParked;
        // relaxed: a statistic; the node is still pending, so the lock is alive.
        if (parks != nullptr) parks->fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (timeout_ns < 0) {
      futex_wait(node.state, kNodeParked);
    } else {
      const int64_t left = deadline - now_ns();
      if (left <= 0) return node.state.load(std::memory_order_acquire);
      (void)futex_wait_for(node.state, kNodeParked, left);
    }
  }
}

}  // namespace detail

DelegationLock::DelegationLock(DelegationLockOptions options) noexcept
    : options_(options), spin_budget_(options.spin_iterations) {
  UVHOST_MISUSE_CHECK(options.max_combined_ops >= 1, "DelegationLockOptions::max_combined_ops must be >= 1");
}

DelegationLock::~DelegationLock() {
  // acquire: if the last session ended on another thread, order its release first.
  UVHOST_MISUSE_CHECK(tail_.load(std::memory_order_acquire) == nullptr,
                      "DelegationLock destroyed while a critical section runs or requests are queued");
}

DelegationLockStats DelegationLock::stats() const noexcept {
  // relaxed: a snapshot for measurement; the counters are independent.
  DelegationLockStats s;
  s.own_ops = own_ops_.get();
  s.delegated_ops = delegated_ops_.get();
  s.async_ops = async_ops_.get();
  s.handoffs = handoffs_.get();
  s.parks = parks_.load(std::memory_order_relaxed);
  s.spin_budget = spin_budget();
  return s;
}

void DelegationLock::learn_spin(uint32_t budget, uint32_t spun) noexcept {
  if (!options_.adaptive_spin) return;
  const uint32_t next = detail::next_spin_budget(budget, spun, options_.spin_iterations);
  // relaxed: a hint for later waits, published with nothing else. Stored only on a
  // change, so a steady budget leaves its cache line shared.
  if (next != budget) spin_budget_.store(next, std::memory_order_relaxed);
}

const void* DelegationLock::finish_node(Node* node, const Node* own) noexcept {
  // Read everything we need BEFORE the exchange: after it a sync node may be gone.
  const bool is_async = node->is_async;
  if (node == own && !is_async) return nullptr;  // our own stack node: nobody waits on it
  std::atomic<uint32_t>* word = &node->state;
  // release: publishes the result (and the critical section's writes) to the owner's
  // acquire load. After this store only the node's address is used.
  const uint32_t previous = word->exchange(detail::kNodeDone, std::memory_order_release);
  // Drop the lock's reference: the Completion may already be gone, then this frees.
  if (is_async) detail::release_async_node(static_cast<detail::AsyncNode*>(node));
  return previous == detail::kNodeParked ? word : nullptr;
}

void DelegationLock::wake(const void* word) noexcept {
  if (word != nullptr) wake_address(word);
}

void DelegationLock::DeferredWakes::add(const void* word) noexcept {
  if (word == nullptr) return;
  if (count_ == kMaxDeferredWakes) wake_all();  // a long session: wake the first batch now
  words_[count_++] = word;
}

void DelegationLock::DeferredWakes::wake_all() noexcept {
  for (uint32_t i = 0; i < count_; ++i) wake_address(words_[i]);
  count_ = 0;
}

void DelegationLock::hand_off(Node* next) noexcept {
  std::atomic<uint32_t>* word = &next->state;
  // release: the new combiner (acquire in await_node) must see every critical section
  // run so far and the combiner-only counters (it continues them with add()).
  const uint32_t previous = word->exchange(detail::kNodeCombine, std::memory_order_release);
  if (previous == detail::kNodeParked) wake_address(word);
}

DelegationLock::Node* DelegationLock::await_link(Node* node) noexcept {
  // An arrival swapped the tail but has not stored node->next yet; that store is its
  // very next instruction unless it was preempted, hence spin briefly, then yield.
  for (uint32_t i = 0;; ++i) {
    // acquire: pairs with the arrival's release store; we read its node's fields next.
    Node* next = node->next.load(std::memory_order_acquire);
    if (next != nullptr) return next;
    if (i < 64) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void DelegationLock::combine(Node* own) noexcept {
  Node* cur = own;  // its section has run; its successor is not known yet
  uint32_t ops = 1;  // own section included
  uint64_t delegated = 0;
  uint64_t async = 0;
  int64_t started = 0;  // when we began running others' sections; 0: not yet
  DeferredWakes wakes;  // woken once we no longer hold the lock
  const uint32_t max_ops = options_.max_combined_ops;
  const int64_t max_ns = options_.max_combine_ns;

  // Counters go out while we still hold the lock (before the releasing CAS or the
  // hand-off): their single-writer add() relies on that.
  auto flush = [&](uint64_t handoff) noexcept {
    if (delegated != 0) delegated_ops_.add(delegated);
    if (async != 0) async_ops_.add(async);
    if (handoff != 0) handoffs_.add(handoff);
    delegated = 0;
    async = 0;
  };

  for (;;) {
    // acquire: see the fields of the node an arrival linked (pairs with its release).
    Node* next = cur->next.load(std::memory_order_acquire);
    if (next == nullptr) {
      flush(0);
      Node* expected = cur;
      // release / relaxed: as in release_or_combine().
      if (tail_.compare_exchange_strong(expected, nullptr, std::memory_order_release,
                                        std::memory_order_relaxed)) {
        wakes.add(finish_node(cur, own));
        wakes.wake_all();
        return;
      }
      next = await_link(cur);
    }
    // cur's successor is known, so cur may go (its owner may pop it right away).
    wakes.add(finish_node(cur, own));
    // Budget: count first (cheap), read the clock only while the count allows more.
    const bool spent = ops >= max_ops || (started != 0 && now_ns() - started >= max_ns);
    if (spent && !next->is_async) {
      flush(1);
      hand_off(next);
      wakes.wake_all();
      return;
    }
    if (started == 0) started = now_ns();
    next->invoke(next);
    ++ops;
    ++delegated;
    if (next->is_async) ++async;
    cur = next;
  }
}

}  // namespace uvhost::sync
