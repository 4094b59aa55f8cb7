// daemon.cpp - ports and their threads, started together, reloaded port by port (see
// daemon.h).
#include "uvhost/serve/daemon.h"

#include "uvhost/serve/control_server.h"
#include "uvhost/serve/direction.h"
#include "uvhost/serve/metrics_http.h"
#include "uvhost/serve/stats_format.h"

#include <fcntl.h>
#include <sys/eventfd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace uvhost::serve {
namespace {

backends::SwitchHubOptions switch_hub_options(const DaemonOptions& options) {
  backends::SwitchHubOptions hub;
  hub.table.writer_lock = options.switch_learning_lock;
  return hub;
}

}  // namespace

Daemon::Daemon(std::vector<PortSpec> ports, DaemonOptions options)
    : specs_(std::move(ports)), options_(options), stop_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!stop_fd_.valid()) throw std::runtime_error("eventfd for the daemon's stop signal");
}

Daemon::~Daemon() {
  control_server_.reset();  // no control request during the teardown
  metrics_server_.reset();
  request_stop();
  wait();
  sync::MutexLock lock(mutex_);
  ports_.clear();  // before the workers and the switch they use
}

void Daemon::release_everything() {
  control_server_.reset();  // joins its thread, which may be waiting for mutex_
  metrics_server_.reset();  // the same
  sync::MutexLock lock(mutex_);
  ports_.clear();  // unlinks what was bound so far
  switch_hub_.reset();
  workers_.reset();
}

std::unique_ptr<Port> Daemon::open_port(const PortSpec& spec, std::string& error) {
  const PortEnvironment environment{workers_.get(), switch_hub_.get()};
  auto port = std::make_unique<Port>(spec, stop_fd_.get(), environment, options_.stats_interval);
  if (port->open(error)) return port;
  close_port(std::move(port));
  return nullptr;
}

void Daemon::close_port(std::unique_ptr<Port> port) {
  const std::string name = port->spec().name;
  port.reset();  // stops its datapath, unlinks its socket
  workers_->release(name);
}

bool Daemon::start(std::string& error) {
  // Once only: a second start would destroy ports whose threads still run them.
  if (started_) {
    error = "the daemon was started already";
    return false;
  }
  {
    sync::MutexLock lock(mutex_);
    workers_ = std::make_unique<datapath::WorkerPool>(options_.pool_workers, options_.enqueue);
    const bool wants_switch = !options_.switch_tap.empty() ||
                              std::any_of(specs_.begin(), specs_.end(),
                                          [](const PortSpec& spec) { return spec.backend == BackendKind::kSwitch; });
    bool ok = true;
    if (wants_switch) {
      switch_hub_ = std::make_unique<backends::SwitchHub>(switch_hub_options(options_));
      if (!options_.switch_tap.empty()) {
        backends::TapBackendOptions tap;
        tap.name = options_.switch_tap;
        if (!switch_hub_->add_tap_uplink(tap, error)) {
          error = fmt::format("switch tap {}: {}", options_.switch_tap, error);
          ok = false;
        }
      }
    }
    for (size_t i = 0; ok && i < specs_.size(); ++i) {
      auto port = open_port(specs_[i], error);
      if (!port) ok = false;
      else ports_.push_back(RunningPort{std::move(port), std::thread()});
    }
    if (!ok) {
      ports_.clear();
      switch_hub_.reset();
      workers_.reset();
      return false;
    }
  }
  started_at_ = std::chrono::steady_clock::now();
  if (!options_.control_path.empty()) {
    control_server_ = ControlServer::open(
        options_.control_path, [this](const nlohmann::json& request) { return control(request); }, error);
    if (!control_server_) {
      release_everything();
      return false;
    }
  }
  if (!options_.metrics_address.empty()) {
    metrics_server_ = MetricsHttpServer::open(
        options_.metrics_address, [this] { return format_prometheus(control(nlohmann::json{{"cmd", "stats"}})); },
        error);
    if (!metrics_server_) {
      error = fmt::format("metrics: {}", error);
      release_everything();
      return false;
    }
    spdlog::info("metrics: http://{}/metrics", metrics_server_->address());
  }
  // spdlog creates its registry on first use, inside the (uninstrumented) shared
  // library: if two port threads log first at the same moment, TSan cannot see the
  // static-init guard and reports a race. Create it here, before the threads exist.
  (void)spdlog::default_logger_raw();
  // A log line's timestamp loads the time zone (glibc opens /etc/localtime) on the first
  // call: load it here, so that no port or worker thread opens a file later and the
  // daemon's descriptors, once started, change only with its ports and connections.
  ::tzset();
  sync::MutexLock lock(mutex_);
  for (RunningPort& running : ports_) running.thread = std::thread([p = running.port.get()] { p->run(); });
  started_ = true;
  return true;
}

