// process_threads.h - CPU time of each thread of another process, from /proc.
//
// Contract
// --------
//  - snapshot_threads(pid) reads /proc/<pid>/task/*/schedstat (its first field: the
//    nanoseconds the thread has run on a CPU, the scheduler's own accounting) and
//    /proc/<pid>/task/<tid>/comm (the thread's name, at most 15 characters). Threads
//    that exit while it reads are skipped. An empty snapshot if the process is gone.
//  - thread_cpu_between(start, end, window_s, side, merge_below): the CPU each thread of
//    `end` used since `start` (a thread born in between counts from 0; one that died
//    in between is lost: its time is not in `end`). Threads under `merge_below` of
//    the window (e.g. 0.01: 1%) are summed into one entry named "other" (omitted when
//    it is 0). Entries in `end`'s order (tid order), "other" last.
//  - Plain functions; no state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "uvhost/bench/workload.h"

namespace uvhost::bench {

struct ThreadSample {
  pid_t tid = 0;
  std::string name;
  uint64_t cpu_ns = 0;
};

std::vector<ThreadSample> snapshot_threads(pid_t pid);

std::vector<ThreadCpu> thread_cpu_between(const std::vector<ThreadSample>& start, const std::vector<ThreadSample>& end,
                                          double window_s, const std::string& side, double merge_below = 0.01);

}  // namespace uvhost::bench
