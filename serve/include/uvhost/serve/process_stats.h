// process_stats.h - this process's resource use, read from /proc/self, for the stats
// reply's "process" object and the Prometheus process_* families (named as the
// Prometheus client libraries name them).
//
// Contract
// --------
//  - process_stats_json() never throws: a value that cannot be read (no /proc, an odd
//    line) is left out of the object, never reported as 0.
//  - Keys and units: "cpu_seconds" (user + system), "resident_bytes", "virtual_bytes",
//    "open_fds", "max_fds" (the soft RLIMIT_NOFILE; left out when unlimited),
//    "start_time_seconds" (since the Unix epoch).
//  - Any thread; a few small reads of /proc each call.
#pragma once

#include <nlohmann/json.hpp>

namespace uvhost::serve {

nlohmann::json process_stats_json();

}  // namespace uvhost::serve
