// lab_output.h - what the `uvhost lab` commands share on the command line: the output
// flags (--json FILE, --plot FILE, --quiet), their progress lines, writing the files,
// list options of enum names and bounded numbers. Defined in lab.cpp.
//
// Each file written prints one line naming it on stdout; on failure the lab prints
// "uvhost lab NAME: ..." on stderr and throws CLI::RuntimeError(1).
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "uvhost/base/name_table.h"
#include "uvhost/bench/lab/lab_summary.h"  // LabProgress, and gnuplot.h's BarChart

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
bench::lab::LabProgress lab_progress(const LabOutputFlags& flags);

// `json` (indented) into --json's file and `charts` on one page, `columns` per row
// (bench/gnuplot.h write_bar_charts: .svg or PNG by the extension), titled "uvhost lab
// NAME (`title_note`bars: ...)", into --plot's file; each only when asked for.
void write_lab_outputs(std::string_view lab, const LabOutputFlags& flags, const nlohmann::json& json,
                       const std::vector<bench::BarChart>& charts, int columns = 2, std::string_view title_note = "");

// A comma-separated list option whose names become values: parse(name) gives the value
// or nullopt (a usage error listing `choices`); the default shown is the values' names.
template <class T, class Parse, class Name>
CLI::Option* add_names_option(CLI::App& cmd, const std::string& flag, std::vector<T>& values, Parse parse, Name name,
                              const std::string& choices, const std::string& help) {
  std::vector<std::string> shown;
  for (const T& v : values) shown.emplace_back(name(v));
  const auto check = [parse, choices](const std::string& text) {
    return parse(text) ? std::string() : fmt::format("'{}' unknown ({})", text, choices);
  };
  return cmd
      .add_option_function<std::vector<std::string>>(
          flag,
          [&values, parse](const std::vector<std::string>& texts) {
            values.clear();
            for (const std::string& text : texts) values.push_back(*parse(text));
          },
          help)
      ->delimiter(',')
      ->check(CLI::Validator(check, ""))
      ->default_str(fmt::format("[{}]", fmt::join(shown, ",")));
}

// The same, the names from the enum's table (base/name_table.h).
template <class E, std::size_t N>
CLI::Option* add_names_option(CLI::App& cmd, const std::string& flag, std::vector<E>& values,
                              const base::NameTable<E, N>& table, const std::string& help) {
  return add_names_option(
      cmd, flag, values, [&table](std::string_view text) { return base::parse(table, text); },
      [&table](E value) { return base::name_of(table, value); }, base::join_names(table, ", "), help);
}

// A number option in [low, high], its default shown.
template <class T, class Bound = int>
CLI::Option* add_bounded(CLI::App& cmd, const std::string& flag, T& value, const std::string& description, Bound low,
                         Bound high) {
  return cmd.add_option(flag, value, description)->capture_default_str()->check(CLI::Range(low, high));
}

}  // namespace uvhost::cli
