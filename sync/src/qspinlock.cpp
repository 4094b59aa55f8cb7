// qspinlock.cpp - slow path of QSpinLock and the thread-index registry for its
// queue nodes. The algorithm is described in uvhost/sync/qspinlock.h.
#include "uvhost/sync/qspinlock.h"

#include <sched.h>

#include <vector>

#include "uvhost/sync/cpu_relax.h"
#include "uvhost/sync/thread_annotations.h"

namespace uvhost::sync {
namespace {

constexpr uint32_t kNoIndex = UINT32_MAX;
// How long a contender waits for an in-flight pending -> locked hand-over before it
// gives up and queues (the kernel uses one bounded spin for the same purpose).
constexpr uint32_t kPendingHandoverSpins = 64;

// One MCS queue node. Aligned so that two waiters never spin on the same cache line.
struct alignas(64) QNode {
  std::atomic<QNode*> next{nullptr};
  std::atomic<uint32_t> locked{0};
};

// Thread index -> that thread's node array. Entries are written by their owner only
// (at registration and at thread exit) and read by a successor that decoded a tail.
struct Registry {
  std::atomic<QNode*> nodes[QSpinLock::kMaxQueuedThreads] = {};
  Mutex mutex;
  std::vector<uint32_t> free_list UVHOST_GUARDED_BY(mutex);  // recycled indices of exited threads
  uint32_t next_unused UVHOST_GUARDED_BY(mutex) = 0;
};

// Leaked on purpose: threads (and their thread_local destructors) may outlive static
// destruction order at process exit.
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

struct ThreadQueueState {
  QNode nodes[QSpinLock::kNodesPerThread];
  uint32_t index = kNoIndex;
  uint32_t depth = 0;      // nodes in use by nested slow paths
  bool exhausted = false;  // registry was full when we asked; do not ask again

  // Returns false when the registry is full (the caller then waits unqueued).
  bool ensure_index() noexcept {
    if (index != kNoIndex) return true;
    if (exhausted) return false;
    Registry& r = registry();
    {
      MutexLock guard(r.mutex);
      if (!r.free_list.empty()) {
        index = r.free_list.back();
        r.free_list.pop_back();
      } else if (r.next_unused < QSpinLock::kMaxQueuedThreads) {
        index = r.next_unused++;
      }
    }
    if (index == kNoIndex) {
      exhausted = true;
      return false;
    }
    // relaxed is sufficient: a successor reads this entry only after decoding our
    // tail, which it got from an acquire RMW on the lock word that reads our release
    // CAS of that tail (sequenced after this store); so this store happens-before.
    r.nodes[index].store(nodes, std::memory_order_relaxed);
    return true;
  }

  ~ThreadQueueState() {
    if (index == kNoIndex) return;
    Registry& r = registry();
    // relaxed: no node of ours is reachable from any lock word now (we are not inside
    // lock()); the mutex below orders this store before the index's next owner's store.
    r.nodes[index].store(nullptr, std::memory_order_relaxed);
    MutexLock guard(r.mutex);
    r.free_list.push_back(index);
  }
};

thread_local ThreadQueueState t_queue_state;

// The userspace concession: spin with PAUSE, and yield the core every
// QSpinLock::kSpinsBeforeYield iterations so a descheduled holder or successor can run.
class SpinWaiter {
 public:
  void pause() noexcept {
    if (++spins_ % QSpinLock::kSpinsBeforeYield == 0) {
      sched_yield();
    } else {
      cpu_relax();
    }
  }

