// serve_config.cpp - the config file of `uvhost serve` and its daemon keys (see
// serve_config.h).
#include "uvhost/serve/serve_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <set>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config_value.h"
#include "uvhost/serve/control_keys.h"
#include "uvhost/serve/metrics_http.h"
#include "uvhost/sync/section_lock.h"

namespace uvhost::serve {

namespace {

// "Work-queue enqueue strategy of every worker: locked_wake, unlock_wake, lockless
// (default)": the strategies from their name table, the daemon's default marked.
std::string enqueue_help() {
  std::string help = "Work-queue enqueue strategy of every worker: ";
  const sync::EnqueueStrategy default_strategy = DaemonOptions{}.enqueue;
  for (sync::EnqueueStrategy strategy : sync::kAllEnqueueStrategies) {
    if (strategy != sync::kAllEnqueueStrategies.front()) help += ", ";
    help += to_string(strategy);
    if (strategy == default_strategy) help += " (default)";
  }
  return help;
}

const std::string kEnqueueHelp = enqueue_help();

const std::string kSwitchLearningLockHelp =
    "Lock the switch's MAC-learning writers serialize on: " + base::choice_list(sync::kSectionLockKindNames) +
    " (default " + std::string(to_string(DaemonOptions{}.switch_learning_lock)) +
    "); delegation runs waiting writers' table updates on the lock holder";

// After kEnqueueHelp, which it points into (one translation unit initializes in order).
const DaemonKey kDaemonKeys[] = {
    {"control", "PATH", "Control socket (mode 0600) for `uvhost ctl`; empty: none"},
    {"pool_workers", "N", "Workers of the shared pool (ports with workers=pool), 1..64 (default 2)"},
    {"enqueue", "STRATEGY", kEnqueueHelp},
    {"switch_tap", "IFNAME",
     "A tap of this name (created, or attached if it exists) joins the ports' switch as an uplink; empty: "
     "none"},
    {"switch_learning_lock", "LOCK", kSwitchLearningLockHelp},
    {"metrics", "ADDR:PORT",
     "Serve Prometheus metrics over HTTP at ADDR:PORT (GET /metrics; e.g. 127.0.0.1:9477, [::1]:9477); empty: "
     "none"},
    {"stats_interval", "SECONDS", "Log each port's counters every SECONDS (0: off, the default)"},
    {"summary_json", "FILE", "On exit, also write each port's counters here as JSON; empty: no file"},
    {"log_level", "LEVEL", "trace, debug, info, warn (or warning), error, critical, off (default: uvhost --log-level)", false},
};

constexpr double kMaxStatsIntervalS = 86400;
constexpr int kMaxJsonDepth = 32;  // the file's shape needs 4 (object, ports, port, value)

bool parse_u32(std::string_view text, uint32_t& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty();
}

bool set_stats_interval(std::string_view value, ServeConfig& config, std::string& error) {
  double seconds = -1;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, seconds);
  // Below a millisecond would round to 0, which means off: refused rather than guessed.
  if (ec != std::errc() || ptr != end || value.empty() || !std::isfinite(seconds) || seconds < 0 ||
      seconds > kMaxStatsIntervalS || (seconds > 0 && seconds < 0.001)) {
    error = fmt::format("stats_interval '{}' is not 0 or a number of seconds in 0.001..{}", value,
                        kMaxStatsIntervalS);
    return false;
  }
  config.daemon.stats_interval = std::chrono::milliseconds(std::llround(seconds * 1000));
  return true;
}

std::string known_keys() {
  std::string keys = "ports";
  for (const DaemonKey& k : kDaemonKeys) keys += fmt::format(", {}", k.key);
  return keys;
}

// The file's text, or nullopt with `error` (without the path: the caller adds it).
std::optional<std::string> read_config_text(const std::string& path, std::string& error) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    error = fmt::format("cannot open config file: {}", std::generic_category().message(errno));
    return std::nullopt;
  }
  if (!S_ISREG(info.st_mode)) {
    error = "not a regular file";
    return std::nullopt;
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    error = "cannot open config file";
    return std::nullopt;
  }
  std::string text;
  text.resize(kMaxConfigBytes + 1);
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (file.bad()) {
    error = "cannot read the config file";
    return std::nullopt;
  }
  text.resize(static_cast<size_t>(file.gcount()));
  if (text.size() > kMaxConfigBytes) {
    error = fmt::format("larger than {} bytes", kMaxConfigBytes);
    return std::nullopt;
  }
  return text;
}

// Parses JSON text; refuses a key repeated within one object (nlohmann would keep the
// last one silently) and nesting deeper than the file's shape can use.
std::optional<nlohmann::json> parse_json_strictly(const std::string& text, std::string& error) {
  std::vector<std::set<std::string>> open_objects;
  std::string problem;
  auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (depth > kMaxJsonDepth && problem.empty())
      problem = fmt::format("nested deeper than {} levels", kMaxJsonDepth);
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == Event::key && !open_objects.empty() && parsed.is_string() &&
        !open_objects.back().insert(parsed.get<std::string>()).second && problem.empty()) {
      problem = fmt::format("key '{}' given twice in one object", parsed.get<std::string>());
    }
    return true;
  };
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(text, check, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." minus the tag.
    std::string what = e.what();
    const size_t tag_end = what.find("] ");
    error = fmt::format("not valid JSON: {}", tag_end == std::string::npos ? what : what.substr(tag_end + 2));
    return std::nullopt;
  }
  if (!problem.empty()) {
    error = problem;
    return std::nullopt;
  }
  return parsed;
}

}  // namespace

