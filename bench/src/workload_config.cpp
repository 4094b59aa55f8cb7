// workload_config.cpp - Workload names and Config parsing (see workload.h).
//
// Port keys are checked by serve's own parser (parse_port_spec) on a spec the bench
// would build anyway, so `uvhost bench` and `uvhost serve` can never disagree on what a
// key accepts. Keys the bench sets itself per run (the socket, the backend per
// workload, queues, the name, the source's size and rate) are refused up front.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>
#include <string>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "uvhost/bench/stats.h"
#include "uvhost/bench/workload.h"
#include "uvhost/serve/port_spec.h"
#include "uvhost/serve/serve_config.h"
#include "uvhost/sync/work_queue.h"

namespace uvhost::bench {

namespace {

template <typename T>
bool parse_number(std::string_view text, T& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty();
}

// The daemon keys (serve_config.h) a configuration may set; the others (control socket,
// summary, log) belong to the bench's own runs.
bool bench_daemon_key(std::string_view key) { return key == "enqueue" || key == "pool_workers"; }

// Port keys the bench decides per run: refusing them keeps runs comparable.
bool bench_owned_port_key(std::string_view key) {
  static const std::set<std::string_view> owned{"sock", "path", "client", "queues", "name", "size", "rate", "tap"};
  return owned.count(key) != 0;
}

}  // namespace

std::optional<Config> parse_config(std::string_view text, std::string& error) {
  Config config;
  std::set<std::string, std::less<>> seen;
  std::optional<BackendKind> started_backend;  // backend=NAME
  bool have_pid = false;
  if (text.empty()) return config;  // the defaults: backend=uvhost, nothing changed
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) {
      error = "empty item in config (two commas, or a trailing comma)";
      return std::nullopt;
    }
    const size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? std::string_view{} : item.substr(eq + 1);
    if (key.empty()) {
      error = fmt::format("item '{}' has no key", item);
      return std::nullopt;
    }
    if (!seen.insert(std::string(key)).second) {
      error = fmt::format("key '{}' given twice", key);
      return std::nullopt;
    }
    auto need_value = [&]() {
      if (eq == std::string_view::npos || value.empty()) {
        error = fmt::format("key '{}' needs a value ({}=...)", key, key);
        return false;
      }
      return true;
    };
    if (key == "backend") {
      if (!need_value()) return std::nullopt;
      started_backend = base::parse(kStartedBackendNames, value);
      if (!started_backend) {
        error = fmt::format("backend '{}' unknown ({}; a running backend: socket=PATH)", value,
                            base::join_names(kStartedBackendNames, ", "));
        return std::nullopt;
      }
    } else if (key == "socket") {
      if (!need_value()) return std::nullopt;
      config.socket = value;
    } else if (key == "pid") {
      if (!need_value()) return std::nullopt;
      if (!parse_number(value, config.backend_pid) || config.backend_pid <= 0) {
        error = fmt::format("pid '{}' is not a process id", value);
        return std::nullopt;
      }
      have_pid = true;
    } else if (key == "uvhost") {
      if (!need_value()) return std::nullopt;
      config.uvhost_binary = value;
      std::error_code ec;
      if (!std::filesystem::is_regular_file(config.uvhost_binary, ec) ||
          ::access(config.uvhost_binary.c_str(), X_OK) != 0) {
        error = fmt::format("uvhost '{}' is not an executable file", value);
        return std::nullopt;
      }
    } else if (key == "label") {
      if (!need_value()) return std::nullopt;
      config.label = value;
    } else if (key == "spin_ns") {
      if (!need_value()) return std::nullopt;
      if (!parse_number(value, config.frontend_spin_ns) || config.frontend_spin_ns > 1'000'000'000) {
        error = fmt::format("spin_ns '{}' is not a number of nanoseconds (0..1e9)", value);
        return std::nullopt;
      }
    } else if (key == "in_order") {
      if (!need_value()) return std::nullopt;
      if (value != "0" && value != "1") {
        error = fmt::format("in_order '{}' is not 0 or 1 (whether the frontend asks for VIRTIO_F_IN_ORDER)", value);
        return std::nullopt;
      }
      config.frontend_in_order = value == "1";
    } else if (key == "ring") {
      if (!need_value()) return std::nullopt;
      const std::optional<RingFormat> ring = base::parse_enum<RingFormat>(value);
      if (!ring) {
        error = fmt::format("ring '{}' is not split or packed (the virtqueue format the frontend asks for)", value);
        return std::nullopt;
      }
      config.frontend_ring = *ring;
    } else if (bench_daemon_key(key)) {
      // Checked by serve's own parser, passed as serve's flag for the key with the value
      // in its canonical spelling (enqueue=b is unlock_wake).
      serve::ServeConfig scratch;
      if (!need_value() || !serve::apply_daemon_key(key, value, scratch, error)) return std::nullopt;
      const nlohmann::json canonical = serve::to_json(scratch)[std::string(key)];
      const std::string canonical_text = canonical.is_string() ? canonical.get<std::string>() : canonical.dump();
      config.serve_args.insert(config.serve_args.end(), {serve::flag_name(key), canonical_text});
    } else if (bench_owned_port_key(key)) {
      error = fmt::format("port key '{}' is set by the bench itself (socket, backend per workload, --queues, "
                          "name, source size and rate)", key);
      return std::nullopt;
    } else {
      config.port_keys.emplace_back(std::string(key), eq == std::string_view::npos ? std::string{} : std::string(value));
    }
    if (comma >= text.size()) break;
  }

  if (!config.socket.empty()) {
    if (started_backend) {
      error = "socket= names a running backend; it cannot be combined with backend=";
      return std::nullopt;
    }
    config.backend = BackendKind::kSocket;
  } else if (have_pid) {
    error = "pid= only goes with socket=PATH (a backend that is already running)";
    return std::nullopt;
  } else if (started_backend) {
    config.backend = *started_backend;
  }

  if (config.backend != BackendKind::kUvhost &&
      (!config.port_keys.empty() || !config.serve_args.empty() || !config.uvhost_binary.empty())) {
    error = fmt::format("port keys, daemon flags (enqueue, pool_workers) and uvhost= apply to backend=uvhost only");
    return std::nullopt;
  }
  if (!config.port_keys.empty()) {
    // The spec the bench builds (backend=loopback: the keys every backend accepts).
    std::string spec = "sock=/nonexistent/bench.sock,backend=loopback";
    for (const auto& [key, value] : config.port_keys) spec += value.empty() ? fmt::format(",{}", key) : fmt::format(",{}={}", key, value);
    std::string spec_error;
    if (!serve::parse_port_spec(spec, spec_error)) {
      error = fmt::format("port keys: {}", spec_error);
      return std::nullopt;
    }
  }
  return config;
}

