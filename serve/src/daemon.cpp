// daemon.cpp - ports and their threads (see daemon.h).
#include "uvhost/serve/daemon.h"

#include "uvhost/serve/control_server.h"
#include "uvhost/serve/direction.h"
#include "uvhost/serve/metrics_http.h"
#include "uvhost/serve/stats_format.h"

#include <sys/eventfd.h>

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace uvhost::serve {

Daemon::Daemon(std::vector<PortSpec> ports, DaemonOptions options)
    : specs_(std::move(ports)), options_(options), stop_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!stop_fd_.valid()) throw std::runtime_error("eventfd for the daemon's stop signal");
}

Daemon::~Daemon() {
  control_server_.reset();  // no control request during the teardown
  metrics_server_.reset();
  request_stop();
  wait();
  ports_.clear();  // before the workers and the switch they use
}

bool Daemon::start(std::string& error) {
  // Once only: a second start would destroy ports whose threads still run them.
  if (!ports_.empty() || !threads_.empty()) {
    error = "the daemon was started already";
    return false;
  }
  workers_ = std::make_unique<datapath::WorkerPool>(options_.pool_workers, options_.enqueue);
  const bool wants_switch = !options_.switch_tap.empty() ||
                            std::any_of(specs_.begin(), specs_.end(),
                                        [](const PortSpec& spec) { return spec.backend == BackendKind::kSwitch; });
  auto fail = [&] {
    control_server_.reset();
    metrics_server_.reset();
    ports_.clear();  // unlinks what was bound so far
    switch_hub_.reset();
    workers_.reset();
    return false;
  };
  if (wants_switch) {
    switch_hub_ = std::make_unique<backends::SwitchHub>();
    if (!options_.switch_tap.empty()) {
      backends::TapBackendOptions tap;
      tap.name = options_.switch_tap;
      if (!switch_hub_->add_tap_uplink(tap, error)) {
        error = fmt::format("switch tap {}: {}", options_.switch_tap, error);
        return fail();
      }
    }
  }
  const PortEnvironment environment{workers_.get(), switch_hub_.get()};
  for (const PortSpec& spec : specs_) {
    auto port = std::make_unique<Port>(spec, stop_fd_.get(), environment, options_.stats_interval);
    if (!port->open(error)) {
      port.reset();  // before fail() takes the workers it may have been given
      return fail();
    }
    ports_.push_back(std::move(port));
  }
  started_at_ = std::chrono::steady_clock::now();
  if (!options_.control_path.empty()) {
    control_server_ = ControlServer::open(
        options_.control_path, [this](const nlohmann::json& request) { return control(request); }, error);
    if (!control_server_) {
      error = fmt::format("control socket {}: {}", options_.control_path, error);
      return fail();
    }
  }
  if (!options_.metrics_address.empty()) {
    metrics_server_ = MetricsHttpServer::open(
        options_.metrics_address, [this] { return format_prometheus(control_stats()); }, error);
    if (!metrics_server_) {
      error = fmt::format("metrics: {}", error);
      return fail();
    }
    spdlog::info("metrics: http://{}/metrics", metrics_server_->address());
  }
  // spdlog creates its registry on first use, inside the (uninstrumented) shared
  // library: if two port threads log first at the same moment, TSan cannot see the
  // static-init guard and reports a race. Create it here, before the threads exist.
  (void)spdlog::default_logger_raw();
  for (auto& port : ports_) threads_.emplace_back([p = port.get()] { p->run(); });
  return true;
}

void Daemon::request_stop() noexcept {
  // Written once and never read: the eventfd stays readable, so every port's poll()
  // sees it, now or whenever it next looks.
  (void)::eventfd_write(stop_fd_.get(), 1);
}

void Daemon::wait() {
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  threads_.clear();
}

Port* Daemon::find_port(const std::string& name) const {
  for (const auto& port : ports_) {
    if (port->spec().name == name) return port.get();
  }
  return nullptr;
}

uint16_t Daemon::metrics_port() const noexcept { return metrics_server_ ? metrics_server_->port() : 0; }

std::vector<PortReport> Daemon::reports() const {
  std::vector<PortReport> reports;
  for (const auto& port : ports_) reports.push_back(PortReport{port->spec(), port->totals()});
  return reports;
}

nlohmann::json to_json(const std::vector<PortReport>& reports) {
  nlohmann::json ports = nlohmann::json::array();
  for (const PortReport& report : reports) {
    const PortTotals& t = report.totals;
    ports.push_back({{"name", report.spec.name},
                     {"socket", report.spec.socket_path},
                     {"client", report.spec.client},
                     {"queue_pairs", report.spec.queue_pairs},
                     {"backend", std::string(to_string(report.spec.backend))},
                     {"workers", std::string(datapath::to_string(report.spec.workers))},
                     {"poll", datapath::describe(report.spec.poll)},
                     {"connections", t.connections},
                     {"rejected", t.rejected},
                     {"protocol_errors", t.protocol_errors},
                     {direction_key(Direction::kRx, "packets"), t.from_guest_packets},
                     {direction_key(Direction::kRx, "bytes"), t.from_guest_bytes},
                     {direction_key(Direction::kRx, "dropped"), t.from_guest_dropped},
                     {direction_key(Direction::kTx, "packets"), t.to_guest_packets},
                     {direction_key(Direction::kTx, "bytes"), t.to_guest_bytes},
                     {direction_key(Direction::kTx, "dropped"), t.to_guest_dropped},
                     {"calls", t.calls},
                     {"broken_queues", t.broken_queues}});
  }
  return nlohmann::json{{"ports", ports}};
}

}  // namespace uvhost::serve
