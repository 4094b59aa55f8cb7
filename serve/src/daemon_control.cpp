// daemon_control.cpp - the daemon's answers to control requests (the protocol is in
// control_server.h): list, stats, set.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "uvhost/serve/control_keys.h"
#include "uvhost/serve/daemon.h"
#include "uvhost/serve/direction.h"
#include "uvhost/serve/process_stats.h"
#include "uvhost/vhost_user/features.h"

namespace uvhost::serve {

namespace {

nlohmann::json error_reply(std::string text) { return {{"ok", false}, {"error", std::move(text)}}; }

// A JSON integer in [0, limit): -1 otherwise. (Clients may send 3 or 3u alike.)
int64_t index_below(const nlohmann::json& value, int64_t limit) {
  if (!value.is_number_integer()) return -1;
  const int64_t number = value.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(value.get<uint64_t>(), INT64_MAX))
                                                    : value.get<int64_t>();
  return number >= 0 && number < limit ? number : -1;
}

nlohmann::json queue_json(const datapath::QueueSnapshot& q) {
  nlohmann::json exits = nlohmann::json::object();
  for (size_t i = 0; i < datapath::kPollExitCount; ++i) {
    exits[std::string(datapath::to_string(static_cast<datapath::PollExit>(i)))] = q.exits[i];
  }
  nlohmann::json out = {
      {"index", q.index},
      {"direction", std::string(to_string(direction_of(q.is_tx)))},
      {"pair", q.pair},
      {"worker", q.worker},
      {"started", q.started},
      {"enabled", q.enabled},
      {"broken", q.broken},
      {"no_kick_fd", q.no_kick_fd},
      {"poll",
       {{"mode", std::string(datapath::to_string(q.poll.mode))},
        {"busy_us", q.poll.busy_us},
        {"exit", std::string(datapath::to_string(q.poll.exit))}}},
      {"packets", q.packets},
      {"bytes", q.bytes},
      {"dropped", q.dropped},
      {"kicks", q.kicks},
      {"calls", q.calls},
      {"calls_suppressed", q.calls_suppressed},
      {"polls", q.polls},
      {"poll_ns", q.poll_ns},
      {"poll_exits", exits},
      {"weight_yields", q.weight_yields},
      {"handler_runs", q.handler_runs},
  };
  if (!q.is_tx) {
    out["buffer_waits"] = q.rx_waits;  // waits for the guest to post receive buffers
    out["inject_dropped"] = q.inject_dropped;
    out["inject_stopped"] = q.inject_stopped;
  }
  return out;
}

// The port's features by name: what it offers, what the current frontend acked (empty
// between connections) and the guest's MTU from NET_SET_MTU (0: none).
nlohmann::json features_json(const Port& port) {
  return {{"offered", vhost_user::feature_names(port.offered_features())},
          {"negotiated", vhost_user::feature_names(port.negotiated_features())},
          {"guest_mtu", port.guest_mtu()}};
}

// The connection's IOTLB (VIRTIO_F_ACCESS_PLATFORM): translations held, updates and
// invalidations received, evictions, misses sent on the back-end channel and misses
// that could not be sent. All 0 without the feature or between connections.
nlohmann::json iotlb_json(const vhost_user::IotlbStats& iotlb) {
  return {{"entries", iotlb.entries},
          {"updates", iotlb.updates},
          {"invalidations", iotlb.invalidations},
          {"evictions", iotlb.evictions},
          {"misses", iotlb.misses},
          {"misses_unreported", iotlb.misses_unreported}};
}

}  // namespace

nlohmann::json Daemon::control(const nlohmann::json& request) {
  const auto cmd = request.find("cmd");
  if (cmd == request.end() || !cmd->is_string()) return error_reply("no \"cmd\" string in the request");
  const std::string& name = cmd->get_ref<const std::string&>();
  sync::MutexLock lock(mutex_);  // the set of ports may change (reload)
  if (name == "list") return control_list();
  if (name == "stats") return control_stats();
  if (name == "set") return control_set(request);
  return error_reply(fmt::format("unknown cmd '{}' (list, stats, set)", name));
}

