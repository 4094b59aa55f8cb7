// lab_iommu_lock.cpp - `uvhost lab iommu-lock` (seed 002): guest-address translation
// through the read-mostly guest memory table under each guard policy, with and
// without a writer, with 95% confidence intervals and a verdict against the mutex.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "lab_output.h"
#include "uvhost/bench/lab/iommu_lock_lab.h"

namespace uvhost::cli {
namespace {

struct IommuLockOptions {
  bench::lab::IommuLockLabConfig config;
  std::vector<std::string> policies{"mutex", "rwsem", "pthread-rwlock", "rcu"};
  std::vector<std::string> mixes{"mix", "read-only"};
  std::string json_path;
  std::string plot_path;
  bool quiet = false;
};

[[noreturn]] void usage_error(const std::string& message) {
  fmt::print(stderr, "uvhost lab iommu-lock: {}\n", message);
  throw CLI::RuntimeError(2);
}

void run_lab_iommu_lock(IommuLockOptions& options) {
  auto& config = options.config;
  config.policies.clear();
  for (const auto& name : options.policies) {
    auto policy = sync::guard_policy_from_string(name);
    if (!policy) usage_error(fmt::format("unknown policy '{}' (mutex|rwsem|pthread-rwlock|rcu)", name));
    config.policies.push_back(*policy);
  }
  config.mixes.clear();
  for (const auto& name : options.mixes) {
    if (name == "mix") {
      config.mixes.push_back(bench::lab::IommuMix::kMixed);
    } else if (name == "read-only") {
      config.mixes.push_back(bench::lab::IommuMix::kReadOnly);
    } else {
      usage_error(fmt::format("unknown mix '{}' (mix|read-only)", name));
    }
  }
  try {
    bench::lab::validate(config);
  } catch (const std::invalid_argument& e) {
    usage_error(e.what());
  }

  fmt::print("seed 002: read-mostly DMA-mapping table - {} reader threads translate through the guest memory map\n",
             fmt::join(config.threads, "/"));
  fmt::print("mix {}:1 = one writer publishes a new map per {} translations; read-only = no writer\n",
             config.reads_per_update, config.reads_per_update);
  fmt::print("{} runs x {} ms per cell, policies interleaved (order rotated each run); cells are mean ±95% CI\n\n",
             config.runs, config.duration_ms);

  auto progress = [&options](const std::string& line) {
    if (!options.quiet) fmt::print(stderr, "  {}\n", line);
  };
  bench::lab::IommuLockLabResult result = bench::lab::run_iommu_lock_lab(config, progress);
  if (!options.quiet) fmt::print(stderr, "\n");
  bench::lab::print_iommu_lock_tables(result, std::cout);
  std::cout.flush();

  if (!options.json_path.empty())
    write_lab_json("iommu-lock", options.json_path, bench::lab::iommu_lock_lab_json(result));
  if (!options.plot_path.empty()) {
    write_lab_plot("iommu-lock", options.plot_path, bench::lab::iommu_lock_charts(result), 2);
  }
  if (result.total_mismatches() != 0) {
    fmt::print(stderr, "uvhost lab iommu-lock: {} translations returned a wrong host address\n",
               result.total_mismatches());
    throw CLI::RuntimeError(1);
  }
}

}  // namespace

void add_lab_iommu_lock(CLI::App& lab) {
  auto options = std::make_shared<IommuLockOptions>();
  auto* cmd = lab.add_subcommand(
      "iommu-lock", "Seed 002: read-mostly guest memory table behind mutex / rwsem / pthread-rwlock / RCU");
  cmd->add_option("--threads", options->config.threads, "Reader thread counts")->delimiter(',')->capture_default_str();
  cmd->add_option("--policies", options->policies, "Guard policies: mutex, rwsem, pthread-rwlock, rcu")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--mixes", options->mixes, "Workloads: mix (one writer, see --reads-per-update), read-only")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--runs", options->config.runs, "Repeated runs per cell (for the confidence interval)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--duration-ms", options->config.duration_ms, "Measured window of one run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--reads-per-update", options->config.reads_per_update,
                  "Mix: translations per map update, all readers together (the seed's 24921:67 = 372)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--sample-every", options->config.sample_every, "Time one translation in this many (stalls)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--json", options->json_path, "Also write all samples and summaries to this JSON file");
  cmd->add_option("--plot", options->plot_path,
                  "Also draw ns per translation per policy and thread count (.png or .svg, with gnuplot)");
  cmd->add_flag("--quiet", options->quiet, "No per-run progress on stderr");
  cmd->callback([options] { run_lab_iommu_lock(*options); });
}

}  // namespace uvhost::cli
