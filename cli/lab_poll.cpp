// lab_poll.cpp - `uvhost lab busypoll` (vhost-net busy polling before sleeping) and
// `uvhost lab busyloop-intr` (ending a busy poll only on this queue's work): poll-mode
// and poll-exit configurations of a `uvhost serve` port against a
// baseline, on the real stack (our frontend, real sockets, eventfds, worker threads),
// interleaved, with the upstream patches' +thu% / +normalize% tables (bench/lab/config_matrix.h).
#include <iostream>
#include <memory>

#include "commands.h"
#include "lab_output.h"
#include "uvhost/bench/lab/config_matrix.h"

namespace uvhost::cli {
namespace {

struct MatrixLabOptions {
  std::vector<bench::Workload> workloads;
  std::vector<uint32_t> sizes{64, 1500};
  std::vector<uint32_t> sessions;
  int runs = 5;
  std::string method = "paired-t";
  LabOutputFlags output;  // --json and --plot
  bool no_pin = false;
  uint32_t busy_us = 50;
  bench::RunOptions run;
};

// The subcommand of a matrix lab with the shared options; `o` holds the lab's defaults.
CLI::App* add_matrix_lab(CLI::App& lab, const std::string& name, const std::string& help, MatrixLabOptions& o) {
  auto& cmd = *lab.add_subcommand(name, help);
  o.run.seconds = 1.0;
  add_names_option(cmd, "--workloads", o.workloads, base::parse_enum<bench::Workload>,
                   [](bench::Workload w) { return bench::to_string(w); }, "rr, stream-tx, stream-rx",
                   "rr, stream-tx, stream-rx");
  cmd.add_option("--sizes", o.sizes, "frame sizes in bytes")->delimiter(',')->capture_default_str();
  cmd.add_option("--sessions", o.sessions, "rr: transactions in flight; streams: flows")
      ->delimiter(',')
      ->capture_default_str();
  add_bounded(cmd, "--runs", o.runs, "rounds; each runs every configuration once per point", 2, 1000);
  add_bounded(cmd, "--seconds", o.run.seconds, "measured seconds per run", 0.05, 600.0);
  add_bounded(cmd, "--warmup", o.run.warmup_seconds, "warm-up seconds per run, not measured", 0.0, 60.0);
  add_bounded(cmd, "--queues", o.run.queue_pairs, "queue pairs of the port (sessions spread over them)", 1, 128);
  cmd.add_option("--method", o.method, "A/B statistics: paired-t, welch or signed-rank")
      ->check(CLI::IsMember({"paired-t", "welch", "signed-rank"}))
      ->capture_default_str();
  cmd.add_flag("--no-pin", o.no_pin, "do not pin the frontend and the backend to different CPUs");
  cmd.add_option("--frontend-cpu", o.run.frontend_cpu, "CPU of the frontend thread")->capture_default_str();
  cmd.add_option("--backend-cpu", o.run.backend_cpu, "CPU of the backend process")->capture_default_str();
  cmd.add_option("--uvhost", o.run.uvhost_binary, "the uvhost binary to serve with (default: this one)");
  cmd.add_option("--json", o.output.json_path, "write every run and comparison as JSON");
  cmd.add_option("--plot", o.output.plot_path, "write a plot (.png or .svg, with gnuplot)");
  return &cmd;
}

bench::Config port_config(std::string label, std::vector<std::pair<std::string, std::string>> keys) {
  bench::Config config;
  config.label = std::move(label);
  config.port_keys = std::move(keys);
  return config;
}

void run_matrix_lab(const std::string& name, const std::string& intro, const std::vector<bench::Config>& configs,
                    MatrixLabOptions& o) {
  o.run.pin = !o.no_pin;
  const bench::AbMethod method = *base::parse_enum<bench::AbMethod>(o.method);
  const std::vector<bench::Point> points = bench::expand_points(o.workloads, o.sizes, o.sessions);
  fmt::print("uvhost lab {}: {}\n", name, intro);
  fmt::print("{} configurations x {} points x {} rounds, {:.2f} s per run after {:.2f} s warm-up, {} queue pair(s), {}\n",
             configs.size(), points.size(), o.runs, o.run.seconds, o.run.warmup_seconds, o.run.queue_pairs,
             o.run.pin ? fmt::format("frontend on CPU {}, backend on CPU {}", o.run.frontend_cpu, o.run.backend_cpu)
                       : std::string("not pinned"));
  fmt::print("statistics: {} ({})\n\n", bench::to_string(method), bench::method_assumption(method));

  const bench::RunOptions run_options = o.run;
  auto failures = std::make_shared<size_t>(0);
  auto runner = bench::retrying(
      [run_options](const bench::Config& config, const bench::Point& point) {
        return bench::run_point(config, point, run_options);
      },
      2, failures);
  bench::lab::ConfigMatrix matrix;
  try {
    matrix = bench::lab::run_config_matrix(configs, points, o.runs, runner, bench::lab::matrix_progress());
  } catch (const std::exception& e) {
    fmt::print(stderr, "uvhost lab {}: {}\n", name, e.what());
    throw CLI::RuntimeError(1);
  }
  const auto comparisons = bench::lab::compare_to_baseline(matrix, method);
  for (const auto& titled : bench::lab::matrix_tables(matrix, comparisons)) {
    fmt::print("\n{}\n", titled.title);
    titled.table.print(std::cout);
  }
  if (*failures > 0) fmt::print("note: {} run(s) failed and were repeated (reasons on stderr)\n", *failures);
  std::cout.flush();
  write_lab_outputs(name, o.output, bench::lab::matrix_to_json(matrix, comparisons, method, o.run),
                    bench::lab::matrix_charts(matrix), 2, "size/sessions; ");
}

}  // namespace

void add_lab_busypoll(CLI::App& lab) {
  auto o = std::make_shared<MatrixLabOptions>();
  o->workloads = {bench::Workload::kRr, bench::Workload::kStreamTx, bench::Workload::kStreamRx};
  o->sessions = {1, 4};
  auto* cmd = add_matrix_lab(lab, "busypoll",
                             "vhost-net busy polling: notify vs busy polling (busy, always, adaptive) on rr, stream-tx "
                             "and stream-rx: +thu% and +normalize% per size and sessions",
                             *o);
  auto modes = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"busy", "always", "adaptive"});
  cmd->add_option("--modes", *modes, "poll modes compared with notify")
      ->delimiter(',')
      ->check(CLI::IsMember({"busy", "always", "adaptive"}))
      ->capture_default_str();
  add_bounded(*cmd, "--busy-us", o->busy_us, "busy: the poll timeout; adaptive: its cap", 1u, 1000000u);
  auto workers = std::make_shared<std::string>();
  cmd->add_option("--workers", *workers,
                  "the port's queue-to-worker mapping (device: every queue on one worker, the case where a poll "
                  "must not steal other queues' turns); default: the daemon's")
      ->check(CLI::IsMember({"device", "pair", "pool"}));
  cmd->callback([o, modes, workers] {
    auto with_workers = [&](std::vector<std::pair<std::string, std::string>> keys) {
      if (!workers->empty()) keys.emplace_back("workers", *workers);
      return keys;
    };
    std::vector<bench::Config> configs{port_config("notify", with_workers({{"poll", "notify"}}))};
    for (const std::string& mode : *modes) {
      auto keys = with_workers({{"poll", mode}});
      if (mode != "always") keys.emplace_back("busy_us", std::to_string(o->busy_us));
      configs.push_back(port_config(mode == "busy" ? fmt::format("busy{}", o->busy_us) : mode, std::move(keys)));
    }
    run_matrix_lab("busypoll",
                   "each poll mode vs notify (the kernel's vhost-net before busy polling), one uvhost serve port "
                   "(sink / source / loopback by workload), one worker",
                   configs, *o);
  });
}

