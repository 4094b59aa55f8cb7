// lab_output.h - what the sync-level `uvhost lab` commands (iommu-lock, workqueue,
// delegation) share on the command line: the output flags (--json FILE, --plot FILE,
// --quiet), their progress lines, and writing the files. Defined in lab.cpp.
//
// Each file written prints one line naming it on stdout; on failure the lab prints
// "uvhost lab NAME: ..." on stderr and throws CLI::RuntimeError(1).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "uvhost/bench/gnuplot.h"

namespace uvhost::cli {

struct LabOutputFlags {
  std::string json_path;
  std::string plot_path;
  bool quiet = false;
};

// --json, --plot (`plot_help` says what is drawn) and --quiet.
void add_lab_output_flags(CLI::App& cmd, LabOutputFlags& flags, const std::string& plot_help);
// --runs and --duration-ms (both positive).
void add_lab_run_flags(CLI::App& cmd, int& runs, int& duration_ms);
// Each run's progress line on stderr ("  LINE"), unless --quiet.
std::function<void(const std::string&)> lab_progress(const LabOutputFlags& flags);

// `json` (indented) into --json's file and `charts` on one page, `columns` per row
// (bench/gnuplot.h write_bar_charts: .svg or PNG by the extension), titled "uvhost lab
// NAME (...)", into --plot's file; each only when asked for.
void write_lab_outputs(std::string_view lab, const LabOutputFlags& flags, const nlohmann::json& json,
                       const std::vector<bench::BarChart>& charts, int columns = 2);

}  // namespace uvhost::cli
