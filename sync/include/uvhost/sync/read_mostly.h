// read_mostly.h - one guard for a read-mostly structure, with the synchronization
// policy chosen at run time.
//
// Contract
// --------
//  ReadMostly<T> owns one heap T (the "table") and lets many threads read it while
//  an occasional writer replaces it wholesale (the guest memory table: translated on
//  every descriptor, millions of times per second; replaced on SET_MEM_TABLE).
//  - read(fn): calls fn(const T&) on the current table and returns what fn returns.
//    fn sees one consistent table: the one that was current at some instant during
//    read(); never a half-built one, never a freed one. fn must not keep references to
//    the table after it returns, must not block for long, and must not call replace()
//    or update() of any ReadMostly (debug builds abort: "read-mostly: replace() called
//    inside read()").
//  - replace(next): publishes next; everything the writer wrote into *next before the
//    call is visible to every read() that sees next (release/acquire). The old table is
//    destroyed before replace() returns, and only after every read() that could still
//    use it has returned. replace() and update() are serialized with each other.
//  - update(fn): copies the current table, calls fn(T&) on the copy, replaces with it;
//    atomic with respect to other replace()/update() calls (no lost update).
//  - The policy is fixed at construction; policy() reports it. All policies give the
//    same guarantees above; they differ in cost and in who waits for whom:
//
//  | GuardPolicy    | string           | read() cost / blocking                         |
//  |----------------|------------------|------------------------------------------------|
//  | kMutex         | "mutex"          | std::mutex: readers exclude each other         |
//  | kRwSem         | "rwsem"          | our RwSemaphore (writer-preferring): readers   |
//  |                |                  | share but write its state word; they wait       |
//  |                |                  | while a writer waits or holds it               |
//  | kPthreadRwlock | "pthread-rwlock" | pthread_rwlock_t, writer-preferring kind (so a |
//  |                |                  | writer is not starved by a stream of readers)  |
//  | kRcu           | "rcu"            | liburcu (memb flavor): readers take no lock,   |
//  |                |                  | write no shared cache line, never wait;        |
//  |                |                  | replace() waits for a grace period instead     |
//
//  - Progress: under kRcu, read() is wait-free (bounded: a few loads and stores to
//    the calling thread's own liburcu slot) and a reader is never delayed by a writer
//    that is stuck in replace(). Under the lock policies read() blocks while the
//    writer holds the lock (only for the pointer swap: the old table is destroyed
//    after unlocking).
//  - Threads: under kRcu each reading thread is registered with liburcu on its first
//    read() (thread_local), and unregistered by a thread_local destructor when the
//    thread exits. Do not call read() from a thread_local destructor of the same
//    thread (the registration may already be gone).
//  - The destructor destroys the current table; no read() or replace() may be running.
//
// Why liburcu (memb) and not an epoch scheme of ours
// --------------------------------------------------
// Both need the same thing on the read side: announce "I am reading" in a per-thread
// slot, and make that store visible to the writer before the reader's loads of the
// table. Without help from the kernel this needs a full fence (or a seq_cst store,
// x86 XCHG) on every read. liburcu's memb flavor moves that fence to the writer:
// synchronize_rcu() runs membarrier(2), which forces a barrier on every CPU running a
// registered reader, so the reader side is a compiler barrier plus a load and a store
// to its own thread's slot. The inlined memb read side is several times cheaper than
// both the library-call read side and an epoch slot with a seq_cst store per read
// (docs/BENCHMARKS.md, "ReadMostly's read side"). An epoch scheme of ours could match liburcu only by re-implementing the membarrier
// dance; liburcu is mature and already a dependency, so kRcu uses its inlined read
// side. The price is on the writer: replace() takes microseconds (more while readers
// are inside), which is fine for a table replaced a few times per VM lifetime.
//
// Include cost: this header pulls in liburcu's inline read side
// (<urcu/static/urcu-memb.h>), which also defines liburcu's own macros (rcu_set_pointer,
// call_rcu_memb, cmm_*, caa_*, ...) in every file that includes it.
//
// Design note
// -----------
// The table pointer is a std::atomic<T*>. Readers load it with acquire (pairs with the
// writer's release exchange: the new table's contents are visible). Under the lock
// policies the lock orders everything and the pointer is loaded relaxed inside it.
// ThreadSanitizer cannot see liburcu's ordering (membarrier, uninstrumented library),
// so it would report the writer's delete of the old table as racing with readers. Under
// UVHOST_SANITIZER_THREAD each RCU reader does __tsan_release(table) after fn returns,
// and the writer does __tsan_acquire(old table) after synchronize_rcu() and before
// deleting: exactly the happens-before edge the grace period provides.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include <urcu/urcu-memb.h>           // registration and synchronize_rcu
#include <urcu/static/urcu-memb.h>    // the inline read side (_urcu_memb_read_lock)

