// live_switch.cpp - which differences between two configs a running backend can take
// (see live_switch.h).
#include "uvhost/bench/live_switch.h"

#include <map>

#include <fmt/format.h>

#include "uvhost/bench/backend_process.h"
#include "uvhost/datapath/poll_mode.h"
#include "uvhost/serve/control_keys.h"
#include "uvhost/serve/daemon.h"
#include "uvhost/serve/port_spec.h"
#include "uvhost/sync/read_mostly.h"
#include "uvhost/sync/work_queue.h"

namespace uvhost::bench {
namespace {

// The daemon flag whose value switches live (as `set` key control::kEnqueue).
constexpr std::string_view kEnqueueFlag = "--enqueue";

// Port keys that need a restart, as written.
std::map<std::string, std::string> restart_port_keys(const Config& c) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : c.port_keys) {
    if (!serve::control::is_live_port_key(key)) out.emplace(key, value);
  }
  return out;
}

// Daemon flags (pairs in serve_args) other than --enqueue.
std::map<std::string, std::string> restart_daemon_flags(const Config& c) {
  std::map<std::string, std::string> out;
  for (size_t i = 0; i + 1 < c.serve_args.size(); i += 2) {
    if (c.serve_args[i] != kEnqueueFlag) out.emplace(c.serve_args[i], c.serve_args[i + 1]);
  }
  return out;
}

struct LiveValues {
  datapath::PollSettings poll;
  sync::GuardPolicy memory = sync::GuardPolicy::kRcu;
  sync::EnqueueStrategy enqueue = serve::DaemonOptions{}.enqueue;
};

std::optional<LiveValues> live_values(const Config& c, std::string& why) {
  // The same spec parse_config validated: unset keys come out as serve's defaults.
  std::string spec = "sock=/nonexistent/bench.sock,backend=loopback";
  for (const auto& [key, value] : c.port_keys) {
    if (serve::control::is_live_port_key(key)) spec += fmt::format(",{}={}", key, value);
  }
  std::string error;
  const std::optional<serve::PortSpec> port = serve::parse_port_spec(spec, error);
  if (!port) {
    why = fmt::format("port keys: {}", error);
    return std::nullopt;
  }
  LiveValues v;
  v.poll = port->poll;
  v.memory = port->memory_policy;
  for (size_t i = 0; i + 1 < c.serve_args.size(); i += 2) {
    if (c.serve_args[i] != kEnqueueFlag) continue;
    const auto strategy = base::parse_enum<sync::EnqueueStrategy>(c.serve_args[i + 1]);
    if (!strategy) {
      why = base::unknown_name(serve::control::kEnqueue, c.serve_args[i + 1], serve::control::kEnqueueChoices);
      return std::nullopt;
    }
    v.enqueue = *strategy;
  }
  return v;
}

}  // namespace

std::optional<LiveSwitch> live_switch(const Config& a, const Config& b, std::string& why) {
  if (a.backend != b.backend || a.socket != b.socket || a.backend_pid != b.backend_pid) {
    why = "A and B use different backends (each side needs its own process)";
    return std::nullopt;
  }
  if (a.uvhost_binary != b.uvhost_binary) {
    why = "A and B run different uvhost binaries (each side needs its own process)";
    return std::nullopt;
  }
  if (restart_port_keys(a) != restart_port_keys(b)) {
    why = "A and B differ in a port key that is fixed when the port is created (only poll, busy_us, exit and "
          "memory switch live)";
    return std::nullopt;
  }
  if (a.frontend_in_order != b.frontend_in_order || a.frontend_ring != b.frontend_ring) {
    why = "A and B differ in the frontend's in_order or ring, negotiated when it connects (each side needs its own "
          "connection)";
    return std::nullopt;
  }
  if (restart_daemon_flags(a) != restart_daemon_flags(b)) {
    why = "A and B differ in a daemon flag that is fixed at start (only enqueue switches live)";
    return std::nullopt;
  }
  const std::optional<LiveValues> va = live_values(a, why);
  if (!va) return std::nullopt;
  const std::optional<LiveValues> vb = live_values(b, why);
  if (!vb) return std::nullopt;

  LiveSwitch sw;
  nlohmann::json port_a{{serve::control::kCmd, "set"}, {serve::control::kPort, kBenchPortName}};
  nlohmann::json port_b = port_a;
  auto differs = [&](std::string_view key, const auto& value_a, const auto& value_b) {
    if (value_a == value_b) return;
    port_a[key] = value_a;
    port_b[key] = value_b;
    sw.keys.emplace_back(key);
  };
  differs(serve::control::kPoll, std::string(to_string(va->poll.mode)), std::string(to_string(vb->poll.mode)));
  differs(serve::control::kBusyUs, va->poll.busy_us, vb->poll.busy_us);
  differs(serve::control::kExit, std::string(to_string(va->poll.exit)), std::string(to_string(vb->poll.exit)));
  differs(serve::control::kMemory, std::string(sync::to_string(va->memory)), std::string(sync::to_string(vb->memory)));
  if (port_a.size() > 2) {
    sw.to_a.push_back(std::move(port_a));
    sw.to_b.push_back(std::move(port_b));
  }
  if (va->enqueue != vb->enqueue) {
    sw.to_a.push_back({{serve::control::kCmd, "set"}, {serve::control::kEnqueue, sync::to_string(va->enqueue)}});
    sw.to_b.push_back({{serve::control::kCmd, "set"}, {serve::control::kEnqueue, sync::to_string(vb->enqueue)}});
    sw.keys.emplace_back(serve::control::kEnqueue);
  }
  if (!sw.to_a.empty() && a.backend != BackendKind::kUvhost) {
    why = "only a uvhost backend started for the run takes control requests";
    return std::nullopt;
  }
  if (a.frontend_spin_ns != b.frontend_spin_ns) sw.keys.emplace_back("spin_ns");
  return sw;
}

}  // namespace uvhost::bench
