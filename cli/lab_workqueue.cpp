// lab_workqueue.cpp - `uvhost lab workqueue`: enqueue strategies of the Linux vhost
// worker's vhost_work_queue (wake inside the lock, "wake up the worker outside the
// lock", a lock-free list), throughput and worker CPU with 95% confidence intervals and a
// verdict against the first strategy. The sync half measures the WorkQueue alone;
// `--datapath` adds (and `--datapath-only` runs only) the half on the real
// datapath::Worker, kicked through eventfds.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "commands.h"
#include "lab_output.h"
#include "uvhost/bench/lab/workqueue_datapath_lab.h"
#include "uvhost/bench/lab/workqueue_lab.h"

namespace uvhost::cli {
namespace {

struct WorkqueueOptions {
  bench::lab::WorkqueueLabConfig config;
  std::vector<std::string> strategies{"locked_wake", "unlock_wake", "lockless"};
  LabOutputFlags output;
  // The datapath half.
  bool datapath = false;
  bool datapath_only = false;
  std::vector<int> queues{1, 8, 64, 256};
  std::vector<std::string> kick_paths{"eventfd", "inject"};
};

bench::lab::WorkqueueDatapathConfig datapath_config(const WorkqueueOptions& options) {
  const auto& s = options.config;  // the sync half's flags, shared by both halves
  bench::lab::WorkqueueDatapathConfig config;
  std::tie(config.queues, config.strategies, config.runs, config.duration_ms, config.saturate, config.rate,
           config.work_ns) = std::tie(options.queues, s.strategies, s.runs, s.duration_ms, s.saturate, s.rate, s.work_ns);
  config.paths.clear();
  for (const auto& name : options.kick_paths) {
    if (name != "eventfd" && name != "inject") {
      fmt::print(stderr, "unknown kick path '{}' (eventfd|inject)\n", name);
      throw CLI::RuntimeError(2);
    }
    config.paths.push_back(name == "eventfd" ? bench::lab::KickPath::kEventfd : bench::lab::KickPath::kInject);
  }
  return config;
}

void run_lab_workqueue(WorkqueueOptions& options) {
  auto& config = options.config;
  config.strategies.clear();
  for (const auto& name : options.strategies) {
    auto strategy = sync::parse_enqueue_strategy(name);
    if (!strategy) {
      fmt::print(stderr, "unknown strategy '{}' ({})\n", name, base::join_names(sync::kEnqueueStrategyNames, "|"));
      throw CLI::RuntimeError(2);
    }
    config.strategies.push_back(*strategy);
  }
  const bool run_sync = !options.datapath_only;
  const bool run_datapath = options.datapath || options.datapath_only;
  bench::lab::WorkqueueDatapathConfig dp_config;
  try {
    bench::lab::validate(config);
    if (run_datapath) {
      dp_config = datapath_config(options);
      bench::lab::validate(dp_config);
    }
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "uvhost lab workqueue: {}\n", e.what());
    throw CLI::RuntimeError(2);
  }

  const auto progress = lab_progress(options.output);
  nlohmann::json json;
  std::vector<bench::BarChart> charts;  // the sync half's, then the datapath half's
  if (run_sync) {
    fmt::print("vhost_work_queue (the Linux vhost worker) - {} producers -> 1 worker, work item = {} ns of CPU\n",
               fmt::join(config.threads, "/"), config.work_ns);
    if (config.saturate) {
      fmt::print("mode: saturating (producers call queue() in a loop; compare throughput)\n");
    } else {
      fmt::print("mode: paced, {:.0f} queue() calls/s offered in total (same throughput; compare worker CPU)\n",
                 config.rate);
    }
    fmt::print("{} runs x {} ms per cell, strategies interleaved; cells are mean ±95% CI\n\n", config.runs,
               config.duration_ms);
    bench::lab::WorkqueueLabResult result = bench::lab::run_workqueue_lab(config, progress);
    if (!options.output.quiet) fmt::print(stderr, "\n");
    bench::lab::print_workqueue_tables(result, std::cout);
    std::cout.flush();
    json = bench::lab::workqueue_lab_json(result);
    charts = bench::lab::workqueue_charts(result);
  } else {
    json = {{"experiment", "workqueue"}, {"seed", "000"}};  // the JSON keys the sync half writes
  }

  uint64_t lost = 0;
  if (run_datapath) {
    fmt::print("{}vhost_work_queue on the datapath: {} queues (one producer thread each) -> 1 datapath::Worker, "
               "handler = {} ns of CPU\n",
               run_sync ? "\n" : "", fmt::join(dp_config.queues, "/"), dp_config.work_ns);
    if (dp_config.saturate) {
      fmt::print("mode: saturating (producers kick in a loop; compare kicks handled)\n");
    } else {
      fmt::print("mode: paced, {:.0f} kicks/s offered in total (compare worker CPU)\n", dp_config.rate);
    }
    fmt::print("{} runs x {} ms per cell, strategies interleaved; cells are mean ±95% CI\n\n", dp_config.runs,
               dp_config.duration_ms);
    bench::lab::WorkqueueDatapathResult dp_result = bench::lab::run_workqueue_datapath_lab(dp_config, progress);
    if (!options.output.quiet) fmt::print(stderr, "\n");
    bench::lab::print_workqueue_datapath_tables(dp_result, std::cout);
    std::cout.flush();
    json["datapath"] = bench::lab::workqueue_datapath_json(dp_result);
    for (auto& chart : bench::lab::workqueue_datapath_charts(dp_result)) charts.push_back(std::move(chart));
    lost = dp_result.total_lost();
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
  auto* cmd = lab.add_subcommand(
      "workqueue", "The vhost worker's vhost_work_queue enqueue strategies (wake in lock / after unlock / lockless)");
  cmd->add_option("--threads", options->config.threads, "Producer thread counts")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--strategies", options->strategies,
                  "Enqueue strategies: locked_wake (a), unlock_wake (b), lockless (c)")
      ->delimiter(',')
      ->capture_default_str();
  add_lab_run_flags(*cmd, options->config.runs, options->config.duration_ms);
  cmd->add_option("--rate", options->config.rate, "Paced mode: total queue() calls per second")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--saturate", options->config.saturate, "Producers queue in a tight loop (no pacing)");
  cmd->add_option("--work-ns", options->config.work_ns, "CPU time burned by one work item run (handle_tx)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_lab_output_flags(*cmd, options->output,
                       "throughput and worker CPU per strategy and producer / queue count");
  cmd->add_flag("--datapath", options->datapath,
                "After the WorkQueue half, run the strategies on the real datapath::Worker (eventfd kicks)");
  cmd->add_flag("--datapath-only", options->datapath_only, "Run only the datapath::Worker half");
  cmd->add_option("--queues", options->queues, "Datapath half: kicked queues (one producer thread each)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--kick-paths", options->kick_paths,
                  "Datapath half: eventfd (guest kick via the worker's epoll), inject (producer queues the handler)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->callback([options] { run_lab_workqueue(*options); });
}

}  // namespace uvhost::cli