std::string describe(const Config& config) {
  std::vector<std::string> items;
  switch (config.backend) {
    case BackendKind::kUvhost: break;
    case BackendKind::kTestpmd:
      items.push_back(fmt::format("backend={}", base::name_of(kStartedBackendNames, config.backend)));
      break;
    case BackendKind::kSocket:
      items.push_back("socket=" + config.socket);
      if (config.backend_pid != 0) items.push_back(fmt::format("pid={}", config.backend_pid));
      break;
  }
  for (const auto& [key, value] : config.port_keys) items.push_back(value.empty() ? key : key + "=" + value);
  for (size_t i = 0; i + 1 < config.serve_args.size(); i += 2) {
    std::string key = config.serve_args[i].substr(2);  // "--pool-workers" -> "pool_workers"
    std::replace(key.begin(), key.end(), '-', '_');
    items.push_back(key + "=" + config.serve_args[i + 1]);
  }
  if (config.frontend_spin_ns != 0) items.push_back(fmt::format("spin_ns={}", config.frontend_spin_ns));
  if (!config.frontend_in_order) items.push_back("in_order=0");
  if (config.frontend_ring != RingFormat::kSplit) items.push_back(fmt::format("ring={}", to_string(config.frontend_ring)));
  if (!config.uvhost_binary.empty()) items.push_back("uvhost=" + config.uvhost_binary);
  if (items.empty()) return "backend=uvhost";
  return fmt::format("{}", fmt::join(items, ","));
}

std::string describe(const Point& point) {
  std::string text = fmt::format("{} {}B x{}", to_string(point.workload), point.size, point.sessions);
  if (point.rate != 0) text += fmt::format(" @{}/s {}", si(static_cast<double>(point.rate)), to_string(point.arrivals));
  return text;
}

}  // namespace uvhost::bench
