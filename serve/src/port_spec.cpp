// port_spec.cpp - parsing port descriptions (see port_spec.h).
#include "uvhost/serve/port_spec.h"

#include <net/if.h>
#include <sys/un.h>

#include <charconv>
#include <fstream>
#include <set>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config_value.h"
#include "uvhost/serve/control_keys.h"
#include "uvhost/vhost_user/backend_device.h"

namespace uvhost::serve {

namespace {

using vhost_user::kMaxQueuePairs;  // what BackendDevice accepts

template <typename T>
bool parse_number(std::string_view text, T& out, int base = 10) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out, base);
  return ec == std::errc() && ptr == end && !text.empty();
}

bool set_backend(std::string_view value, PortSpec& spec, std::string& error) {
  auto kind = base::parse_enum<BackendKind>(value);
  if (!kind) {
    error = base::unknown_name("backend", value, kBackendKindNames);
    return false;
  }
  spec.backend = *kind;
  return true;
}

template <typename T>
bool set_bounded(std::string_view key, std::string_view value, T low, T high, T& out, std::string& error) {
  T number{};
  if (!parse_number(value, number) || number < low || number > high) {
    error = fmt::format("{} '{}' is not a number in {}..{}", key, value, low, high);
    return false;
  }
  out = number;
  return true;
}

// A key whose value is one of E's names (its name table); the error lists them.
template <typename E>
bool set_named(std::string_view key, std::string_view value, E& out, std::string& error) {
  const std::optional<E> parsed = base::parse_enum<E>(value);
  if (!parsed) {
    error = base::unknown_name(key, value, enum_names(E{}));
    return false;
  }
  out = *parsed;
  return true;
}

// The value of cpus= that follows the frontend's CPUs instead of naming CPUs.
constexpr std::string_view kFrontendCpus = "frontend";

bool set_cpus(std::string_view value, PortSpec& spec, std::string& error) {
  if (value == kFrontendCpus) {
    spec.placement.cpus = {};
    spec.placement.follow_frontend = true;
    return true;
  }
  auto cpus = datapath::parse_cpu_list(value, error);
  if (!cpus) {
    error += fmt::format("; cpus= also takes {}", kFrontendCpus);
    return false;
  }
  spec.placement.cpus = std::move(*cpus);
  spec.placement.follow_frontend = false;
  return true;
}

bool set_queues(std::string_view value, PortSpec& spec, std::string& error) {
  uint32_t pairs = 0;
  if (!parse_number(value, pairs) || pairs == 0 || pairs > kMaxQueuePairs) {
    error = fmt::format("queues '{}' is not a number of queue pairs in 1..{}", value, kMaxQueuePairs);
    return false;
  }
  spec.queue_pairs = pairs;
  return true;
}

bool set_mode(std::string_view value, PortSpec& spec, std::string& error) {
  unsigned mode = 0;
  if (!parse_number(value, mode, 8) || mode > 0777) {
    error = fmt::format("mode '{}' is not an octal permission like 0600", value);
    return false;
  }
  spec.socket_mode = static_cast<mode_t>(mode);
  return true;
}

bool set_memory(std::string_view value, PortSpec& spec, std::string& error) {
  auto policy = base::parse_enum<sync::GuardPolicy>(value);
  if (!policy) {
    error = base::unknown_name("memory guard", value, control::kMemoryChoices);
    return false;
  }
  spec.memory_policy = *policy;
  return true;
}

bool set_client(std::string_view value, PortSpec& spec, std::string& error) {
  if (value == "1" || value == "true" || value == "yes") {
    spec.client = true;
  } else if (value == "0" || value == "false" || value == "no") {
    spec.client = false;
  } else {
    error = fmt::format("client '{}' is not 0 or 1", value);
    return false;
  }
  return true;
}

// "path" is another name for "sock": giving both is giving the socket twice.
std::string_view canonical_key(std::string_view key) { return key == "path" ? std::string_view("sock") : key; }

