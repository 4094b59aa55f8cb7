// cpu_time.cpp - clock_gettime / getrusage wrappers.
#include "uvhost/bench/cpu_time.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>

namespace uvhost::bench {
namespace {
int64_t read_clock(clockid_t clock) noexcept {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
int64_t to_ns(const timeval& tv) noexcept {
  return static_cast<int64_t>(tv.tv_sec) * 1'000'000'000 + static_cast<int64_t>(tv.tv_usec) * 1000;
}
}  // namespace

int64_t monotonic_ns() noexcept { return read_clock(CLOCK_MONOTONIC); }
int64_t thread_cpu_ns() noexcept { return read_clock(CLOCK_THREAD_CPUTIME_ID); }

int64_t thread_cpu_ns(pthread_t thread) noexcept {
  clockid_t clock{};
  if (pthread_getcpuclockid(thread, &clock) != 0) return 0;
  return read_clock(clock);
}

int64_t process_cpu_ns() noexcept {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return to_ns(usage.ru_utime) + to_ns(usage.ru_stime);
}

int64_t machine_steal_ns() noexcept {
  std::FILE* f = std::fopen("/proc/stat", "re");
  if (f == nullptr) return -1;
  // cpu  user nice system idle iowait irq softirq steal ... (in clock ticks)
  unsigned long long field[8] = {};
  const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &field[0], &field[1], &field[2],
                            &field[3], &field[4], &field[5], &field[6], &field[7]);
  std::fclose(f);
  const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  if (n != 8 || ticks_per_second <= 0) return -1;
  return static_cast<int64_t>(field[7] * (1'000'000'000ULL / static_cast<unsigned long long>(ticks_per_second)));
}

}  // namespace uvhost::bench
