// daemon.h - `uvhost serve` minus the command line: a set of ports, a thread each,
// and one way to stop them all.
//
// Contract
// --------
//  - start() opens every port first (server sockets bound and listening, so a bad
//    path or a socket in use fails here, before any thread runs), then starts one
//    thread per port. On failure nothing is left running or bound (and start() may be
//    tried again). After a successful start, start() fails ("started already").
//  - request_stop() may be called from any thread and is async-signal-safe (one
//    eventfd write). Each port finishes the burst it is in, stops its device's rings
//    and closes the connection; wait() joins the threads. The sockets are removed when
//    the Daemon is destroyed.
//  - Signals are the caller's business (the CLI blocks SIGINT/SIGTERM in every thread
//    and waits for them with sigwait, then calls request_stop()).
//  - reports() after wait(): one entry per port, in the order given.
//  - The daemon owns what ports share: the worker pool (datapath/worker_pool.h; the
//    `pool` mapping's workers, and every port's own workers), the L2 switch when a port
//    has backend=switch or a switch tap was asked for, the control socket and the
//    metrics endpoint (metrics_http.h: the stats reply as Prometheus text; port 0 picks
//    a free port, which start() logs and metrics_port() tells).
//  - control(request) answers one control request (the protocol is in
//    control_server.h); any thread, once start() succeeded.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "uvhost/backends/switch_backend.h"
#include "uvhost/datapath/worker_pool.h"
#include "uvhost/serve/port.h"
#include "uvhost/serve/port_spec.h"
#include "uvhost/vhost_user/unique_fd.h"

namespace uvhost::serve {

struct DaemonOptions {
  std::chrono::milliseconds stats_interval{0};  // 0: no periodic counters in the log
  uint32_t pool_workers = 2;                    // workers of the shared pool (workers=pool)
  sync::EnqueueStrategy enqueue = sync::EnqueueStrategy::kLockless;  // every worker's, at start
  std::string switch_tap;                       // non-empty: a tap of this name joins the switch
  std::string control_path;                     // non-empty: the control socket
  std::string metrics_address;                  // non-empty: GET /metrics at IPV4:PORT or [IPV6]:PORT
};

class ControlServer;
class MetricsHttpServer;

struct PortReport {
  PortSpec spec;
  PortTotals totals;
};

class Daemon {
 public:
  explicit Daemon(std::vector<PortSpec> ports, DaemonOptions options = {});
  ~Daemon();  // stops and joins if still running
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  bool start(std::string& error);
  void request_stop() noexcept;
  void wait();

  std::vector<PortReport> reports() const;
  uint16_t metrics_port() const noexcept;  // the bound metrics port; 0 without one
  nlohmann::json control(const nlohmann::json& request);

 private:
  nlohmann::json control_list() const;
  nlohmann::json control_stats() const;
  nlohmann::json control_set(const nlohmann::json& request);
  Port* find_port(const std::string& name) const;

  std::vector<PortSpec> specs_;
  DaemonOptions options_;
  std::chrono::steady_clock::time_point started_at_;
  // Shared by the ports: made before them, destroyed after them (members are
  // destroyed in reverse order).
  std::unique_ptr<datapath::WorkerPool> workers_;
  std::unique_ptr<backends::SwitchHub> switch_hub_;
  vhost_user::UniqueFd stop_fd_;
  std::vector<std::unique_ptr<Port>> ports_;
  std::vector<std::thread> threads_;
  std::unique_ptr<ControlServer> control_server_;  // first to go: it calls control()
  std::unique_ptr<MetricsHttpServer> metrics_server_;  // as early: it calls control_stats()
};

nlohmann::json to_json(const std::vector<PortReport>& reports);

}  // namespace uvhost::serve
