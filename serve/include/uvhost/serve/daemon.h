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
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "uvhost/serve/port.h"
#include "uvhost/serve/port_spec.h"
#include "uvhost/vhost_user/unique_fd.h"

namespace uvhost::serve {

struct DaemonOptions {
  std::chrono::milliseconds stats_interval{0};  // 0: no periodic counters in the log
};

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

 private:
  std::vector<PortSpec> specs_;
  DaemonOptions options_;
  vhost_user::UniqueFd stop_fd_;
  std::vector<std::unique_ptr<Port>> ports_;
  std::vector<std::thread> threads_;
};

nlohmann::json to_json(const std::vector<PortReport>& reports);

}  // namespace uvhost::serve
