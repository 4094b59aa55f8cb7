// serve.cpp - `uvhost serve`: the daemon. Ports from --port or --config, runs until
// SIGINT or SIGTERM, then stops every port cleanly and prints what each carried.
#include <signal.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "commands.h"
#include "uvhost/bench/table.h"
#include "uvhost/serve/backend_program.h"
#include "uvhost/serve/daemon.h"
#include "uvhost/serve/inherited_sockets.h"

namespace uvhost::cli {
namespace {

struct ServeOptions {
  std::vector<std::string> ports;
  std::string config_path;
  double stats_interval_s = 0;
  std::string summary_json;
  std::string control_path;
  uint32_t pool_workers = 2;
  std::string enqueue = "lockless";
  std::string switch_tap;
  // QEMU's backend-program conventions (serve/backend_program.h).
  std::string socket_path;
  int fd = -1;
  bool print_capabilities = false;
};

void print_summary(const std::vector<serve::PortReport>& reports) {
  bench::TextTable table({"port", "mode", "backend", "conns", "tx pkts", "tx bytes", "tx drops", "rx pkts",
                          "rx bytes", "rx drops", "errors"});
  for (const auto& r : reports) {
    const auto& t = r.totals;
    table.add_row({r.spec.name, r.spec.client ? "client" : "server", std::string(serve::to_string(r.spec.backend)),
                   std::to_string(t.connections), std::to_string(t.tx_packets), std::to_string(t.tx_bytes),
                   std::to_string(t.tx_dropped), std::to_string(t.rx_packets), std::to_string(t.rx_bytes),
                   std::to_string(t.rx_dropped), std::to_string(t.protocol_errors)});
  }
  table.print(std::cout);
  std::cout.flush();
}

void run_serve(const ServeOptions& options) {
  // Logs go to stderr; stdout carries only the summary table.
  spdlog::set_default_logger(spdlog::stderr_color_mt("uvhost"));

  std::vector<serve::PortSpec> ports;
  std::string error;
  if (options.print_capabilities) {
    std::cout << serve::capabilities_json() << std::endl;
    return;
  }
  const bool conventional = !options.socket_path.empty() || options.fd >= 0;
  if (conventional) {
    if (options.ports.size() > 1 || !options.config_path.empty()) {
      spdlog::error("--socket-path and --fd serve one port: give at most one --port (its keys, without sock=) and no --config");
      throw CLI::RuntimeError(2);
    }
    auto spec = serve::backend_program_port(options.ports.empty() ? "" : options.ports.front(), options.socket_path,
                                            options.fd, error);
    if (!spec) {
      spdlog::error("{}", error);
      throw CLI::RuntimeError(2);
    }
    ports.push_back(std::move(*spec));
  }
  if (!options.config_path.empty()) {
    auto loaded = serve::load_config_file(options.config_path, error);
    if (!loaded) {
      spdlog::error("{}", error);
      throw CLI::RuntimeError(2);
    }
    ports = std::move(*loaded);
  }
  for (const std::string& text : conventional ? std::vector<std::string>{} : options.ports) {
    auto spec = serve::parse_port_spec(text, error);
    if (!spec) {
      spdlog::error("{}", error);
      throw CLI::RuntimeError(2);
    }
    ports.push_back(std::move(*spec));
  }
  if (ports.empty()) {
    spdlog::error("no ports: give --port sock=PATH[,...] or --config FILE");
    throw CLI::RuntimeError(2);
  }
  if (!serve::finish_ports(ports, error)) {
    spdlog::error("{}", error);
    throw CLI::RuntimeError(2);
  }
  // Socket activation (systemd): ports adopt the sockets passed to us. Not with --fd,
  // which names the one socket itself.
  if (options.fd < 0) {
    auto inherited = serve::inherited_sockets(error);
    if (!inherited || !serve::claim_inherited_sockets(ports, *inherited, error)) {
      spdlog::error("{}", error);
      throw CLI::RuntimeError(2);
    }
  }

  // Block the stop signals before any thread exists, so every port thread inherits the
  // mask and only sigwait() below receives them. A dead peer must never kill us
  // through SIGPIPE (sends use MSG_NOSIGNAL too).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  serve::DaemonOptions daemon_options;
  daemon_options.stats_interval = std::chrono::milliseconds(static_cast<int64_t>(options.stats_interval_s * 1000));
  daemon_options.control_path = options.control_path;
  daemon_options.pool_workers = options.pool_workers;
  daemon_options.switch_tap = options.switch_tap;
  daemon_options.enqueue = *sync::parse_enqueue_strategy(options.enqueue);  // checked by CLI11
  serve::Daemon daemon(std::move(ports), daemon_options);
  if (!daemon.start(error)) {
    spdlog::error("{}", error);
    throw CLI::RuntimeError(1);
  }
  spdlog::info("serving; SIGINT or SIGTERM stops");
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("{}: stopping", strsignal(signal_number));
  daemon.request_stop();
  daemon.wait();

  const auto reports = daemon.reports();
  print_summary(reports);
  if (!options.summary_json.empty()) {
    std::ofstream file(options.summary_json);
    file << serve::to_json(reports).dump(2) << "\n";
    if (!file) {
      spdlog::error("cannot write {}", options.summary_json);
      throw CLI::RuntimeError(1);
    }
  }
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "Run the vhost-user backend daemon: one socket per port");
  cmd->add_option("--port", options->ports,
                  "A port: sock=PATH[,client][,queues=N][,backend=sink|source|loopback|tap|switch][,tap=IFNAME][,mtu=N]"
                  "[,rate=PPS][,size=BYTES][,mode=0600][,name=NAME][,memory=rcu|mutex|rwsem|pthread_rwlock]"
                  "[,workers=device|pair|pool][,poll=notify|busy|always|adaptive][,busy_us=N][,exit=accurate|any]"
                  "[,burst=N][,weight=N][,weight_bytes=N] (repeat for more ports)");
  cmd->add_option("--config", options->config_path,
                  "JSON file: {\"ports\": [{\"sock\": PATH, \"client\": false, \"queues\": 1, ...}]}");
  cmd->add_option("--stats-interval", options->stats_interval_s, "Log each port's counters every N seconds (0: off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--summary-json", options->summary_json, "On exit, also write each port's counters here");
  cmd->add_option("--control", options->control_path,
                  "Control socket (mode 0600) for `uvhost ctl`: stats, poll modes, guard policy, enqueue strategy");
  cmd->add_option("--pool-workers", options->pool_workers, "Workers of the shared pool (ports with workers=pool)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--enqueue", options->enqueue, "Work-queue enqueue strategy of every worker (seed 000)")
      ->check(CLI::IsMember({"locked_wake", "unlock_wake", "lockless"}));
  cmd->add_option("--switch-tap", options->switch_tap,
                  "A tap of this name (created, or attached if it exists) joins the ports' switch as an uplink");
  auto* socket_path = cmd->add_option("--socket-path", options->socket_path,
                                      "Serve one port listening on this vhost-user socket (QEMU's backend-program "
                                      "conventions; --port then gives its other keys, without sock=)");
  cmd->add_option("--fd", options->fd,
                  "Serve one port on this already-open vhost-user socket: listening (frontends connect to it) or "
                  "connected (that one frontend); --port gives its other keys")
      ->check(CLI::NonNegativeNumber)
      ->excludes(socket_path);
  cmd->add_flag("--print-capabilities", options->print_capabilities,
                "Print the backend's capabilities as vhost-user.json defines them ({\"type\": \"net\"}) and exit");
  cmd->callback([options] { run_serve(*options); });
}

}  // namespace uvhost::cli
