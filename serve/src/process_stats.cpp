// process_stats.cpp - /proc/self as the "process" stats object (see process_stats.h).
#include "uvhost/serve/process_stats.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace uvhost::serve {

namespace {

// The fields of /proc/self/stat after the command name (which may hold spaces and
// parentheses: the last ')' ends it). fields[0] is the state (field 3 in proc(5)).
std::vector<std::string> stat_fields() {
  std::ifstream file("/proc/self/stat");
  std::string line;
  if (!std::getline(file, line)) return {};
  const auto close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;
}

// proc(5) field number N (1-based) as a number.
std::optional<uint64_t> stat_field(const std::vector<std::string>& fields, size_t number) {
  if (number < 3 || number - 3 >= fields.size()) return std::nullopt;
  try {
    size_t used = 0;
    const uint64_t value = std::stoull(fields[number - 3], &used);
    if (used != fields[number - 3].size()) return std::nullopt;
    return value;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The boot time (seconds since the epoch) from /proc/stat's "btime" line.
std::optional<uint64_t> boot_time() {
  std::ifstream file("/proc/stat");
  for (std::string line; std::getline(file, line);) {
    if (line.rfind("btime ", 0) != 0) continue;
    try {
      return std::stoull(line.substr(6));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<uint64_t> open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return std::nullopt;
  uint64_t count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count > 0 ? count - 1 : 0;  // not the directory's own fd
}

}  // namespace

nlohmann::json process_stats_json() {
  nlohmann::json out = nlohmann::json::object();
  const auto fields = stat_fields();
  const long ticks = ::sysconf(_SC_CLK_TCK);
  const long page = ::sysconf(_SC_PAGESIZE);
  const auto utime = stat_field(fields, 14);
  const auto stime = stat_field(fields, 15);
  if (utime && stime && ticks > 0) out["cpu_seconds"] = static_cast<double>(*utime + *stime) / static_cast<double>(ticks);
  if (const auto vsize = stat_field(fields, 23)) out["virtual_bytes"] = *vsize;
  if (const auto rss = stat_field(fields, 24); rss && page > 0) out["resident_bytes"] = *rss * static_cast<uint64_t>(page);
  const auto start_ticks = stat_field(fields, 22);
  const auto boot = boot_time();
  if (start_ticks && boot && ticks > 0)
    out["start_time_seconds"] = static_cast<double>(*boot) + static_cast<double>(*start_ticks) / static_cast<double>(ticks);
  if (const auto fds = open_fds()) out["open_fds"] = *fds;
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    out["max_fds"] = static_cast<uint64_t>(limit.rlim_cur);
  return out;
}

}  // namespace uvhost::serve
