// stats_prometheus.cpp - the "stats" reply in Prometheus' text exposition format 0.0.4
// (see stats_format.h). Each family is built whole (HELP, TYPE, every sample) before
// the next: the format wants a family's samples together.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "stats_json.h"
#include "uvhost/serve/stats_format.h"

namespace uvhost::serve {

namespace {

using namespace detail;  // the readers of stats_json.h

using Labels = std::vector<std::pair<std::string, std::string>>;

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// HELP text escapes only backslash and newline.
std::string escape_help(std::string_view help) {
  std::string out;
  for (const char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);  // shortest text that reads back as the same double
}

class Family {
 public:
  Family(std::string name, std::string_view type, std::string_view help)
      : name_(std::move(name)), type_(type), help_(help) {}

  void add(const Labels& labels, const std::string& value) {
    std::string line = name_;
    if (!labels.empty()) {
      line += '{';
      for (size_t i = 0; i < labels.size(); ++i)
        line += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, escape_label_value(labels[i].second));
      line += '}';
    }
    samples_ += line + " " + value + "\n";
  }
  void add(const Labels& labels, std::optional<uint64_t> value) {
    if (value) add(labels, std::to_string(*value));
  }
  void add(const Labels& labels, std::optional<double> value) {
    if (value) add(labels, format_value(*value));
  }
  void add(const Labels& labels, std::optional<bool> value) {
    if (value) add(labels, std::string(*value ? "1" : "0"));
  }

  // Nothing for a family without samples: every stats reply lacking a field would
  // otherwise carry its empty header.
  void append_to(std::string& out) const {
    if (samples_.empty()) return;
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name_, escape_help(help_), name_, type_);
    out += samples_;
  }

 private:
  std::string name_;
  std::string_view type_;
  std::string_view help_;
  std::string samples_;
};

// Families each read straight from one counter field of the same JSON object (a
// process, a port, a queue, a worker), in the order they are printed.
struct FieldCounter {
  const char* field;
  Family family;
};
using FieldCounters = std::vector<FieldCounter>;

void add_samples(FieldCounters& counters, const Labels& labels, const json& object) {
  for (FieldCounter& entry : counters) entry.family.add(labels, counter(object, entry.field));
}

void append_all(const FieldCounters& counters, std::string& out) {
  for (const FieldCounter& entry : counters) entry.family.append_to(out);
}

// Divided, not multiplied by 1e-9: the quotient is the double nearest the exact value,
// so 260000 ns prints as 0.00026, not 0.00026000000000000003.
std::optional<double> scaled(std::optional<uint64_t> value, double divisor) {
  if (!value) return std::nullopt;
  return static_cast<double>(*value) / divisor;
}

Labels port_labels(const json& port) {
  Labels labels;
  if (const auto name = text(port, "name")) labels.emplace_back("port", *name);
  return labels;
}

// port, pair (queue pair), queue (vring index), direction (rx: from the guest).
Labels queue_labels(const json& port, const json& queue) {
  Labels labels = port_labels(port);
  if (const auto pair = counter(queue, "pair")) labels.emplace_back("pair", std::to_string(*pair));
  if (const auto index = counter(queue, "index")) labels.emplace_back("queue", std::to_string(*index));
  if (const auto direction = text(queue, "direction")) labels.emplace_back("direction", *direction);
  return labels;
}

Labels with(Labels labels, std::string name, std::optional<std::string> value) {
  if (value) labels.emplace_back(std::move(name), std::move(*value));
  return labels;
}

