// run_support.h - what the two run shapes share (run_point.cpp: one backend, A and B
// maybe switched live; run_side_by_side.cpp: A and B in two backend processes).
// Internal to the bench library.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <cerrno>
#include <map>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "uvhost/bench/frontend_driver.h"
#include "uvhost/bench/process_threads.h"
#include "uvhost/bench/workload.h"

namespace uvhost::bench::detail {

// Pins the calling thread to one CPU for its lifetime (cpu < 0: no pin), then restores
// its old mask.
class ThreadPin {
 public:
  explicit ThreadPin(int cpu) {
    if (cpu < 0) return;
    if (::sched_getaffinity(0, sizeof old_, &old_) != 0) throw std::system_error(errno, std::generic_category(), "sched_getaffinity");
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<size_t>(cpu), &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0) {
      throw std::system_error(errno, std::generic_category(), fmt::format("pinning the frontend to CPU {}", cpu));
    }
    pinned_ = true;
  }
  ~ThreadPin() {
    if (pinned_) (void)::sched_setaffinity(0, sizeof old_, &old_);
  }
  ThreadPin(const ThreadPin&) = delete;
  ThreadPin& operator=(const ThreadPin&) = delete;

 private:
  cpu_set_t old_{};
  bool pinned_ = false;
};

// Per-thread CPU of one process summed over a side's sub-windows (tid -> name and ns).
class SideThreadCpu {
 public:
  void add(const std::vector<ThreadSample>& start, const std::vector<ThreadSample>& end) {
    for (const ThreadSample& t : end) {
      uint64_t base = 0;  // a thread born within the sub-window counts from 0
      for (const ThreadSample& s : start) {
        if (s.tid == t.tid) base = s.cpu_ns;
      }
      ThreadSample& sum = sums_[t.tid];
      sum.tid = t.tid;
      sum.name = t.name;
      sum.cpu_ns += t.cpu_ns >= base ? t.cpu_ns - base : 0;
    }
  }
  std::vector<ThreadSample> totals() const {
    std::vector<ThreadSample> out;
    for (const auto& [tid, sample] : sums_) out.push_back(sample);
    return out;
  }

 private:
  std::map<pid_t, ThreadSample> sums_;
};

// Throws std::runtime_error for options or a point no run can take.
void validate_run(const Config& config, const Point& point, const RunOptions& options);

// One side's RunResult from what its frontend drove and its backend's threads' CPU.
RunResult run_result_of(const DriveResult& drive, const Point& point, const SideThreadCpu* backend_cpu);

}  // namespace uvhost::bench::detail
