// thread_annotations.h - clang's thread-safety analysis (-Wthread-safety) for
// mutex-protected state: the attribute macros and a std::mutex the analysis knows.
//
// Contract
// --------
//  - UVHOST_GUARDED_BY(m) on a member: read or written only with `m` held;
//    UVHOST_PT_GUARDED_BY(m): the same for what a pointer member points to;
//    UVHOST_REQUIRES(m) on a function: its caller holds `m`; UVHOST_EXCLUDES(m): its
//    caller must not (it takes `m` itself).
//  - Mutex is std::mutex declared as a capability; MutexLock holds one for a scope.
//  - The macros expand to nothing for compilers other than clang (GCC builds are
//    unchecked; the clang builds, e.g. the fuzz preset, check with -Wthread-safety).
#pragma once

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
#define UVHOST_NO_THREAD_SAFETY_ANALYSIS UVHOST_THREAD_ATTRIBUTE(no_thread_safety_analysis)

namespace uvhost::sync {

class UVHOST_CAPABILITY("mutex") Mutex {
 public:
  void lock() UVHOST_ACQUIRE() { mutex_.lock(); }
  void unlock() UVHOST_RELEASE() { mutex_.unlock(); }

 private:
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

}  // namespace uvhost::sync
