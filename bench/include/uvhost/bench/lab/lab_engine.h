// lab_engine.h - the one engine the sync-level labs (workqueue and its datapath half,
// iommu-lock, delegation on its slab / pool / txq structures) run on, in the manner of
// Concurrency Kit's regressions: one harness, and per lab only what differs.
//
// A lab is a sample type (one run's figures), a run_once (one measured run of one cell)
// and a table of fields (LabField, lab_summary.h). A cell (LabCell) is a sweep point
// (threads, queues, ...) and a variant (strategy, policy, lock) with `samples` and one
// Summary per field; a result (LabResult) is the config and the cells. The engine does
// the rest, the same way for every lab:
//  - run_cells(): a group of cells (one sweep point, every variant) `runs` times,
//    interleaved (a b c a b c) or rotated each run (a b c, b c a, ...) so drift on a
//    shared machine hits every variant alike; each sample kept, every field summarized;
//    run_grid(): that over a two-level sweep;
//  - ci_text() / ci_cells(): figures as "mean ±CI" table cells;
//  - grouped_charts(): one bar chart per figure, a group per sweep point, a bar per
//    variant with its 95% CI (gnuplot.h); charts_per_variant(): those per outer variant;
//  - cells_json(): every cell's summaries and samples, plus what the lab adds;
//  - count_label(): "1 thread", "8 queues";
//  - variants against the baseline, one way for every lab: baseline_matrix() (one
//    figure, a row per variant, a column per sweep point, "mean ±CI (×ratio ±CI)"),
//    add_verdict_cells() (per figure the ratio to the baseline and its verdict) and
//    baseline_cells() ("baseline" / "-" for the baseline itself);
//  - find_cell(), require(), require_counts(): a lab's lookups and checks;
//  - burn() / burn_iterations_per_ns(): a calibrated amount of CPU work (a handler's
//    stand-in); sleep_until_ns() / fine_timer_slack(): the paced producers' sleeps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/base/name_table.h"
#include "uvhost/bench/gnuplot.h"
#include "uvhost/bench/lab/lab_summary.h"
#include "uvhost/bench/stats.h"
#include "uvhost/bench/table.h"

namespace uvhost::bench::lab {

// Calls run_one(run, variant) for every run and variant, in the interleaved order.
template <class RunOne>
void interleave(std::size_t variants, int runs, bool rotate, RunOne&& run_one) {
  for (int run = 0; run < runs; ++run)
    for (std::size_t k = 0; k < variants; ++k)
      run_one(run, rotate ? (k + static_cast<std::size_t>(run)) % variants : k);
}

// Runs cells[first..] interleaved: sample = run_once(cell), then progress(cell, sample,
// run); then summarizes every field of those cells.
template <class Cell, class Fields, class RunOnce, class Progress>
void run_cells(std::vector<Cell>& cells, std::size_t first, int runs, bool rotate, const Fields& fields,
               RunOnce&& run_once, Progress&& progress) {
  interleave(cells.size() - first, runs, rotate, [&](int run, std::size_t k) {
    Cell& cell = cells[first + k];
    cell.samples.push_back(run_once(cell));
    progress(cell, cell.samples.back(), run);
  });
  for (std::size_t k = first; k < cells.size(); ++k) summarize_fields(cells[k], fields);
}

// A two-level sweep: per (outer, inner) point, in that order, a cell per variant keyed
// cell.key() = (outer, inner, variant), then run_cells() on that point's cells.
template <class Cell, class Outer, class Inner, class Variant, class Fields, class RunOnce, class Progress>
void run_grid(std::vector<Cell>& cells, const std::vector<Outer>& outers, const std::vector<Inner>& inners,
              const std::vector<Variant>& variants, int runs, bool rotate, const Fields& fields, RunOnce&& run_once,
              Progress&& progress) {
  for (const Outer& outer : outers)
    for (const Inner& inner : inners) {
      const std::size_t first = cells.size();
      for (const Variant& variant : variants) cells.emplace_back().key() = std::tuple(outer, inner, variant);
      run_cells(cells, first, runs, rotate, fields, run_once, progress);
    }
}

// "12.3 ±0.45": the mean and the CI half-width (also for a single run).
std::string ci_text(const Summary& s);

template <class Cell>
std::vector<std::string> ci_cells(const Cell& cell, std::initializer_list<Summary Cell::*> figures) {
  std::vector<std::string> cells;
  for (auto figure : figures) cells.push_back(ci_text(cell.*figure));
  return cells;
}

// "1 thread", "8 threads".
std::string count_label(int count, const char* noun);

// ---- Variants against the baseline -------------------------------------------------

// "12.3 ±0.45 (×0.850 ±0.041)": a figure and, when `base` is given, its ratio of means
// to the baseline's with the CI (ratio_of_means, 3 and 2 significant digits).
std::string ci_with_ratio_text(const Summary& value, const Summary* base);

// One figure against the baseline in the upstream lock comparisons' shape (vfio's: a
// row per lock, a column per workload): headers[0] heads the row names, headers[1..]
// the columns; cell_at(row, column) gives a cell, base_at(row, column) its baseline
// (nullptr: none; the baseline's own cell shows no ratio).
template <class Cell, class CellAt, class BaseAt>
TextTable baseline_matrix(std::vector<std::string> headers, const std::vector<std::string>& rows,
                          Summary Cell::*figure, CellAt&& cell_at, BaseAt&& base_at) {
  const std::size_t columns = headers.size() - 1;
  TextTable table(std::move(headers));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::vector<std::string> row{rows[r]};
    for (std::size_t c = 0; c < columns; ++c) {
      const Cell* cell = cell_at(r, c);
      const Cell* base = base_at(r, c);
      const bool with_ratio = base != nullptr && base != cell;
      row.push_back(ci_with_ratio_text(cell->*figure, with_ratio ? &(base->*figure) : nullptr));
    }
    table.add_row(std::move(row));
  }
  return table;
}