nlohmann::json Daemon::control_list() const {
  nlohmann::json ports = nlohmann::json::array();
  for (const auto& running : ports_) {
    const Port* port = running.port.get();
    const PortSpec& spec = port->spec();
    ports.push_back({{"name", spec.name},
                     {"socket", spec.socket_path},
                     {"client", spec.client},
                     {"backend", std::string(to_string(spec.backend))},
                     {"queue_pairs", spec.queue_pairs},
                     {"workers", std::string(datapath::to_string(spec.workers))},
                     {"connected", port->connected()},
                     {"features", features_json(*port)}});
  }
  return {{"ok", true}, {"ports", ports}};
}

nlohmann::json Daemon::control_stats() const {
  nlohmann::json ports = nlohmann::json::array();
  std::map<std::string, std::vector<std::string>> worker_queues;
  for (const auto& running : ports_) {
    const Port* port = running.port.get();
    const PortSpec& spec = port->spec();
    const PortTotals totals = port->totals();
    nlohmann::json queues = nlohmann::json::array();
    for (const datapath::QueueSnapshot& q : port->snapshot()) {
      queues.push_back(queue_json(q));
      worker_queues[q.worker].push_back(fmt::format("{}/{}", spec.name, q.index));
    }
    ports.push_back({{"name", spec.name},
                     {"backend", std::string(to_string(spec.backend))},
                     {"connected", port->connected()},
                     {"connections", totals.connections},
                     {"rejected", totals.rejected},
                     {"protocol_errors", totals.protocol_errors},
                     {"memory", std::string(sync::to_string(port->memory_policy()))},
                     {"features", features_json(*port)},
                     {"iotlb", iotlb_json(port->iotlb())},
                     {"backend_stats", port->backend() ? port->backend()->stats() : nlohmann::json::object()},
                     {"queues", queues}});
  }
  nlohmann::json workers = nlohmann::json::array();
  if (workers_) {
    for (const auto& worker : workers_->workers()) {
      const datapath::WorkerStats w = worker->stats();
      workers.push_back({{"name", worker->name()},
                         {"cpu_ns", w.queue.worker_cpu_ns},
                         {"items_run", w.queue.items_run},
                         {"wakeups", w.queue.wakeups},
                         {"parks", w.queue.parks},
                         {"epoll_waits", w.epoll_waits},
                         {"fd_events", w.fd_events},
                         {"event_polls", w.event_polls},
                         {"enqueue", std::string(sync::to_string(worker->work_queue().strategy()))},
                         {"queues", worker_queues[worker->name()]}});
    }
  }
  const double uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at_).count();
  nlohmann::json reply = {{"ok", true},       {"uptime_s", uptime},   {"ports", ports},
                          {"workers", workers}, {"process", process_stats_json()}};
  if (switch_hub_) reply["switch"] = switch_hub_->stats();
  return reply;
}

