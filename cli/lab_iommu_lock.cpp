// lab_iommu_lock.cpp - `uvhost lab iommu-lock`: guest-address translation through the
// read-mostly guest memory table under each guard policy (the vfio type1 change from a
// mutex to an rwsem for IOVA lookups, and RCU), with and without a writer, with 95%
// confidence intervals and a verdict against the mutex.
#include <fmt/format.h>

#include <iostream>
#include <memory>
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
  LabOutputFlags output;
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
    if (name != "mix" && name != "read-only") usage_error(fmt::format("unknown mix '{}' (mix|read-only)", name));
    config.mixes.push_back(name == "mix" ? bench::lab::IommuMix::kMixed : bench::lab::IommuMix::kReadOnly);
  }
  try {
    bench::lab::validate(config);
  } catch (const std::invalid_argument& e) {
    usage_error(e.what());
  }

  fmt::print("read-mostly DMA-mapping table (vfio type1: mutex vs rwsem) - {} reader threads translate through "
             "the guest memory map\n",
             fmt::join(config.threads, "/"));
  fmt::print("mix {}:1 = one writer publishes a new map per {} translations; read-only = no writer\n",
             config.reads_per_update, config.reads_per_update);
  fmt::print("{} runs x {} ms per cell, policies interleaved (order rotated each run); cells are mean ±95% CI\n\n",
             config.runs, config.duration_ms);

  const bench::lab::IommuLockLabResult result = bench::lab::run_iommu_lock_lab(config, lab_progress(options.output));
  if (!options.output.quiet) fmt::print(stderr, "\n");
  bench::lab::print_iommu_lock_tables(result, std::cout);
  std::cout.flush();
  write_lab_outputs("iommu-lock", options.output, bench::lab::iommu_lock_lab_json(result),
                    bench::lab::iommu_lock_charts(result));
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
      "iommu-lock", "Read-mostly guest memory table (vfio type1's IOVA lookups) behind mutex / rwsem / "
                    "pthread-rwlock / RCU");
  cmd->add_option("--threads", options->config.threads, "Reader thread counts")->delimiter(',')->capture_default_str();
  cmd->add_option("--policies", options->policies, "Guard policies: mutex, rwsem, pthread-rwlock, rcu")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--mixes", options->mixes, "Workloads: mix (one writer, see --reads-per-update), read-only")
      ->delimiter(',')
      ->capture_default_str();
  add_lab_run_flags(*cmd, options->config.runs, options->config.duration_ms);
  cmd->add_option("--reads-per-update", options->config.reads_per_update,
                  "Mix: translations per map update, all readers together (vfio's boot-time 24921:67 = 372)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--sample-every", options->config.sample_every, "Time one translation in this many (stalls)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_lab_output_flags(*cmd, options->output, "ns per translation per policy and thread count");
  cmd->callback([options] { run_lab_iommu_lock(*options); });
}

}  // namespace uvhost::cli