// backend_stats is whatever the backend reports (backends/port_backend.h): nested
// objects of numbers, booleans and strings. Each numeric or boolean leaf is one sample
// labelled stat="path.to.leaf", in the family its kind belongs to, so that no family
// mixes units or counters with gauges. Strings (names) are not samples.
struct BackendFamilies {
  Family bytes{"uvhost_port_backend_bytes_total", "counter",
               "Bytes the port's backend counted, named by stat (e.g. tx.bytes, generated_bytes)."};
  Family events{"uvhost_port_backend_events_total", "counter",
                "Events the port's backend counted (frames, drops, errors), named by stat."};
  Family sizes{"uvhost_port_backend_size_bytes", "gauge", "A size the port's backend reports (mtu, frame_size)."};
  Family levels{"uvhost_port_backend_level", "gauge",
                "A level or setting the port's backend reports (queues, ifindex, rate_pps, flags), named by stat."};
  Family states{"uvhost_port_backend_state", "gauge", "A yes (1) / no (0) state of the port's backend, named by stat."};

  void append_to(std::string& out) const {
    for (const Family* family : {&bytes, &events, &sizes, &levels, &states}) family->append_to(out);
  }
};

// Leaves that are not counters, by their own key (whatever object they are in): the
// gauges today's backends report (backends/*_backend.cpp stats()). Any other unsigned
// leaf is taken for a counter, so a backend adding a gauge adds its key here.
constexpr std::string_view kSizeKeys[] = {"mtu", "frame_size"};
constexpr std::string_view kLevelKeys[] = {"ifindex", "id", "queues", "capacity", "entries", "rate_pps",
                                           "offload_flags"};

template <size_t N>
bool listed(std::string_view key, const std::string_view (&keys)[N]) {
  for (const std::string_view candidate : keys)
    if (key == candidate) return true;
  return false;
}

void backend_samples(BackendFamilies& families, const Labels& labels, const json& value, const std::string& key,
                     const std::string& path) {
  if (value.is_object()) {
    for (const auto& item : value.items())
      backend_samples(families, labels, item.value(), item.key(), path.empty() ? item.key() : path + "." + item.key());
    return;
  }
  const Labels stat = with(labels, "stat", path);
  if (value.is_boolean()) {
    families.states.add(stat, std::optional<bool>(value.get<bool>()));
  } else if (!value.is_number()) {
    return;  // a string, null or array: not a sample
  } else if (listed(key, kSizeKeys)) {
    families.sizes.add(stat, std::optional<double>(value.get<double>()));
  } else if (listed(key, kLevelKeys) || !value.is_number_unsigned()) {
    families.levels.add(stat, std::optional<double>(value.get<double>()));  // a fraction or a sign: not a counter
  } else if (key == "bytes" || key.ends_with("_bytes")) {
    families.bytes.add(stat, std::optional<uint64_t>(value.get<uint64_t>()));
  } else {
    families.events.add(stat, std::optional<uint64_t>(value.get<uint64_t>()));
  }
}

