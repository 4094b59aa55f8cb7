// section_lock.h - a lock that runs critical sections, chosen at run time: the
// type-erased form of the labs' lock runners, for structures that take their lock at
// construction (the switch's MAC table writers; the labs' PacketPool and SharedTxQueue).
//
// CONTRACT
//
//   std::unique_ptr<SectionLock> lock = make_section_lock(SectionLockKind::kDelegation);
//   lock->run([&] { free_list.push_back(id); });
//   lock->try_run([&] { refresh(entry); });  // skipped if another thread holds the lock
//
//  - run(fn) executes fn under mutual exclusion with every other section run on the
//    same SectionLock and returns after fn has run. Everything fn wrote is visible to
//    the next critical section and, after run() returns, to the caller (acquire/release,
//    as for a mutex; the wrapped lock provides it).
//  - try_run(fn) runs fn the same way if the lock is free and returns true, or returns
//    false at once without running fn when another thread holds it. A wrapped lock that
//    has no try (CK's CLH lock, a lab runner without try_run) runs fn, waiting if it
//    must, and returns true.
//  - fn may run on ANOTHER thread: with a delegation lock the current holder (the
//    combiner) runs the sections of the threads waiting behind it. So fn must not use
//    thread_local state or thread identity, must not block, and must not throw (an
//    exception escaping fn terminates the process: a lock()/unlock() wrapper could
//    not release the lock on the way out, and the sections that use it do not throw).
//  - Not recursive: run() on the same lock from inside fn deadlocks.
//  - Thread-safety analysis: SectionLock is a capability. Clang cannot see that a
//    lambda passed to run() executes under the lock, so a section that calls functions
//    annotated UVHOST_REQUIRES(lock) first calls lock.assert_held() (no code: a
//    statement of the contract for the analysis).
//  - name(): the wrapped lock's name as the labs print it ("std::mutex", "delegation").
//  - Cost over the wrapped lock: one virtual call and one indirect call per section.
//    Its users take the lock once per batch of buffers, burst of packets or table
//    write, not per packet lookup, so this is a few ns against sections of tens to
//    hundreds.
//
// SectionLockOf<L> adapts two kinds of lock (chosen at compile time):
//  - anything with run(fn): sync::DelegationLock itself, and the labs' runners
//    (experiments/lock_runners.h), so a structure measured in the lab uses exactly the
//    lock the lab names;
//  - any Lockable (lock() / unlock()): sync's baseline locks, QSpinLock, std::mutex.
// SectionLockKind names the two a daemon's configuration chooses between ("mutex":
// std::mutex; "delegation": DelegationLock with its default options).
//
// Why type erasure and not a template parameter on each structure: the lock is picked
// by name at run time (CLI flags, a daemon or port setting), and the structure's code
// stays one non-template class in a .cpp file. The signature of the erased call is the
// delegation lock's API as in the flat-combining / ffwd delegation papers,
// lock(lock, fn, arg).
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

#include "uvhost/base/name_table.h"
#include "uvhost/sync/baseline_locks.h"
#include "uvhost/sync/delegation_lock.h"
#include "uvhost/sync/thread_annotations.h"

namespace uvhost::sync {

class UVHOST_CAPABILITY("section lock") SectionLock {
 public:
  using SectionFn = void (*)(void* arg) noexcept;

  virtual ~SectionLock() = default;

  // Runs section(arg) under the lock (possibly on another thread).
  virtual void run_section(SectionFn section, void* arg) = 0;
  // Runs section(arg) if the lock is free (see the contract); whether it ran.
  virtual bool try_run_section(SectionFn section, void* arg) = 0;
  virtual const char* name() const noexcept = 0;

  // Runs fn() under the lock; fn is called through a reference, never copied.
  template <class F>
  void run(F&& fn) {
    run_section(&call<std::remove_reference_t<F>>, static_cast<void*>(&fn));
  }
  template <class F>
  bool try_run(F&& fn) {
    return try_run_section(&call<std::remove_reference_t<F>>, static_cast<void*>(&fn));
  }

  // For the analysis only, called first inside a section (see the contract).
  void assert_held() const noexcept UVHOST_ASSERT_CAPABILITY(this) {}

 private:
  template <class Fn>
  static void call(void* fn) noexcept {
    (*static_cast<Fn*>(fn))();
  }
};

template <class L>
class SectionLockOf final : public SectionLock {
 public:
  template <class... Args>
  explicit SectionLockOf(Args&&... args) : lock_(std::forward<Args>(args)...) {}

  void run_section(SectionFn section, void* arg) override {
    if constexpr (requires(L& l) { l.run([] {}); }) {
      lock_.run([section, arg] { section(arg); });
    } else {
      lock_.lock();
      section(arg);  // noexcept: the unlock below always runs
      lock_.unlock();
    }
  }

  bool try_run_section(SectionFn section, void* arg) override {
    if constexpr (requires(L& l) { l.try_run([] {}); }) {
      return lock_.try_run([section, arg] { section(arg); });
    } else if constexpr (requires(L& l) { l.try_lock(); }) {
      if (!lock_.try_lock()) return false;
      section(arg);  // noexcept: the unlock below always runs
      lock_.unlock();
      return true;
    } else {
      run_section(section, arg);
      return true;
    }
  }

  const char* name() const noexcept override {
    if constexpr (requires { L::kName; }) {
      return L::kName;
    } else if constexpr (std::is_same_v<L, sync::DelegationLock>) {
      return "delegation";
    } else {
      return "unnamed";
    }
  }

  L& underlying() noexcept { return lock_; }

 private:
  L lock_;
};

template <class L, class... Args>
std::unique_ptr<SectionLock> make_section_lock(Args&&... args) {
  return std::make_unique<SectionLockOf<L>>(std::forward<Args>(args)...);
}

enum class SectionLockKind { kMutex, kDelegation };
inline constexpr auto kSectionLockKindNames = base::name_table<SectionLockKind>(
    {{SectionLockKind::kMutex, "mutex"}, {SectionLockKind::kDelegation, "delegation"}});
constexpr const auto& enum_names(SectionLockKind) noexcept { return kSectionLockKindNames; }

inline std::unique_ptr<SectionLock> make_section_lock(SectionLockKind kind) {
  if (kind == SectionLockKind::kDelegation) return make_section_lock<DelegationLock>();
  return make_section_lock<StdMutexLock>();
}

}  // namespace uvhost::sync
