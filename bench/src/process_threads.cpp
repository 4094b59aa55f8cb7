// process_threads.cpp - see process_threads.h.
#include "uvhost/bench/process_threads.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <system_error>

namespace uvhost::bench {

std::vector<ThreadSample> snapshot_threads(pid_t pid) {
  std::vector<ThreadSample> out;
  const std::filesystem::path task = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(task, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string tid_text = it->path().filename().string();
    char* parse_end = nullptr;
    const long tid = std::strtol(tid_text.c_str(), &parse_end, 10);
    if (parse_end == tid_text.c_str() || *parse_end != '\0') continue;
    std::ifstream schedstat(it->path() / "schedstat");
    uint64_t ns = 0;
    if (!(schedstat >> ns)) continue;  // the thread exited meanwhile
    std::ifstream comm(it->path() / "comm");
    std::string name;
    std::getline(comm, name);
    out.push_back(ThreadSample{static_cast<pid_t>(tid), name.empty() ? "?" : name, ns});
  }
  std::sort(out.begin(), out.end(), [](const ThreadSample& a, const ThreadSample& b) { return a.tid < b.tid; });
  return out;
}

std::vector<ThreadCpu> thread_cpu_between(const std::vector<ThreadSample>& start, const std::vector<ThreadSample>& end,
                                          double window_s, const std::string& side, double merge_below) {
  std::map<pid_t, uint64_t> before;
  for (const ThreadSample& s : start) before[s.tid] = s.cpu_ns;
  std::vector<ThreadCpu> out;
  double other = 0;
  for (const ThreadSample& s : end) {
    const auto found = before.find(s.tid);
    const uint64_t base = found == before.end() ? 0 : found->second;
    // schedstat only grows; a smaller value means the tid was reused by a new thread.
    const double seconds = static_cast<double>(s.cpu_ns >= base ? s.cpu_ns - base : s.cpu_ns) * 1e-9;
    if (window_s > 0 && seconds < merge_below * window_s) {
      other += seconds;
    } else {
      out.push_back(ThreadCpu{s.name, side, seconds});
    }
  }
  if (other > 0) out.push_back(ThreadCpu{"other", side, other});
  return out;
}

}  // namespace uvhost::bench
