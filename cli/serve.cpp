// serve.cpp - `uvhost serve`: the daemon. Its configuration from --config and the flags
// (serve_config.h: one key each), runs until SIGINT or SIGTERM, then stops every port
// cleanly and prints what each carried.
#include <signal.h>

#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "commands.h"
#include "uvhost/bench/table.h"
#include "uvhost/serve/daemon.h"
#include "uvhost/serve/direction.h"
#include "uvhost/serve/serve_config.h"

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
};

[[noreturn]] void refuse(const std::string& message) {
  spdlog::error("{}", message);
  throw CLI::RuntimeError(kExitUsage);
}

// The configuration: the file, then the flags given, then the --port ports; checked
// (finish_ports) but nothing opened. Refuses with exit status 2.
serve::ServeConfig load_config(const ServeOptions& options) {
  serve::ServeConfig config;
  std::string error;
  if (!options.config_path.empty()) {
    auto loaded = serve::load_serve_config(options.config_path, error);
    if (!loaded) refuse(error);
    config = std::move(*loaded);
  }
  for (const auto& [key, value] : options.flags) {
    if (options.command->get_option(serve::flag_name(key))->count() == 0) continue;
    if (!serve::apply_daemon_key(key, value, config, error)) {
      refuse(fmt::format("{}: {}", serve::flag_name(key), error));
    }
  }
  for (const std::string& text : options.ports) {
    auto spec = serve::parse_port_spec(text, error);
    if (!spec) refuse(error);
    config.ports.push_back(std::move(*spec));
  }
  if (config.ports.empty()) refuse("no ports: give --port sock=PATH[,...] or a config file with \"ports\"");
  if (!serve::finish_ports(config.ports, error)) refuse(error);
  return config;
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

  // Block the stop signals before any thread exists, so every port thread inherits the
  // mask and only sigwait() below receives them. A dead peer must never kill us
  // through SIGPIPE (sends use MSG_NOSIGNAL too).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  serve::Daemon daemon(std::move(config.ports), config.daemon);
  std::string error;
  if (!daemon.start(error)) {
    spdlog::error("{}", error);
    throw CLI::RuntimeError(kExitFailure);
  }
  spdlog::info("serving; SIGINT or SIGTERM stops");
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("{}: stopping", strsignal(signal_number));
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

}  // namespace

void add_serve_command(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "Run the vhost-user backend daemon: one socket per port");
  options->command = cmd;
  cmd->add_option("--port", options->ports,
                  "A port: sock=PATH[,client][,queues=N][,backend=sink|source|loopback|tap|switch][,tap=IFNAME][,mtu=N]"
                  "[,rate=PPS][,size=BYTES][,mode=0600][,name=NAME][,memory=rcu|mutex|rwsem|pthread_rwlock]"
                  "[,workers=device|pair|pool][,poll=notify|busy|always|adaptive][,busy_us=N][,exit=accurate|any]"
                  "[,burst=N][,weight=N][,weight_bytes=N] (repeat for more ports; added after the config file's)");
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
  cmd->add_flag("--check-config", options->check_config,
                "Check the configuration (file and flags) and exit: 0 if it is valid, 2 if not; opens nothing");
  cmd->add_flag("--print-config", options->print_config,
                "Print the whole configuration the daemon would run with, as a config file (JSON), and exit");
  cmd->callback([options] { run_serve(*options); });
}

}  // namespace uvhost::cli
