// bench_report.h - `uvhost bench`'s sweep: every point run repeatedly (interleaved),
// summarized, and written out as a table, JSON or CSV. Shared by `uvhost bench`,
// `uvhost bench compare` and the labs.
//
// Contract
// --------
//  - expand_points(workloads, sizes, sessions, rates, arrivals): the cross product,
//    workloads outermost, rates innermost; rates apply to rr only (other workloads get
//    one point each, closed loop).
//  - run_sweep(config, points, options, runs, observer): `runs` rounds; round r runs
//    every point once, in order (interleaving spreads slow drifts of a shared machine
//    over every point instead of biasing one). The observer hears each run before it
//    starts (result == nullptr) and after it finished. The first failing run's
//    std::runtime_error propagates.
//  - summarize_point(workload, runs): mean and 95% CI (stats.h) of each column over
//    the runs. Latency columns are the runs' percentiles averaged (each run's
//    percentile is one sample), not a merged histogram.
//  - sweep_table(): one row per point: workload, size, sessions, Mpps, Gbit/s, trans/s,
//    p50/p99/p99.9 us, frontend and backend CPU in cores (cpu_seconds / window seconds),
//    and normalized throughput (transactions or packets per CPU-second of every
//    measured thread), each as mean ±CI half-width.
//  - sweep_to_json(): {"config", "options", "points": [{"workload", "size", "sessions",
//    "runs": [run_to_json...], "summary": {column: {mean, ci95_half, n, ...}}}]}.
//  - write_csv(): a header, then one row per run (label, config, point, run index, the
//    raw figures, frontend/backend CPU seconds).
//  - stderr_progress(): the observer `uvhost bench` uses: on a terminal one line,
//    rewritten in place while each run is measured; otherwise one plain line per
//    finished run.
#pragma once

#include <array>

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/bench/stats.h"
#include "uvhost/bench/table.h"
#include "uvhost/bench/workload.h"

namespace uvhost::bench {

struct PointRuns {
  Point point;
  std::vector<RunResult> runs;
};

struct PointSummary {
  Summary mpps, gbps, tps, p50_us, p99_us, p999_us, frontend_cores, backend_cores, normalized;
};

struct RunEvent {
  const Point& point;
  size_t point_index = 0;  // 0-based, of point_count
  size_t point_count = 0;
  int run = 0;             // 0-based, of runs
  int runs = 0;
  double seconds = 0;      // the run's measured window (options.seconds)
  const RunResult* result = nullptr;  // nullptr: the run is starting
};
using RunObserver = std::function<void(const RunEvent&)>;

std::vector<Point> expand_points(const std::vector<Workload>& workloads, const std::vector<uint32_t>& sizes,
                                 const std::vector<uint32_t>& sessions, const std::vector<uint64_t>& rates = {0},
                                 Arrivals arrivals = Arrivals::kPoisson);
std::vector<PointRuns> run_sweep(const Config& config, const std::vector<Point>& points, const RunOptions& options,
                                 int runs, const RunObserver& observer = {});

// CPU seconds of one side ("frontend" or "backend") of a run.
double side_cpu_seconds(const RunResult& run, const std::string& side);
PointSummary summarize_point(Workload workload, const std::vector<RunResult>& runs);

TextTable sweep_table(const std::vector<PointRuns>& sweep);
nlohmann::json run_to_json(const RunResult& run);
nlohmann::json sweep_to_json(const Config& config, const RunOptions& options, const std::vector<PointRuns>& sweep);
void write_csv(std::ostream& out, const Config& config, const std::vector<PointRuns>& sweep);
// "rr 64 B x1: 123 k trans/s, p99 45.6 us, cpu 1.00 + 0.53": one finished run.
std::string run_line(const Point& point, const RunResult& run);

RunObserver stderr_progress();

// A run that throws is tried again, at most `retries` more times; each failure is
// printed on stderr (with its reason) and counted in `*failures`, which the commands
// report at the end. A run that fails every try rethrows. Why: one rare stall of a
// run (an rr answer never seen: docs/BENCHMARKS.md, "Known problem") must not
// throw away a comparison of hundreds of runs, and must not go unreported either.
using PointRunFn = std::function<RunResult(const Config&, const Point&)>;
PointRunFn retrying(PointRunFn runner, int retries, std::shared_ptr<size_t> failures);
// The same for rounds of both sides in one run (run_point_interleaved).
using PairRunFn = std::function<std::array<RunResult, 2>(const Config& a, const Config& b, bool a_first, const Point&)>;
PairRunFn retrying_pairs(PairRunFn runner, int retries, std::shared_ptr<size_t> failures);

}  // namespace uvhost::bench
