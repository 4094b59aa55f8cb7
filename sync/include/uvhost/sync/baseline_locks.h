// baseline_locks.h - the locks we compare ours with, behind one Lockable interface.
//
// Contract (every wrapper)
// ------------------------
//  - Mutual exclusion; lock()/try_lock() acquire, unlock() releases (the usual lock
//    happens-before: the previous holder's critical section is visible to the next).
//  - lock(), unlock(), try_lock() where the underlying lock has one (CkClhLock has no
//    try_lock: CK's CLH lock does not offer one). Works with std::lock_guard and
//    std::unique_lock. Not recursive, not copyable, not movable.
//  - static constexpr const char* kName: the name labs and benchmarks print.
//  - None of these is written by us; each wrapper is a thin call into the real thing.
//
//  | wrapper          | kName          | waits by                  | fairness          |
//  |------------------|----------------|---------------------------|-------------------|
//  | StdMutexLock     | "std::mutex"   | spin briefly, futex sleep | none (barging)    |
//  | PthreadSpinLock  | "pthread-spin" | test-and-set spinning     | none              |
//  | CkTicketLock     | "ck-ticket"    | spinning on one word      | FIFO              |
//  | CkMcsLock        | "ck-mcs"       | spinning on own node      | FIFO              |
//  | CkClhLock        | "ck-clh"       | spinning on pred's node   | FIFO              |
//
//  The spinning locks never sleep and never yield: when threads outnumber cores, a
//  descheduled holder (or, for the FIFO locks, a descheduled next-in-line waiter)
//  stalls everyone (docs/BENCHMARKS.md, the delegation lock's table: the CK FIFO locks
//  collapse once threads outnumber cores). That is the behaviour we want to measure, not a bug to fix.
//
// Queue nodes (CkMcsLock, CkClhLock)
// ----------------------------------
// An MCS/CLH acquisition needs a queue node that lives from lock() to unlock(). The
// wrappers keep one node per thread (thread_local), so:
//  * a thread may hold at most ONE CkMcsLock and at most ONE CkClhLock at a time
//    (debug builds abort: "ck-mcs: thread already holds a ck-mcs lock");
//  * unlock() must be called by the thread that called lock() (debug builds abort when
//    the calling thread holds none: "ck-mcs: unlock without holding").
// CLH nodes migrate: unlock() leaves the thread's node in the queue and takes the
// predecessor's. So each CkClhLock allocates one initial node, and the node the lock
// points to when it is destroyed is freed with it; each thread frees the node it owns
// at thread exit. Destroying a CkClhLock (or CkMcsLock, CkTicketLock) that is held is
// misuse (debug abort).
//
// ThreadSanitizer: CK's atomics are inline assembly that TSan cannot see, so under
// UVHOST_SANITIZER_THREAD the CK wrappers annotate the lock's happens-before edge
// (__tsan_acquire after lock, __tsan_release before unlock) on the wrapper's address.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <mutex>

#include "uvhost/sync/ck_locks.h"
#include "uvhost/sync/misuse.h"

#if defined(UVHOST_SANITIZER_THREAD)
extern "C" {
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
}
#endif

namespace uvhost::sync {

namespace detail {
inline constexpr std::size_t kCkLockStorage = UVHOST_CK_LOCK_STORAGE;
inline constexpr std::size_t kCkLockAlign = UVHOST_CK_LOCK_ALIGN;
inline constexpr std::size_t kCkNodeStorage = UVHOST_CK_NODE_STORAGE;
inline constexpr std::size_t kCkNodeAlign = UVHOST_CK_NODE_ALIGN;

inline void tsan_acquire([[maybe_unused]] void* address) noexcept {
#if defined(UVHOST_SANITIZER_THREAD)
  __tsan_acquire(address);
#endif
}
inline void tsan_release([[maybe_unused]] void* address) noexcept {
#if defined(UVHOST_SANITIZER_THREAD)
  __tsan_release(address);
#endif
}

// The per-thread MCS node: used by one acquisition at a time.
struct alignas(kCkNodeAlign) CkMcsThreadNode {
  unsigned char storage[kCkNodeStorage] = {};
  bool held = false;
};
inline thread_local CkMcsThreadNode t_ck_mcs_node;

// The per-thread CLH node (migrates between threads; freed at thread exit).
struct CkClhThreadNode {
  void* node = nullptr;
  bool held = false;
  CkClhThreadNode() = default;
  CkClhThreadNode(const CkClhThreadNode&) = delete;
  CkClhThreadNode& operator=(const CkClhThreadNode&) = delete;
  ~CkClhThreadNode() {
    UVHOST_MISUSE_CHECK(!held, "ck-clh: thread exits while holding a ck-clh lock");
    if (node != nullptr) uvhost_ck_clh_node_free(node);
  }
};
inline thread_local CkClhThreadNode t_ck_clh_node;
}  // namespace detail

// std::mutex (glibc: futex-based, barging; sleeps when contended).
class StdMutexLock {
 public:
  static constexpr const char* kName = "std::mutex";
  void lock() { mutex_.lock(); }
  bool try_lock() { return mutex_.try_lock(); }
  void unlock() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
};

// pthread_spinlock_t (glibc: test-and-test-and-set; never sleeps).
class PthreadSpinLock {
 public:
  static constexpr const char* kName = "pthread-spin";
  PthreadSpinLock() noexcept { pthread_spin_init(&lock_, PTHREAD_PROCESS_PRIVATE); }
  ~PthreadSpinLock() { pthread_spin_destroy(&lock_); }
  PthreadSpinLock(const PthreadSpinLock&) = delete;
  PthreadSpinLock& operator=(const PthreadSpinLock&) = delete;
  void lock() noexcept { pthread_spin_lock(&lock_); }
  bool try_lock() noexcept { return pthread_spin_trylock(&lock_) == 0; }
  void unlock() noexcept { pthread_spin_unlock(&lock_); }

