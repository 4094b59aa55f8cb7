// workqueue_lab.h - seed 000's experiment: vhost_work_queue enqueue strategies.
//
// What it measures: N producer threads (1, 8, 64, 256 by default) queue work to
// one WorkQueue worker. Each producer owns WorkItems (virtqueue polls) that it
// signals round-robin - enough of them that each is offered at most 1000 times a
// second, so paced offers are not coalesced - and a run burns a fixed amount of
// CPU (`work_ns`, standing in for handle_tx).
// For every enqueue strategy - (a) wake inside the spinlock, (b) wake after
// unlock (seed 000's patch), (c) lock-free list - it reports throughput (items
// run per second) and the worker thread's CPU as % of one core, the two columns
// of the seed's table, plus producers' CPU, the mean cost of a queue() call,
// and futex wake-ups and parks per second.
//
// Modes:
//  - paced (default): producers together offer `rate` queue() calls per second
//    (each sleeps to an absolute deadline), so throughput is the same for every
//    strategy and CPU is the figure to compare - the seed's "same throughput,
//    less vhost CPU".
//  - saturating: producers call queue() in a tight loop; throughput is the figure.
//
// Method: every (threads, strategy) cell is run `runs` times; runs of the
// strategies are interleaved (a b c a b c ...) so that drift on a shared,
// noisy machine hits all strategies alike; each figure is summarized with a
// 95% confidence interval (bench/stats.h). Each run uses a fresh WorkQueue.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

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

// The seed's table (threads | tp | worker% per strategy, with worker-CPU ratios
// against the first strategy) followed by a detail table.
void print_workqueue_tables(const WorkqueueLabResult& result, std::ostream& out);

nlohmann::json workqueue_lab_json(const WorkqueueLabResult& result);

}  // namespace uvhost::bench::lab
