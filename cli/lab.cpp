// lab.cpp - `uvhost lab`: the seeds' experiments, one subcommand each.
#include "commands.h"

namespace uvhost::cli {

void add_lab_command(CLI::App& app) {
  auto* lab = app.add_subcommand(
      "lab", "Re-run a seed thread's experiment and print its table with confidence intervals");
  lab->require_subcommand(1);
  add_lab_delegation(*lab);
  add_lab_workqueue(*lab);
  add_lab_iommu_lock(*lab);
  add_lab_busypoll(*lab);
  add_lab_busyloop_intr(*lab);
}

}  // namespace uvhost::cli