// One key=value item; the value is nullopt for a bare key ("client").
bool apply(std::string_view key, std::optional<std::string_view> value, PortSpec& spec, std::string& error) {
  auto need_value = [&]() {
    if (value && !value->empty()) return true;
    error = fmt::format("'{}' needs a value ({}=...)", key, key);
    return false;
  };
  if (key == "sock" || key == "path") {
    if (!need_value()) return false;
    spec.socket_path = std::string(*value);
    return true;
  }
  if (key == "client") return set_client(value.value_or("1"), spec, error);
  if (key == "queues") return need_value() && set_queues(*value, spec, error);
  if (key == "backend") return need_value() && set_backend(*value, spec, error);
  if (key == "mode") return need_value() && set_mode(*value, spec, error);
  if (key == control::kMemory) return need_value() && set_memory(*value, spec, error);
  if (key == "name") {
    if (!need_value()) return false;
    spec.name = std::string(*value);
    return true;
  }
  if (key == "tap") {
    if (!need_value()) return false;
    spec.tap_name = std::string(*value);
    return true;
  }
  if (key == "mtu") {
    uint32_t mtu = 0;
    if (!need_value() || !set_bounded<uint32_t>(key, *value, 68, 65535, mtu, error)) return false;
    spec.mtu = mtu;
    return true;
  }
  if (key == "rate") return need_value() && set_bounded<uint64_t>(key, *value, 0, 1'000'000'000'000, spec.source_rate_pps, error);
  if (key == "size") return need_value() && set_bounded<uint32_t>(key, *value, 60, 65535, spec.source_frame_size, error);
  if (key == "workers") return need_value() && set_named(key, *value, spec.workers, error);
  if (key == "cpus") return need_value() && set_cpus(*value, spec, error);
  if (key == "sched") return need_value() && set_named(key, *value, spec.placement.scheduler, error);
  if (key == control::kPoll) return need_value() && set_named(key, *value, spec.poll.mode, error);
  if (key == control::kBusyUs) {
    return need_value() && set_bounded<uint32_t>(key, *value, 0, control::kMaxBusyUs, spec.poll.busy_us, error);
  }
  if (key == control::kExit) return need_value() && set_named(key, *value, spec.poll.exit, error);
  if (key == "burst") return need_value() && set_bounded<uint32_t>(key, *value, 1, 1024, spec.burst, error);
  if (key == "weight") return need_value() && set_bounded<uint32_t>(key, *value, 1, 65536, spec.weight_packets, error);
  if (key == "weight_bytes") return need_value() && set_bounded<uint64_t>(key, *value, 1, uint64_t{1} << 30, spec.weight_bytes, error);
  if (key == "tx_delivery") return need_value() && set_named(key, *value, spec.tx_delivery, error);
  error = fmt::format(
      "unknown key '{}' (sock, client, queues, backend, mode, name, memory, tap, mtu, rate, size, workers, "
      "cpus, sched, poll, busy_us, exit, burst, weight, weight_bytes, tx_delivery)",
      key);
  return false;
}

bool check_complete(const PortSpec& spec, const std::set<std::string, std::less<>>& seen, std::string& error) {
  if (spec.socket_path.empty()) {
    error = "no socket path (sock=PATH)";
    return false;
  }
  // Checked here too (the port checks again when it binds) so that a config check
  // (`uvhost serve --check-config`) finds what the start would refuse.
  if (spec.socket_path.size() >= sizeof(sockaddr_un::sun_path)) {
    error = fmt::format("socket path longer than {} bytes", sizeof(sockaddr_un::sun_path) - 1);
    return false;
  }
  if (spec.tap_name.size() >= IFNAMSIZ) {
    error = fmt::format("tap '{}' is longer than {} characters", spec.tap_name, IFNAMSIZ - 1);
    return false;
  }
  for (const std::string* text : {&spec.socket_path, &spec.name, &spec.tap_name}) {
    if (text->find('\0') != std::string::npos) {
      error = "a NUL character in sock=, name= or tap=";
      return false;
    }
  }
  if (seen.contains("tap") && spec.backend != BackendKind::kTap) {
    error = "tap= is for backend=tap";
    return false;
  }
  if (seen.contains("mtu") && spec.backend != BackendKind::kTap && spec.backend != BackendKind::kSwitch) {
    error = "mtu= is for backend=tap and backend=switch";
    return false;
  }
  if ((seen.contains("cpus") || seen.contains("sched")) && spec.workers == datapath::WorkerMapping::kPool) {
    error = "cpus= and sched= are for workers=device and workers=pair (the pool's workers are shared)";
    return false;
  }
  if ((seen.contains("rate") || seen.contains("size")) && spec.backend != BackendKind::kSource) {
    error = "rate= and size= are for backend=source";
    return false;
  }
  return true;
}

