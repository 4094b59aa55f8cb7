// daemon.h - `uvhost serve` minus the command line: a set of ports, a thread each,
// one way to stop them all, and a reload that changes the set port by port.
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
//  - reload(ports) applies a new set of ports to the running daemon, port by port
//    (reload_plan.h matches them by name): a kept port (same keys) is not touched, its
//    connection and traffic go on; a removed port stops (its connection closes, its
//    socket is removed, its own workers end); an added port opens and starts; a
//    restarted port (keys changed) stops, then opens with the new keys. The set is
//    checked first (finish_ports: names, duplicate sockets) and the added ports whose
//    socket no departing port holds are opened before anything stops: a bad set, or
//    a socket that cannot be bound, fails with `error` and changes nothing. A port that
//    takes over a departing port's socket (or a restarted one) opens after that port
//    stopped; if it then fails to open, reload() returns false with `error` naming it,
//    the rest of the new set runs. `plan` (optional) receives what was done (left as it was when nothing was). A switch
//    port in the new set joins the daemon's switch (made then if it had none; the
//    --switch-tap uplink is only set at start()). A port on a handed socket (--fd,
//    socket activation: PortSpec::socket_fd) keeps it across reloads, restarted or not.
//    Call it from the thread that called
//    start(), after it succeeded, not concurrently with wait().
//  - status(): how many ports run and how many have a frontend; any thread.
//  - Signals are the caller's business (the CLI blocks SIGINT/SIGTERM/SIGHUP in every
//    thread and waits for them with sigwait, then calls request_stop() or reload()).
//  - reports() after wait(): one entry per port, in the order given (after a reload,
//    the new set's order; a removed port's counters leave with it).
//  - The daemon owns what ports share: the worker pool (datapath/worker_pool.h; the
//    `pool` mapping's workers, and every port's own workers), the L2 switch when a port
//    has backend=switch or a switch tap was asked for, the control socket and the
//    metrics endpoint (metrics_http.h: the stats reply as Prometheus text; port 0 picks
//    a free port, which start() logs and metrics_port() tells).
//  - control(request) answers one control request (the protocol is in
//    control_server.h); any thread, once start() succeeded, also during a reload (the
//    set of ports, the pool and the switch are under one mutex).
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
#include "uvhost/serve/reload_plan.h"
#include "uvhost/sync/section_lock.h"
#include "uvhost/sync/thread_annotations.h"
#include "uvhost/base/unique_fd.h"

namespace uvhost::serve {

struct DaemonOptions {
  std::chrono::milliseconds stats_interval{0};  // 0: no periodic counters in the log
  uint32_t pool_workers = 2;                    // workers of the shared pool (workers=pool)
  sync::EnqueueStrategy enqueue = sync::EnqueueStrategy::kLockless;  // every worker's, at start
  std::string switch_tap;                       // non-empty: a tap of this name joins the switch
  sync::SectionLockKind switch_learning_lock = sync::SectionLockKind::kMutex;  // the MAC table's writers'
  std::string control_path;                     // non-empty: the control socket
  std::string metrics_address;                  // non-empty: GET /metrics at IPV4:PORT or [IPV6]:PORT
};

class ControlServer;
class MetricsHttpServer;

struct PortReport {
  PortSpec spec;
  PortTotals totals;
};

struct DaemonStatus {
  size_t ports = 0;      // ports running
  size_t connected = 0;  // of those, with a frontend
};

class Daemon {
 public:
  explicit Daemon(std::vector<PortSpec> ports, DaemonOptions options = {});
  ~Daemon();  // stops and joins if still running
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  bool start(std::string& error) UVHOST_EXCLUDES(mutex_);
  void request_stop() noexcept;
  void wait() UVHOST_EXCLUDES(mutex_);
  bool reload(std::vector<PortSpec> ports, std::string& error, ReloadPlan* plan = nullptr) UVHOST_EXCLUDES(mutex_);

  DaemonStatus status() const UVHOST_EXCLUDES(mutex_);
  std::vector<PortReport> reports() const UVHOST_EXCLUDES(mutex_);
  uint16_t metrics_port() const noexcept;  // the bound metrics port; 0 without one
  nlohmann::json control(const nlohmann::json& request) UVHOST_EXCLUDES(mutex_);

 private:
  struct RunningPort {
    std::unique_ptr<Port> port;
    std::thread thread;  // not joinable before the port runs, and after wait()
  };

  nlohmann::json control_list() const UVHOST_REQUIRES(mutex_);
  nlohmann::json control_stats() const UVHOST_REQUIRES(mutex_);
  nlohmann::json control_set(const nlohmann::json& request) UVHOST_REQUIRES(mutex_);
  Port* find_port(const std::string& name) const UVHOST_REQUIRES(mutex_);
  // Makes and opens one port (nullptr and `error` on failure, its workers released).
  std::unique_ptr<Port> open_port(const PortSpec& spec, std::string& error) UVHOST_REQUIRES(mutex_);
  // Destroys a port whose thread is joined (or never ran), then its own workers.
  void close_port(std::unique_ptr<Port> port) UVHOST_REQUIRES(mutex_);
  void release_everything() UVHOST_EXCLUDES(mutex_);

  std::vector<PortSpec> specs_;  // the ports start() opens
  DaemonOptions options_;
  bool started_ = false;  // start() succeeded (the thread calling start/reload/wait only)
  std::chrono::steady_clock::time_point started_at_;
  mutable sync::Mutex mutex_;
  // Shared by the ports: made before them, destroyed after them (members are
  // destroyed in reverse order).
  std::unique_ptr<datapath::WorkerPool> workers_ UVHOST_GUARDED_BY(mutex_);
  std::unique_ptr<backends::SwitchHub> switch_hub_ UVHOST_GUARDED_BY(mutex_);
  base::UniqueFd stop_fd_;
  std::vector<RunningPort> ports_ UVHOST_GUARDED_BY(mutex_);
  std::unique_ptr<ControlServer> control_server_;  // first to go: it calls control()
  std::unique_ptr<MetricsHttpServer> metrics_server_;  // as early: it calls control()
};

nlohmann::json to_json(const std::vector<PortReport>& reports);

}  // namespace uvhost::serve
