// lab_summary.h - what the sync-level labs (workqueue, iommu-lock, delegation) share
// once their runs are in: per-figure summaries, each variant held against the
// baseline with a verdict, and those as tables, JSON and plot bars.
//
// A LabField is one figure of a lab: its JSON name, where one run's value sits in the
// lab's sample struct and where its Summary sits in the lab's cell struct; a lab lists
// its figures once and the helpers below summarize, print and write them all.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/bench/ab_stats.h"
#include "uvhost/bench/gnuplot.h"
#include "uvhost/bench/stats.h"
#include "uvhost/bench/table.h"

namespace uvhost::bench::lab {

// A lab's progress: one line per finished run (empty: no progress).
using LabProgress = std::function<void(const std::string&)>;

// Events per second over a window of wall_ns (0 for an empty window).
double per_second(double count, int64_t wall_ns);

nlohmann::json summary_json(const Summary& s);

template <class Sample, class Cell>
struct LabField {
  const char* name;
  double Sample::*sample;
  Summary Cell::*summary;
};

template <class Sample>
Summary summarize_field(const std::vector<Sample>& samples, double Sample::*field) {
  std::vector<double> values;
  values.reserve(samples.size());
  for (const Sample& s : samples) values.push_back(s.*field);
  return summarize(values);
}

// Every listed Summary of `cell` from cell.samples.
template <class Cell, class Fields>
void summarize_fields(Cell& cell, const Fields& fields) {
  for (const auto& f : fields) cell.*f.summary = summarize_field(cell.samples, f.sample);
}

// {name: summary_json} for every field of a cell.
template <class Cell, class Fields>
nlohmann::json fields_json(const Cell& cell, const Fields& fields) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : fields) j[f.name] = summary_json(cell.*f.summary);
  return j;
}

// {name: value} for every field of one run.
template <class Sample, class Fields>
nlohmann::json sample_json(const Sample& sample, const Fields& fields) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : fields) j[f.name] = sample.*f.sample;
  return j;
}

// A variant against the baseline: mean(value) / mean(base) with the 95% CI of
// ratio_of_means (stats.h, delta method), and the verdict of that CI under ab_stats.h's
// rule (verdict_of_interval on ratio - 1): better / worse when the CI excludes 1, by
// `direction`; noise when it contains 1; invalid ("n/a") when either side has fewer than
// 2 runs or a mean that is not a positive finite number.
struct BaselineRatio : Ratio {
  Verdict verdict = Verdict::kInvalid;
  Direction direction = Direction::kHigherIsBetter;
};
BaselineRatio ratio_vs_baseline(const Summary& value, const Summary& base, Direction direction);

// "×0.85 ±0.04", or "-" when invalid.
std::string ratio_text(const BaselineRatio& r);
// value, ci95_half, verdict and which way is better ("higher" / "lower").
nlohmann::json ratio_json(const BaselineRatio& r);

// One Summary as a bar (mean) with its whisker (95% CI half-width).
void add_bar(BarSeries& series, const Summary& s);

// A variant against the baseline at the same sweep point: throughput and worker CPU.
struct VariantVerdicts {
  BaselineRatio throughput, worker_cpu;
};
VariantVerdicts variant_verdicts(const Summary& throughput, const Summary& base_throughput, const Summary& worker_cpu,
                                 const Summary& base_worker_cpu);
struct VariantFigures {
  const Summary* throughput;
  const Summary* worker_cpu;
};
// at(count, variant index): the figures of one cell.
using VariantCellAt = std::function<VariantFigures(int count, std::size_t variant)>;
struct VariantSweepNames {
  std::string count_header;     // "threads", "queues"
  std::string variant_header;   // "strategy"
  std::string tp_column;        // after the variant's name: "tp (items/s)", "kicks/s"
  std::string throughput_name;  // "throughput", "kicks handled/s"
};
// The upstream table (count | throughput | worker % per variant, worker-CPU ratios vs the
// first variant), then every variant's verdicts against the first (count | variant |
// throughput ×base | verdict | worker CPU ×base | verdict) with a line saying which way
// is better.
void print_variant_sweep(const VariantSweepNames& names, const std::vector<int>& counts,
                         const std::vector<std::string>& variants, const VariantCellAt& at, std::ostream& out);
// A cell's ratios against the baseline `first` as JSON: {variant_key: first,
// throughput_key: ratio_json, "worker_cpu_pct": ratio_json}.
nlohmann::json variant_vs_first(const VariantFigures& cell, const VariantFigures& base, const std::string& variant_key,
                                std::string_view first, const std::string& throughput_key);

// Per count a row per variant: the count, the variant, every field's "mean ±CI", then
// extra(cell); a separator after each count.
template <class Fields, class CellAt, class Extra>
TextTable field_table(std::vector<std::string> headers, const std::vector<int>& counts,
                      const std::vector<std::string>& variants, const Fields& fields, CellAt&& at, Extra&& extra) {
  TextTable table(std::move(headers));
  for (int count : counts) {
    for (std::size_t k = 0; k < variants.size(); ++k) {
      const auto& cell = *at(count, k);
      std::vector<std::string> row{std::to_string(count), variants[k]};
      for (const auto& f : fields) row.push_back(with_ci((cell.*f.summary).mean, (cell.*f.summary).ci95_half));
      for (std::string& more : extra(cell)) row.push_back(std::move(more));
      table.add_row(std::move(row));
    }
    table.add_separator();
  }
  return table;
}

}  // namespace uvhost::bench::lab