nlohmann::json Daemon::control_set(const nlohmann::json& request) {
  for (const auto& [key, unused] : request.items()) {
    if (std::ranges::find(control::kSetKeys, key) == control::kSetKeys.end()) {
      return error_reply(fmt::format("unknown key '{}' in set", key));
    }
  }
  auto string_field = [&](std::string_view key) -> std::optional<std::string> {
    const auto it = request.find(key);
    if (it == request.end()) return std::nullopt;
    if (!it->is_string()) throw std::invalid_argument(fmt::format("'{}' must be a string", key));
    return it->get<std::string>();
  };
  nlohmann::json changed = nlohmann::json::array();
  try {
    // Validate everything before changing anything.
    const auto enqueue_text = string_field(control::kEnqueue);
    const auto worker = string_field(control::kWorker);
    std::optional<sync::EnqueueStrategy> enqueue;
    if (enqueue_text) {
      enqueue = base::parse_enum<sync::EnqueueStrategy>(*enqueue_text);
      if (!enqueue) return error_reply(base::unknown_name(control::kEnqueue, *enqueue_text, control::kEnqueueChoices));
      if (worker && workers_->find(*worker) == nullptr) return error_reply(fmt::format("no worker '{}'", *worker));
    }
    const auto port_name = string_field(control::kPort);
    const auto poll_text = string_field(control::kPoll);
    const auto exit_text = string_field(control::kExit);
    const auto memory_text = string_field(control::kMemory);
    const bool has_busy = request.contains(control::kBusyUs);
    const bool has_queue = request.contains(control::kQueue);
    const bool port_change = poll_text || exit_text || memory_text || has_busy || has_queue;
    if (!port_change && !enqueue) return error_reply("set: nothing to change");
    Port* port = nullptr;
    if (port_change) {
      if (!port_name) return error_reply("set: which port? (\"port\")");
      port = find_port(*port_name);
      if (port == nullptr) return error_reply(fmt::format("no port '{}'", *port_name));
    }
    std::optional<uint32_t> queue;
    if (has_queue) {
      const int64_t index = index_below(request[control::kQueue], 2 * int64_t{port->spec().queue_pairs});
      if (index < 0) return error_reply(fmt::format("queue must be a vring index below {}", 2 * port->spec().queue_pairs));
      queue = static_cast<uint32_t>(index);
    }
    std::optional<datapath::PollMode> mode;
    if (poll_text && !(mode = base::parse_enum<datapath::PollMode>(*poll_text))) {
      return error_reply(base::unknown_name(control::kPoll, *poll_text, control::kPollChoices));
    }
    std::optional<datapath::ExitPolicy> exit;
    if (exit_text && !(exit = base::parse_enum<datapath::ExitPolicy>(*exit_text))) {
      return error_reply(base::unknown_name(control::kExit, *exit_text, control::kExitChoices));
    }
    std::optional<uint32_t> busy_us;
    if (has_busy) {
      const int64_t micros = index_below(request[control::kBusyUs], int64_t{control::kMaxBusyUs} + 1);
      if (micros < 0) {
        return error_reply(fmt::format("{} must be a number of microseconds in 0..{}", control::kBusyUs, control::kMaxBusyUs));
      }
      busy_us = static_cast<uint32_t>(micros);
    }
    std::optional<sync::GuardPolicy> memory;
    if (memory_text) {
      memory = base::parse_enum<sync::GuardPolicy>(*memory_text);
      if (!memory) return error_reply(base::unknown_name(control::kMemory, *memory_text, control::kMemoryChoices));
    }

    if (enqueue) {
      workers_->set_enqueue_strategy(*enqueue, worker.value_or(""));
      changed.push_back(fmt::format("enqueue={} on {}", *enqueue_text, worker.value_or("every worker")));
    }
    if (mode || exit || busy_us) {
      datapath::DeviceDatapath* dp = port->datapath();
      const uint32_t first = queue.value_or(0);
      const uint32_t last = queue ? *queue : 2 * port->spec().queue_pairs - 1;
      for (uint32_t index = first; index <= last; ++index) {
        datapath::PollSettings settings = dp->poll(index);
        if (mode) settings.mode = *mode;
        if (exit) settings.exit = *exit;
        if (busy_us) settings.busy_us = *busy_us;
        dp->set_poll(index, settings);
        changed.push_back(fmt::format("{}/{} poll={}", port->spec().name, index, datapath::describe(settings)));
      }
    }
    if (memory) {
      port->set_memory_policy(*memory);
      changed.push_back(fmt::format("{} memory={} (from the next connection)", port->spec().name, sync::to_string(*memory)));
    }
  } catch (const std::exception& e) {
    return error_reply(e.what());
  }
  return {{"ok", true}, {"changed", changed}};
}

}  // namespace uvhost::serve
