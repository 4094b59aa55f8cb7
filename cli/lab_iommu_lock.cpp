// lab_iommu_lock.cpp - `uvhost lab iommu-lock`: guest-address translation through the
// read-mostly guest memory table under each guard policy (the vfio type1 change from a
// mutex to an rwsem for IOVA lookups, and RCU), with and without a writer, with 95%
// confidence intervals and a verdict against the mutex.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "lab_output.h"
#include "uvhost/bench/lab/iommu_lock_lab.h"

namespace uvhost::cli {
namespace {

struct IommuLockOptions {
  bench::lab::IommuLockLabConfig config;
  LabOutputFlags output;
};

void run_lab_iommu_lock(IommuLockOptions& options) {
  const auto& config = options.config;
  fmt::print("read-mostly DMA-mapping table (vfio type1: mutex vs rwsem) - {} reader threads translate through "
             "{}\n",
             fmt::join(config.threads, "/"),
             config.table == bench::lab::IommuTableKind::kIotlb
                 ? fmt::format("the IOTLB's IOVA view ({} page translations; an update remaps one page)",
                               bench::lab::IommuTable::kIotlbPages)
                 : std::string("the guest memory map (an update is a new memory table)"));
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
  if (const uint64_t mismatches = result.total(&bench::lab::IommuLockLabCell::mismatches); mismatches != 0) {
    fmt::print(stderr, "uvhost lab iommu-lock: {} translations returned a wrong host address\n", mismatches);
    throw CLI::RuntimeError(1);
  }
}

}  // namespace

void add_lab_iommu_lock(CLI::App& lab) {
  auto options = std::make_shared<IommuLockOptions>();
  auto* cmd = lab.add_subcommand(
      "iommu-lock", "Read-mostly guest memory table (vfio type1's IOVA lookups) behind mutex / rwsem / "
                    "pthread-rwlock / RCU");
  cmd->add_option("--threads", options->config.threads, "Reader thread counts")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  constexpr const auto& tables = experiments::kIommuTableKindNames;
  cmd->add_option_function<std::string>(
         "--table",
         [options](const std::string& text) { options->config.table = *base::parse(tables, text); },
         "What is translated through and updated: memory-table (SET_MEM_TABLE) or iotlb "
         "(VIRTIO_F_ACCESS_PLATFORM: IOVA lookups, one IOTLB update per map change)")
      ->check(CLI::Validator(
          [](const std::string& text) {
            return base::parse(tables, text) ? std::string()
                                             : fmt::format("'{}' unknown ({})", text, base::join_names(tables, ", "));
          },
          ""))
      ->default_str(std::string(base::name_of(tables, options->config.table)));
  add_names_option(*cmd, "--policies", options->config.policies, sync::kGuardPolicyNames, "Guard policies");
  add_names_option(*cmd, "--mixes", options->config.mixes, bench::lab::kIommuMixNames,
                   "Workloads: mix (one writer, see --reads-per-update), read-only");
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
