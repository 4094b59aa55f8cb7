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
#pragma once

#include <mutex>

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
  sync::DelegationLock lock;
  template <class F>
  void run(F&& fn) {
    lock.run(fn);
  }
};

struct DelegationAsyncRunner {
  static constexpr const char* kName = "delegation-async";
  static constexpr bool kAsyncFlush = true;
  sync::DelegationLock lock;
  template <class F>
  void run(F&& fn) {
    lock.run(fn);
  }
};

}  // namespace uvhost::experiments

// The lab's lock list, in table order: the baseline first, then ours, then the
// other spinlocks. (A macro so the list is one line to extend.)
#define UVHOST_DELEGATION_LAB_RUNNERS                                                        \
  ::uvhost::experiments::LockableRunner<::uvhost::sync::StdMutexLock>,                        \
      ::uvhost::experiments::DelegationRunner, ::uvhost::experiments::DelegationAsyncRunner,   \
      ::uvhost::experiments::LockableRunner<::uvhost::sync::QSpinLock>,                       \
      ::uvhost::experiments::LockableRunner<::uvhost::sync::PthreadSpinLock>,                 \
      ::uvhost::experiments::LockableRunner<::uvhost::sync::CkTicketLock>,                    \
      ::uvhost::experiments::LockableRunner<::uvhost::sync::CkMcsLock>,                       \
      ::uvhost::experiments::LockableRunner<::uvhost::sync::CkClhLock>
