// lock_runners.h - every lock the labs compare, behind one call: run(fn).
//
// A runner executes fn under mutual exclusion. For an ordinary lock that is
// lock(); fn(); unlock(); for the delegation lock it is lock.run(fn), where
// another thread may execute fn. Runners are templates parameters of the lab's
// loops (no virtual call on the measured path); kName is what tables print.
#pragma once

#include <mutex>

namespace uvhost::bench::lab {

template <class Lock>
struct LockableRunner {
  static constexpr const char* kName = Lock::kName;
  Lock lock;
  template <class F>
  void run(F&& fn) {
    std::lock_guard<Lock> guard(lock);
    fn();
  }
};

struct StdMutexRunner {
  static constexpr const char* kName = "std::mutex";
  std::mutex lock;
  template <class F>
  void run(F&& fn) {
    std::lock_guard<std::mutex> guard(lock);
    fn();
  }
};

}  // namespace uvhost::bench::lab

// The lab's lock list, in table order.
#define UVHOST_DELEGATION_LAB_RUNNERS ::uvhost::bench::lab::StdMutexRunner
