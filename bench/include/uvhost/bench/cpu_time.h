// cpu_time.h - CPU accounting for benchmarks and labs.
//
// Hardware counters are not available on our machines, so CPU cost is measured
// as CPU time: per thread with CLOCK_THREAD_CPUTIME_ID (the thread reads its own
// clock, or another thread's through pthread_getcpuclockid), per process with
// getrusage. Wall time is CLOCK_MONOTONIC. All values in nanoseconds.
#pragma once

#include <pthread.h>

#include <cstdint>

namespace uvhost::bench {

int64_t monotonic_ns() noexcept;
// CPU time consumed so far by the calling thread.
int64_t thread_cpu_ns() noexcept;
// CPU time consumed so far by another (live) thread of this process.
int64_t thread_cpu_ns(pthread_t thread) noexcept;
// User + system CPU time of the whole process (all threads, live and exited).
int64_t process_cpu_ns() noexcept;
// Time the hypervisor ran something else while this machine's CPUs wanted to run
// ("steal" of /proc/stat's cpu line, summed over every CPU), so far; -1 when it cannot
// be read. Its growth over a window is a disturbance no process here caused or sees.
int64_t machine_steal_ns() noexcept;

// Measures wall and process CPU time between construction and stop().
class CpuWallTimer {
 public:
  CpuWallTimer() noexcept : wall_start_(monotonic_ns()), cpu_start_(process_cpu_ns()) {}
  struct Result {
    int64_t wall_ns;
    int64_t cpu_ns;
    // CPU used as a share of one core: 1.0 = one core busy the whole time.
    double cores() const noexcept { return wall_ns > 0 ? static_cast<double>(cpu_ns) / static_cast<double>(wall_ns) : 0.0; }
  };
  Result stop() const noexcept { return {monotonic_ns() - wall_start_, process_cpu_ns() - cpu_start_}; }

 private:
  int64_t wall_start_;
  int64_t cpu_start_;
};

}  // namespace uvhost::bench
