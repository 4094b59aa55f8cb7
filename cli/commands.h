// commands.h - each subcommand of `uvhost` registers itself on the CLI11 app.
//
// A subcommand's file adds its options and a callback; main.cpp only wires them.
// Callbacks report failure by throwing CLI::RuntimeError(exit_code).
#pragma once

#include <CLI/CLI.hpp>

namespace uvhost::cli {

void add_version_command(CLI::App& app);
void add_lab_command(CLI::App& app);
void add_serve_command(CLI::App& app);
// `uvhost bench`: the workloads of bench/include/uvhost/bench/workload.h. Takes optional
// subcommands (compare, calibrate) added by their own files.
void add_bench_command(CLI::App& app);
// `uvhost bench compare` and `uvhost bench calibrate` (cli/bench_compare.cpp), added to
// the `bench` subcommand.
void add_bench_compare(CLI::App& bench);
void add_bench_calibrate(CLI::App& bench);
// Returns the `ctl` subcommand: main.cpp maps its parse errors to exit status 2.
CLI::App* add_ctl_command(CLI::App& app);

// `uvhost lab <experiment>`: one function per seed experiment.
void add_lab_delegation(CLI::App& lab);
void add_lab_workqueue(CLI::App& lab);
void add_lab_iommu_lock(CLI::App& lab);
void add_lab_busypoll(CLI::App& lab);
void add_lab_busyloop_intr(CLI::App& lab);

}  // namespace uvhost::cli