std::span<const DaemonKey> daemon_keys() noexcept {
  return kDaemonKeys;
}

std::string flag_name(std::string_view key) {
  std::string flag = "--" + std::string(key);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

bool apply_daemon_key(std::string_view key, std::string_view value, ServeConfig& config, std::string& error) {
  DaemonOptions& daemon = config.daemon;
  if (key == "control") {
    daemon.control_path = std::string(value);
    return true;
  }
  if (key == "pool_workers") {
    uint32_t workers = 0;
    if (!parse_u32(value, workers) || workers < 1 || workers > 64) {
      error = fmt::format("pool_workers '{}' is not a number in 1..64", value);
      return false;
    }
    daemon.pool_workers = workers;
    return true;
  }
  if (key == control::kEnqueue) {
    const auto strategy = base::parse_enum<sync::EnqueueStrategy>(value);
    if (!strategy) {
      error = base::unknown_name(control::kEnqueue, value, control::kEnqueueChoices);
      return false;
    }
    daemon.enqueue = *strategy;
    return true;
  }
  if (key == "switch_learning_lock") {
    const auto kind = base::parse_enum<sync::SectionLockKind>(value);
    if (!kind) {
      error = base::unknown_name(key, value, sync::kSectionLockKindNames);
      return false;
    }
    daemon.switch_learning_lock = *kind;
    return true;
  }
  if (key == "switch_tap") {
    // The kernel's IFNAMSIZ (16) holds 15 characters and the terminating zero.
    if (value.size() > 15 || value.find_first_of("/ \t\n") != std::string_view::npos) {
      error = fmt::format(
          "switch_tap '{}' is not an interface name (at most 15 characters, no '/' or spaces)", value);
      return false;
    }
    daemon.switch_tap = std::string(value);
    return true;
  }
  if (key == "metrics") {
    if (!value.empty() && !parse_metrics_address(value, error)) return false;
    daemon.metrics_address = std::string(value);
    return true;
  }
  if (key == "stats_interval") return set_stats_interval(value, config, error);
  if (key == "summary_json") {
    config.summary_json = std::string(value);
    return true;
  }
  if (key == "log_level") {
    if (!value.empty() &&
        std::find(std::begin(kLogLevels), std::end(kLogLevels), value) == std::end(kLogLevels)) {
      error = fmt::format("log_level '{}' unknown ({})", value, fmt::join(kLogLevels, ", "));
      return false;
    }
    config.log_level = std::string(value);
    return true;
  }
  error = fmt::format("unknown key '{}' ({})", key, known_keys());
  return false;
}

std::optional<ServeConfig> parse_serve_config(const nlohmann::json& file, std::string& error) {
  if (!file.is_object()) {
    error = fmt::format("the config must be a JSON object with the keys {}", known_keys());
    return std::nullopt;
  }
  ServeConfig config;
  for (const auto& item : file.items()) {
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    if (key == "ports") {
      if (!value.is_array()) {
        error = "\"ports\" must be an array of port objects";
        return std::nullopt;
      }
      for (size_t i = 0; i < value.size(); ++i) {
        auto spec = parse_port_json(value[i], error);
        if (!spec) {
          error = fmt::format("ports[{}]: {}", i, error);
          return std::nullopt;
        }
        config.ports.push_back(std::move(*spec));
      }
      continue;
    }
    const bool known = std::any_of(std::begin(kDaemonKeys), std::end(kDaemonKeys),
                                   [&key](const DaemonKey& k) { return k.key == key; });
    if (!known) {
      error = fmt::format("unknown key '{}' ({})", key, known_keys());
      return std::nullopt;
    }
    const bool number = key == "pool_workers" || key == "stats_interval";
    const std::optional<std::string> text =
        config_value_text(key, value, number ? ConfigType::kNumber : ConfigType::kString, error);
    if (!text) return std::nullopt;
    if (!apply_daemon_key(key, *text, config, error)) return std::nullopt;
  }
  return config;
}

std::optional<ServeConfig> load_serve_config(const std::string& path, std::string& error) {
  std::optional<ServeConfig> config;
  if (auto text = read_config_text(path, error)) {
    if (auto json = parse_json_strictly(*text, error)) config = parse_serve_config(*json, error);
  }
  if (!config) error = fmt::format("{}: {}", path, error);
  return config;
}

nlohmann::json to_json(const ServeConfig& config) {
  const DaemonOptions& daemon = config.daemon;
  nlohmann::json ports = nlohmann::json::array();
  for (const PortSpec& spec : config.ports) ports.push_back(port_to_json(spec));
  return {
      {"control", daemon.control_path},
      {"pool_workers", daemon.pool_workers},
      {"enqueue", sync::to_string(daemon.enqueue)},
      {"switch_tap", daemon.switch_tap},
      {"switch_learning_lock", to_string(daemon.switch_learning_lock)},
      {"metrics", daemon.metrics_address},
      {"stats_interval", static_cast<double>(daemon.stats_interval.count()) / 1000.0},
      {"summary_json", config.summary_json},
      {"log_level", config.log_level},
      {"ports", std::move(ports)},
  };
}

}  // namespace uvhost::serve