void add_lab_busyloop_intr(CLI::App& lab) {
  auto o = std::make_shared<MatrixLabOptions>();
  o->workloads = {bench::Workload::kRr, bench::Workload::kStreamTx};
  o->sessions = {4, 16};
  o->run.queue_pairs = 4;
  auto* cmd = add_matrix_lab(lab, "busyloop-intr",
                             "vhost-net busyloop exit: what ends a busy poll: any pending work (before) vs work for "
                             "this queue only (accurate), with several queues on one worker",
                             *o);
  add_bounded(*cmd, "--busy-us", o->busy_us, "the busy-poll timeout of every queue", 1u, 1000000u);
  cmd->callback([o] {
    const std::string us = std::to_string(o->busy_us);
    // workers=device: every vring of the port on one worker, so the other queues'
    // pending work is what the exit policy has to tell apart from this queue's.
    std::vector<bench::Config> configs{
        port_config("any", {{"poll", "busy"}, {"busy_us", us}, {"exit", "any"}, {"workers", "device"}}),
        port_config("accurate", {{"poll", "busy"}, {"busy_us", us}, {"exit", "accurate"}, {"workers", "device"}})};
    run_matrix_lab("busyloop-intr",
                   fmt::format("exit=accurate vs exit=any, busy {} us, {} queue pairs on one worker", us,
                               o->run.queue_pairs),
                   configs, *o);
  });
}

}  // namespace uvhost::cli
