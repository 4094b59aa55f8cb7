// lab.cpp - `uvhost lab`: one subcommand per experiment, and what the labs
// share on the command line (lab_output.h).
#include <fmt/format.h>

#include <fstream>

#include "commands.h"
#include "lab_output.h"

namespace uvhost::cli {

void add_lab_command(CLI::App& app) {
  auto* lab = app.add_subcommand(
      "lab", "Re-run an upstream change's experiment and print its table with confidence intervals");
  lab->require_subcommand(1);
  add_lab_delegation(*lab);
  add_lab_workqueue(*lab);
  add_lab_iommu_lock(*lab);
  add_lab_busypoll(*lab);
  add_lab_busyloop_intr(*lab);
  add_lab_load_sweep(*lab);
}

void add_lab_output_flags(CLI::App& cmd, LabOutputFlags& flags, const std::string& plot_help) {
  cmd.add_option("--json", flags.json_path, "Also write all samples and summaries to this JSON file");
  cmd.add_option("--plot", flags.plot_path, "Also draw " + plot_help + " (.png or .svg, with gnuplot)");
  cmd.add_flag("--quiet", flags.quiet, "No per-run progress on stderr");
}

void add_lab_run_flags(CLI::App& cmd, int& runs, int& duration_ms) {
  cmd.add_option("--runs", runs, "Repeated runs per cell (for the confidence interval)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--duration-ms", duration_ms, "Measured window of one run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

bench::lab::LabProgress lab_progress(const LabOutputFlags& flags) {
  return [quiet = flags.quiet](const std::string& line) {
    if (!quiet) fmt::print(stderr, "  {}\n", line);
  };
}

void write_lab_outputs(std::string_view lab, const LabOutputFlags& flags, const nlohmann::json& json,
                       const std::vector<bench::BarChart>& charts, int columns, std::string_view title_note) {
  if (!flags.json_path.empty()) {
    std::ofstream file(flags.json_path);
    file << json.dump(2) << "\n";
    file.close();
    if (!file) {
      fmt::print(stderr, "uvhost lab {}: cannot write {}\n", lab, flags.json_path);
      throw CLI::RuntimeError(1);
    }
    fmt::print("\nJSON written to {}\n", flags.json_path);
  }
  if (flags.plot_path.empty()) return;
  std::string error;
  const std::string title = fmt::format("uvhost lab {} ({}bars: mean, whiskers: 95% CI)", lab, title_note);
  if (!bench::write_bar_charts(flags.plot_path, title, charts, columns, error)) {
    fmt::print(stderr, "uvhost lab {}: plot: {}\n", lab, error);
    throw CLI::RuntimeError(1);
  }
  fmt::print("plot written to {}\n", flags.plot_path);
}

}  // namespace uvhost::cli
