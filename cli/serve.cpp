// serve.cpp - `uvhost serve`: the daemon. Ports from --port or --config, runs until
// SIGINT or SIGTERM, then stops every port cleanly and prints what each carried;
// SIGHUP reloads --config. Tells systemd (Type=notify) when it is ready, reloading,
// stopping, and how many ports are connected.
#include <signal.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "commands.h"
#include "uvhost/bench/table.h"
#include "uvhost/serve/daemon.h"
#include "uvhost/serve/service_notifier.h"

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

// The daemon's ports: --config's, then --port's, named and checked (finish_ports).
// At start and on each SIGHUP alike. nullopt and `error` when any of it fails.
std::optional<std::vector<serve::PortSpec>> collect_ports(const ServeOptions& options, std::string& error) {
  std::vector<serve::PortSpec> ports;
  if (!options.config_path.empty()) {
    auto loaded = serve::load_config_file(options.config_path, error);
    if (!loaded) return std::nullopt;
    ports = std::move(*loaded);
  }
  for (const std::string& text : options.ports) {
    auto spec = serve::parse_port_spec(text, error);
    if (!spec) return std::nullopt;
    ports.push_back(std::move(*spec));
  }
  if (ports.empty()) {
    error = "no ports: give --port sock=PATH[,...] or --config FILE";
    return std::nullopt;
  }
  if (!serve::finish_ports(ports, error)) return std::nullopt;
  return ports;
}

// SIGHUP: --config read again (with the --port ports), applied port by port
// (serve::Daemon::reload). A configuration that does not load changes nothing.
void reload(const ServeOptions& options, serve::Daemon& daemon) {
  if (options.config_path.empty()) {
    spdlog::warn("SIGHUP: nothing to reload (no --config); the ports stay as they are");
    return;
  }
  std::string error;
  auto ports = collect_ports(options, error);
  serve::ReloadPlan plan;
  if (!ports || !daemon.reload(std::move(*ports), error, &plan)) {
    if (plan.changes_nothing()) {
      spdlog::error("SIGHUP: reload of {} refused, nothing changed: {}", options.config_path, error);
    } else {
      spdlog::error("SIGHUP: reload of {} applied in part ({}): {}", options.config_path, serve::describe(plan), error);
    }
    return;
  }
  spdlog::info("SIGHUP: reloaded {}: {}", options.config_path, serve::describe(plan));
}

void run_serve(const ServeOptions& options) {
  // Logs go to stderr; stdout carries only the summary table.
  spdlog::set_default_logger(spdlog::stderr_color_mt("uvhost"));

  std::string error;
  auto ports = collect_ports(options, error);
  if (!ports) {
    spdlog::error("{}", error);
    throw CLI::RuntimeError(2);
  }

  // Block the stop and reload signals before any thread exists, so every port thread
  // inherits the mask and only sigtimedwait() below receives them. A dead peer must
  // never kill us through SIGPIPE (sends use MSG_NOSIGNAL too).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  serve::DaemonOptions daemon_options;
  daemon_options.stats_interval = std::chrono::milliseconds(static_cast<int64_t>(options.stats_interval_s * 1000));
  daemon_options.control_path = options.control_path;
  daemon_options.pool_workers = options.pool_workers;
  daemon_options.switch_tap = options.switch_tap;
  daemon_options.enqueue = *sync::parse_enqueue_strategy(options.enqueue);  // checked by CLI11
  serve::Daemon daemon(std::move(*ports), daemon_options);
  if (!daemon.start(error)) {
    spdlog::error("{}", error);
    throw CLI::RuntimeError(1);
  }
  spdlog::info("serving; SIGINT or SIGTERM stops, SIGHUP reloads {}",
               options.config_path.empty() ? std::string("(nothing: no --config)") : options.config_path);
  serve::ServiceNotifier notifier;
  auto status = [&daemon] {
    const serve::DaemonStatus now = daemon.status();
    return serve::service_status(now.ports, now.connected);
  };
  notifier.ready(status());
  for (;;) {
    // Woken each second to keep the service manager's STATUS line current.
    const timespec tick{1, 0};
    const int signal_number = sigtimedwait(&signals, nullptr, &tick);
    if (signal_number < 0) {
      notifier.status(status());
      continue;
    }
    if (signal_number == SIGHUP) {
      notifier.reloading(status());
      reload(options, daemon);
      notifier.ready(status());
      continue;
    }
    spdlog::info("{}: stopping", strsignal(signal_number));
    notifier.stopping(status());
    break;
  }
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
  cmd->callback([options] { run_serve(*options); });
}

}  // namespace uvhost::cli