void Daemon::request_stop() noexcept {
  // Written once and never read: the eventfd stays readable, so every port's poll()
  // sees it, now or whenever it next looks.
  (void)::eventfd_write(stop_fd_.get(), 1);
}

void Daemon::wait() {
  // Joined without the lock: control requests go on being answered meanwhile.
  std::vector<std::thread> threads;
  {
    sync::MutexLock lock(mutex_);
    for (RunningPort& running : ports_) {
      if (running.thread.joinable()) threads.push_back(std::move(running.thread));
    }
  }
  for (std::thread& thread : threads) thread.join();
}

bool Daemon::reload(std::vector<PortSpec> next, std::string& error, ReloadPlan* applied) {
  if (!started_) {
    error = "the daemon is not running";
    return false;
  }
  if (next.empty()) {
    error = "the new configuration has no ports";
    return false;
  }
  if (!finish_ports(next, error)) return false;

  std::vector<PortSpec> current;
  {
    sync::MutexLock lock(mutex_);
    for (const RunningPort& running : ports_) current.push_back(running.port->spec());
  }
  // A port on a socket handed to us (--fd, socket activation) keeps it: a reloaded
  // configuration cannot name those fds, so the new spec takes the running port's.
  for (PortSpec& spec : next) {
    for (const PortSpec& running : current) {
      if (running.name == spec.name && running.socket_fd >= 0 && spec.socket_fd < 0 &&
          running.socket_path == spec.socket_path) {
        spec.socket_fd = running.socket_fd;
      }
    }
  }
  const ReloadPlan plan = plan_reload(current, next);
  if (plan.changes_nothing()) {
    if (applied != nullptr) *applied = plan;
    return true;
  }

  auto listed = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  // A restarted port on a handed socket opens on a duplicate of it: the departing port
  // closes its own. Held here until the new port owns it (closed if it never does).
  std::map<std::string, base::UniqueFd> duplicates;
  for (PortSpec& spec : next) {
    if (spec.socket_fd < 0 || !listed(plan.restarted, spec.name)) continue;
    base::UniqueFd copy(::fcntl(spec.socket_fd, F_DUPFD_CLOEXEC, 0));
    if (!copy.valid()) {
      error = fmt::format("{}: cannot duplicate its handed socket (fd {}): {}", spec.name, spec.socket_fd,
                          std::strerror(errno));
      return false;
    }
    spec.socket_fd = copy.get();
    duplicates.emplace(spec.name, std::move(copy));
  }
  auto find_spec = [](const std::vector<PortSpec>& specs, const std::string& name) -> const PortSpec& {
    return *std::find_if(specs.begin(), specs.end(), [&name](const PortSpec& spec) { return spec.name == name; });
  };
  // Sockets held by the ports that go away (removed, or restarted with new keys): a new
  // port on one of them can only bind once that port is gone.
  std::set<std::string> departing_paths;
  for (const PortSpec& spec : current) {
    if (listed(plan.removed, spec.name) || listed(plan.restarted, spec.name)) departing_paths.insert(spec.socket_path);
  }

  // 1. Added ports on free sockets, before anything stops: a failure changes nothing.
  std::map<std::string, std::unique_ptr<Port>> opened;
  {
    sync::MutexLock lock(mutex_);
    const bool wants_switch = std::any_of(next.begin(), next.end(),
                                          [](const PortSpec& spec) { return spec.backend == BackendKind::kSwitch; });
    if (wants_switch && !switch_hub_) switch_hub_ = std::make_unique<backends::SwitchHub>(switch_hub_options(options_));
    for (const std::string& name : plan.added) {
      const PortSpec& spec = find_spec(next, name);
      if (departing_paths.contains(spec.socket_path)) continue;
      auto port = open_port(spec, error);
      if (!port) {
        for (auto& entry : opened) close_port(std::move(entry.second));
        return false;
      }
      opened.emplace(name, std::move(port));
    }
  }

  if (applied != nullptr) *applied = plan;  // from here on, it is being applied

  // 2. Departing ports stop: out of the set (control requests no longer see them),
  //    joined without the lock, then destroyed with their workers.
  std::vector<RunningPort> departing;
  {
    sync::MutexLock lock(mutex_);
    for (auto it = ports_.begin(); it != ports_.end();) {
      const std::string& name = it->port->spec().name;
      if (listed(plan.removed, name) || listed(plan.restarted, name)) {
        departing.push_back(std::move(*it));
        it = ports_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (RunningPort& running : departing) running.port->request_stop();
  for (RunningPort& running : departing) {
    if (running.thread.joinable()) running.thread.join();
  }

  // 3. The rest opens on the freed sockets; 4. the set takes the new order and the new
  //    ports' threads start.
  std::vector<std::string> failures;
  sync::MutexLock lock(mutex_);
  for (RunningPort& running : departing) close_port(std::move(running.port));
  for (const PortSpec& spec : next) {
    if (listed(plan.kept, spec.name) || opened.contains(spec.name)) continue;
    std::string port_error;
    auto port = open_port(spec, port_error);
    if (!port) {
      failures.push_back(port_error);
      continue;
    }
    if (auto copy = duplicates.find(spec.name); copy != duplicates.end()) (void)copy->second.release();  // the port's now
    opened.emplace(spec.name, std::move(port));
  }
  std::vector<RunningPort> ports;
  for (const PortSpec& spec : next) {
    auto kept = std::find_if(ports_.begin(), ports_.end(),
                             [&spec](const RunningPort& running) {
                               return running.port && running.port->spec().name == spec.name;  // null: moved already
                             });
    if (kept != ports_.end()) {
      ports.push_back(std::move(*kept));
      continue;
    }
    auto made = opened.find(spec.name);
    if (made == opened.end()) continue;  // failed to open
    RunningPort running{std::move(made->second), std::thread()};
    running.thread = std::thread([p = running.port.get()] { p->run(); });
    ports.push_back(std::move(running));
  }
  ports_ = std::move(ports);
  if (!failures.empty()) {
    error = fmt::format("not running after the reload: {}", fmt::join(failures, "; "));
    return false;
  }
  return true;
}

DaemonStatus Daemon::status() const {
  sync::MutexLock lock(mutex_);
  DaemonStatus status;
  status.ports = ports_.size();
  for (const RunningPort& running : ports_) {
    if (running.port->connected()) ++status.connected;
  }
  return status;
}

Port* Daemon::find_port(const std::string& name) const {
  for (const RunningPort& running : ports_) {
    if (running.port->spec().name == name) return running.port.get();
  }
  return nullptr;
}

uint16_t Daemon::metrics_port() const noexcept { return metrics_server_ ? metrics_server_->port() : 0; }

std::vector<PortReport> Daemon::reports() const {
  sync::MutexLock lock(mutex_);
  std::vector<PortReport> reports;
  for (const RunningPort& running : ports_) reports.push_back(PortReport{running.port->spec(), running.port->totals()});
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
