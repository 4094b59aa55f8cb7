// thread_annotations.h - clang's thread-safety analysis (-Wthread-safety) for
// mutex-protected state: the attribute macros and a std::mutex the analysis knows.
//
// Contract
// --------
//  - UVHOST_GUARDED_BY(m) on a member: read or written only with `m` held;
//    UVHOST_PT_GUARDED_BY(m): the same for what a pointer member points to;
//    UVHOST_REQUIRES(m) on a function: its caller holds `m`; UVHOST_EXCLUDES(m): its
//    caller must not (it takes `m` itself). UVHOST_ASSERT_CAPABILITY(m) on a function:
//    after it returns the analysis treats `m` as held (for sections a lock runs on the
//    caller's behalf, section_lock.h).
//  - Mutex is std::mutex declared as a capability: lock(), unlock(), and try_lock()
//    (true: held). MutexLock holds one for a scope.
//  - CondVar is std::condition_variable for a Mutex (abseil's absl::CondVar shape):
//    wait(mutex) and wait_until(mutex, deadline) are called with `mutex` held and
//    return with it held (wake-ups may be spurious: the caller loops on its condition,
//    which the analysis then sees read under the lock, unlike a predicate lambda);
//    notify_one() / notify_all() need no lock.
//  - The macros expand to nothing for compilers other than clang (GCC builds are
//    unchecked; the clang builds, the tsan and fuzz presets, check with
//    -Wthread-safety, and CI makes its warnings errors).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define UVHOST_THREAD_ATTRIBUTE(x) __attribute__((x))
#else
#define UVHOST_THREAD_ATTRIBUTE(x)
#endif

#define UVHOST_CAPABILITY(name) UVHOST_THREAD_ATTRIBUTE(capability(name))
#define UVHOST_SCOPED_CAPABILITY UVHOST_THREAD_ATTRIBUTE(scoped_lockable)
#define UVHOST_GUARDED_BY(m) UVHOST_THREAD_ATTRIBUTE(guarded_by(m))
#define UVHOST_PT_GUARDED_BY(m) UVHOST_THREAD_ATTRIBUTE(pt_guarded_by(m))
#define UVHOST_REQUIRES(...) UVHOST_THREAD_ATTRIBUTE(requires_capability(__VA_ARGS__))
#define UVHOST_EXCLUDES(...) UVHOST_THREAD_ATTRIBUTE(locks_excluded(__VA_ARGS__))
#define UVHOST_ACQUIRE(...) UVHOST_THREAD_ATTRIBUTE(acquire_capability(__VA_ARGS__))
#define UVHOST_RELEASE(...) UVHOST_THREAD_ATTRIBUTE(release_capability(__VA_ARGS__))
#define UVHOST_TRY_ACQUIRE(...) UVHOST_THREAD_ATTRIBUTE(try_acquire_capability(__VA_ARGS__))
#define UVHOST_ASSERT_CAPABILITY(x) UVHOST_THREAD_ATTRIBUTE(assert_capability(x))
#define UVHOST_NO_THREAD_SAFETY_ANALYSIS UVHOST_THREAD_ATTRIBUTE(no_thread_safety_analysis)

namespace uvhost::sync {

class UVHOST_CAPABILITY("mutex") Mutex {
 public:
  void lock() UVHOST_ACQUIRE() { mutex_.lock(); }
  void unlock() UVHOST_RELEASE() { mutex_.unlock(); }
  bool try_lock() UVHOST_TRY_ACQUIRE(true) { return mutex_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mutex_;
};

class UVHOST_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) UVHOST_ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
  ~MutexLock() UVHOST_RELEASE() { mutex_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mutex_;
};

class CondVar {
 public:
  void wait(Mutex& mutex) UVHOST_REQUIRES(mutex) {
    std::unique_lock<std::mutex> held(mutex.mutex_, std::adopt_lock);
    cv_.wait(held);
    held.release();  // still locked: the caller's scope unlocks it
  }
  // false: woken by the deadline rather than a notify (the caller re-checks either way).
  template <class Clock, class Duration>
  bool wait_until(Mutex& mutex, std::chrono::time_point<Clock, Duration> deadline) UVHOST_REQUIRES(mutex) {
    std::unique_lock<std::mutex> held(mutex.mutex_, std::adopt_lock);
    const bool notified = cv_.wait_until(held, deadline) == std::cv_status::no_timeout;
    held.release();
    return notified;
  }
  void notify_one() noexcept { cv_.notify_one(); }
  void notify_all() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace uvhost::sync