// A figure held against the baseline: its column headers, where it sits, which way is better.
template <class Cell>
struct VerdictColumn {
  std::string ratio_header;
  std::string verdict_header;
  Summary Cell::*figure;
  Direction direction;
};

// Per column: "ratio_header", "verdict_header".
template <class Cell>
void add_verdict_headers(std::vector<std::string>& headers, const std::vector<VerdictColumn<Cell>>& columns) {
  for (const auto& c : columns) {
    headers.push_back(c.ratio_header);
    headers.push_back(c.verdict_header);
  }
}

// Per column: ratio_text() of `cell` against `base` and the verdict.
template <class Cell>
void add_verdict_cells(std::vector<std::string>& row, const Cell& cell, const Cell& base,
                       const std::vector<VerdictColumn<Cell>>& columns) {
  for (const auto& c : columns) {
    const BaselineRatio r = ratio_vs_baseline(cell.*c.figure, base.*c.figure, c.direction);
    row.push_back(ratio_text(r));
    row.emplace_back(to_string(r.verdict));
  }
}

// A row's "vs baseline" and "verdict" cells: "baseline" and "-" for the baseline itself.
std::vector<std::string> baseline_cells(const BaselineRatio& r, bool is_baseline);

// ---- Lookups and checks ---------------------------------------------------------

// The first cell `matches`, or nullptr.
template <class Cell, class Matches>
const Cell* find_cell(const std::vector<Cell>& cells, Matches&& matches) noexcept {
  for (const Cell& cell : cells)
    if (matches(cell)) return &cell;
  return nullptr;
}

// What every lab's cell holds beside its key and summaries: one sample per run.
template <class Sample>
struct LabCell {
  std::vector<Sample> samples;
};

// A lab's result: its configuration and its cells (sweep-point-major). find(keys...)
// is the cell whose key() equals the keys; total(counter) sums a per-cell counter.
template <class Config, class Cell>
struct LabResult {
  Config config;
  std::vector<Cell> cells;
  template <class... Keys>
  const Cell* find(Keys... keys) const noexcept {
    return find_cell(cells, [&](const Cell& cell) { return cell.key() == std::tuple(keys...); });
  }
  uint64_t total(uint64_t Cell::*counter) const noexcept {
    uint64_t sum = 0;
    for (const Cell& cell : cells) sum += cell.*counter;
    return sum;
  }
};

// Throws Error(what) unless `ok`.
template <class Error = std::invalid_argument>
void require(bool ok, const std::string& what) {
  if (!ok) throw Error(what);
}

// Every count in [low, high], and at least one: "no thread counts", "thread count 0 not in [1, 1024]".
void require_counts(const std::vector<int>& counts, int low, int high, const char* noun);

