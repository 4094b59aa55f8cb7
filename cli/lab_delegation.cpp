// lab_delegation.cpp - `uvhost lab delegation`: a delegation lock (flat combining /
// ffwd style: the lock holder runs the waiters' critical sections) on the SLAB
// sections (--structure slab, the default), a packet pool and a shared TX queue (pool,
// txq) and the switch's MAC learning under MAC flapping (learning;
// bench/lab/delegation_lab.h); each lock's ops/s against std::mutex with a verdict,
// `--json` and `--plot`.
#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "lab_output.h"
#include "uvhost/bench/lab/delegation_lab.h"

namespace uvhost::cli {

using bench::lab::LockStructure;

void add_lab_delegation(CLI::App& lab) {
  auto* cmd = lab.add_subcommand(
      "delegation",
      "Delegation lock vs qspinlock, CK and std locks on SLAB refill/flush critical sections, "
      "a packet pool, a shared TX queue and the switch's MAC learning");
  struct Flags {
    bench::lab::DelegationLabConfig config;  // its structure is set per run
    std::vector<LockStructure> structures{LockStructure::kSlab};
    LabOutputFlags output;
    bool list = false;
  };
  auto flags = std::make_shared<Flags>();
  auto& c = flags->config;
  cmd->add_option("--threads", c.threads, "Thread counts to run")->delimiter(',')->capture_default_str();
  cmd->add_option("--locks", c.locks, "Locks to compare (default: all; see --list)")
      ->delimiter(',')
      ->check(CLI::IsMember(bench::lab::delegation_lab_locks()));
  add_bounded(*cmd, "--runs", c.runs, "Runs per lock and thread count", 1, 1000);
  add_bounded(*cmd, "--duration-ms", c.duration_ms, "Length of one run", 1, 600000);
  add_bounded(*cmd, "--batch", c.batch, "Objects moved per refill/flush (txq: descriptors per pushed burst)", 1,
              4096);
  cmd->add_option("--private-work", c.private_work, "Private work between critical sections (loop iterations)")
      ->capture_default_str();
  add_names_option(*cmd, "--structure,--structures", flags->structures, bench::lab::kLockStructureNames,
                   "Structures to run: slab (SLAB refill/flush), pool (packet pool with per-thread caches), "
                   "txq (TX queue shared by all workers), learning (the switch's MAC table under MAC flapping)");
  add_bounded(*cmd, "--ring", c.ring, "pool: buffers a thread gets before putting them back", 1, 1 << 16);
  add_bounded(*cmd, "--cache", c.cache_capacity, "pool: buffers per thread cache (>= --batch)", 1, 1 << 16);
  add_bounded(*cmd, "--txq-size", c.txq_capacity, "txq: descriptors the shared queue holds", 1, 1 << 20);
  add_bounded(*cmd, "--consumer-burst", c.consumer_burst, "txq: most descriptors the consumer pops at a time", 1,
              1 << 16);
  add_bounded(*cmd, "--txq-retries", c.txq_retries,
              "txq: times a worker backs off and retries a burst that found the queue full before dropping "
              "the rest (0: drop at once)",
              0, 64);
  add_bounded(*cmd, "--flapping-macs", c.flapping_macs, "learning: source MACs every port sends from", 1, 4096);
  add_lab_output_flags(*cmd, flags->output,
                       "ops/s and CPU ns per critical section per lock and thread count, per structure");
  cmd->add_flag("--list", flags->list, "List the locks and exit");
  cmd->callback([flags] {
    if (flags->list) {
      for (const auto& name : bench::lab::delegation_lab_locks()) fmt::print("{}\n", name);
      return;
    }
    std::vector<nlohmann::json> reports;
    std::vector<bench::BarChart> charts;
    for (LockStructure structure : flags->structures) {
      if (!reports.empty()) std::cout << '\n';
      auto config = flags->config;
      config.structure = structure;
      const auto result = bench::lab::run_delegation_lab(config, lab_progress(flags->output));
      bench::lab::print_delegation_table(result, std::cout);
      std::cout << std::flush;
      reports.push_back(bench::lab::delegation_lab_json(result));
      for (auto& chart : bench::lab::delegation_charts(result)) charts.push_back(std::move(chart));
    }
    // One structure: its report; several: all of them.
    const nlohmann::json json = reports.size() == 1 ? reports.front()
                                                    : nlohmann::json{{"experiment", "delegation"},
                                                                     {"seed", "004"},  // the key tools read
                                                                     {"reports", reports}};
    write_lab_outputs("delegation", flags->output, json, charts);
  });
}

}  // namespace uvhost::cli
