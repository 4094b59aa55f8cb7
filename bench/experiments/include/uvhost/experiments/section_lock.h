// section_lock.h - a lock that runs critical sections, chosen at run time: the
// type-erased form of the labs' lock runners, for the datapath structures that take
// their lock at construction (PacketPool, SharedTxQueue).
//
// CONTRACT
//
//   std::unique_ptr<SectionLock> lock = make_section_lock<sync::DelegationLock>();
//   lock->run([&] { free_list.push_back(id); });
//
//  - run(fn) executes fn under mutual exclusion with every other run() on the same
//    SectionLock and returns after fn has run. Everything fn wrote is visible to the
//    next critical section and, after run() returns, to the caller (acquire/release,
//    as for a mutex; the wrapped lock provides it).
//  - fn may run on ANOTHER thread: with a delegation lock the current holder (the
//    combiner) runs the sections of the threads waiting behind it. So fn must not use
//    thread_local state or thread identity, must not block, and must not throw (an
//    exception escaping fn terminates the process: a lock()/unlock() wrapper could
//    not release the lock on the way out, and the datapath's sections do not throw).
//  - Not recursive: run() on the same lock from inside fn deadlocks.
//  - name(): the wrapped lock's name as the labs print it ("std::mutex", "delegation").
//  - Cost over the wrapped lock: one virtual call and one indirect call per section.
//    The datapath takes a lock once per batch of buffers or burst of packets, not per
//    packet, so this is a few ns against a section of tens to hundreds.
//
// SectionLockOf<L> adapts two kinds of lock (chosen at compile time):
//  - anything with run(fn): sync::DelegationLock itself, and the labs' runners
//    (experiments/lock_runners.h), so a structure measured in the lab uses exactly the
//    lock the lab names;
//  - any Lockable (lock() / unlock()): sync's baseline locks, QSpinLock, std::mutex.
//
// Why type erasure and not a template parameter on each structure: the lock is picked
// by name at run time (CLI flags, a port's configuration), and the structure's code
// stays one non-template class in a .cpp file. The signature of the erased call is the
// delegation lock's API as in the
// flat-combining / ffwd delegation papers, lock(lock, fn, arg).
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

#include "uvhost/sync/delegation_lock.h"

namespace uvhost::experiments {

class SectionLock {
 public:
  using SectionFn = void (*)(void* arg) noexcept;

  virtual ~SectionLock() = default;

  // Runs section(arg) under the lock (possibly on another thread).
  virtual void run_section(SectionFn section, void* arg) = 0;
  virtual const char* name() const noexcept = 0;

  // Runs fn() under the lock; fn is called through a reference, never copied.
  template <class F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run_section([](void* arg) noexcept { (*static_cast<Fn*>(arg))(); }, static_cast<void*>(&fn));
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

}  // namespace uvhost::experiments