// Where the item starting at `start` ends: the next comma, except inside a list
// value, one that opens with '[' right after its '=' (cpus=[0,2-3], as DPDK's device
// arguments write lists), up to its ']'. A '[' elsewhere (in a path) is a character.
size_t next_item_end(std::string_view text, size_t start) {
  bool in_list = false;
  for (size_t i = start; i < text.size(); ++i) {
    if (in_list) {
      in_list = text[i] != ']';
    } else if (text[i] == '[' && i > start && text[i - 1] == '=') {
      in_list = true;
    } else if (text[i] == ',') {
      return i;
    }
  }
  return text.size();
}

}  // namespace

std::optional<PortSpec> parse_port_spec(std::string_view text, std::string& error) {
  PortSpec spec;
  std::set<std::string, std::less<>> seen;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = next_item_end(text, start);
    const std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) {
      error = fmt::format("empty item in port '{}'", text);
      return std::nullopt;
    }
    const size_t equals = item.find('=');
    const std::string_view key = item.substr(0, equals);
    std::optional<std::string_view> value;
    if (equals != std::string_view::npos) value = item.substr(equals + 1);
    if (!seen.emplace(canonical_key(key)).second) {
      error = fmt::format("'{}' given twice in port '{}'", canonical_key(key), text);
      return std::nullopt;
    }
    if (!apply(key, value, spec, error)) {
      error = fmt::format("port '{}': {}", text, error);
      return std::nullopt;
    }
  }
  if (!check_complete(spec, seen, error)) {
    error = fmt::format("port '{}': {}", text, error);
    return std::nullopt;
  }
  return spec;
}

namespace {

// A port key's one JSON type in the config file (unknown keys are refused by apply()).
ConfigType json_type_of(std::string_view key) {
  constexpr std::string_view kNumbers[] = {"queues",        "mtu",   "rate",   "size",
                                           control::kBusyUs, "burst", "weight", "weight_bytes"};
  if (key == "client") return ConfigType::kBoolean;
  for (std::string_view number : kNumbers) {
    if (key == number) return ConfigType::kNumber;
  }
  return ConfigType::kString;
}

}  // namespace

std::optional<PortSpec> parse_port_json(const nlohmann::json& entry, std::string& error) {
  if (!entry.is_object()) {
    error = "not an object";
    return std::nullopt;
  }
  PortSpec spec;
  std::set<std::string, std::less<>> seen;  // JSON keys are unique, but "sock" and "path" are one
  for (const auto& item : entry.items()) {
    const std::string& key = item.key();
    if (!seen.emplace(std::string(canonical_key(key))).second) {
      error = fmt::format("'{}' given twice", canonical_key(key));
      return std::nullopt;
    }
    // "mode" as a JSON number would be read in decimal: ask for a string.
    if (key == "mode" && !item.value().is_string()) {
      error = "mode must be a string of octal digits like \"0660\"";
      return std::nullopt;
    }
    const std::optional<std::string> text = config_value_text(key, item.value(), json_type_of(key), error);
    if (!text) return std::nullopt;
    if (!apply(key, *text, spec, error)) return std::nullopt;
  }
  if (!check_complete(spec, seen, error)) return std::nullopt;
  return spec;
}