void process_families(const json& stats, std::string& out) {
  const json* process = member(stats, "process");
  if (process == nullptr) return;
  Family cpu("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
  FieldCounters counters{
      {"resident_bytes", {"process_resident_memory_bytes", "gauge", "Resident memory size in bytes."}},
      {"virtual_bytes", {"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes."}},
      {"open_fds", {"process_open_fds", "gauge", "Number of open file descriptors."}},
      {"max_fds", {"process_max_fds", "gauge", "Maximum number of open file descriptors."}},
  };
  Family start("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.");
  cpu.add({}, number(*process, "cpu_seconds"));
  add_samples(counters, {}, *process);
  start.add({}, number(*process, "start_time_seconds"));
  cpu.append_to(out);
  append_all(counters, out);
  start.append_to(out);
}

void port_families(const json& stats, std::string& out) {
  Family info("uvhost_port_info", "gauge", "Always 1; the port's backend and guest-memory guard in labels.");
  Family connected("uvhost_port_connected", "gauge", "1 while a frontend is connected.");
  FieldCounters counters{
      {"connections", {"uvhost_port_connections_total", "counter", "Frontends served."}},
      {"rejected",
       {"uvhost_port_rejected_total", "counter", "Frontends turned away while another was served."}},
      {"protocol_errors",
       {"uvhost_port_protocol_errors_total", "counter", "Connections ended for a protocol error."}},
  };
  Family features("uvhost_port_negotiated_feature_info", "gauge",
                  "Always 1; one sample per virtio feature the connected frontend negotiated, by name.");
  Family mtu("uvhost_port_guest_mtu_bytes", "gauge", "The MTU the guest set (VHOST_USER_NET_SET_MTU); absent if none.");
  FieldCounters iotlb{
      {"entries", {"uvhost_port_iotlb_entries", "gauge", "IOTLB translations held (VIRTIO_F_ACCESS_PLATFORM)."}},
      {"updates", {"uvhost_port_iotlb_updates_total", "counter", "IOTLB updates received from the frontend."}},
      {"invalidations",
       {"uvhost_port_iotlb_invalidations_total", "counter", "IOTLB invalidations received from the frontend."}},
      {"evictions", {"uvhost_port_iotlb_evictions_total", "counter", "IOTLB translations evicted for room."}},
      {"misses", {"uvhost_port_iotlb_misses_total", "counter", "IOTLB misses sent to the frontend."}},
      {"misses_unreported",
       {"uvhost_port_iotlb_misses_unreported_total", "counter", "IOTLB misses that could not be sent."}},
  };
  BackendFamilies backend;
  for (const auto& port : array_member(stats, "ports")) {
    const Labels labels = port_labels(port);
    info.add(with(with(labels, "backend", text(port, "backend")), "memory", text(port, "memory")), std::string("1"));
    connected.add(labels, flag(port, "connected"));
    add_samples(counters, labels, port);
    if (const json* negotiated = member(port, "features")) {
      for (const auto& name : array_member(*negotiated, "negotiated"))
        if (name.is_string()) features.add(with(labels, "feature", name.get<std::string>()), std::string("1"));
      if (const auto guest_mtu = counter(*negotiated, "guest_mtu"); guest_mtu && *guest_mtu > 0)
        mtu.add(labels, guest_mtu);
    }
    if (const json* values = member(port, "iotlb")) add_samples(iotlb, labels, *values);
    if (const json* values = member(port, "backend_stats")) backend_samples(backend, labels, *values, "", "");
  }
  info.append_to(out);
  connected.append_to(out);
  append_all(counters, out);
  features.append_to(out);
  mtu.append_to(out);
  append_all(iotlb, out);
  backend.append_to(out);
}

void queue_families(const json& stats, std::string& out) {
  FieldCounters counters{
      {"packets", {"uvhost_queue_packets_total", "counter", "Packets the queue carried."}},
      {"bytes", {"uvhost_queue_bytes_total", "counter", "Bytes the queue carried (virtio-net header not counted)."}},
      {"dropped", {"uvhost_queue_dropped_total", "counter", "Packets dropped on this queue."}},
      {"kicks", {"uvhost_queue_kicks_total", "counter", "Guest notifications (kicks) received."}},
      {"calls", {"uvhost_queue_calls_total", "counter", "Guest interrupts (calls) sent."}},
      {"calls_suppressed",
       {"uvhost_queue_calls_suppressed_total", "counter", "Calls not sent because the guest did not want them."}},
      {"polls", {"uvhost_queue_polls_total", "counter", "Busy-poll sessions."}},
      {"weight_yields", {"uvhost_queue_weight_yields_total", "counter", "Bursts cut short by the work weight."}},
      {"handler_runs", {"uvhost_queue_handler_runs_total", "counter", "Times the queue's handler ran."}},
      {"buffer_waits",
       {"uvhost_queue_buffer_waits_total", "counter", "Waits for the guest to post receive buffers (tx queues)."}},
      {"inject_dropped",
       {"uvhost_queue_inject_dropped_total", "counter",
        "Frames for the guest refused: its ring full or the queue not running (tx queues)."}},
      {"inject_stopped",
       {"uvhost_queue_inject_stopped_total", "counter",
        "The part of inject_dropped refused because the queue was not running (tx queues)."}},
  };
  Family info("uvhost_queue_info", "gauge", "Always 1; the queue's worker and poll settings in labels.");
  Family busy("uvhost_queue_busy_poll_seconds", "gauge", "Busy-poll budget per session.");
  Family started("uvhost_queue_started", "gauge", "1 while the ring is started.");
  Family enabled("uvhost_queue_enabled", "gauge", "1 while the ring is enabled.");
  Family broken("uvhost_queue_broken", "gauge", "1 when the ring was stopped for a guest error.");
  Family poll_seconds("uvhost_queue_poll_seconds_total", "counter", "Time spent busy polling.");
  Family exits("uvhost_queue_poll_exits_total", "counter", "Busy-poll sessions ended, by reason.");
  for (const auto& port : array_member(stats, "ports")) {
    for (const auto& queue : array_member(port, "queues")) {
      const Labels labels = queue_labels(port, queue);
      add_samples(counters, labels, queue);
      const json* poll = member(queue, "poll");
      const json no_poll = json::object();
      const json& settings = poll != nullptr ? *poll : no_poll;
      Labels info_labels = with(labels, "worker", text(queue, "worker"));
      info_labels = with(std::move(info_labels), "poll_mode", text(settings, "mode"));
      info_labels = with(std::move(info_labels), "poll_exit", text(settings, "exit"));
      info.add(info_labels, std::string("1"));
      busy.add(labels, scaled(counter(settings, "busy_us"), 1e6));
      started.add(labels, flag(queue, "started"));
      enabled.add(labels, flag(queue, "enabled"));
      broken.add(labels, flag(queue, "broken"));
      poll_seconds.add(labels, scaled(counter(queue, "poll_ns"), 1e9));
      if (const json* reasons = member(queue, "poll_exits"); reasons != nullptr && reasons->is_object())
        for (const auto& item : reasons->items())
          exits.add(with(labels, "reason", item.key()), counter(*reasons, item.key()));
    }
  }
  info.append_to(out);
  append_all(counters, out);
  for (const Family* family : {&busy, &started, &enabled, &broken, &poll_seconds, &exits}) family->append_to(out);
}

void worker_families(const json& stats, std::string& out) {
  Family info("uvhost_worker_info", "gauge", "Always 1; the worker's enqueue strategy in a label.");
  Family cpu("uvhost_worker_cpu_seconds_total", "counter", "CPU time the worker thread used.");
  FieldCounters counters{
      {"items_run", {"uvhost_worker_items_run_total", "counter", "Work items the worker ran."}},
      {"wakeups", {"uvhost_worker_wakeups_total", "counter", "Times the worker was woken from parking."}},
      {"parks",
       {"uvhost_worker_parks_total", "counter", "Times the worker parked (slept) for lack of work."}},
      {"epoll_waits", {"uvhost_worker_epoll_waits_total", "counter", "Sleeps in epoll_wait."}},
      {"fd_events",
       {"uvhost_worker_fd_events_total", "counter", "Ready file descriptors the worker dispatched."}},
  };
  for (const auto& worker : array_member(stats, "workers")) {
    Labels labels;
    if (const auto name = text(worker, "name")) labels.emplace_back("worker", *name);
    info.add(with(labels, "enqueue", text(worker, "enqueue")), std::string("1"));
    cpu.add(labels, scaled(counter(worker, "cpu_ns"), 1e9));
    add_samples(counters, labels, worker);
  }
  info.append_to(out);
  cpu.append_to(out);
  append_all(counters, out);
}

}  // namespace

std::string format_prometheus(const json& stats) {
  std::string out;
  Family uptime("uvhost_uptime_seconds", "gauge", "Seconds since the daemon started.");
  uptime.add({}, number(stats, "uptime_s"));
  uptime.append_to(out);
  process_families(stats, out);
  port_families(stats, out);
  queue_families(stats, out);
  worker_families(stats, out);
  return out;
}

}  // namespace uvhost::serve
