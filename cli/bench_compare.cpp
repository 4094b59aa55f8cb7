// bench_compare.cpp - `uvhost bench compare` (is B better than A, or is it noise?) and
// `uvhost bench calibrate` (does compare's verdict hold on this machine?). The runs,
// statistics and reports live in the bench library (ab_compare.h, ab_report.h,
// ab_plot.h, calibrate.h) and so does their setup (compare_setup.h: retries, runners,
// interleaving); this file parses flags and calls in.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "uvhost/bench/ab_compare.h"
#include "uvhost/bench/ab_plot.h"
#include "uvhost/bench/ab_report.h"
#include "uvhost/bench/bench_report.h"
#include "uvhost/bench/calibrate.h"
#include "uvhost/bench/compare_setup.h"
#include "uvhost/bench/workload.h"

namespace uvhost::cli {
namespace {

// What compare and calibrate both take: how each run is made.
struct RunFlags {
  uint32_t runs = bench::CompareDefaults::kRuns;
  bool no_pin = false;
  std::string frontend = "embedded";
  std::string interleave = "auto";
  double min_effect = bench::CompareDefaults::kMinEffect;
  // Given or not: their defaults depend on the interleaving.
  const CLI::Option* seconds_flag = nullptr;
  const CLI::Option* min_effect_flag = nullptr;
  bench::RunOptions options = [] {
    bench::RunOptions o;
    o.seconds = bench::CompareDefaults::kSeconds;
    o.warmup_seconds = bench::CompareDefaults::kWarmupSeconds;
    return o;
  }();
};

struct CompareOptions {
  std::string a;
  std::string b;
  std::vector<std::string> workloads{"rr"};
  std::vector<uint32_t> sizes{64};
  std::vector<uint32_t> sessions{1};
  std::string method{bench::to_string(bench::CompareDefaults::kMethod)};
  RunFlags run;
  std::string plot_path;
  std::string json_path;
  std::string csv_path;
};

struct CalibrateOptions {
  std::string config{bench::CalibrateDefaults::kConfig};
  std::string workload{bench::to_string(bench::CalibrateDefaults::kWorkload)};
  uint32_t size = bench::CalibrateDefaults::kSize;
  uint32_t sessions = bench::CalibrateDefaults::kSessions;
  uint32_t trials = bench::CalibrateDefaults::kTrials;
  double slowdown = bench::CalibrateDefaults::kSlowdown;
  RunFlags run;
  std::string json_path;
};

[[noreturn]] void usage_error(const char* command, const std::string& what) {
  fmt::print(stderr, "uvhost bench {}: {}\n", command, what);
  throw CLI::RuntimeError(2);
}

bench::Config config_or_exit(const char* command, const char* flag, const std::string& text,
                             const char* label) {
  std::string error;
  std::optional<bench::Config> config = bench::parse_config(text, error);
  if (!config) usage_error(command, fmt::format("{}: {}", flag, error));
  if (config->label.empty()) config->label = label;
  return *config;
}

bench::Workload workload_or_exit(const char* command, const std::string& name) {
  auto w = base::parse_enum<bench::Workload>(name);
  if (!w) usage_error(command, base::unknown_name("workload", name, bench::kWorkloadNames));
  return *w;
}

// The run options the flags describe.
bench::RunOptions run_options(const RunFlags& flags) {
  bench::RunOptions options = flags.options;
  options.pin = !flags.no_pin;
  options.frontend = base::parse_enum<bench::Frontend>(flags.frontend).value_or(bench::Frontend::kEmbedded);
  return options;
}

// --interleave, decided by the bench library; a refusal of an explicit request is a
// usage error, a coarser interleaving than asked for is said on stderr.
bench::Interleave interleave_or_exit(const char* command, const RunFlags& flags, const bench::InterleaveChoice& choice,
                                     std::vector<std::string>& live_keys) {
  if (choice.refused) usage_error(command, fmt::format("--interleave {}: {}", flags.interleave, choice.why));
  if (!choice.why.empty()) {
    fmt::print(stderr, "uvhost bench {}: A and B {} ({})\n", command,
               choice.interleave != bench::Interleave::kProcesses ? "in separate runs"
               : flags.frontend == "qemu"                         ? "as two guests side by side"
                                                                  : "in two backend processes side by side",
               choice.why);
  }
  live_keys = choice.live_keys;
  return choice.interleave;
}

// --seconds and --min-effect where given, else the defaults for how A and B alternate.
void apply_interleave_defaults(RunFlags& flags, bench::Interleave interleave) {
  const bool processes = interleave == bench::Interleave::kProcesses;
  if (flags.seconds_flag == nullptr || flags.seconds_flag->count() == 0) {
    flags.options.seconds = processes ? bench::CompareDefaults::kProcessesSeconds : bench::CompareDefaults::kSeconds;
  }
  if (flags.min_effect_flag == nullptr || flags.min_effect_flag->count() == 0) {
    flags.min_effect = processes ? bench::CompareDefaults::kProcessesMinEffect : bench::CompareDefaults::kMinEffect;
  }
}

bench::InterleaveRequest interleave_request(const RunFlags& flags) {
  return base::parse_enum<bench::InterleaveRequest>(flags.interleave)
      .value_or(bench::InterleaveRequest::kAuto);
}

void report_failures(const char* command, size_t failures) {
  if (failures > 0) fmt::print("note: {} run(s) failed and were repeated (reasons on stderr)\n", failures);
  if (failures > 0) fmt::print(stderr, "uvhost bench {}: {} run(s) failed and were repeated\n", command, failures);
}

void print_progress(const std::string& line) {
  fmt::print(stderr, "  {}\n", line);
}

template <typename Write>
void write_file(const char* command, const std::string& path, Write write) {
  std::ofstream file(path);
  write(file);
  file.flush();
  if (!file) {
    fmt::print(stderr, "uvhost bench {}: cannot write {}\n", command, path);
    throw CLI::RuntimeError(1);
  }
}

// The measurement's result; a failure is said on stderr ("uvhost bench <command>:
// why") and exits 1.
template <typename Measure>
auto measure_or_exit(const char* command, Measure measure) {
  try {
    return measure();
  } catch (const std::exception& e) {
    fmt::print(stderr, "uvhost bench {}: {}\n", command, e.what());
    throw CLI::RuntimeError(1);
  }
}

void run_compare_command(CompareOptions& o) {
  bench::CompareSpec spec;
  spec.a = config_or_exit("compare", "--a", o.a, "A");
  spec.b = config_or_exit("compare", "--b", o.b, "B");
  const auto method = base::parse_enum<bench::AbMethod>(o.method);
  if (!method) usage_error("compare", base::unknown_name("--method", o.method, bench::kAbMethodNames));
  spec.method = *method;
  std::vector<bench::Workload> workloads;
  for (const std::string& name : o.workloads) workloads.push_back(workload_or_exit("compare", name));
  spec.points = bench::expand_points(workloads, o.sizes, o.sessions);
  spec.runs = o.run.runs;
  spec.interleave = interleave_or_exit(
      "compare", o.run,
      bench::choose_interleave(interleave_request(o.run), run_options(o.run).frontend, spec.a, spec.b), spec.live_keys);
  apply_interleave_defaults(o.run, spec.interleave);
  spec.frontend = run_options(o.run).frontend;
  spec.min_effect = o.run.min_effect;
  spec.seconds = o.run.options.seconds;
  spec.warmup_seconds = o.run.options.warmup_seconds;
  spec.slice_seconds = o.run.options.slice_seconds;

  fmt::print(stderr, "uvhost bench compare: {} point(s); {}\n", spec.points.size(), bench::interleave_line(spec));
  auto failures = std::make_shared<size_t>(0);
  const bench::CompareResult result = measure_or_exit("compare", [&] {
    return bench::in_one_call(spec.interleave)
               ? bench::run_compare_interleaved(
                     spec, bench::real_pair_runner(run_options(o.run), spec.interleave, failures), print_progress)
               : bench::run_compare(spec, bench::real_runner(run_options(o.run), failures), print_progress);
  });
  bench::print_compare_report(result, std::cout);
  report_failures("compare", *failures);
  std::cout.flush();

  if (!o.json_path.empty()) {
    write_file("compare", o.json_path,
               [&](std::ostream& f) { f << bench::compare_json(result).dump(2) << "\n"; });
  }
  if (!o.csv_path.empty()) {
    write_file("compare", o.csv_path, [&](std::ostream& f) { bench::write_compare_csv(result, f); });
  }
  if (!o.plot_path.empty()) {
    std::string error;
    if (!bench::plot_compare(result, o.plot_path, error)) {
      fmt::print(stderr, "uvhost bench compare: --plot {}: {}\n", o.plot_path, error);
      throw CLI::RuntimeError(1);
    }
    fmt::print("plot written to {}\n", o.plot_path);
  }
}

void run_calibrate_command(CalibrateOptions& o) {
  bench::CalibrateSpec spec;
  spec.base = config_or_exit("calibrate", "--config", o.config, "A");
  spec.point = bench::Point{workload_or_exit("calibrate", o.workload), o.size, o.sessions};
  spec.trials = o.trials;
  spec.slowdown = o.slowdown;
  spec.runs = o.run.runs;
  std::vector<std::string> live_keys;
  spec.interleave = interleave_or_exit(
      "calibrate", o.run,
      bench::choose_calibrate_interleave(interleave_request(o.run), run_options(o.run).frontend, spec.base),
      live_keys);
  apply_interleave_defaults(o.run, spec.interleave);
  spec.seconds = o.run.options.seconds;
  spec.warmup_seconds = o.run.options.warmup_seconds;
  spec.min_effect = o.run.min_effect;
  spec.slice_seconds = o.run.options.slice_seconds;

  fmt::print(stderr, "uvhost bench calibrate: {} trials x (A/A + A/B) x {} rounds, interleaved in {}, {} s + {} s warmup\n",
             spec.trials, spec.runs, bench::to_string(spec.interleave), spec.seconds, spec.warmup_seconds);
  auto failures = std::make_shared<size_t>(0);
  const bench::CalibrateResult result = measure_or_exit("calibrate", [&] {
    return bench::run_calibrate(
        spec, bench::real_runner(run_options(o.run), failures), print_progress,
        bench::in_one_call(spec.interleave) ? bench::real_pair_runner(run_options(o.run), spec.interleave, failures)
                                            : bench::PairRunner{});
  });
  // A measurement, not a test: the exit status is 0 whether or not the targets pass.
  bench::print_calibrate_report(result, std::cout);
  report_failures("calibrate", *failures);
  std::cout.flush();
  if (!o.json_path.empty()) {
    write_file("calibrate", o.json_path,
               [&](std::ostream& f) { f << bench::calibrate_json(result).dump(2) << "\n"; });
  }
}

void add_run_flags(CLI::App* cmd, RunFlags& run) {
  cmd->add_option("--runs", run.runs, "Rounds per point; each round runs A and B once, order alternating")
      ->check(CLI::Range(2, 1000))
      ->capture_default_str();
  run.seconds_flag = cmd->add_option("--seconds", run.options.seconds,
                                     fmt::format("Measured time per side and round (default {} s; {} s with "
                                                 "--interleave processes)",
                                                 bench::CompareDefaults::kSeconds,
                                                 bench::CompareDefaults::kProcessesSeconds))
                          ->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", run.options.warmup_seconds, "Warm-up before each window")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--interleave", run.interleave,
                  "runs: A and B each in their own runs (own backend process); slices: each round one run "
                  "with A and B switched live every --slice (only keys a running backend switches: poll, "
                  "busy_us, exit, memory, enqueue, spin_ns); processes: each round A's and B's backends "
                  "alive together, the frontend alternating between them every --slice, the idle one paused "
                  "(SIGSTOP; any difference, e.g. backend=testpmd; with --frontend qemu two guests, each window "
                  "--slice rounded up to whole seconds); auto: slices where possible, else processes, else runs")
      ->check(CLI::IsMember(base::names(bench::kInterleaveRequestNames)))
      ->capture_default_str();
  cmd->add_option("--slice", run.options.slice_seconds,
                  "--interleave slices or processes: each side's sub-window, seconds (--seconds per side in all)")
      ->check(CLI::Range(0.001, 10.0))
      ->capture_default_str();
  run.min_effect_flag =
      cmd->add_option("--min-effect", run.min_effect,
                      fmt::format("Smallest change a verdict claims, as a fraction (default {}; {} with --interleave "
                                  "processes): better/worse needs the 95% CI to exclude 0 and |change| >= this; 0: "
                                  "the CI alone",
                                  bench::CompareDefaults::kMinEffect, bench::CompareDefaults::kProcessesMinEffect))
          ->check(CLI::Range(0.0, 0.5));
  cmd->add_option("--queues", run.options.queue_pairs, "Queue pairs")->check(CLI::Range(1, 128));
  cmd->add_flag("--no-pin", run.no_pin, "Do not pin the frontend and the backend to CPUs");
  cmd->add_option("--uvhost", run.options.uvhost_binary,
                  "The uvhost binary to serve with (default: this one)");
  cmd->add_option("--testpmd", run.options.testpmd_binary, "The dpdk-testpmd binary");
  cmd->add_option("--frontend", run.frontend,
                  "Traffic source: embedded (ours, in this process) or qemu (a Linux guest: iperf3, ping; "
                  "--seconds and --warmup rounded up to whole seconds, the warm-up to at least 1)")
      ->check(CLI::IsMember(base::names(bench::kFrontendNames)))
      ->capture_default_str();
  cmd->add_option("--guest-dir", run.options.guest_dir,
                  "--frontend qemu: scripts/build-guest.sh's cache (build/guest) or the folder of its vmlinux");
}

}  // namespace

