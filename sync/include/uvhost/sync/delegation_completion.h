// delegation_completion.h - the request nodes of DelegationLock and the Completion<R>
// that DelegationLock::submit() returns.
//
// Contract of Completion<R> (a one-shot, move-only future for one critical section):
//  - ready() is true once the critical section has run; it never blocks. When it
//    returns true, everything the critical section wrote (and everything written
//    under the lock before it) is visible to the caller (acquire on the node's
//    status word, paired with the combiner's release).
//  - wait() blocks until ready(); wait_for(d) blocks at most about d after a short
//    spin and returns ready(). Both spin, then park on a futex (no busy waiting).
//  - get() waits, then returns the critical section's result or rethrows the
//    exception it threw, in the caller's thread. After get() the Completion is
//    empty (valid() == false); calling get() twice is misuse.
//  - Destroying a Completion whose critical section has not run yet is allowed and
//    defined: the lock and the Completion share ownership of the request, so the
//    critical section still runs exactly once, its result (or exception) is
//    discarded and the request is freed by whichever side lets go last. Nothing
//    blocks in the destructor.
//  - A Completion is used by one thread at a time (like std::future). Waiting on a
//    pending Completion from inside a critical section of the same lock would never
//    return and is reported as misuse in debug builds.
//
// The node types below are implementation detail shared with delegation_lock.h.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

#include "uvhost/sync/misuse.h"

namespace uvhost::sync {

class DelegationLock;

namespace detail {

// Status word of a request node. kPending -> kParked only by the node's owner (it is
// about to sleep); kPending/kParked -> kDone or kCombine only by the combiner.
inline constexpr uint32_t kNodePending = 0;
inline constexpr uint32_t kNodeParked = 1;   // pending, and the owner sleeps on a futex
inline constexpr uint32_t kNodeDone = 2;     // the critical section ran; result is set
inline constexpr uint32_t kNodeCombine = 3;  // the owner is now the combiner (sync only)

// One queued critical section. Sync nodes live on the waiting caller's stack; async
// nodes live on the heap (AsyncNode). The combiner calls `invoke` through a plain
// function pointer: no virtual call, no allocation on the synchronous path.
struct DelegationNode {
  using InvokeFn = void (*)(DelegationNode*) noexcept;

  std::atomic<DelegationNode*> next{nullptr};
  std::atomic<uint32_t> state{kNodePending};
  bool is_async = false;
  InvokeFn invoke = nullptr;
};

// Heap node shared by the lock and a Completion: two references at submit().
struct AsyncNode : DelegationNode {
  using DestroyFn = void (*)(AsyncNode*) noexcept;

  std::atomic<uint32_t> refs{2};
  DestroyFn destroy = nullptr;
  uint32_t spin_iterations = 0;     // the lock's spin budget, for Completion::wait()
  const DelegationLock* lock = nullptr;  // for the misuse check in wait()
  std::atomic<uint64_t>* park_counter = nullptr;  // the lock's `parks` statistic
};

// Drops one reference; the last one frees the node.
inline void release_async_node(AsyncNode* node) noexcept {
  // acq_rel: the last owner must see every write the other owner made to the node
  // (the combiner's result, the Completion's move-out) before it destroys it.
  if (node->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) node->destroy(node);
}

// Waits (spin, then futex) until node.state leaves kPending/kParked, or until
// timeout_ns has passed (timeout_ns < 0: no timeout). Returns the state seen;
// kNodePending or kNodeParked only on timeout. Counts a sleep in *parks (the node is
// pending then, so the lock, which owns *parks, is alive). If `spun` is given it gets
// the pauses spent before the state changed, or kWaitParked if the waiter slept.
// In delegation_lock.cpp.
inline constexpr uint32_t kWaitParked = UINT32_MAX;
uint32_t await_node(DelegationNode& node, uint32_t spin_iterations, int64_t timeout_ns,
                    std::atomic<uint64_t>* parks, uint32_t* spun = nullptr) noexcept;

// Debug-only bookkeeping of the locks this thread is combining for (to detect
// self-deadlock): a stack of frames, one per combining session, in a thread_local.
struct CombineFrame {
  const DelegationLock* lock = nullptr;
  const CombineFrame* prev = nullptr;
};
const CombineFrame*& combine_frames() noexcept;  // this thread's innermost frame
bool this_thread_combines(const DelegationLock* lock) noexcept;

// Where a critical section's result goes: a value, a reference, or nothing.
template <class R>
struct ResultSlot {
  static_assert(!std::is_rvalue_reference_v<R>, "critical sections may not return R&&");
  std::optional<R> value;
  template <class F>
  void fill(F& fn) { value.emplace(std::invoke(fn)); }
  R take() { return std::move(*value); }
};
template <class R>
struct ResultSlot<R&> {
  R* pointer = nullptr;
  template <class F>
  void fill(F& fn) { pointer = &std::invoke(fn); }
  R& take() noexcept { return *pointer; }
};
template <>
struct ResultSlot<void> {
  template <class F>
  void fill(F& fn) { std::invoke(fn); }
  void take() noexcept {}
};

// Result or exception of one critical section.
template <class R>
struct Outcome {
  ResultSlot<R> slot;
  std::exception_ptr error;

