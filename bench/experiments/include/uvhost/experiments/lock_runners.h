// lock_runners.h - every lock the labs compare, behind one call: run(fn).
//
// A runner executes fn under mutual exclusion. For an ordinary lock that is
// lock(); fn(); unlock(); for the delegation lock it is lock.run(fn), where the
// current combiner thread may execute fn on the caller's behalf. Runners are
// template parameters of the lab loops (no virtual call on the measured path);
// kName is what the tables print.
//
// kAsyncFlush marks the asynchronous delegation variant: the lab submits each
// flush with DelegationLock::submit() and keeps working (at most one flush in
// flight per thread), which no lock()/unlock() interface can express.
// "delegation-park" is the same lock with its waiters parking at once instead of
// spinning first: how much the spin buys (or costs) shows beside "delegation".
//
// for_each_runner() visits the runners in table order; section_lock_set() gives each
// synchronous one as a SectionLock, by name, for the structures that take their lock
// at construction.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "uvhost/sync/section_lock.h"
#include "uvhost/sync/baseline_locks.h"
#include "uvhost/sync/delegation_lock.h"
#include "uvhost/sync/qspinlock.h"

namespace uvhost::experiments {

template <class Lock>
struct LockableRunner {
  static constexpr const char* kName = Lock::kName;
  static constexpr bool kAsyncFlush = false;
  Lock lock;
  template <class F>
  void run(F&& fn) {
    lock.lock();
    fn();
    lock.unlock();
  }
};

struct DelegationRunner {
  static constexpr const char* kName = "delegation";
  static constexpr bool kAsyncFlush = false;
  explicit DelegationRunner(sync::DelegationLockOptions options = {}) : lock(options) {}
  sync::DelegationLock lock;
  template <class F>
  void run(F&& fn) {
    lock.run(fn);
  }
};

// The same lock; the lab submits flushes asynchronously (see above).
struct DelegationAsyncRunner : DelegationRunner {
  static constexpr const char* kName = "delegation-async";
  static constexpr bool kAsyncFlush = true;
};

// The same lock without spinning: a waiter parks on its futex at once (spin_iterations
// 0, no adaptive spin), the other end of the spin-or-park trade-off.
struct DelegationParkRunner : DelegationRunner {
  static constexpr const char* kName = "delegation-park";
  DelegationParkRunner() : DelegationRunner({.spin_iterations = 0, .adaptive_spin = false}) {}
};

// Calls visit.template operator()<Runner>() for every runner the labs compare, in
// table order: the baseline first, then ours, then the other spinlocks.
template <class Visit>
void for_each_runner(Visit&& visit) {
  [&]<class... Runners>() {
    (visit.template operator()<Runners>(), ...);
  }.template operator()<LockableRunner<sync::StdMutexLock>, DelegationRunner, DelegationAsyncRunner,
                        DelegationParkRunner, LockableRunner<sync::QSpinLock>, LockableRunner<sync::PthreadSpinLock>,
                        LockableRunner<sync::CkTicketLock>, LockableRunner<sync::CkMcsLock>,
                        LockableRunner<sync::CkClhLock>>();
}

// A runner as a SectionLock (section_lock.h), made on demand.
struct NamedSectionLock {
  const char* name;
  std::unique_ptr<sync::SectionLock> (*make)();
};

// Every runner as a SectionLock, in table order, less the asynchronous variant
// (SectionLock::run() is synchronous).
inline const std::vector<NamedSectionLock>& section_lock_set() {
  static const std::vector<NamedSectionLock> locks = [] {
    std::vector<NamedSectionLock> out;
    for_each_runner([&]<class Runner>() {
      if constexpr (!Runner::kAsyncFlush)
        out.push_back({Runner::kName, [] { return sync::make_section_lock<Runner>(); }});
    });
    return out;
  }();
  return locks;
}

}  // namespace uvhost::experiments
