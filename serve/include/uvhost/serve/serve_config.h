// serve_config.h - the whole configuration of `uvhost serve`: the daemon's settings and
// its ports, from a JSON config file, from the command line, or both.
//
// Contract
// --------
//  - One vocabulary. Every daemon setting is a key of the config file, listed once in
//    daemon_keys(); its command-line flag is the key with '-' for '_' and "--" in front
//    (`pool_workers` is `--pool-workers`), and both go through apply_daemon_key(), so
//    they take the same values and refuse bad ones with the same message. The ports are
//    the file's "ports" array (the keys of port_spec.h) and the `--port` flags.
//  - The file is one JSON object (comments allowed: `//` and `/* */`):
//      {"control": "/run/uvhost/ctl.sock", "pool_workers": 2, "enqueue": "lockless",
//       "switch_tap": "", "stats_interval": 0, "summary_json": "", "log_level": "info",
//       "ports": [{"sock": "/run/uvhost/vm0.sock", "backend": "tap", ...}, ...]}
//    Every key is optional ("ports" too: the command line may give them all). Unknown
//    keys, a key given twice (at any depth), values of the wrong type or out of range:
//    nullopt, `error` naming the file, the place ("ports[1]") and the key.
//  - Precedence (the CLI's job, cli/serve.cpp): the file first, then each flag given
//    replaces its key; `--port` adds ports after the file's.
//  - to_json() writes a configuration as a file that parse_serve_config() reads back
//    into the same configuration (every key, defaults included: what the daemon runs
//    with, for `uvhost serve --print-config`).
//  - Hostile files: larger than kMaxConfigBytes, not a regular file, not UTF-8 JSON,
//    nested too deep - all refused with a message, never a crash.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "uvhost/serve/daemon.h"
#include "uvhost/serve/port_spec.h"

namespace uvhost::serve {

struct ServeConfig {
  DaemonOptions daemon;
  std::vector<PortSpec> ports;
  std::string summary_json;  // non-empty: on exit, each port's counters as JSON here
  std::string log_level;     // empty: the command line's --log-level (default info)
};

// The log levels, by name (spdlog's), for log_level and `uvhost --log-level`.
// "warning" is how the log prints warn; "critical" spdlog's level above error.
inline constexpr std::string_view kLogLevels[] = {"trace", "debug", "info",     "warn",
                                                  "warning", "error", "critical", "off"};

// One daemon setting.
struct DaemonKey {
  std::string_view key;         // in the config file
  std::string_view value_name;  // for help: PATH, N, ...
  std::string_view help;
  // Also a flag of `uvhost serve` (log_level is not: it is `uvhost --log-level`, the
  // option every subcommand shares).
  bool serve_flag = true;
};

std::span<const DaemonKey> daemon_keys() noexcept;
// "pool_workers" -> "--pool-workers".
std::string flag_name(std::string_view key);

// Sets one daemon key from its text; false with `error` ("pool_workers '0' is not a
// number in 1..64") for an unknown key or a bad value.
bool apply_daemon_key(std::string_view key, std::string_view value, ServeConfig& config, std::string& error);

inline constexpr size_t kMaxConfigBytes = 1 << 20;

std::optional<ServeConfig> parse_serve_config(const nlohmann::json& file, std::string& error);
// Reads, parses and checks a config file (no sockets are touched).
std::optional<ServeConfig> load_serve_config(const std::string& path, std::string& error);
nlohmann::json to_json(const ServeConfig& config);

}  // namespace uvhost::serve
