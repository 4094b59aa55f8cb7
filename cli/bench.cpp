// bench.cpp - `uvhost bench`: netperf-style workloads (rr, stream-tx, stream-rx) through
// a vhost-user backend, driven by our embedded frontend; the engine is the bench
// library (workload.h, bench_report.h). Subcommands (compare, calibrate) hang off it.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "uvhost/bench/bench_report.h"
#include "uvhost/bench/qemu_frontend.h"
#include "uvhost/bench/workload.h"

namespace uvhost::cli {
namespace {

struct BenchOptions {
  std::vector<std::string> workloads = base::names(bench::kWorkloadNames);
  std::vector<uint32_t> sizes{64, 1500};
  std::vector<uint32_t> sessions{1};
  std::vector<uint64_t> rates{0};
  std::string arrivals = "poisson";
  std::string config;
  std::string backend;
  std::string socket;
  int backend_pid = 0;
  int runs = 3;
  bool no_pin = false;
  std::string json_path;
  std::string csv_path;
  bench::RunOptions run;
  std::string frontend = "embedded";
};

[[noreturn]] void usage_error(const std::string& what) {
  fmt::print(stderr, "uvhost bench: {}\n", what);
  throw CLI::RuntimeError(2);
}

void run_bench(BenchOptions& o) {
  std::string error;
  std::optional<bench::Config> config = bench::parse_config(o.config, error);
  if (!config) usage_error("--config: " + error);
  if (!o.backend.empty()) {
    if (config->backend == bench::BackendKind::kSocket) usage_error("--backend and a socket cannot go together");
    config->backend =
        base::parse(bench::kStartedBackendNames, o.backend).value_or(bench::BackendKind::kUvhost);
    if (config->backend != bench::BackendKind::kUvhost && (!config->port_keys.empty() || !config->serve_args.empty())) {
      usage_error("port keys and daemon flags in --config apply to --backend uvhost only");
    }
  }
  if (!o.socket.empty()) {
    if (!o.backend.empty() || config->backend != bench::BackendKind::kUvhost || !config->port_keys.empty() ||
        !config->serve_args.empty()) {
      usage_error("--socket names a running backend: no --backend, port keys or daemon flags with it");
    }
    config->backend = bench::BackendKind::kSocket;
    config->socket = o.socket;
    config->backend_pid = o.backend_pid;
  } else if (o.backend_pid != 0) {
    usage_error("--backend-pid goes with --socket");
  }
  std::vector<bench::Workload> workloads;
  for (const std::string& name : o.workloads) {
    auto w = base::parse_enum<bench::Workload>(name);
    if (!w) usage_error(base::unknown_name("workload", name, bench::kWorkloadNames));
    workloads.push_back(*w);
  }
  o.run.pin = !o.no_pin;
  o.run.frontend = base::parse_enum<bench::Frontend>(o.frontend).value_or(bench::Frontend::kEmbedded);
  if (o.run.frontend == bench::Frontend::kQemu) {
    try {
      (void)bench::find_guest(o.run.guest_dir);
    } catch (const std::exception& e) {
      usage_error(e.what());
    }
  }
  const bool open_loop = std::any_of(o.rates.begin(), o.rates.end(), [](uint64_t r) { return r != 0; });
  if (open_loop && o.run.frontend != bench::Frontend::kEmbedded) {
    usage_error("--rates (open loop) needs the embedded frontend");
  }
  const std::vector<bench::Point> points = bench::expand_points(
      workloads, o.sizes, o.sessions, o.rates,
      base::parse_enum<bench::Arrivals>(o.arrivals).value_or(bench::Arrivals::kPoisson));

  fmt::print("uvhost bench: {} ({}), {} points x {} runs, {:.1f} s each after {:.1f} s warm-up, {} queue pair(s), {}\n",
             config->label.empty() ? "-" : config->label, bench::describe(*config), points.size(), o.runs,
             o.run.seconds, o.run.warmup_seconds, o.run.queue_pairs,
             o.run.pin ? fmt::format("frontend on CPU {}, backend on CPU {}", o.run.frontend_cpu, o.run.backend_cpu)
                       : std::string("not pinned"));
  std::vector<bench::PointRuns> sweep;
  try {
    sweep = bench::run_sweep(*config, points, o.run, o.runs, bench::stderr_progress());
  } catch (const std::exception& e) {
    if (::isatty(STDERR_FILENO)) fmt::print(stderr, "\n");
    fmt::print(stderr, "uvhost bench: {}\n", e.what());
    throw CLI::RuntimeError(1);
  }
  fmt::print("\ncells: {}; cores = CPU seconds / window seconds; per CPU-s = "
             "transactions (rr) or packets per CPU-second of both sides\n",
             o.runs < 2 ? std::string("one run per point, so no interval (--runs 2 or more gives 95% CIs)")
                        : fmt::format("mean ±95% CI half-width over {} runs", o.runs));
  bench::sweep_table(sweep).print(std::cout);

  if (!o.json_path.empty()) {
    std::ofstream file(o.json_path);
    file << bench::sweep_to_json(*config, o.run, sweep).dump(2) << "\n";
    if (!file) usage_error("cannot write " + o.json_path);
  }
  if (!o.csv_path.empty()) {
    std::ofstream file(o.csv_path);
    bench::write_csv(file, *config, sweep);
    if (!file) usage_error("cannot write " + o.csv_path);
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Measure a vhost-user backend with netperf-style workloads (" +
                                              base::join_names(bench::kWorkloadNames, ", ") + ")");
  cmd->require_subcommand(0, 1);
  add_bench_compare(*cmd);
  add_bench_calibrate(*cmd);
  cmd->add_option("--workloads", o->workloads,
                  "Comma-separated: " + base::join_names(bench::kWorkloadNames, ", "))
      ->delimiter(',');
  cmd->add_option("--sizes", o->sizes, "Ethernet frame sizes in bytes, 60..65535")
      ->delimiter(',')
      ->check(CLI::Range(60, 65535));
  cmd->add_option("--sessions", o->sessions, "rr: requests in flight; stream: flows")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--rates", o->rates,
                  "rr: offered transactions/s, open loop (0: closed loop, each session's next request when its "
                  "answer is back); a list is a load sweep")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--arrivals", o->arrivals, "Open-loop rr: gaps between arrivals")
      ->check(CLI::IsMember(base::names(bench::kArrivalsNames)))
      ->capture_default_str();
  cmd->add_option("--config", o->config,
                  "KEY=VALUE,...: backend=" + base::join_names(bench::kStartedBackendNames, "|") +
                      ", port keys of `uvhost serve --port` (poll=busy, workers=pair, ...), enqueue=, "
                      "pool_workers=, spin_ns=, in_order=0|1 (the frontend asks for VIRTIO_F_IN_ORDER; default 1), ring=" +
                      base::join_names(bench::kRingFormatNames, "|") +
                      " (the virtqueue format the frontend asks for; default split), label=, "
                      "uvhost=PATH (the binary that serves)");
  cmd->add_option("--backend", o->backend, "The backend started for each run")
      ->check(CLI::IsMember(base::names(bench::kStartedBackendNames)));
  cmd->add_option("--socket", o->socket, "Use an already running backend listening here");
  cmd->add_option("--backend-pid", o->backend_pid, "With --socket: the process whose threads' CPU is counted")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--queues", o->run.queue_pairs, "Queue pairs")->check(CLI::Range(1, 128));
  cmd->add_option("--seconds", o->run.seconds, "Measured window per run")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", o->run.warmup_seconds, "Warm-up before each window")->check(CLI::NonNegativeNumber);
  cmd->add_option("--runs", o->runs, "Runs per point (interleaved)")->check(CLI::Range(1, 1000));
  cmd->add_flag("--no-pin", o->no_pin, "Do not pin the frontend and the backend to CPUs");
  cmd->add_option("--frontend-cpu", o->run.frontend_cpu, "CPU of the frontend (this thread)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--backend-cpu", o->run.backend_cpu, "CPU of the backend process")->check(CLI::NonNegativeNumber);
  cmd->add_option("--uvhost", o->run.uvhost_binary, "The uvhost binary to serve with (default: this one)");
  cmd->add_option("--testpmd", o->run.testpmd_binary, "The dpdk-testpmd binary");
  cmd->add_option("--frontend", o->frontend,
                  "Traffic source: embedded (ours, in this process) or qemu (a Linux guest: iperf3, ping; "
                  "--seconds and --warmup rounded up to whole seconds, the warm-up to at least 1)")
      ->check(CLI::IsMember(base::names(bench::kFrontendNames)))
      ->capture_default_str();
  cmd->add_option("--guest-dir", o->run.guest_dir,
                  "--frontend qemu: scripts/build-guest.sh's cache (build/guest) or the folder of its vmlinux");
  cmd->add_option("--json", o->json_path, "Write every run and the summaries here");
  cmd->add_option("--csv", o->csv_path, "Write one row per run here");
  // Runs only when no subcommand (compare, calibrate) was given.
  cmd->callback([cmd, o] {
    if (cmd->get_subcommands().empty()) run_bench(*o);
  });
}

}  // namespace uvhost::cli
