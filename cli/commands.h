// commands.h - each subcommand of `uvhost` registers itself on the CLI11 app.
//
// A subcommand's file adds its options and a callback; main.cpp only wires them.
// Callbacks report failure by throwing CLI::RuntimeError(exit_code).
//
// The contract every subcommand keeps (README, "The command"):
//  - Exit status: 0 done; kExitFailure (1) it could not be done (a daemon unreachable, a
//    socket in use, a run that failed, a file not written); kExitUsage (2) the command
//    line or a config file is wrong. CLI11's own parse errors (unknown flag, bad value,
//    missing subcommand) are mapped to 2 by main.cpp; --help and --version exit 0.
//  - stdout carries results only (tables, JSON, Prometheus text, --print-config), so
//    it can be piped; logs, progress and errors go to stderr.
//  - A flag that sets what a config file or a key list also sets has that key's name
//    with '-' for '_' (--pool-workers is pool_workers, --busy-us is busy_us).
#pragma once

#include <CLI/CLI.hpp>

namespace uvhost::cli {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

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
void add_ctl_command(CLI::App& app);

// `uvhost lab <experiment>`: one function per lab experiment (bench/lab).
void add_lab_delegation(CLI::App& lab);
void add_lab_workqueue(CLI::App& lab);
void add_lab_iommu_lock(CLI::App& lab);
void add_lab_busypoll(CLI::App& lab);
void add_lab_busyloop_intr(CLI::App& lab);
void add_lab_load_sweep(CLI::App& lab);

}  // namespace uvhost::cli
