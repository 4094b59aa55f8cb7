// workqueue_lab.h - the Linux vhost worker's work queue (vhost_work_queue): where the
// enqueue wakes the worker. N producer threads (1, 8, 64, 256 by default) queue work
// items (virtqueue polls, signalled round-robin, each offered at most 1000 times a
// second so paced offers are not coalesced) to one WorkQueue worker; a run burns
// `work_ns` of CPU (handle_tx's stand-in). Strategies: (a) wake inside the spinlock,
// (b) wake after unlock ("vhost: wake up the worker outside the lock"), (c) a
// lock-free list. Per cell: throughput (items run/s) and the worker's CPU (% of one
// core) - the two columns of the upstream table - plus producers' CPU, the mean cost
// of queue(), futex wake-ups and parks per second.
//
// Modes: paced (default; producers together offer `rate` queue() calls/s, sleeping to
// absolute deadlines, so throughput is equal and CPU is the figure: "same throughput,
// less vhost CPU") or saturating (tight loops; throughput is the figure).
// Method: lab_engine.h (strategies interleaved); every strategy but the first is held
// against the first (locked_wake by default) with a verdict per ratio (lab_summary.h).
// Each run uses a fresh WorkQueue.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/bench/gnuplot.h"
#include "uvhost/bench/lab/lab_summary.h"
#include "uvhost/bench/stats.h"
#include "uvhost/sync/work_queue.h"

namespace uvhost::bench::lab {

struct WorkqueueLabConfig {
  std::vector<int> threads{1, 8, 64, 256};
  std::vector<sync::EnqueueStrategy> strategies{sync::EnqueueStrategy::kLockedWake,
                                                sync::EnqueueStrategy::kUnlockThenWake,
                                                sync::EnqueueStrategy::kLockless};
  int runs = 5;
  int duration_ms = 300;  // measured window of one run
  bool saturate = false;
  double rate = 20000;    // paced mode: queue() calls per second, all producers together
  int work_ns = 300;      // CPU burned by one run of a work item
};

// One run of one (threads, strategy) cell.
struct WorkqueueRunSample {
  double offered_per_s = 0;     // queue() calls per second
  double throughput = 0;        // work item runs per second
  double worker_cpu_pct = 0;    // worker thread CPU, % of one core
  double producer_cpu_pct = 0;  // all producer threads together, % of one core
  double enqueue_ns = 0;        // mean wall-clock time of one queue() call
  double wakeups_per_s = 0;     // futex wakes issued
  double parks_per_s = 0;       // times the worker went to sleep
};

struct WorkqueueLabCell {
  int threads = 0;
  sync::EnqueueStrategy strategy = sync::EnqueueStrategy::kLockless;
  std::vector<WorkqueueRunSample> samples;
  Summary offered_per_s, throughput, worker_cpu_pct, producer_cpu_pct, enqueue_ns, wakeups_per_s,
      parks_per_s;
};

struct WorkqueueLabResult {
  WorkqueueLabConfig config;
  std::vector<WorkqueueLabCell> cells;  // threads-major, in config order
  const WorkqueueLabCell* find(int threads, sync::EnqueueStrategy strategy) const noexcept;
};

// Throws std::invalid_argument for an unusable configuration.
void validate(const WorkqueueLabConfig& config);

// One measured run.
WorkqueueRunSample run_workqueue_once(const WorkqueueLabConfig& config, int threads,
                                      sync::EnqueueStrategy strategy);

// The whole experiment. `progress` (optional) gets one line per run.
WorkqueueLabResult run_workqueue_lab(const WorkqueueLabConfig& config,
                                     const std::function<void(const std::string&)>& progress = {});

// A strategy against the baseline strategy (the first one) at the same producer or
// queue count (lab_summary.h ratio_vs_baseline: the ratio_of_means CI and its verdict):
// throughput (higher is better) and the worker's CPU (lower is better).
struct StrategyVerdicts {
  BaselineRatio throughput, worker_cpu;
};
StrategyVerdicts strategy_verdicts(const Summary& throughput, const Summary& base_throughput,
                                   const Summary& worker_cpu, const Summary& base_worker_cpu);
// What both halves (this one and workqueue_datapath_lab.h) print per sweep, where
// `count` is producers or queues: the upstream table (count | throughput | worker % per
// strategy, worker-CPU ratios vs the first strategy), then every strategy's verdicts
// against the first (count | strategy | throughput ×base | verdict | worker CPU ×base |
// verdict) with a line saying which way is better.
struct StrategyFigures {
  const Summary* throughput;
  const Summary* worker_cpu;
};
using StrategyCellAt = std::function<StrategyFigures(int count, sync::EnqueueStrategy)>;
struct StrategySweepNames {
  std::string count_header;     // "threads", "queues"
  std::string tp_column;        // after the strategy's name: "tp (items/s)", "kicks/s"
  std::string throughput_name;  // "throughput", "kicks handled/s"
};
void print_strategy_sweep(const StrategySweepNames& names, const std::vector<int>& counts,
                          const std::vector<sync::EnqueueStrategy>& strategies, const StrategyCellAt& at,
                          std::ostream& out);
// A cell's "vs_first_strategy" JSON: the first strategy's name, the throughput (under
// `throughput_key`) and worker CPU ratios with their verdicts.
nlohmann::json strategy_vs_first(const StrategyFigures& cell, const StrategyFigures& base,
                                 sync::EnqueueStrategy first, const std::string& throughput_key);

// print_strategy_sweep() for the producer counts, then a detail table.
void print_workqueue_tables(const WorkqueueLabResult& result, std::ostream& out);

// Throughput and worker CPU per producer count, a bar per strategy with its 95% CI.
std::vector<BarChart> workqueue_charts(const WorkqueueLabResult& result);

nlohmann::json workqueue_lab_json(const WorkqueueLabResult& result);

}  // namespace uvhost::bench::lab