 private:
  pthread_spinlock_t lock_;
};

// Concurrency Kit ticket lock: FIFO; one word, all waiters spin on it.
class CkTicketLock {
 public:
  static constexpr const char* kName = "ck-ticket";
  CkTicketLock() noexcept { uvhost_ck_ticket_init(storage_); }
  ~CkTicketLock() {
    UVHOST_MISUSE_CHECK(!uvhost_ck_ticket_locked(storage_), "ck-ticket: destroyed while held");
  }
  CkTicketLock(const CkTicketLock&) = delete;
  CkTicketLock& operator=(const CkTicketLock&) = delete;

  void lock() noexcept {
    uvhost_ck_ticket_lock(storage_);
    detail::tsan_acquire(this);
  }
  bool try_lock() noexcept {
    if (!uvhost_ck_ticket_trylock(storage_)) return false;
    detail::tsan_acquire(this);
    return true;
  }
  void unlock() noexcept {
    UVHOST_MISUSE_CHECK(uvhost_ck_ticket_locked(storage_), "ck-ticket: unlock of an unlocked lock");
    detail::tsan_release(this);
    uvhost_ck_ticket_unlock(storage_);
  }

 private:
  alignas(detail::kCkLockAlign) unsigned char storage_[detail::kCkLockStorage] = {};
};

// Concurrency Kit MCS lock: FIFO; each waiter spins on its own (thread_local) node.
// One CkMcsLock held per thread at a time (see the file comment).
class CkMcsLock {
 public:
  static constexpr const char* kName = "ck-mcs";
  CkMcsLock() noexcept { uvhost_ck_mcs_init(storage_); }
  ~CkMcsLock() { UVHOST_MISUSE_CHECK(!uvhost_ck_mcs_locked(storage_), "ck-mcs: destroyed while held"); }
  CkMcsLock(const CkMcsLock&) = delete;
  CkMcsLock& operator=(const CkMcsLock&) = delete;

  void lock() noexcept {
    detail::CkMcsThreadNode& node = detail::t_ck_mcs_node;
    UVHOST_MISUSE_CHECK(!node.held, "ck-mcs: thread already holds a ck-mcs lock");
    uvhost_ck_mcs_lock(storage_, node.storage);
    node.held = true;
    detail::tsan_acquire(this);
  }
  bool try_lock() noexcept {
    detail::CkMcsThreadNode& node = detail::t_ck_mcs_node;
    UVHOST_MISUSE_CHECK(!node.held, "ck-mcs: thread already holds a ck-mcs lock");
    if (!uvhost_ck_mcs_trylock(storage_, node.storage)) return false;
    node.held = true;
    detail::tsan_acquire(this);
    return true;
  }
  void unlock() noexcept {
    detail::CkMcsThreadNode& node = detail::t_ck_mcs_node;
    UVHOST_MISUSE_CHECK(node.held, "ck-mcs: unlock without holding");
    detail::tsan_release(this);
    uvhost_ck_mcs_unlock(storage_, node.storage);
    node.held = false;
  }

 private:
  alignas(detail::kCkLockAlign) unsigned char storage_[detail::kCkLockStorage] = {};
};

// Concurrency Kit CLH lock: FIFO; each waiter spins on its predecessor's node. No
// try_lock. One CkClhLock held per thread at a time (see the file comment).
class CkClhLock {
 public:
  static constexpr const char* kName = "ck-clh";
  CkClhLock() { uvhost_ck_clh_init(storage_, uvhost_ck_clh_node_alloc()); }
  ~CkClhLock() {
    UVHOST_MISUSE_CHECK(!uvhost_ck_clh_locked(storage_), "ck-clh: destroyed while held");
    // The tail node is not owned by any thread once the lock is free.
    uvhost_ck_clh_node_free(uvhost_ck_clh_tail(storage_));
  }
  CkClhLock(const CkClhLock&) = delete;
  CkClhLock& operator=(const CkClhLock&) = delete;

  void lock() {
    detail::CkClhThreadNode& node = detail::t_ck_clh_node;
    UVHOST_MISUSE_CHECK(!node.held, "ck-clh: thread already holds a ck-clh lock");
    if (node.node == nullptr) node.node = uvhost_ck_clh_node_alloc();
    uvhost_ck_clh_lock(storage_, node.node);
    node.held = true;
    detail::tsan_acquire(this);
  }
  void unlock() noexcept {
    detail::CkClhThreadNode& node = detail::t_ck_clh_node;
    UVHOST_MISUSE_CHECK(node.held, "ck-clh: unlock without holding");
    detail::tsan_release(this);
    uvhost_ck_clh_unlock(&node.node);  // node.node becomes the predecessor's node
    node.held = false;
  }

 private:
  alignas(detail::kCkLockAlign) unsigned char storage_[detail::kCkLockStorage] = {};
};

}  // namespace uvhost::sync