void add_bench_compare(CLI::App& bench) {
  auto o = std::make_shared<CompareOptions>();
  auto* cmd = bench.add_subcommand(
      "compare",
      "A/B: run configs A and B interleaved (in slices of one run where they differ only in live-switchable "
      "keys, else in slices of two backend processes side by side), repeatedly, and say better / worse / "
      "noise with a 95% CI");
  cmd->add_option("--a", o->a, "Config A: KEY=VALUE,... (as `uvhost bench --config`), e.g. poll=notify")
      ->required();
  cmd->add_option("--b", o->b, "Config B, e.g. poll=busy,busy_us=50 or backend=testpmd")->required();
  cmd->add_option("--workloads", o->workloads,
                  "Comma-separated: " + base::join_names(bench::kWorkloadNames, ", "))
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--sizes", o->sizes, "Ethernet frame sizes in bytes, 60..65535")
      ->delimiter(',')
      ->check(CLI::Range(60, 65535))
      ->capture_default_str();
  cmd->add_option("--sessions", o->sessions, "rr: requests in flight; stream: flows")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--method", o->method,
                  "paired-t (t on the log ratios B/A of each round), welch (independent samples) or "
                  "signed-rank (Wilcoxon on the same log ratios: robust to a disturbed round)")
      ->check(CLI::IsMember(base::names(bench::kAbMethodNames)))
      ->capture_default_str();
  add_run_flags(cmd, o->run);
  cmd->add_option("--plot", o->plot_path,
                  "Draw thu and normalize of A and B with 95% CIs (FILE.png or FILE.svg; gnuplot)");
  cmd->add_option("--json", o->json_path, "Write every raw run and every summary here");
  cmd->add_option("--csv", o->csv_path, "Write one row per run here");
  cmd->callback([o] { run_compare_command(*o); });
}

