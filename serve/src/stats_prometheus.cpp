// stats_prometheus.cpp - the "stats" reply in Prometheus' text exposition format 0.0.4
// (see stats_format.h). Each family is built whole (HELP, TYPE, every sample) before
// the next: the format wants a family's samples together.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "stats_json.h"
#include "uvhost/serve/stats_format.h"

namespace uvhost::serve {

namespace {

using detail::array_member;
using detail::counter;
using detail::flag;
using detail::json;
using detail::member;
using detail::number;
using detail::text;

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

Labels queue_labels(const json& port, const json& queue) {
  Labels labels = port_labels(port);
  if (const auto index = counter(queue, "index")) labels.emplace_back("queue", std::to_string(*index));
  if (const auto direction = text(queue, "direction")) labels.emplace_back("direction", *direction);
  return labels;
}

Labels with(Labels labels, std::string name, std::optional<std::string> value) {
  if (value) labels.emplace_back(std::move(name), std::move(*value));
  return labels;
}

// backend_stats is whatever the backend reports: every numeric (or boolean) leaf
// becomes one sample, its path (keys joined with '.') a label.
void backend_samples(Family& family, const Labels& labels, const json& value, const std::string& path) {
  if (value.is_object()) {
    for (const auto& [key, child] : value.items())
      backend_samples(family, labels, child, path.empty() ? key : path + "." + key);
  } else if (value.is_number_unsigned()) {
    family.add(with(labels, "stat", path), std::optional<uint64_t>(value.get<uint64_t>()));
  } else if (value.is_number()) {
    family.add(with(labels, "stat", path), std::optional<double>(value.get<double>()));
  } else if (value.is_boolean()) {
    family.add(with(labels, "stat", path), std::optional<bool>(value.get<bool>()));
  }
}

void port_families(const json& stats, std::string& out) {
  Family info("uvhost_port_info", "gauge", "Always 1; the port's backend and guest-memory guard in labels.");
  Family connected("uvhost_port_connected", "gauge", "1 while a frontend is connected.");
  Family connections("uvhost_port_connections_total", "counter", "Frontends served.");
  Family errors("uvhost_port_protocol_errors_total", "counter", "Connections ended for a protocol error.");
  Family backend("uvhost_port_backend_stat", "untyped", "A value the port's backend reports, named by stat.");
  for (const auto& port : array_member(stats, "ports")) {
    const Labels labels = port_labels(port);
    info.add(with(with(labels, "backend", text(port, "backend")), "memory", text(port, "memory")), std::string("1"));
    connected.add(labels, flag(port, "connected"));
    connections.add(labels, counter(port, "connections"));
    errors.add(labels, counter(port, "protocol_errors"));
    if (const json* values = member(port, "backend_stats")) backend_samples(backend, labels, *values, "");
  }
  for (const Family* family : {&info, &connected, &connections, &errors, &backend}) family->append_to(out);
}

void queue_families(const json& stats, std::string& out) {
  // Counters read straight from a queue's field of the same meaning.
  struct CounterFamily {
    const char* field;
    Family family;
  };
  CounterFamily counters[] = {
      {"packets", {"uvhost_queue_packets_total", "counter", "Packets the queue carried."}},
      {"bytes", {"uvhost_queue_bytes_total", "counter", "Bytes the queue carried (virtio-net header not counted)."}},
      {"dropped", {"uvhost_queue_dropped_total", "counter", "Packets dropped on this queue."}},
      {"kicks", {"uvhost_queue_kicks_total", "counter", "Guest notifications (kicks) received."}},
      {"calls", {"uvhost_queue_calls_total", "counter", "Guest interrupts (calls) sent."}},
      {"calls_suppressed",
       {"uvhost_queue_calls_suppressed_total", "counter", "Calls not sent because the guest did not want them."}},
      {"polls", {"uvhost_queue_polls_total", "counter", "Busy-poll sessions."}},
      {"weight_yields", {"uvhost_queue_weight_yields_total", "counter", "Bursts cut short by the work weight."}},
  };
  Family info("uvhost_queue_info", "gauge", "Always 1; the queue's worker and poll settings in labels.");
  Family busy_us("uvhost_queue_busy_poll_microseconds", "gauge", "Busy-poll budget per session.");
  Family started("uvhost_queue_started", "gauge", "1 while the ring is started.");
  Family enabled("uvhost_queue_enabled", "gauge", "1 while the ring is enabled.");
  Family broken("uvhost_queue_broken", "gauge", "1 when the ring was stopped for a guest error.");
  Family poll_seconds("uvhost_queue_poll_seconds_total", "counter", "Time spent busy polling.");
  Family exits("uvhost_queue_poll_exits_total", "counter", "Busy-poll sessions ended, by reason.");
  for (const auto& port : array_member(stats, "ports")) {
    for (const auto& queue : array_member(port, "queues")) {
      const Labels labels = queue_labels(port, queue);
      for (auto& [field, family] : counters) family.add(labels, counter(queue, field));
      const json* poll = member(queue, "poll");
      const json no_poll = json::object();
      const json& settings = poll != nullptr ? *poll : no_poll;
      Labels info_labels = with(labels, "worker", text(queue, "worker"));
      info_labels = with(std::move(info_labels), "poll_mode", text(settings, "mode"));
      info_labels = with(std::move(info_labels), "poll_exit", text(settings, "exit"));
      info.add(info_labels, std::string("1"));
      busy_us.add(labels, counter(settings, "busy_us"));
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
  for (const auto& [field, family] : counters) family.append_to(out);
  for (const Family* family : {&busy_us, &started, &enabled, &broken, &poll_seconds, &exits}) family->append_to(out);
}

void worker_families(const json& stats, std::string& out) {
  Family info("uvhost_worker_info", "gauge", "Always 1; the worker's enqueue strategy in a label.");
  Family cpu("uvhost_worker_cpu_seconds_total", "counter", "CPU time the worker thread used.");
  Family items("uvhost_worker_items_run_total", "counter", "Work items the worker ran.");
  Family wakeups("uvhost_worker_wakeups_total", "counter", "Times the worker was woken from parking.");
  Family parks("uvhost_worker_parks_total", "counter", "Times the worker parked (slept) for lack of work.");
  for (const auto& worker : array_member(stats, "workers")) {
    Labels labels;
    if (const auto name = text(worker, "name")) labels.emplace_back("worker", *name);
    info.add(with(labels, "enqueue", text(worker, "enqueue")), std::string("1"));
    cpu.add(labels, scaled(counter(worker, "cpu_ns"), 1e9));
    items.add(labels, counter(worker, "items_run"));
    wakeups.add(labels, counter(worker, "wakeups"));
    parks.add(labels, counter(worker, "parks"));
  }
  for (const Family* family : {&info, &cpu, &items, &wakeups, &parks}) family->append_to(out);
}

}  // namespace

std::string format_prometheus(const json& stats) {
  std::string out;
  Family uptime("uvhost_uptime_seconds", "gauge", "Seconds since the daemon started.");
  uptime.add({}, number(stats, "uptime_s"));
  uptime.append_to(out);
  port_families(stats, out);
  queue_families(stats, out);
  worker_families(stats, out);
  return out;
}

}  // namespace uvhost::serve
