// stats_format.cpp - the "list" and "stats" replies as text tables (see stats_format.h).
// Prometheus output is in stats_prometheus.cpp.
#include "uvhost/serve/stats_format.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "stats_json.h"

namespace uvhost::serve {

namespace {

using namespace detail;  // the readers of stats_json.h

const std::string kMissing = "-";

// Columns sized to their widest cell, two spaces apart; right-aligned columns are the
// numeric ones (decided per column, so "-" lines up with the numbers). No trailing
// blanks, so the output diffs and greps cleanly.
class Table {
 public:
  struct Column {
    std::string header;
    bool right = false;
  };
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

  void add(std::vector<std::string> cells) {
    cells.resize(columns_.size(), kMissing);
    rows_.push_back(std::move(cells));
  }

  std::string str() const {
    std::vector<size_t> width(columns_.size());
    for (size_t c = 0; c < columns_.size(); ++c) width[c] = columns_[c].header.size();
    for (const auto& row : rows_)
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    std::string out;
    auto line = [&](auto cell_of) {
      std::string text_line;
      for (size_t c = 0; c < columns_.size(); ++c) {
        const std::string& cell = cell_of(c);
        if (c > 0) text_line += "  ";
        const std::string pad(width[c] - cell.size(), ' ');
        text_line += columns_[c].right ? pad + cell : cell + pad;
      }
      text_line.erase(text_line.find_last_not_of(' ') + 1);
      out += text_line + "\n";
    };
    line([&](size_t c) -> const std::string& { return columns_[c].header; });
    for (const auto& row : rows_) line([&](size_t c) -> const std::string& { return row[c]; });
    return out;
  }

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

std::string or_missing(const std::optional<std::string>& value) { return value ? *value : kMissing; }

std::string count_cell(const json& value, std::string_view key) {
  const auto found = counter(value, key);
  return found ? std::to_string(*found) : kMissing;
}

std::string yes_no(const json& value, std::string_view key) {
  const auto found = flag(value, key);
  return found ? (*found ? "yes" : "no") : kMissing;
}

// Nanoseconds as `scale` units with `decimals` (poll ms, CPU seconds).
std::string scaled_cell(const json& value, std::string_view key, double scale, int decimals) {
  const auto found = counter(value, key);
  return found ? fmt::format("{:.{}f}", static_cast<double>(*found) / scale, decimals) : kMissing;
}

// "busy/50us/accurate": the mode, then what applies to it.
std::string poll_cell(const json& queue) {
  const json* poll = member(queue, "poll");
  if (poll == nullptr || !poll->is_object()) return kMissing;
  const auto mode = text(*poll, "mode");
  std::string cell = or_missing(mode);
  if (mode == "notify") return cell;  // neither busy_us nor exit applies
  if (const auto busy = counter(*poll, "busy_us")) cell += fmt::format("/{}us", *busy);
  if (const auto exit = text(*poll, "exit")) cell += "/" + *exit;
  return cell;
}

std::string state_cell(const json& queue) {
  const auto broken = flag(queue, "broken");
  const auto started = flag(queue, "started");
  const auto enabled = flag(queue, "enabled");
  if (broken == true) return "BROKEN";
  if (!started && !enabled) return kMissing;
  if (started == false) return "stopped";
  if (enabled == false) return "disabled";
  return "running";
}

// Poll exits in a fixed order, abbreviated ("w3 k0 o0 a0 t2"); reasons we do not know
// (a newer daemon) follow as name=count.
constexpr std::pair<std::string_view, std::string_view> kExitNames[] = {
    {"work", "w"}, {"own_kick", "k"}, {"other_queue", "o"}, {"any_work", "a"}, {"timeout", "t"}};
constexpr std::string_view kDirectionLegend = "dir: rx = from the guest, tx = to the guest (as DPDK and OVS)";
constexpr std::string_view kExitLegend =
    "poll exits: w=work k=own kick o=other queue a=any work t=timeout";

std::string exits_cell(const json& queue) {
  const json* exits = member(queue, "poll_exits");
  if (exits == nullptr || !exits->is_object()) return kMissing;
  std::vector<std::string> parts;
  for (const auto& [name, abbreviation] : kExitNames)
    if (const auto count = counter(*exits, name)) parts.push_back(fmt::format("{}{}", abbreviation, *count));
  for (const auto& item : exits->items()) {
    // A named variable, not a structured binding: clang before 16 cannot capture those.
    const std::string& name = item.key();
    const bool known = std::any_of(std::begin(kExitNames), std::end(kExitNames),
                                   [&](const auto& entry) { return entry.first == name; });
    if (!known) parts.push_back(fmt::format("{}={}", name, item.value().dump()));
  }
  return parts.empty() ? kMissing : fmt::format("{}", fmt::join(parts, " "));
}

std::string queue_index_cell(const json& queue) { return count_cell(queue, "index"); }

// Scalar leaves of backend_stats ("key=value", nested keys joined with '.').
void flatten(const json& value, const std::string& prefix, std::vector<std::string>& parts) {
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) flatten(child, prefix.empty() ? key : prefix + "." + key, parts);
  } else if (value.is_primitive() && !value.is_null()) {
    parts.push_back(prefix + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
  }
}

std::string ports_section(const json& stats) {
  Table table({{"port"}, {"backend"}, {"connected"}, {"conns", true}, {"errors", true}, {"memory"}});
  std::string backend_lines;
  for (const auto& port : array_member(stats, "ports")) {
    const std::string name = or_missing(text(port, "name"));
    table.add({name, or_missing(text(port, "backend")), yes_no(port, "connected"), count_cell(port, "connections"),
               count_cell(port, "protocol_errors"), or_missing(text(port, "memory"))});
    std::vector<std::string> parts;
    if (const json* backend = member(port, "backend_stats")) flatten(*backend, "", parts);
    if (!parts.empty()) backend_lines += fmt::format("{} backend: {}\n", name, fmt::join(parts, " "));
  }
  return table.str() + backend_lines;
}

// The queues of the same port and index in another reply, for rates.
const json* find_queue(const json& stats, const std::optional<std::string>& port_name, const json& queue) {
  const auto index = counter(queue, "index");
  if (!port_name || !index) return nullptr;
  for (const auto& port : array_member(stats, "ports")) {
    if (text(port, "name") != port_name) continue;
    for (const auto& candidate : array_member(port, "queues"))
      if (counter(candidate, "index") == index) return &candidate;
  }
  return nullptr;
}

const json* find_worker(const json& stats, const std::optional<std::string>& name) {
  if (!name) return nullptr;
  for (const auto& worker : array_member(stats, "workers"))
    if (text(worker, "name") == name) return &worker;
  return nullptr;
}

// (current - previous) / seconds * scale; nullopt when it cannot be known.
std::optional<double> rate(const json* previous, const json& current, std::string_view key, double seconds) {
  if (previous == nullptr || !(seconds > 0)) return std::nullopt;
  const auto before = counter(*previous, key);
  const auto now = counter(current, key);
  if (!before || !now || *now < *before) return std::nullopt;
  return static_cast<double>(*now - *before) / seconds;
}

std::string rate_cell(std::optional<double> value, double scale, int decimals) {
  return value ? fmt::format("{:.{}f}", *value * scale, decimals) : kMissing;
}

std::string uptime_line(const json& stats) {
  const auto uptime = number(stats, "uptime_s");
  return uptime ? fmt::format("uptime {:.1f} s\n", *uptime) : std::string();
}

}  // namespace

std::string format_ports_table(const json& list) {
  Table table({{"port"}, {"socket"}, {"mode"}, {"backend"}, {"pairs", true}, {"workers"}, {"connected"},
               {"mtu", true}});
  for (const auto& port : array_member(list, "ports")) {
    const auto client = flag(port, "client");
    const json* features = member(port, "features");
    const uint64_t mtu = features != nullptr ? counter(*features, "guest_mtu").value_or(0) : 0;  // 0: none set
    table.add({or_missing(text(port, "name")), or_missing(text(port, "socket")),
               client ? (*client ? "client" : "server") : kMissing, or_missing(text(port, "backend")),
               count_cell(port, "queue_pairs"), or_missing(text(port, "workers")), yes_no(port, "connected"),
               mtu > 0 ? std::to_string(mtu) : kMissing});
  }
  // What each connected frontend negotiated, by name, under the table (too long for a column).
  std::string negotiated;
  for (const auto& port : array_member(list, "ports")) {
    const json* features = member(port, "features");
    if (features == nullptr) continue;
    std::vector<std::string> names;
    for (const auto& name : array_member(*features, "negotiated")) {
      if (name.is_string()) names.push_back(name.get<std::string>());
    }
    if (names.empty()) continue;
    negotiated += fmt::format("negotiated by {}: {}\n", or_missing(text(port, "name")), fmt::join(names, " "));
  }
  return table.str() + negotiated;
}

std::string format_stats_table(const json& stats) {
  Table queues({{"port"}, {"queue", true}, {"dir"}, {"state"}, {"worker"}, {"poll"}, {"packets", true},
                {"bytes", true}, {"dropped", true}, {"kicks", true}, {"calls", true}, {"suppressed", true},
                {"polls", true}, {"poll ms", true}, {"poll exits"}, {"yields", true}});
  for (const auto& port : array_member(stats, "ports")) {
    const std::string name = or_missing(text(port, "name"));
    for (const auto& queue : array_member(port, "queues")) {
      queues.add({name, queue_index_cell(queue), or_missing(text(queue, "direction")), state_cell(queue),
                  or_missing(text(queue, "worker")), poll_cell(queue), count_cell(queue, "packets"),
                  count_cell(queue, "bytes"), count_cell(queue, "dropped"), count_cell(queue, "kicks"),
                  count_cell(queue, "calls"), count_cell(queue, "calls_suppressed"), count_cell(queue, "polls"),
                  scaled_cell(queue, "poll_ns", 1e6, 1), exits_cell(queue), count_cell(queue, "weight_yields")});
    }
  }
  Table workers({{"worker"}, {"cpu s", true}, {"items", true}, {"wakeups", true}, {"parks", true}, {"enqueue"},
                 {"queues"}});
  for (const auto& worker : array_member(stats, "workers")) {
    std::vector<std::string> names;
    for (const auto& queue : array_member(worker, "queues"))
      names.push_back(queue.is_string() ? queue.get<std::string>() : queue.dump());
    workers.add({or_missing(text(worker, "name")), scaled_cell(worker, "cpu_ns", 1e9, 3),
                 count_cell(worker, "items_run"), count_cell(worker, "wakeups"), count_cell(worker, "parks"),
                 or_missing(text(worker, "enqueue")), names.empty() ? kMissing : fmt::format("{}", fmt::join(names, ","))});
  }
  return uptime_line(stats) + ports_section(stats) + "\n" + queues.str() + std::string(kDirectionLegend) + "\n" +
         std::string(kExitLegend) + "\n\n" +
         workers.str();
}

std::string format_stats_delta_table(const json& previous, const json& current, double seconds) {
  Table queues({{"port"}, {"queue", true}, {"dir"}, {"state"}, {"worker"}, {"poll"}, {"pps", true},
                {"Mbit/s", true}, {"drops/s", true}, {"kicks/s", true}, {"calls/s", true}, {"polls/s", true},
                {"poll %", true}});
  for (const auto& port : array_member(current, "ports")) {
    const auto name = text(port, "name");
    for (const auto& queue : array_member(port, "queues")) {
      const json* before = find_queue(previous, name, queue);
      queues.add({or_missing(name), queue_index_cell(queue), or_missing(text(queue, "direction")), state_cell(queue),
                  or_missing(text(queue, "worker")), poll_cell(queue),
                  rate_cell(rate(before, queue, "packets", seconds), 1, 0),
                  rate_cell(rate(before, queue, "bytes", seconds), 8e-6, 2),
                  rate_cell(rate(before, queue, "dropped", seconds), 1, 0),
                  rate_cell(rate(before, queue, "kicks", seconds), 1, 0),
                  rate_cell(rate(before, queue, "calls", seconds), 1, 0),
                  rate_cell(rate(before, queue, "polls", seconds), 1, 0),
                  // Share of wall time spent busy polling this queue.
                  rate_cell(rate(before, queue, "poll_ns", seconds), 1e-7, 1)});
    }
  }
  Table workers({{"worker"}, {"cpu %", true}, {"items/s", true}, {"wakeups/s", true}, {"parks/s", true},
                 {"enqueue"}});
  for (const auto& worker : array_member(current, "workers")) {
    const auto name = text(worker, "name");
    const json* before = find_worker(previous, name);
    workers.add({or_missing(name), rate_cell(rate(before, worker, "cpu_ns", seconds), 1e-7, 1),
                 rate_cell(rate(before, worker, "items_run", seconds), 1, 0),
                 rate_cell(rate(before, worker, "wakeups", seconds), 1, 0),
                 rate_cell(rate(before, worker, "parks", seconds), 1, 0), or_missing(text(worker, "enqueue"))});
  }
  return uptime_line(current) + fmt::format("rates over {:.2f} s\n", seconds) + queues.str() + "\n" + workers.str();
}

}  // namespace uvhost::serve