  template <class F>
  void capture(F& fn) noexcept {
    try {
      slot.fill(fn);
    } catch (...) {
      error = std::current_exception();
    }
  }
  R take() {
    if (error) std::rethrow_exception(error);
    return slot.take();
  }
};

template <class R>
struct AsyncResult : AsyncNode {
  Outcome<R> outcome;
};

// The heap request of submit(): owns a copy (or the moved-from original) of fn.
template <class F, class R>
struct AsyncRequest final : AsyncResult<R> {
  F fn;

  template <class G>
  explicit AsyncRequest(G&& g) : fn(std::forward<G>(g)) {
    this->is_async = true;
    this->invoke = &AsyncRequest::invoke_thunk;
    this->destroy = &AsyncRequest::destroy_thunk;
  }
  static void invoke_thunk(DelegationNode* node) noexcept {
    auto* self = static_cast<AsyncRequest*>(node);
    self->outcome.capture(self->fn);
  }
  static void destroy_thunk(AsyncNode* node) noexcept { delete static_cast<AsyncRequest*>(node); }
};

}  // namespace detail

template <class R>
class [[nodiscard]] Completion {
 public:
  Completion() noexcept = default;
  Completion(Completion&& other) noexcept
      : node_(std::exchange(other.node_, nullptr)),
        inline_(std::move(other.inline_)),
        inline_ready_(std::exchange(other.inline_ready_, false)) {}
  Completion& operator=(Completion&& other) noexcept {
    if (this != &other) {
      reset();
      node_ = std::exchange(other.node_, nullptr);
      inline_ = std::move(other.inline_);
      inline_ready_ = std::exchange(other.inline_ready_, false);
    }
    return *this;
  }
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;
  ~Completion() { reset(); }

  // True until get() or a move takes the result away.
  bool valid() const noexcept { return inline_ready_ || node_ != nullptr; }

  bool ready() const noexcept {
    UVHOST_MISUSE_CHECK(valid(), "Completion::ready() on an empty Completion");
    if (inline_ready_) return true;
    // acquire: pairs with the combiner's release of kNodeDone; the result and the
    // critical section's writes are visible once this returns true.
    return node_->state.load(std::memory_order_acquire) == detail::kNodeDone;
  }

  void wait() const noexcept {
    if (ready()) return;
    UVHOST_MISUSE_CHECK(!detail::this_thread_combines(node_->lock),
                        "Completion::wait() inside a critical section of the same DelegationLock "
                        "(the request can only run after this one: self-deadlock)");
    (void)detail::await_node(*node_, node_->spin_iterations, -1, node_->park_counter);
  }

  bool wait_for(std::chrono::nanoseconds timeout) const noexcept {
    if (ready()) return true;
    UVHOST_MISUSE_CHECK(!detail::this_thread_combines(node_->lock),
                        "Completion::wait_for() inside a critical section of the same DelegationLock");
    return detail::await_node(*node_, node_->spin_iterations, timeout.count(), node_->park_counter) ==
           detail::kNodeDone;
  }

  // Waits, then returns the result or rethrows the critical section's exception.
  R get() {
    UVHOST_MISUSE_CHECK(valid(), "Completion::get() on an empty Completion (get() called twice?)");
    wait();
    // Move ourselves into a local: *this is empty afterwards, and the local releases
    // the node only after the return value has been constructed from it.
    Completion self(std::move(*this));
    return self.outcome().take();
  }

 private:
  friend class DelegationLock;

  explicit Completion(detail::AsyncResult<R>* node) noexcept : node_(node) {}

  detail::Outcome<R>& outcome() noexcept { return inline_ready_ ? inline_ : node_->outcome; }

  void reset() noexcept {
    if (node_ != nullptr) detail::release_async_node(std::exchange(node_, nullptr));
    inline_ready_ = false;
  }

  detail::AsyncResult<R>* node_ = nullptr;  // shared with the lock while pending
  detail::Outcome<R> inline_;               // used when submit() ran fn inline
  bool inline_ready_ = false;
};

}  // namespace uvhost::sync
