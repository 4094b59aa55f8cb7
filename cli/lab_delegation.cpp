// lab_delegation.cpp - `uvhost lab delegation`: seed 004's experiment.
#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "commands.h"
#include "uvhost/bench/lab/delegation_lab.h"

namespace uvhost::cli {

void add_lab_delegation(CLI::App& lab) {
  auto* cmd = lab.add_subcommand(
      "delegation",
      "Seed 004: delegation lock vs qspinlock, CK and std locks on SLAB refill/flush critical sections");
  struct Flags {
    bench::lab::DelegationLabOptions options;
    std::string json_path;
    bool quiet = false;
    bool list = false;
  };
  auto flags = std::make_shared<Flags>();
  auto& o = flags->options;
  cmd->add_option("--threads", o.threads, "Thread counts to run")->delimiter(',')->capture_default_str();
  cmd->add_option("--locks", o.locks, "Locks to compare (default: all; see --list)")->delimiter(',');
  cmd->add_option("--runs", o.runs, "Runs per lock and thread count")->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--duration-ms", o.duration_ms, "Length of one run")->capture_default_str()->check(CLI::Range(1, 600000));
  cmd->add_option("--batch", o.batch, "Objects moved per refill/flush")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--private-work", o.private_work, "Private work between critical sections (loop iterations)")
      ->capture_default_str();
  cmd->add_option("--json", flags->json_path, "Also write all samples and summaries as JSON to this file");
  cmd->add_flag("--quiet", flags->quiet, "No progress lines");
  cmd->add_flag("--list", flags->list, "List the locks and exit");
  cmd->callback([flags] {
    if (flags->list) {
      for (const auto& name : bench::lab::delegation_lab_locks()) fmt::print("{}\n", name);
      return;
    }
    const auto report = bench::lab::run_delegation_lab(flags->options, flags->quiet ? nullptr : &std::cerr);
    bench::lab::print_delegation_table(report, std::cout);
    if (!flags->json_path.empty()) {
      std::ofstream out(flags->json_path);
      out << bench::lab::to_json(report).dump(2) << '\n';
      if (!out) throw CLI::RuntimeError(fmt::format("cannot write {}", flags->json_path), 1);
    }
  });
}

}  // namespace uvhost::cli
