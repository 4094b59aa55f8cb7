// lab_engine.h - the one engine the sync-level labs (workqueue and its datapath half,
// iommu-lock, delegation and its pool / txq structures) run on, in the manner of
// Concurrency Kit's regressions: one harness, and per lab only what differs.
//
// A lab is a sample type (one run's figures), a run_once (one measured run of one cell)
// and a table of fields (LabField, lab_summary.h). A cell is a sweep point (threads,
// queues, ...) and a variant (strategy, policy, lock) with `samples` and one Summary per
// field. The engine does the rest, the same way for every lab:
//  - run_cells(): a group of cells (one sweep point, every variant) `runs` times,
//    interleaved (a b c a b c) or rotated each run (a b c, b c a, ...) so drift on a
//    shared machine hits every variant alike; each sample kept, every field summarized;
//  - ci_text() / ci_cells(): figures as "mean ±CI" table cells;
//  - grouped_charts(): one bar chart per figure, a group per sweep point, a bar per
//    variant with its 95% CI (gnuplot.h);
//  - cells_json(): every cell's summaries and samples, plus what the lab adds;
//  - count_label(): "1 thread", "8 queues";
//  - run_threads_for(): the measured window of a run: threads started together, told
//    to stop after the duration, timed until the last one has finished;
//  - burn() / burn_iterations_per_ns(): a calibrated amount of CPU work (a handler's
//    stand-in); sleep_until_ns() / fine_timer_slack(): the paced producers' sleeps.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/bench/cpu_time.h"
#include "uvhost/bench/gnuplot.h"
#include "uvhost/bench/lab/lab_summary.h"
#include "uvhost/bench/stats.h"

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

// Every cell as {field: summary..., "samples": [{field: value...}...]}, then
// describe(cell, entry) adds the cell's keys and anything else.
template <class Cell, class Fields, class Describe>
nlohmann::json cells_json(const std::vector<Cell>& cells, const Fields& fields, Describe&& describe) {
  nlohmann::json out = nlohmann::json::array();
  for (const Cell& cell : cells) {
    nlohmann::json entry = fields_json(cell, fields);
    entry["samples"] = nlohmann::json::array();
    for (const auto& s : cell.samples) entry["samples"].push_back(sample_json(s, fields));
    describe(cell, entry);
    out.push_back(std::move(entry));
  }
  return out;
}

// Names of `values` by `name_of` (a to_string), as strings.
template <class T, class NameOf>
std::vector<std::string> names(const std::vector<T>& values, NameOf&& name_of) {
  std::vector<std::string> out;
  for (const T& v : values) out.emplace_back(name_of(v));
  return out;
}

// Starts `count` threads running body(index) together, sets `stop` after `duration_ms`
// and joins them. Returns the wall time from the start until the last thread ended
// (finishing an operation queued behind a lock after `stop` is part of its cost);
// cpu_ns[index] is each thread's CPU time.
template <class Body>
int64_t run_threads_for(std::size_t count, int duration_ms, std::atomic<bool>& stop, std::vector<int64_t>& cpu_ns,
                        Body&& body) {
  cpu_ns.assign(count, 0);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      go.wait(false, std::memory_order_acquire);  // acquire: see the structure fully built
      const int64_t cpu_start = thread_cpu_ns();
      body(i);
      cpu_ns[i] = thread_cpu_ns() - cpu_start;
    });
  }
  const int64_t start = monotonic_ns();
  go.store(true, std::memory_order_release);
  go.notify_all();
  std::this_thread::sleep_for(std::chrono::milliseconds(duration_ms));
  stop.store(true, std::memory_order_relaxed);  // relaxed: a hint to finish; join() orders the results
  for (auto& t : threads) t.join();
  return monotonic_ns() - start;
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
