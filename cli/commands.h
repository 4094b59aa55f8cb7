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
// Returns the `ctl` subcommand: main.cpp maps its parse errors to exit status 2.
CLI::App* add_ctl_command(CLI::App& app);

// `uvhost lab <experiment>`: one function per seed experiment.
void add_lab_delegation(CLI::App& lab);
void add_lab_workqueue(CLI::App& lab);

}  // namespace uvhost::cli
