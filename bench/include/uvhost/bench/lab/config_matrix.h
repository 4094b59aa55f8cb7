// config_matrix.h - several configurations of the real stack against one baseline, run
// interleaved on the same points: the engine of `uvhost lab busypoll` (vhost-net busy
// polling before sleeping) and `uvhost lab busyloop-intr` (ending a busy poll only on
// this queue's work).
//
// Contract
// --------
//  - run_config_matrix(): `runs` rounds; in round r every point is run once under every
//    configuration, the configurations of a point back to back in an order rotated by
//    (r + point index), so each configuration goes first as often as the others and a
//    slow drift of the shared machine hits them alike. The runner is run_point() in the
//    labs (any function with its signature in tests). The first failing run's exception
//    propagates. The observer hears each run before (result == nullptr) and after it.
//  - compare_to_baseline(): for every point and every configuration but the first, the
//    upstream patches' figures against configuration 0: +thu% (throughput: transactions/s for rr,
//    packets/s for streams) and +normalize% (throughput per CPU-second of every measured
//    thread), each with its 95% CI and verdict (ab_stats.h, `method`); the runs of round
//    r of both configurations form pair r. Also the means of CPU used (cores) and, for
//    rr, p99 latency, with their own verdicts (lower is better).
//  - matrix_tables(): one table per workload and configuration, in the upstream patches' shape
//    (size | sessions | base thu | thu | +thu% [CI] | verdict | +normalize% [CI] |
//    verdict | cores base -> cfg | p99 us base -> cfg).
//  - matrix_to_json(): configs, points, every raw run, every comparison.
//  - matrix_charts(): per workload, throughput and normalized throughput per point
//    ("size/sessions"), one bar per configuration with its 95% CI (gnuplot.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/bench/ab_stats.h"
#include "uvhost/bench/bench_report.h"
#include "uvhost/bench/gnuplot.h"
#include "uvhost/bench/table.h"
#include "uvhost/bench/workload.h"

namespace uvhost::bench::lab {

using PointRunner = std::function<RunResult(const Config&, const Point&)>;

struct MatrixRunEvent {
  const Config& config;
  const Point& point;
  size_t done = 0;   // runs finished so far
  size_t total = 0;  // runs in the whole matrix
  const RunResult* result = nullptr;  // nullptr: starting
};
using MatrixObserver = std::function<void(const MatrixRunEvent&)>;

struct ConfigMatrix {
  std::vector<Config> configs;  // [0] is the baseline
  std::vector<Point> points;
  // runs[point][config][round]
  std::vector<std::vector<std::vector<RunResult>>> runs;
};

ConfigMatrix run_config_matrix(const std::vector<Config>& configs, const std::vector<Point>& points, int rounds,
                               const PointRunner& runner, const MatrixObserver& observer = {});

struct BaselineComparison {
  size_t point_index = 0;
  size_t config_index = 0;  // >= 1
  AbComparison thu, normalize, cores, p99;
  double base_thu = 0, thu_mean = 0;  // means over the rounds
  double base_cores = 0, cores_mean = 0;
  double base_p99_us = 0, p99_us = 0;
};

std::vector<BaselineComparison> compare_to_baseline(const ConfigMatrix& matrix, AbMethod method);

struct TitledTable {
  std::string title;
  TextTable table;
};
std::vector<TitledTable> matrix_tables(const ConfigMatrix& matrix, const std::vector<BaselineComparison>& comparisons);

nlohmann::json matrix_to_json(const ConfigMatrix& matrix, const std::vector<BaselineComparison>& comparisons,
                              AbMethod method, const RunOptions& options);

std::vector<BarChart> matrix_charts(const ConfigMatrix& matrix);

// metric(run) of every run, in order: one column of a matrix cell for summaries and
// comparisons.
template <class Metric>
std::vector<double> values_of(const std::vector<RunResult>& runs, Metric&& metric) {
  std::vector<double> values;
  for (const RunResult& run : runs) values.push_back(metric(run));
  return values;
}

// The labs' progress on stderr: one line per finished run ("[12/48] busy rr 64 x1: ...").
MatrixObserver matrix_progress();

}  // namespace uvhost::bench::lab