template <class Cell>
struct ChartFigure {
  std::string title;
  std::string y_label;
  Summary Cell::*figure;
};

// Per figure a chart: `groups` x `series`; cell_at(group, series) is the cell of a bar
// (nullptr: an empty bar).
template <class Cell, class CellAt>
std::vector<BarChart> grouped_charts(const std::vector<ChartFigure<Cell>>& figures,
                                     const std::vector<std::string>& groups, const std::vector<std::string>& series,
                                     CellAt&& cell_at) {
  std::vector<BarChart> charts;
  for (const auto& f : figures) {
    BarChart chart{f.title, f.y_label, groups, {}};
    for (std::size_t s = 0; s < series.size(); ++s) {
      BarSeries bars{series[s], {}, {}};
      for (std::size_t g = 0; g < groups.size(); ++g) {
        const Cell* cell = cell_at(g, s);
        add_bar(bars, cell != nullptr ? cell->*f.figure : Summary{});
      }
      chart.series.push_back(std::move(bars));
    }
    charts.push_back(std::move(chart));
  }
  return charts;
}

// Per outer variant (a mix, a kick path) the grouped_charts() of figures_of(outer): a
// group per count ("4 threads" with noun "thread"), a bar per series;
// cell_at(outer, count, series index) is a bar's cell.
template <class Cell, class Outer, class FiguresOf, class CellAt>
std::vector<BarChart> charts_per_variant(const std::vector<Outer>& outers, const std::vector<int>& counts,
                                         const char* noun, const std::vector<std::string>& series,
                                         FiguresOf&& figures_of, CellAt&& cell_at) {
  std::vector<std::string> groups;
  for (int count : counts) groups.push_back(count_label(count, noun));
  std::vector<BarChart> charts;
  for (const Outer& outer : outers) {
    auto per_outer = grouped_charts<Cell>(figures_of(outer), groups, series, [&](std::size_t g, std::size_t s) {
      return cell_at(outer, counts[g], s);
    });
    for (auto& chart : per_outer) charts.push_back(std::move(chart));
  }
  return charts;
}

// Every cell as {field: summary..., "samples": [{field: value...}...]}, where
// describe_sample(sample, its JSON) adds a sample's counts; then describe(cell, entry)
// adds the cell's keys and anything else.
template <class Cell, class Fields, class DescribeSample, class Describe>
nlohmann::json cells_json(const std::vector<Cell>& cells, const Fields& fields, DescribeSample&& describe_sample,
                          Describe&& describe) {
  nlohmann::json out = nlohmann::json::array();
  for (const Cell& cell : cells) {
    nlohmann::json entry = fields_json(cell, fields);
    entry["samples"] = nlohmann::json::array();
    for (const auto& s : cell.samples) {
      entry["samples"].push_back(sample_json(s, fields));
      describe_sample(s, entry["samples"].back());
    }
    describe(cell, entry);
    out.push_back(std::move(entry));
  }
  return out;
}

template <class Cell, class Fields, class Describe>
nlohmann::json cells_json(const std::vector<Cell>& cells, const Fields& fields, Describe&& describe) {
  return cells_json(cells, fields, [](const auto&, nlohmann::json&) {}, describe);
}

// Names of `values` by `name_of` (a to_string), as strings.
template <class T, class NameOf>
std::vector<std::string> names(const std::vector<T>& values, NameOf&& name_of) {
  std::vector<std::string> out;
  for (const T& v : values) out.emplace_back(name_of(v));
  return out;
}

// Names of enum values from their name table (base/name_table.h).
template <base::NamedEnum E>
std::vector<std::string> names(const std::vector<E>& values) {
  return names(values, [](E v) { return base::to_string(v); });
}

// Dependent arithmetic the compiler cannot drop: `iterations` steps of an LCG.
uint64_t burn(uint64_t iterations) noexcept;
// burn() iterations per nanosecond of CPU on this machine, measured once (best of 3).
double burn_iterations_per_ns();
// burn() iterations for `ns` of CPU.
uint64_t burn_iterations_for(int ns);
// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns`.
void sleep_until_ns(int64_t deadline_ns) noexcept;
// A 1 us timer slack (default 50 us) for the calling thread, so paced sleeps end on time.
void fine_timer_slack() noexcept;

}  // namespace uvhost::bench::lab
