// lab_load_sweep.cpp - `uvhost lab load-sweep`: rr latency and the backend's CPU per
// transaction across an offered load (open loop), poll modes against each other and
// against DPDK's vhost PMD, plus each one's idle cost (bench/lab/load_sweep.h).
#include <iostream>
#include <memory>

#include "commands.h"
#include "lab_output.h"
#include "uvhost/bench/lab/load_sweep.h"

namespace uvhost::cli {
namespace {

// What each --configs name runs: a `uvhost serve` loopback port in a poll mode, or
// testpmd's vhost PMD in macswap (DPDK's PMD polls forever, like `always`).
bench::Config named_config(const std::string& name, uint32_t busy_us) {
  bench::Config config;
  config.label = name;
  if (name == "testpmd") {
    config.backend = bench::BackendKind::kTestpmd;
    return config;
  }
  config.port_keys = {{"poll", name}};
  if (name == "busy" || name == "adaptive") config.port_keys.emplace_back("busy_us", std::to_string(busy_us));
  return config;
}

struct LoadSweepOptions {
  std::vector<std::string> configs{"always", "adaptive", "notify", "testpmd"};
  std::string subject = "adaptive";
  std::vector<uint64_t> rates{1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 0};
  std::string arrivals = "poisson";
  uint32_t size = 64;
  uint32_t sessions = 16;
  int runs = 3;
  uint32_t busy_us = 50;
  bool no_idle = false;
  bool no_pin = false;
  LabOutputFlags output;
  bench::RunOptions run;
};

void run_load_sweep_lab(LoadSweepOptions& o) {
  o.run.pin = !o.no_pin;
  bench::lab::LoadSweepSpec spec;
  for (const std::string& name : o.configs) spec.configs.push_back(named_config(name, o.busy_us));
  spec.subject = o.subject;
  spec.size = o.size;
  spec.sessions = o.sessions;
  spec.rates = o.rates;
  spec.arrivals = base::parse_enum<bench::Arrivals>(o.arrivals).value_or(bench::Arrivals::kPoisson);
  spec.rounds = o.runs;
  spec.idle = !o.no_idle;
  fmt::print("uvhost lab load-sweep: rr {} B, open loop ({} arrivals, at most {} in flight) at {} rates, "
             "{} configurations, {} rounds, {:.2f} s per run after {:.2f} s warm-up, {} queue pair(s), {}\n",
             o.size, o.arrivals, o.sessions, o.rates.size(), spec.configs.size(), o.runs, o.run.seconds,
             o.run.warmup_seconds, o.run.queue_pairs,
             o.run.pin ? fmt::format("frontend on CPU {}, backend on CPU {}", o.run.frontend_cpu, o.run.backend_cpu)
                       : std::string("not pinned"));
  for (const bench::Config& config : spec.configs) fmt::print("  {}: {}\n", config.label, bench::describe(config));

  auto failures = std::make_shared<size_t>(0);
  const bench::RunOptions load_options = o.run;
  bench::RunOptions idle_options = o.run;
  idle_options.idle_window = true;
  auto load_runner = bench::retrying(
      [load_options](const bench::Config& c, const bench::Point& p) { return bench::run_point(c, p, load_options); },
      2, failures);
  auto idle_runner = bench::retrying(
      [idle_options](const bench::Config& c, const bench::Point& p) { return bench::run_point(c, p, idle_options); },
      2, failures);
  bench::lab::LoadSweep sweep;
  try {
    sweep = bench::lab::run_load_sweep(spec, load_runner, idle_runner,
                                       o.output.quiet ? bench::lab::MatrixObserver{} : bench::lab::matrix_progress());
  } catch (const std::exception& e) {
    fmt::print(stderr, "uvhost lab load-sweep: {}\n", e.what());
    throw CLI::RuntimeError(1);
  }
  fmt::print("\nlatency from each request's scheduled arrival; backend us/trans = CPU of every backend thread / "
             "transactions; the frontend spins in every configuration and is not counted\n");
  for (const auto& titled : bench::lab::load_sweep_tables(sweep)) {
    fmt::print("\n{}\n", titled.title);
    titled.table.print(std::cout);
  }
  if (*failures > 0) fmt::print("note: {} run(s) failed and were repeated (reasons on stderr)\n", *failures);
  std::cout.flush();
  write_lab_outputs("load-sweep", LabOutputFlags{o.output.json_path, "", o.output.quiet},
                    bench::lab::load_sweep_json(sweep, o.run), {});
  if (!o.output.plot_path.empty()) {
    std::string error;
    if (!bench::write_line_charts(o.output.plot_path,
                                  "uvhost lab load-sweep (rr, open loop; lines: mean, whiskers: 95% CI)",
                                  bench::lab::load_sweep_charts(sweep), 3, error)) {
      fmt::print(stderr, "uvhost lab load-sweep: plot: {}\n", error);
      throw CLI::RuntimeError(1);
    }
    fmt::print("plot written to {}\n", o.output.plot_path);
  }
}

}  // namespace

void add_lab_load_sweep(CLI::App& lab) {
  auto o = std::make_shared<LoadSweepOptions>();
  auto& cmd = *lab.add_subcommand(
      "load-sweep",
      "Adaptive polling: rr latency (p50, p99) and the backend's CPU per transaction across an offered load (open "
      "loop), poll modes against each other and DPDK's vhost PMD, and each one's idle CPU");
  cmd.add_option("--configs", o->configs, "what to compare: poll modes of a uvhost loopback port, and testpmd")
      ->delimiter(',')
      ->check(CLI::IsMember({"always", "adaptive", "notify", "busy", "testpmd"}))
      ->capture_default_str();
  cmd.add_option("--subject", o->subject, "the configuration whose ratios to every other one are tabled")
      ->capture_default_str();
  cmd.add_option("--rates", o->rates, "offered transactions/s; 0: closed loop (the saturation point)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--arrivals", o->arrivals, "gaps between arrivals")
      ->check(CLI::IsMember(base::names(bench::kArrivalsNames)))
      ->capture_default_str();
  add_bounded(cmd, "--size", o->size, "frame bytes", 60u, 65535u);
  add_bounded(cmd, "--sessions", o->sessions, "requests in flight at most (closed loop: always)", 1u, 4096u);
  add_bounded(cmd, "--queues", o->run.queue_pairs, "queue pairs (requests spread over them)", 1u, 128u);
  add_bounded(cmd, "--runs", o->runs, "rounds; each runs every configuration once per rate", 2, 1000);
  add_bounded(cmd, "--seconds", o->run.seconds, "measured seconds per run", 0.05, 600.0);
  add_bounded(cmd, "--warmup", o->run.warmup_seconds, "warm-up seconds per run, not measured", 0.0, 60.0);
  add_bounded(cmd, "--busy-us", o->busy_us, "busy: the poll timeout; adaptive: its cap", 1u, 1000000u);
  cmd.add_flag("--no-idle", o->no_idle, "skip the idle runs");
  cmd.add_flag("--no-pin", o->no_pin, "do not pin the frontend and the backend to different CPUs");
  cmd.add_option("--frontend-cpu", o->run.frontend_cpu, "CPU of the frontend thread")->capture_default_str();
  cmd.add_option("--backend-cpu", o->run.backend_cpu, "CPU of the backend process")->capture_default_str();
  cmd.add_option("--uvhost", o->run.uvhost_binary, "the uvhost binary to serve with (default: this one)");
  cmd.add_option("--testpmd", o->run.testpmd_binary, "the dpdk-testpmd binary")->capture_default_str();
  add_lab_output_flags(cmd, o->output, "CPU per transaction, p50 and p99 against the offered load");
  cmd.callback([o] { run_load_sweep_lab(*o); });
}

}  // namespace uvhost::cli