void add_bench_calibrate(CLI::App& bench) {
  auto o = std::make_shared<CalibrateOptions>();
  auto* cmd = bench.add_subcommand("calibrate",
                                   "Check compare on this machine: A/A comparisons must say noise >= 95%, A "
                                   "vs A slowed by --slowdown must say "
                                   "worse >= 80% (exit status 0 either way)");
  cmd->add_option("--config", o->config,
                  "Config A (KEY=VALUE,...); the default busy-polls, where extra work has a known cost")
      ->capture_default_str();
  cmd->add_option("--trials", o->trials, "A/A and A/B comparisons, each")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->add_option("--slowdown", o->slowdown, "Extra frontend work per packet for B, as a fraction")
      ->check(CLI::Range(0.0001, 0.9))
      ->capture_default_str();
  cmd->add_option("--workload", o->workload, base::choice_list(bench::kWorkloadNames))->capture_default_str();
  cmd->add_option("--size", o->size, "Ethernet frame size in bytes")
      ->check(CLI::Range(60, 65535))
      ->capture_default_str();
  cmd->add_option("--sessions", o->sessions, "rr: requests in flight; stream: flows")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  add_run_flags(cmd, o->run);
  cmd->add_option("--json", o->json_path, "Write every trial's runs and comparisons and the rates here");
  cmd->callback([o] { run_calibrate_command(*o); });
}

}  // namespace uvhost::cli