nlohmann::json port_to_json(const PortSpec& spec) {
  nlohmann::json port = {
      {"name", spec.name},
      {"sock", spec.socket_path},
      {"client", spec.client},
      {"queues", spec.queue_pairs},
      {"backend", to_string(spec.backend)},
      {control::kMemory, sync::to_string(spec.memory_policy)},
      {"workers", datapath::to_string(spec.workers)},
      {control::kPoll, datapath::to_string(spec.poll.mode)},
      {control::kBusyUs, spec.poll.busy_us},
      {control::kExit, datapath::to_string(spec.poll.exit)},
      {"burst", spec.burst},
      {"weight", spec.weight_packets},
      {"weight_bytes", spec.weight_bytes},
      {"tx_delivery", datapath::to_string(spec.tx_delivery)},
  };
  if (spec.name.empty()) port.erase("name");  // unnamed: finish_ports() names it
  if (spec.placement.follow_frontend) {
    port["cpus"] = kFrontendCpus;
  } else if (!spec.placement.cpus.empty()) {
    port["cpus"] = datapath::to_string(spec.placement.cpus);
  }
  if (spec.placement.scheduler != datapath::WorkerScheduler::kOther) {
    port["sched"] = datapath::to_string(spec.placement.scheduler);
  }
  if (!spec.client) port["mode"] = fmt::format("{:04o}", spec.socket_mode);
  if (spec.backend == BackendKind::kTap && !spec.tap_name.empty()) port["tap"] = spec.tap_name;
  const bool takes_mtu = spec.backend == BackendKind::kTap || spec.backend == BackendKind::kSwitch;
  if (takes_mtu && spec.mtu) port["mtu"] = *spec.mtu;
  if (spec.backend == BackendKind::kSource) {
    port["rate"] = spec.source_rate_pps;
    port["size"] = spec.source_frame_size;
  }
  return port;
}

bool finish_ports(std::vector<PortSpec>& ports, std::string& error) {
  std::set<std::string> names;
  std::set<std::string> paths;
  for (size_t i = 0; i < ports.size(); ++i) {
    PortSpec& spec = ports[i];
    if (spec.name.empty()) spec.name = fmt::format("port{}", i);
    if (!names.insert(spec.name).second) {
      error = fmt::format("two ports are named '{}'", spec.name);
      return false;
    }
    if (!paths.insert(spec.socket_path).second) {
      error = fmt::format("two ports use the socket {}", spec.socket_path);
      return false;
    }
  }
  return true;
}

namespace {

// " on CPUs 1, sched batch" (only what is not the default).
std::string placement_text(const datapath::WorkerPlacement& placement) {
  std::string text;
  if (placement.follow_frontend) text += " on the frontend's CPUs";
  if (!placement.cpus.empty()) text += fmt::format(" on CPUs {}", datapath::to_string(placement.cpus));
  if (placement.scheduler != datapath::WorkerScheduler::kOther) {
    text += fmt::format(", sched {}", datapath::to_string(placement.scheduler));
  }
  return text;
}

}  // namespace

std::string describe(const PortSpec& spec) {
  return fmt::format("{} ({} {}, {} queue pair{}, {}{}, memory guard {}, workers {}{}, poll {}, burst {}, weight {}{})",
                     spec.name, spec.client ? "client of" : "listening on",
                     spec.socket_fd < 0 ? spec.socket_path : fmt::format("fd {} {}", spec.socket_fd, spec.socket_path),
                     spec.queue_pairs,
                     spec.queue_pairs == 1 ? "" : "s", to_string(spec.backend),
                     spec.mtu ? fmt::format(" mtu {}", *spec.mtu) : std::string(), sync::to_string(spec.memory_policy),
                     datapath::to_string(spec.workers),
                     placement_text(spec.placement),
                     datapath::describe(spec.poll), spec.burst,
                     spec.weight_packets,
                     spec.tx_delivery == datapath::TxDelivery::kInPlace ? "" : ", tx delivery at most once");
}

}  // namespace uvhost::serve
