// proc_figures.h - the figures of another process that a leak would move, read from
// /proc/PID: open fds, resident memory, threads, mappings.
//
// Contract
// --------
//  - read_proc_figures(pid) reads /proc/PID/fd (entries), /proc/PID/status (VmRSS,
//    Threads) and /proc/PID/maps (lines). nullopt when the process is gone or a file
//    cannot be read (then `error` says which).
//  - Needs the right to read those files (same user or root).
#pragma once

#include <optional>
#include <string>

#include <sys/types.h>

namespace uvhost::soak {

struct ProcFigures {
  long fds = 0;
  long rss_kib = 0;
  long threads = 0;
  long maps = 0;
};

std::optional<ProcFigures> read_proc_figures(pid_t pid, std::string& error);

}  // namespace uvhost::soak
