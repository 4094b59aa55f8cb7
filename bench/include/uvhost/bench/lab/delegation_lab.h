// delegation_lab.h - a delegation lock (the holder runs the waiters' critical
// sections, flat-combining / ffwd style) against spinlocks and mutexes on SLAB's
// refill/flush critical sections (experiments/lock_load.h run_slab_load()).
//
// Each lock runs `runs` times for `duration_ms` per thread count, locks rotated each
// run (lab_engine.h). Per lock and thread count, mean and 95% CI over the runs of:
//  - ops/s: critical sections per second, all threads, until the last thread has
//    finished its last operation after the stop signal (draining a queued lock counts);
//  - ns/CS: wall time per critical section; CPU ns/CS: CPU of all threads per section;
//  - cores: CPU used during the run; fairness: the slowest thread's ops / the mean's;
//  - vs std::mutex: the ops/s ratio with its CI and verdict (lab_summary.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "uvhost/bench/gnuplot.h"
#include "uvhost/bench/lab/lab_engine.h"
#include "uvhost/bench/lab/lab_summary.h"
#include "uvhost/bench/stats.h"

namespace uvhost::bench::lab {

struct DelegationLabOptions {
  std::vector<int> threads{2, 4, 16, 64};
  std::vector<std::string> locks;  // empty: every lock in delegation_lab_locks()
  int runs = 5;
  int duration_ms = 200;
  std::size_t batch = 16;            // objects per refill/flush (SLAB's batchcount)
  std::size_t private_work = 64;     // loop iterations of private work between sections
  std::size_t pool_objects = 1 << 16;
  std::size_t objects_per_slab = 32;
};

struct DelegationPoint {
  std::string lock;
  int threads = 0;
  std::vector<double> ops_per_s, ns_per_cs, cpu_ns_per_cs, cores, fairness;  // one per run
  Summary ops_per_s_summary, ns_per_cs_summary, cpu_ns_per_cs_summary, cores_summary, fairness_summary;
  BaselineRatio vs_mutex;  // ops/s relative to std::mutex at the same thread count, with its verdict
};

struct DelegationLabReport {
  DelegationLabOptions options;
  std::vector<DelegationPoint> points;
};

// Names of the locks the lab can run, in table order ("std::mutex" first).
std::vector<std::string> delegation_lab_locks();

// Runs the experiment. `progress`, if given, gets one line per finished run.
// Throws std::runtime_error if a lock broke the pool's invariants or a name is unknown.
DelegationLabReport run_delegation_lab(const DelegationLabOptions& options, std::ostream* progress);

void print_delegation_table(const DelegationLabReport& report, std::ostream& out);
nlohmann::json to_json(const DelegationLabReport& report);
// ops/s and CPU ns per critical section, a group per thread count, a bar per lock.
std::vector<BarChart> delegation_charts(const DelegationLabReport& report);

// What both delegation labs (this one and delegation_datapath_lab.h) share:
//  - set_vs_mutex(): every point's ops/s against std::mutex's at its thread count
//    (left invalid when std::mutex was not run);
//  - point_headers() / point_cells(): the table columns threads | lock | ops/s | ns/CS |
//    CPU ns/CS | cores | fairness | vs std::mutex | verdict, and one point's cells;
//  - point_json(): one point's summaries, samples and vs_mutex (ratio, CI, verdict);
//  - point_charts(): the panels of delegation_charts() for any list of points.
// record_run(): one run's figures from its raw counts (critical sections, the slowest
// thread's, CPU and wall time); summarize_point(): every figure's Summary.
void record_run(DelegationPoint& p, uint64_t ops, uint64_t min_ops, int64_t cpu_ns, int64_t wall_ns);
void summarize_point(DelegationPoint& p);
void set_vs_mutex(const std::vector<DelegationPoint*>& points);
std::vector<std::string> point_headers();
std::vector<std::string> point_cells(const DelegationPoint& p);
std::string verdict_note();  // one line: what the verdict column says
// {"experiment", "seed", "options": the options both labs share, "points": []}.
nlohmann::json report_json(const DelegationLabOptions& options);

// The points as a table (cells(point) per row, a separator between thread counts),
// then verdict_note(). base(point) is the point's DelegationPoint.
template <class Point, class Base, class Cells>
void print_points(std::ostream& out, std::vector<std::string> headers, const std::vector<Point>& points,
                  Base&& base, Cells&& cells) {
  TextTable table(std::move(headers));
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (i > 0 && base(points[i]).threads != base(points[i - 1]).threads) table.add_separator();
    table.add_row(cells(points[i]));
  }
  table.print(out);
  out << verdict_note() << "\n";
}
nlohmann::json point_json(const DelegationPoint& p);
std::vector<BarChart> point_charts(const std::string& structure,
                                   const std::vector<const DelegationPoint*>& points);

// Throws std::runtime_error for runs, duration, batch or a thread count below 1, or no
// thread counts.
void check_common(const DelegationLabOptions& options);

// The protocol of both labs (lab_engine.h run_sweep, a point per lock): each point
// measured by measure(point, lock index, thread count, run), then summarized, held
// against std::mutex at its thread count, and finish(points) for what the lab adds.
// base(point) is the point's DelegationPoint.
template <class Point, class Base, class Measure, class Finish>
std::vector<Point> run_points(const std::vector<int>& threads, const std::vector<std::string>& locks, int runs,
                              Base&& base, Measure&& measure, Finish&& finish) {
  return run_sweep<Point>(
      threads, locks.size(), runs,
      [&](Point& p, std::size_t i, int thread_count) {
        std::tie(base(p).lock, base(p).threads) = std::tuple(locks[i], thread_count);
      },
      measure, [&](std::vector<Point>& points) {
        std::vector<DelegationPoint*> bases;
        for (Point& p : points) bases.push_back(&base(p));
        for (DelegationPoint* p : bases) summarize_point(*p);
        set_vs_mutex(bases);
        finish(points);
      });
}

}  // namespace uvhost::bench::lab
