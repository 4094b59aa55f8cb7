// lab_workqueue.cpp - `uvhost lab workqueue`: enqueue strategies of the Linux vhost
// worker's vhost_work_queue (wake inside the lock, "wake up the worker outside the
// lock", a lock-free list), throughput and worker CPU with 95% confidence intervals and a
// verdict against the first strategy. The sync half measures the WorkQueue alone;
// `--datapath` adds (and `--datapath-only` runs only) the half on the real
// datapath::Worker, kicked through eventfds.
#include <iostream>
#include <memory>
#include <stdexcept>

#include "commands.h"
#include "lab_output.h"
#include "uvhost/bench/lab/workqueue_datapath_lab.h"

namespace uvhost::cli {
namespace {

struct WorkqueueOptions {
  bench::lab::WorkqueueLabConfig config;  // its load's flags are shared by both halves
  bench::lab::WorkqueueDatapathConfig datapath;
  LabOutputFlags output;
  bool with_datapath = false;
  bool datapath_only = false;
};

void run_lab_workqueue(WorkqueueOptions& options) {
  const auto& config = options.config;
  auto& dp_config = options.datapath;
  static_cast<bench::lab::WorkqueueLoad&>(dp_config) = config;
  const bool run_sync = !options.datapath_only;
  const bool run_datapath = options.with_datapath || options.datapath_only;
  try {
    bench::lab::validate(config);
    if (run_datapath) bench::lab::validate(dp_config);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "uvhost lab workqueue: {}\n", e.what());
    throw CLI::RuntimeError(2);
  }

  const auto progress = lab_progress(options.output);
  // A half: its heading and load above its runs, then its tables; returns its result.
  const auto run_half = [&](const std::string& heading, const char* saturating, const std::string& paced,
                            const auto& run, const auto& print_tables) {
    fmt::print("{}\nmode: {}\n", heading,
               config.saturate ? std::string(saturating) : fmt::format("paced, {:.0f} {}", config.rate, paced));
    fmt::print("{} runs x {} ms per cell, strategies interleaved; cells are mean ±95% CI\n\n", config.runs,
               config.duration_ms);
    const auto result = run(progress);
    if (!options.output.quiet) fmt::print(stderr, "\n");
    print_tables(result, std::cout);
    std::cout.flush();
    return result;
  };
  nlohmann::json json = {{"experiment", "workqueue"}, {"seed", "000"}};  // the keys the sync half writes
  std::vector<bench::BarChart> charts;  // the sync half's, then the datapath half's
  if (run_sync) {
    const auto result = run_half(
        fmt::format("vhost_work_queue (the Linux vhost worker) - {} producers -> 1 worker, work item = {} ns of CPU",
                    fmt::join(config.threads, "/"), config.work_ns),
        "saturating (producers call queue() in a loop; compare throughput)",
        "queue() calls/s offered in total (same throughput; compare worker CPU)",
        [&](const auto& p) { return bench::lab::run_workqueue_lab(config, p); }, bench::lab::print_workqueue_tables);
    json = bench::lab::workqueue_lab_json(result);
    charts = bench::lab::workqueue_charts(result);
  }

  uint64_t lost = 0;
  if (run_datapath) {
    const auto result = run_half(
        fmt::format("{}vhost_work_queue on the datapath: {} queues (one producer thread each) -> 1 datapath::Worker, "
                    "handler = {} ns of CPU",
                    run_sync ? "\n" : "", fmt::join(dp_config.queues, "/"), dp_config.work_ns),
        "saturating (producers kick in a loop; compare kicks handled)", "kicks/s offered in total (compare worker CPU)",
        [&](const auto& p) { return bench::lab::run_workqueue_datapath_lab(dp_config, p); },
        bench::lab::print_workqueue_datapath_tables);
    json["datapath"] = bench::lab::workqueue_datapath_json(result);
    for (auto& chart : bench::lab::workqueue_datapath_charts(result)) charts.push_back(std::move(chart));
    lost = result.total_lost();
  }

  write_lab_outputs("workqueue", options.output, json, charts);
  if (lost != 0) {
    fmt::print(stderr, "uvhost lab workqueue: {} kicks were never consumed (lost wake-up)\n", lost);
    throw CLI::RuntimeError(1);
  }
}

}  // namespace

void add_lab_workqueue(CLI::App& lab) {
  auto options = std::make_shared<WorkqueueOptions>();
  auto& config = options->config;
  auto* cmd = lab.add_subcommand(
      "workqueue", "The vhost worker's vhost_work_queue enqueue strategies (wake in lock / after unlock / lockless)");
  cmd->add_option("--threads", config.threads, "Producer thread counts")->delimiter(',')->capture_default_str();
  add_names_option(*cmd, "--strategies", config.strategies, sync::kEnqueueStrategyNames,
                   "Enqueue strategies: locked_wake (a), unlock_wake (b), lockless (c)");
  add_lab_run_flags(*cmd, config.runs, config.duration_ms);
  cmd->add_option("--rate", config.rate, "Paced mode: total queue() calls per second")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--saturate", config.saturate, "Producers queue in a tight loop (no pacing)");
  cmd->add_option("--work-ns", config.work_ns, "CPU time burned by one work item run (handle_tx)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_lab_output_flags(*cmd, options->output, "throughput and worker CPU per strategy and producer / queue count");
  cmd->add_flag("--datapath", options->with_datapath,
                "After the WorkQueue half, run the strategies on the real datapath::Worker (eventfd kicks)");
  cmd->add_flag("--datapath-only", options->datapath_only, "Run only the datapath::Worker half");
  cmd->add_option("--queues", options->datapath.queues, "Datapath half: kicked queues (one producer thread each)")
      ->delimiter(',')
      ->capture_default_str();
  add_names_option(*cmd, "--kick-paths", options->datapath.paths, bench::lab::kKickPathNames,
                   "Datapath half: eventfd (guest kick via the worker's epoll), inject (producer queues the handler)");
  cmd->callback([options] { run_lab_workqueue(*options); });
}

}  // namespace uvhost::cli
