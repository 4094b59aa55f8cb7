// lab_delegation.cpp - `uvhost lab delegation`: a delegation lock (flat combining /
// ffwd style: the lock holder runs the waiters' critical sections) on the SLAB
// sections (--structure slab, the default) or the datapath's packet pool and shared TX
// queue (pool, txq; bench/lab/delegation_datapath_lab.h); each lock's ops/s against
// std::mutex with a verdict, `--json` and `--plot`.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "commands.h"
#include "lab_output.h"
#include "uvhost/bench/lab/delegation_datapath_lab.h"
#include "uvhost/bench/lab/delegation_lab.h"

namespace uvhost::cli {

void add_lab_delegation(CLI::App& lab) {
  auto* cmd = lab.add_subcommand(
      "delegation",
      "Delegation lock vs qspinlock, CK and std locks on SLAB refill/flush critical sections, "
      "a packet pool and a shared TX queue");
  struct Flags {
    bench::lab::DelegationLabOptions options;
    bench::lab::DatapathLabOptions datapath;  // its `common` is `options`, copied at run time
    std::vector<std::string> structures{"slab"};
    LabOutputFlags output;
    bool list = false;
  };
  auto flags = std::make_shared<Flags>();
  auto& o = flags->options;
  cmd->add_option("--threads", o.threads, "Thread counts to run")->delimiter(',')->capture_default_str();
  cmd->add_option("--locks", o.locks, "Locks to compare (default: all; see --list)")
      ->delimiter(',')
      ->check(CLI::IsMember(bench::lab::delegation_lab_locks()));
  add_bounded(*cmd, "--runs", o.runs, "Runs per lock and thread count", 1, 1000);
  add_bounded(*cmd, "--duration-ms", o.duration_ms, "Length of one run", 1, 600000);
  add_bounded(*cmd, "--batch", o.batch, "Objects moved per refill/flush (txq: descriptors per pushed burst)", 1,
              4096);
  cmd->add_option("--private-work", o.private_work, "Private work between critical sections (loop iterations)")
      ->capture_default_str();
  cmd->add_option("--structure,--structures", flags->structures,
                  "Structures to run: slab (SLAB refill/flush), pool (packet pool with per-thread caches), "
                  "txq (TX queue shared by all workers)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember(bench::lab::delegation_structures()));
  auto& d = flags->datapath;
  add_bounded(*cmd, "--ring", d.ring, "pool: buffers a thread gets before putting them back", 1, 1 << 16);
  add_bounded(*cmd, "--cache", d.cache_capacity, "pool: buffers per thread cache (>= --batch)", 1, 1 << 16);
  add_bounded(*cmd, "--txq-size", d.txq_capacity, "txq: descriptors the shared queue holds", 1, 1 << 20);
  add_bounded(*cmd, "--consumer-burst", d.consumer_burst, "txq: most descriptors the consumer pops at a time", 1,
              1 << 16);
  add_bounded(*cmd, "--txq-retries", d.txq_retries,
              "txq: times a worker backs off and retries a burst that found the queue full before dropping "
              "the rest (0: drop at once)",
              0, 64);
  add_lab_output_flags(*cmd, flags->output,
                       "ops/s and CPU ns per critical section per lock and thread count, per structure");
  cmd->add_flag("--list", flags->list, "List the locks and exit");
  cmd->callback([flags] {
    if (flags->list) {
      for (const auto& name : bench::lab::delegation_lab_locks()) fmt::print("{}\n", name);
      return;
    }
    std::ostream* progress = flags->output.quiet ? nullptr : &std::cerr;
    std::vector<nlohmann::json> reports;
    std::vector<bench::BarChart> charts;
    bool first = true;
    for (const auto& structure : flags->structures) {
      if (!first) std::cout << '\n';
      first = false;
      if (structure == "slab") {
        const auto report = bench::lab::run_delegation_lab(flags->options, progress);
        bench::lab::print_delegation_table(report, std::cout);
        auto j = bench::lab::to_json(report);
        j["structure"] = "slab";
        reports.push_back(std::move(j));
        for (auto& chart : bench::lab::delegation_charts(report)) charts.push_back(std::move(chart));
      } else {
        auto options = flags->datapath;
        options.structure = structure;
        options.common = flags->options;
        const auto report = bench::lab::run_delegation_datapath_lab(options, progress);
        bench::lab::print_datapath_table(report, std::cout);
        reports.push_back(bench::lab::to_json(report));
        for (auto& chart : bench::lab::datapath_charts(report)) charts.push_back(std::move(chart));
      }
      std::cout << std::flush;
    }
    // One structure: its report (with "structure"); several: all of them.
    const nlohmann::json json = reports.size() == 1 ? reports.front()
                                                    : nlohmann::json{{"experiment", "delegation"},
                                                                     {"seed", "004"},  // the key tools read
                                                                     {"reports", reports}};
    write_lab_outputs("delegation", flags->output, json, charts);
  });
}

}  // namespace uvhost::cli
