// daemon.cpp - ports and their threads (see daemon.h).
#include "uvhost/serve/daemon.h"

#include <sys/eventfd.h>

#include <stdexcept>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace uvhost::serve {

Daemon::Daemon(std::vector<PortSpec> ports, DaemonOptions options)
    : specs_(std::move(ports)), options_(options), stop_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!stop_fd_.valid()) throw std::runtime_error("eventfd for the daemon's stop signal");
}

Daemon::~Daemon() {
  request_stop();
  wait();
}

bool Daemon::start(std::string& error) {
  // Once only: a second start would destroy ports whose threads still run them.
  if (!ports_.empty() || !threads_.empty()) {
    error = "the daemon was started already";
    return false;
  }
  for (const PortSpec& spec : specs_) {
    auto port = std::make_unique<Port>(spec, stop_fd_.get(), options_.stats_interval);
    if (!port->open(error)) {
      ports_.clear();  // unlinks what was bound so far
      return false;
    }
    ports_.push_back(std::move(port));
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
                     {"backend", std::string(vhost_user::to_string(report.spec.backend))},
                     {"connections", t.connections},
                     {"rejected", t.rejected},
                     {"protocol_errors", t.protocol_errors},
                     {"tx_packets", t.tx_packets},
                     {"tx_bytes", t.tx_bytes},
                     {"rx_packets", t.rx_packets},
                     {"rx_bytes", t.rx_bytes},
                     {"rx_dropped", t.rx_dropped},
                     {"calls", t.calls},
                     {"broken_queues", t.broken_queues}});
  }
  return nlohmann::json{{"ports", ports}};
}

}  // namespace uvhost::serve
