// misuse.h - loud failure for detectable API misuse in debug builds.
//
// Contract: UVHOST_MISUSE_CHECK(cond, fmt-string) does nothing in release builds
// (NDEBUG defined). In debug and sanitizer builds, when `cond` is false it prints
// "uvhost: misuse: <message> (file:line)" to stderr and aborts, so a test can
// check the message with a death test and a developer sees which rule was broken.
// It is for misuse the primitive can detect cheaply (unlocking a lock that is not
// held, destroying a busy lock, freeing a queued work item), not for input errors.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace uvhost::sync::detail {
[[noreturn]] inline void misuse_abort(const char* message, const char* file, int line) noexcept {
  std::fprintf(stderr, "uvhost: misuse: %s (%s:%d)\n", message, file, line);
  std::fflush(stderr);
  std::abort();
}
}  // namespace uvhost::sync::detail

#ifdef NDEBUG
#define UVHOST_MISUSE_CHECKS_ENABLED 0
#define UVHOST_MISUSE_CHECK(cond, message) ((void)0)
#else
#define UVHOST_MISUSE_CHECKS_ENABLED 1
#define UVHOST_MISUSE_CHECK(cond, message) \
  ((cond) ? (void)0 : ::uvhost::sync::detail::misuse_abort((message), __FILE__, __LINE__))
#endif
