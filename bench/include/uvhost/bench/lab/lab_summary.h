// lab_summary.h - what the sync-level labs (workqueue, iommu-lock, delegation) share
// once their runs are in: per-figure summaries, each variant held against the
// baseline with a verdict, and those as JSON and plot bars.
//
// Contract
// --------
//  - LabField: one figure of a lab - its JSON name, where one run's value sits in the
//    lab's sample struct and where its Summary sits in the lab's cell struct. A lab
//    lists its figures once; summarize_fields() fills every Summary of a cell from
//    cell.samples, fields_json() writes them (summaries or one sample's values).
//  - ratio_vs_baseline(): mean(value) / mean(base) with the 95% CI of ratio_of_means
//    (stats.h, delta method) and the verdict of that CI under ab_stats.h's rule
//    (verdict_of_interval on ratio - 1): better / worse when the CI excludes 1, by
//    `direction`; noise when it contains 1; invalid ("n/a") when either side has fewer
//    than 2 runs or a mean that is not a positive finite number (no interval to judge).
//    No new statistics: the CI is the one the labs already printed.
//  - ratio_text(): "×0.85 ±0.04" (with_ci), or "-" when invalid; ratio_json(): value,
//    ci95_half, verdict and which way is better ("higher" / "lower").
//  - add_bar(): one Summary as a bar (mean) and its whisker (95% CI half-width) at the
//    end of a gnuplot.h series.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/bench/ab_stats.h"
#include "uvhost/bench/gnuplot.h"
#include "uvhost/bench/stats.h"

namespace uvhost::bench::lab {

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

// A variant against the baseline: the ratio of means with its 95% CI, and the verdict.
struct BaselineRatio : Ratio {
  Verdict verdict = Verdict::kInvalid;
  Direction direction = Direction::kHigherIsBetter;
};

BaselineRatio ratio_vs_baseline(const Summary& value, const Summary& base, Direction direction);

std::string ratio_text(const BaselineRatio& r);
nlohmann::json ratio_json(const BaselineRatio& r);
// "higher" or "lower": which way is better.
std::string_view better_word(Direction direction) noexcept;

void add_bar(BarSeries& series, const Summary& s);

}  // namespace uvhost::bench::lab