 private:
  uint32_t spins_ = 0;
};

uint32_t encode_tail(uint32_t thread_index, uint32_t node_index) noexcept {
  return ((thread_index + 1) << QSpinLock::kTailThreadShift) |
         (node_index << QSpinLock::kTailIdxShift);
}

QNode* decode_tail(uint32_t word) noexcept {
  const uint32_t thread_index = (word >> QSpinLock::kTailThreadShift) - 1;
  const uint32_t node_index = (word & QSpinLock::kTailIdxMask) >> QSpinLock::kTailIdxShift;
  // relaxed: see ensure_index(); the caller's acquire RMW on the lock word ordered it.
  QNode* nodes = registry().nodes[thread_index].load(std::memory_order_relaxed);
  return &nodes[node_index];
}

}  // namespace

uint32_t QSpinLock::thread_indices_high_water() noexcept {
  Registry& r = registry();
  MutexLock guard(r.mutex);
  return r.next_unused;
}

void QSpinLock::lock_unqueued() noexcept {
  SpinWaiter waiter;
  for (;;) {
    // relaxed: only a hint; the CAS decides and carries the acquire.
    uint32_t value = word_.load(std::memory_order_relaxed);
    // acquire on success: pairs with unlock()'s release.
    if (value == 0 && word_.compare_exchange_weak(value, kLockedVal, std::memory_order_acquire,
                                                  std::memory_order_relaxed)) {
      return;
    }
    waiter.pause();
  }
}

void QSpinLock::lock_slow(uint32_t value) noexcept {
  constexpr uint32_t kLockedPending = kLockedMask | kPendingVal;

  // (1) Only "pending" is set: a pending -> locked hand-over is in progress. Wait a
  //     little for it, so that we can use the pending bit ourselves instead of queuing.
  for (uint32_t i = 0; value == kPendingVal && i < kPendingHandoverSpins; ++i) {
    cpu_relax();
    value = word_.load(std::memory_order_relaxed);  // relaxed: a hint, re-read by RMW below
  }

  // (2) Nobody but the holder: become the pending waiter (no queue node needed).
  if ((value & ~kLockedMask) == 0) {
    // acquire: if the lock is already free, this RMW is what orders us after the
    // previous holder's release (RMWs continue the release sequence).
    value = word_.fetch_or(kPendingVal, std::memory_order_acquire);
    if ((value & ~kLockedMask) == 0) {
      // We own pending. Nobody else can take the lock now: the fast path needs 0, a
      // queue head needs pending clear, and a new pending contender sees ours.
      SpinWaiter waiter;
      while ((value & kLockedMask) != 0) {
        waiter.pause();
        // acquire: pairs with the holder's release in unlock().
        value = word_.load(std::memory_order_acquire);
      }
      // pending -> locked in one RMW (the word may gain tail bits concurrently).
      // acquire: keeps the critical section after this point (the load above already
      // synchronized; this costs nothing more on x86).
      word_.fetch_sub(kPendingVal - kLockedVal, std::memory_order_acquire);
      return;
    }
    // Pending or a queue already existed. If the pending bit was clear, we set it:
    // undo. relaxed: nothing is published by this; a queue head waiting for pending to
    // clear re-reads the word and we are about to queue behind it anyway.
    if ((value & kPendingVal) == 0) word_.fetch_and(~kPendingVal, std::memory_order_relaxed);
  }

  // (3) Queue.
  ThreadQueueState& state = t_queue_state;
  if (state.depth >= kNodesPerThread || !state.ensure_index()) {
    lock_unqueued();
    return;
  }
  const uint32_t node_index = state.depth++;
  QNode* node = &state.nodes[node_index];
  // relaxed: published to our successor by the release CAS that installs our tail.
  node->next.store(nullptr, std::memory_order_relaxed);
  node->locked.store(0, std::memory_order_relaxed);
  const uint32_t tail = encode_tail(state.index, node_index);

  // Swap our tail in, keeping the locked and pending bits.
  // release: publishes our node's initialisation and registry entry to the thread
  // that will decode this tail. acquire: makes the previous tail's node and registry
  // entry visible to us before we link behind it.
  uint32_t old = word_.load(std::memory_order_relaxed);  // relaxed: a guess for the CAS
  while (!word_.compare_exchange_weak(old, (old & ~kTailMask) | tail, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
  }

  SpinWaiter waiter;
  if ((old & kTailMask) != 0) {
    QNode* prev = decode_tail(old);
    // release: pairs with the predecessor's acquire load of `next`; it will then write
    // our `locked` flag.
    prev->next.store(node, std::memory_order_release);
    // acquire: pairs with the predecessor's release hand-over below; orders us after it.
    while (node->locked.load(std::memory_order_acquire) == 0) waiter.pause();
  }

  // (4) We are the queue head: wait for the holder and the pending waiter to leave.
  for (;;) {
    // acquire: pairs with unlock()'s release (the holder's critical section).
    value = word_.load(std::memory_order_acquire);
    if ((value & kLockedPending) != 0) {
      waiter.pause();
      continue;
    }
    if ((value & kTailMask) != tail) break;  // someone queued behind us
    // Still the tail: take the lock and empty the queue in one CAS. acquire as above;
    // relaxed on failure: we loop and re-load with acquire. The CAS can fail because a
    // successor swapped its tail in (then we break above next time) or because a
    // contender briefly set pending before noticing the queue (it clears it again).
    if (word_.compare_exchange_strong(value, kLockedVal, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      --state.depth;
      return;
    }
  }

  // A successor exists (or is about to link). Nobody else can take the lock: the
  // queue is non-empty, so the fast path, trylock and new pending owners all fail.
  // acquire: the load above already synchronized with the last unlock; kept for clarity.
  word_.fetch_or(kLockedVal, std::memory_order_acquire);
  QNode* next = nullptr;
  // acquire: pairs with the successor's release store of prev->next (its node init).
  while ((next = node->next.load(std::memory_order_acquire)) == nullptr) waiter.pause();
  // release: the successor's acquire spin on `locked` sees everything we did; our node
  // is not touched by anyone after this store.
  next->locked.store(1, std::memory_order_release);
  --state.depth;
}

}  // namespace uvhost::sync
