// serve.cpp - `uvhost serve`: the daemon. Its configuration from --config and the flags
// (serve_config.h: one key each), runs until SIGINT or SIGTERM, then stops every port
// cleanly and prints what each carried; SIGHUP reloads the ports of --config. Tells
// systemd (Type=notify) when it is ready, reloading, stopping, and how many ports are
// connected.
#include <signal.h>

#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "commands.h"
#include "uvhost/bench/table.h"
#include "uvhost/serve/backend_program.h"
#include "uvhost/serve/daemon.h"
#include "uvhost/serve/direction.h"
#include "uvhost/serve/inherited_sockets.h"
#include "uvhost/serve/port_spec.h"
#include "uvhost/serve/serve_config.h"
#include "uvhost/serve/service_notifier.h"

namespace uvhost::cli {
namespace {

// What the command line gave: the config file, the ports, and the text of each daemon
// flag given (serve_config.h's keys; applied over the file's).
struct ServeOptions {
  std::vector<std::string> ports;
  std::string config_path;
  std::map<std::string, std::string, std::less<>> flags;  // key -> value, bound to CLI11
  CLI::App* command = nullptr;
  bool check_config = false;
  bool print_config = false;
  // QEMU's backend-program conventions (serve/backend_program.h).
  std::string socket_path;
  int fd = -1;
  bool print_capabilities = false;
};

[[noreturn]] void refuse(const std::string& message) {
  spdlog::error("{}", message);
  throw CLI::RuntimeError(kExitUsage);
}

// The configuration: the file, then the flags given, then the --port ports; checked
// (finish_ports) but nothing opened. At start and on each SIGHUP alike: nullopt and
// `error` when any of it fails.
std::optional<serve::ServeConfig> build_config(const ServeOptions& options, std::string& error) {
  serve::ServeConfig config;
  if (!options.config_path.empty()) {
    auto loaded = serve::load_serve_config(options.config_path, error);
    if (!loaded) return std::nullopt;
    config = std::move(*loaded);
  }
  for (const auto& [key, value] : options.flags) {
    if (options.command->get_option(serve::flag_name(key))->count() == 0) continue;
    if (!serve::apply_daemon_key(key, value, config, error)) {
      error = fmt::format("{}: {}", serve::flag_name(key), error);
      return std::nullopt;
    }
  }
  if (!options.socket_path.empty() || options.fd >= 0) {
    // One port, on --socket-path or --fd; a --port gives its other keys.
    if (options.ports.size() > 1 || !options.config_path.empty()) {
      error = "--socket-path and --fd serve one port: give at most one --port (its keys, without sock=) and no --config";
      return std::nullopt;
    }
    auto spec = serve::backend_program_port(options.ports.empty() ? "" : options.ports.front(), options.socket_path,
                                            options.fd, error);
    if (!spec) return std::nullopt;
    config.ports.push_back(std::move(*spec));
  } else {
    for (const std::string& text : options.ports) {
      auto spec = serve::parse_port_spec(text, error);
      if (!spec) return std::nullopt;
      config.ports.push_back(std::move(*spec));
    }
  }
  if (config.ports.empty()) {
    error = "no ports: give --port sock=PATH[,...] or a config file with \"ports\"";
    return std::nullopt;
  }
  if (!serve::finish_ports(config.ports, error)) return std::nullopt;
  return config;
}

// The same, refusing with exit status 2.
serve::ServeConfig load_config(const ServeOptions& options) {
  std::string error;
  auto config = build_config(options, error);
  if (!config) refuse(error);
  return std::move(*config);
}

// SIGHUP: --config read again (with the flags and the --port ports) and its ports
// applied port by port (serve::Daemon::reload). The daemon-wide keys (control, metrics,
// pool workers, ...) take effect at the next start only. A configuration that does not
// load changes nothing.
void reload(const ServeOptions& options, serve::Daemon& daemon) {
  if (options.config_path.empty()) {
    spdlog::warn("SIGHUP: nothing to reload (no --config); the ports stay as they are");
    return;
  }
  std::string error;
  auto config = build_config(options, error);
  serve::ReloadPlan plan;
  if (!config || !daemon.reload(std::move(config->ports), error, &plan)) {
    if (plan.changes_nothing()) {
      spdlog::error("SIGHUP: reload of {} refused, nothing changed: {}", options.config_path, error);
    } else {
      spdlog::error("SIGHUP: reload of {} applied in part ({}): {}", options.config_path, serve::describe(plan), error);
    }
    return;
  }
  spdlog::info("SIGHUP: reloaded {}: {}", options.config_path, serve::describe(plan));
}

// Directions as DPDK and OVS name them (serve/direction.h): rx from the guest, tx to it.
void print_summary(const std::vector<serve::PortReport>& reports) {
  const auto column = [](serve::Direction direction, const char* what) {
    return fmt::format("{} {}", serve::to_string(direction), what);
  };
  using serve::Direction;
  bench::TextTable table({"port", "mode", "backend", "conns", column(Direction::kRx, "pkts"),
                          column(Direction::kRx, "bytes"), column(Direction::kRx, "drops"),
                          column(Direction::kTx, "pkts"), column(Direction::kTx, "bytes"),
                          column(Direction::kTx, "drops"), "errors"});
  for (const auto& r : reports) {
    const auto& t = r.totals;
    table.add_row({r.spec.name, r.spec.client ? "client" : "server", std::string(serve::to_string(r.spec.backend)),
                   std::to_string(t.connections), std::to_string(t.from_guest_packets),
                   std::to_string(t.from_guest_bytes), std::to_string(t.from_guest_dropped),
                   std::to_string(t.to_guest_packets), std::to_string(t.to_guest_bytes),
                   std::to_string(t.to_guest_dropped), std::to_string(t.protocol_errors)});
  }
  table.print(std::cout);
  std::cout.flush();
}

void run_serve(const ServeOptions& options) {
  if (options.print_capabilities) {
    std::cout << serve::capabilities_json() << std::endl;
    return;
  }
  serve::ServeConfig config = load_config(options);
  // The file's log level, unless the command line gave one (`uvhost --log-level`).
  if (!config.log_level.empty() && options.command->get_parent()->get_option("--log-level")->count() == 0) {
    spdlog::set_level(spdlog::level::from_str(config.log_level));
  }
  if (options.print_config) {
    // In the order of serve_config.h's keys, ports last (a JSON object sorts its keys).
    const nlohmann::json all = serve::to_json(config);
    nlohmann::ordered_json file;
    for (const serve::DaemonKey& key : serve::daemon_keys()) {
      file[std::string(key.key)] = all.at(std::string(key.key));
    }
    file["ports"] = all.at("ports");
    std::cout << file.dump(2) << "\n" << std::flush;
    return;
  }
  if (options.check_config) {
    spdlog::info("configuration ok: {} port{}", config.ports.size(), config.ports.size() == 1 ? "" : "s");
    return;
  }

  // Socket activation (systemd): ports adopt the sockets passed to us. Not with --fd,
  // which names the one socket itself.
  if (options.fd < 0) {
    std::string error;
    auto inherited = serve::inherited_sockets(error);
    if (!inherited || !serve::claim_inherited_sockets(config.ports, *inherited, error)) refuse(error);
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

  serve::Daemon daemon(std::move(config.ports), config.daemon);
  std::string error;
  if (!daemon.start(error)) {
    spdlog::error("{}", error);
    throw CLI::RuntimeError(kExitFailure);
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
  if (!config.summary_json.empty()) {
    std::ofstream file(config.summary_json);
    file << serve::to_json(reports).dump(2) << "\n";
    if (!file) {
      spdlog::error("cannot write {}", config.summary_json);
      throw CLI::RuntimeError(kExitFailure);
    }
  }
}

// --port's help: the keys, with each enum's choices from its name table.
std::string port_help() {
  return fmt::format(
      "A port: sock=PATH[,client][,queues=N][,backend={}][,tap=IFNAME][,mtu=N]"
      "[,rate=PPS][,size=BYTES][,mode=0600][,name=NAME][,memory={}]"
      "[,workers={}][,poll={}][,busy_us=N][,exit={}]"
      "[,cpus=LIST|frontend][,sched=other|batch|idle][,burst=N][,weight=N][,weight_bytes=N][,tx_delivery={}] (repeat for more ports; added after the "
      "config file's)",
      base::join_names(serve::kBackendKindNames, "|"), base::join_names(sync::kGuardPolicyNames, "|"),
      base::join_names(datapath::kWorkerMappingNames, "|"), base::join_names(datapath::kPollModeNames, "|"),
      base::join_names(datapath::kExitPolicyNames, "|"), base::join_names(datapath::kTxDeliveryNames, "|"));
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "Run the vhost-user backend daemon: one socket per port");
  options->command = cmd;
  cmd->add_option("--port", options->ports, port_help());
  cmd->add_option("--config", options->config_path,
                  "JSON config file: every flag below as a key (--pool-workers is \"pool_workers\"), plus "
                  "\"log_level\" and \"ports\": [{\"sock\": PATH, \"backend\": ...}]; flags given override it")
      ->type_name("FILE");
  // One flag per daemon key of the config file (serve_config.h): same name, same values.
  for (const serve::DaemonKey& key : serve::daemon_keys()) {
    if (!key.serve_flag) continue;
    std::string& value = options->flags[std::string(key.key)];
    cmd->add_option(serve::flag_name(key.key), value, std::string(key.help))
        ->type_name(std::string(key.value_name));
  }
  auto* socket_path = cmd->add_option("--socket-path", options->socket_path,
                                      "Serve one port listening on this vhost-user socket (QEMU's backend-program "
                                      "conventions; --port then gives its other keys, without sock=)")
                          ->type_name("PATH");
  cmd->add_option("--fd", options->fd,
                  "Serve one port on this already-open vhost-user socket: listening (frontends connect to it) or "
                  "connected (that one frontend); --port gives its other keys")
      ->type_name("N")
      ->check(CLI::NonNegativeNumber)
      ->excludes(socket_path);
  cmd->add_flag("--print-capabilities", options->print_capabilities,
                "Print the backend's capabilities as vhost-user.json defines them ({\"type\": \"net\"}) and exit");
  cmd->add_flag("--check-config", options->check_config,
                "Check the configuration (file and flags) and exit: 0 if it is valid, 2 if not; opens nothing");
  cmd->add_flag("--print-config", options->print_config,
                "Print the whole configuration the daemon would run with, as a config file (JSON), and exit");
  cmd->callback([options] { run_serve(*options); });
}

}  // namespace uvhost::cli