#include "uvhost/base/name_table.h"
#include "uvhost/sync/misuse.h"
#include "uvhost/sync/rw_semaphore.h"

#if defined(UVHOST_SANITIZER_THREAD)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace uvhost::sync {

using base::to_string;

enum class GuardPolicy { kMutex, kRwSem, kPthreadRwlock, kRcu };

// The one spelling of each policy: printing, parsing and choice lists come from here.
inline constexpr auto kGuardPolicyNames = base::name_table<GuardPolicy>({{GuardPolicy::kMutex, "mutex"},
                                                                         {GuardPolicy::kRwSem, "rwsem"},
                                                                         {GuardPolicy::kPthreadRwlock, "pthread-rwlock"},
                                                                         {GuardPolicy::kRcu, "rcu"}});

inline constexpr auto kAllGuardPolicies = base::values_of(kGuardPolicyNames);

constexpr const auto& enum_names(GuardPolicy) noexcept { return kGuardPolicyNames; }


namespace detail {

// Read sections of this thread, all guards and policies (for the replace() check).
inline thread_local uint32_t t_read_mostly_depth = 0;
// Fast check of the liburcu registration (trivially destructible: no TLS guard).
inline thread_local bool t_rcu_registered = false;

struct RcuThreadRegistration {
  RcuThreadRegistration() noexcept {
    urcu_memb_register_thread();
    t_rcu_registered = true;
  }
  ~RcuThreadRegistration() {
    t_rcu_registered = false;
    urcu_memb_unregister_thread();
  }
  RcuThreadRegistration(const RcuThreadRegistration&) = delete;
  RcuThreadRegistration& operator=(const RcuThreadRegistration&) = delete;
};

[[gnu::noinline]] inline void rcu_register_this_thread() {
  thread_local RcuThreadRegistration registration;
  (void)registration;
}

inline void rcu_ensure_registered() {
  if (!t_rcu_registered) [[unlikely]] rcu_register_this_thread();
}

inline void tsan_rcu_reader_done([[maybe_unused]] const void* table) noexcept {
#if defined(UVHOST_SANITIZER_THREAD)
  __tsan_release(const_cast<void*>(table));
#endif
}
inline void tsan_rcu_grace_period_over([[maybe_unused]] const void* table) noexcept {
#if defined(UVHOST_SANITIZER_THREAD)
  __tsan_acquire(const_cast<void*>(table));
#endif
}

}  // namespace detail

template <class T>
class ReadMostly {
 public:
  ReadMostly(GuardPolicy policy, std::unique_ptr<T> initial) : policy_(policy), current_(initial.release()) {
    UVHOST_MISUSE_CHECK(current_.load(std::memory_order_relaxed) != nullptr, "read-mostly: null table");
    if (policy_ == GuardPolicy::kPthreadRwlock) {
      pthread_rwlockattr_t attr;
      pthread_rwlockattr_init(&attr);
      // Writer-preferring (glibc's default prefers readers and can starve replace()).
      pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
      pthread_rwlock_init(&rwlock_, &attr);
      pthread_rwlockattr_destroy(&attr);
    }
  }

  ~ReadMostly() {
    if (policy_ == GuardPolicy::kPthreadRwlock) pthread_rwlock_destroy(&rwlock_);
    // relaxed: no reader or writer may run concurrently with destruction (contract).
    delete current_.load(std::memory_order_relaxed);
  }

  ReadMostly(const ReadMostly&) = delete;
  ReadMostly& operator=(const ReadMostly&) = delete;

  GuardPolicy policy() const noexcept { return policy_; }

  template <class F>
  decltype(auto) read(F&& fn) const {
    switch (policy_) {
      case GuardPolicy::kRcu: {
        detail::rcu_ensure_registered();
        RcuSection section;
        // acquire: pairs with replace()'s release exchange, so the table's contents
        // (written before publication) are visible. (liburcu's rcu_dereference would
        // use a consume load; acquire is the same instruction on x86 and TSan knows it.)
        section.table = current_.load(std::memory_order_acquire);
        return std::forward<F>(fn)(std::as_const(*section.table));
      }
      case GuardPolicy::kMutex: {
        std::lock_guard<std::mutex> guard(mutex_);
        ReadDepth depth;
        // relaxed: the mutex orders this load after the writer's store.
        return std::forward<F>(fn)(std::as_const(*current_.load(std::memory_order_relaxed)));
      }
      case GuardPolicy::kRwSem: {
        SharedGuard<RwSemaphore> guard(rwsem_);
        ReadDepth depth;
        // relaxed: the rwsem's acquire orders this load after the writer's store.
        return std::forward<F>(fn)(std::as_const(*current_.load(std::memory_order_relaxed)));
      }
      case GuardPolicy::kPthreadRwlock:
      default: {
        PthreadReadGuard guard(rwlock_);
        ReadDepth depth;
        // relaxed: pthread_rwlock_rdlock orders this load after the writer's store.
        return std::forward<F>(fn)(std::as_const(*current_.load(std::memory_order_relaxed)));
      }
    }
  }

