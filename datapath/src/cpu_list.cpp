// cpu_list.cpp - see cpu_list.h.
#include "uvhost/datapath/cpu_list.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include <fmt/format.h>

#include "uvhost/base/errno_text.h"

namespace uvhost::datapath {

namespace {

std::optional<uint32_t> cpu_number(std::string_view text) {
  uint32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<CpuList> parse_cpu_list(std::string_view text, std::string& error) {
  CpuList list;
  const std::string_view whole = text;
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    const size_t dash = item.find('-');
    const std::optional<uint32_t> first = cpu_number(item.substr(0, dash));
    const std::optional<uint32_t> last = dash == std::string_view::npos ? first : cpu_number(item.substr(dash + 1));
    if (!first || !last || *last < *first) {
      error = fmt::format("'{}' is not a CPU list like 1 or 0-3 or [0,2-3]", whole);
      return std::nullopt;
    }
    if (*last >= CpuList::kMaxCpus) {
      error = fmt::format("CPU {} in '{}' is not below {}", *last, whole, CpuList::kMaxCpus);
      return std::nullopt;
    }
    for (uint32_t cpu = *first; cpu <= *last; ++cpu) list.cpus_.push_back(cpu);
  }
  std::sort(list.cpus_.begin(), list.cpus_.end());
  list.cpus_.erase(std::unique(list.cpus_.begin(), list.cpus_.end()), list.cpus_.end());
  return list;
}

std::string to_string(const CpuList& list) {
  std::string out;
  const std::vector<uint32_t>& cpus = list.cpus();
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

bool pin_this_thread(const CpuList& list, std::string& error) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const uint32_t cpu : list.cpus()) CPU_SET(cpu, &set);
  const int rc = ::pthread_setaffinity_np(::pthread_self(), sizeof(set), &set);
  if (rc != 0) {
    error = base::errno_text(fmt::format("cannot run on CPUs {}", to_string(list)), rc);
    return false;
  }
  return true;
}

std::optional<CpuList> cpus_of_process(pid_t pid, std::string& error) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(pid, sizeof(set), &set) != 0) {
    error = base::errno_text(fmt::format("cannot read the CPUs of process {}", pid));
    return std::nullopt;
  }
  CpuList list;
  for (uint32_t cpu = 0; cpu < CpuList::kMaxCpus; ++cpu) {
    if (CPU_ISSET(cpu, &set)) list.cpus_.push_back(cpu);
  }
  return list;
}

}  // namespace uvhost::datapath
