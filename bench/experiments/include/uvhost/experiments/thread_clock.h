// thread_clock.h - the clocks the experiments' load generators time with, in ns:
// CLOCK_MONOTONIC (wall) and CLOCK_THREAD_CPUTIME_ID (the calling thread's CPU).
#pragma once

#include <time.h>

#include <cstdint>

namespace uvhost::experiments {

inline int64_t clock_ns(clockid_t clock) noexcept {
  timespec ts{};
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace uvhost::experiments