  void replace(std::unique_ptr<T> next) {
    UVHOST_MISUSE_CHECK(next != nullptr, "read-mostly: replace() with a null table");
    UVHOST_MISUSE_CHECK(detail::t_read_mostly_depth == 0, "read-mostly: replace() called inside read()");
    std::lock_guard<std::mutex> writer(writer_mutex_);
    replace_locked(std::move(next));
  }

  template <class F>
  void update(F&& fn) {
    UVHOST_MISUSE_CHECK(detail::t_read_mostly_depth == 0, "read-mostly: replace() called inside read()");
    std::lock_guard<std::mutex> writer(writer_mutex_);
    // relaxed: only writers store current_, and writer_mutex_ orders us after them.
    auto copy = std::make_unique<T>(*current_.load(std::memory_order_relaxed));
    std::forward<F>(fn)(*copy);
    replace_locked(std::move(copy));
  }

 private:
  // RAII for one RCU read-side critical section (also counts the read depth).
  struct RcuSection {
    const T* table = nullptr;
    RcuSection() noexcept {
      _urcu_memb_read_lock();
      ++detail::t_read_mostly_depth;
    }
    ~RcuSection() {
      detail::tsan_rcu_reader_done(table);
      --detail::t_read_mostly_depth;
      _urcu_memb_read_unlock();
    }
    RcuSection(const RcuSection&) = delete;
    RcuSection& operator=(const RcuSection&) = delete;
  };

  struct ReadDepth {
    ReadDepth() noexcept { ++detail::t_read_mostly_depth; }
    ~ReadDepth() { --detail::t_read_mostly_depth; }
    ReadDepth(const ReadDepth&) = delete;
    ReadDepth& operator=(const ReadDepth&) = delete;
  };

  template <class Lock>
  struct SharedGuard {
    Lock& lock;
    explicit SharedGuard(Lock& l) noexcept : lock(l) { lock.lock_shared(); }
    ~SharedGuard() { lock.unlock_shared(); }
    SharedGuard(const SharedGuard&) = delete;
    SharedGuard& operator=(const SharedGuard&) = delete;
  };

  struct PthreadReadGuard {
    pthread_rwlock_t& lock;
    explicit PthreadReadGuard(pthread_rwlock_t& l) noexcept : lock(l) { pthread_rwlock_rdlock(&lock); }
    ~PthreadReadGuard() { pthread_rwlock_unlock(&lock); }
    PthreadReadGuard(const PthreadReadGuard&) = delete;
    PthreadReadGuard& operator=(const PthreadReadGuard&) = delete;
  };

  // Publishes next, then destroys the old table once no reader can use it.
  // Caller holds writer_mutex_.
  void replace_locked(std::unique_ptr<T> next) {
    T* old = nullptr;
    switch (policy_) {
      case GuardPolicy::kRcu:
        // release: readers that load `next` (acquire) see its contents. No acquire
        // needed: `old` was published by a writer ordered before us by writer_mutex_.
        old = current_.exchange(next.release(), std::memory_order_release);
        // Wait until every reader that might have loaded `old` has left its read
        // section (liburcu grace period; membarrier orders their accesses before).
        urcu_memb_synchronize_rcu();
        detail::tsan_rcu_grace_period_over(old);
        break;
      case GuardPolicy::kMutex: {
        std::lock_guard<std::mutex> guard(mutex_);
        // relaxed: the mutex orders readers' loads (see read()).
        old = current_.exchange(next.release(), std::memory_order_relaxed);
        break;
      }
      case GuardPolicy::kRwSem: {
        std::lock_guard<RwSemaphore> guard(rwsem_);
        old = current_.exchange(next.release(), std::memory_order_relaxed);  // relaxed: as above
        break;
      }
      case GuardPolicy::kPthreadRwlock:
      default:
        pthread_rwlock_wrlock(&rwlock_);
        old = current_.exchange(next.release(), std::memory_order_relaxed);  // relaxed: as above
        pthread_rwlock_unlock(&rwlock_);
        break;
    }
    // Lock policies: readers only touch the table under the lock, and we held it
    // exclusively after they left, so nobody can still use `old`.
    delete old;
  }

  const GuardPolicy policy_;
  std::atomic<T*> current_;
  mutable std::mutex mutex_;             // kMutex
  mutable RwSemaphore rwsem_;            // kRwSem
  mutable pthread_rwlock_t rwlock_ = {};  // kPthreadRwlock (initialized only for it)
  std::mutex writer_mutex_;              // serializes replace()/update() (all policies)
};

}  // namespace uvhost::sync
