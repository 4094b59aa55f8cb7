// lab_workqueue.cpp - `uvhost lab workqueue` (seed 000): enqueue strategies of
// vhost_work_queue, throughput and worker CPU with 95% confidence intervals.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "uvhost/bench/lab/workqueue_lab.h"

namespace uvhost::cli {
namespace {

struct WorkqueueOptions {
  bench::lab::WorkqueueLabConfig config;
  std::vector<std::string> strategies{"locked_wake", "unlock_wake", "lockless"};
  std::string json_path;
  bool quiet = false;
};

void run_lab_workqueue(WorkqueueOptions& options) {
  auto& config = options.config;
  config.strategies.clear();
  for (const auto& name : options.strategies) {
    auto strategy = sync::parse_enqueue_strategy(name);
    if (!strategy) {
      fmt::print(stderr, "unknown strategy '{}' (locked_wake|unlock_wake|lockless, or a|b|c)\n", name);
      throw CLI::RuntimeError(2);
    }
    config.strategies.push_back(*strategy);
  }
  try {
    bench::lab::validate(config);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "uvhost lab workqueue: {}\n", e.what());
    throw CLI::RuntimeError(2);
  }

  fmt::print("seed 000: vhost_work_queue - {} producers -> 1 worker, work item = {} ns of CPU\n",
             fmt::join(config.threads, "/"), config.work_ns);
  if (config.saturate) {
    fmt::print("mode: saturating (producers call queue() in a loop; compare throughput)\n");
  } else {
    fmt::print("mode: paced, {:.0f} queue() calls/s offered in total (same throughput; compare worker CPU)\n",
               config.rate);
  }
  fmt::print("{} runs x {} ms per cell, strategies interleaved; cells are mean ±95% CI\n\n", config.runs,
             config.duration_ms);

  auto progress = [&options](const std::string& line) {
    if (!options.quiet) fmt::print(stderr, "  {}\n", line);
  };
  bench::lab::WorkqueueLabResult result = bench::lab::run_workqueue_lab(config, progress);
  if (!options.quiet) fmt::print(stderr, "\n");
  bench::lab::print_workqueue_tables(result, std::cout);
  std::cout.flush();

  if (!options.json_path.empty()) {
    std::ofstream file(options.json_path);
    if (!file) {
      fmt::print(stderr, "cannot write {}\n", options.json_path);
      throw CLI::RuntimeError(1);
    }
    file << bench::lab::workqueue_lab_json(result).dump(2) << "\n";
    fmt::print("\nJSON written to {}\n", options.json_path);
  }
}

}  // namespace

void add_lab_workqueue(CLI::App& lab) {
  auto options = std::make_shared<WorkqueueOptions>();
  auto* cmd = lab.add_subcommand(
      "workqueue", "Seed 000: vhost_work_queue enqueue strategies (wake in lock / after unlock / lockless)");
  cmd->add_option("--threads", options->config.threads, "Producer thread counts")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--strategies", options->strategies,
                  "Enqueue strategies: locked_wake (a), unlock_wake (b), lockless (c)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--runs", options->config.runs, "Repeated runs per cell (for the confidence interval)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--duration-ms", options->config.duration_ms, "Measured window of one run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--rate", options->config.rate, "Paced mode: total queue() calls per second")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--saturate", options->config.saturate, "Producers queue in a tight loop (no pacing)");
  cmd->add_option("--work-ns", options->config.work_ns, "CPU time burned by one work item run (handle_tx)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--json", options->json_path, "Also write all samples and summaries to this JSON file");
  cmd->add_flag("--quiet", options->quiet, "No per-run progress on stderr");
  cmd->callback([options] { run_lab_workqueue(*options); });
}

}  // namespace uvhost::cli
