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
// Method: lab_engine.h (strategies interleaved, a fresh WorkQueue per run); every
// strategy but the first (locked_wake by default) is held against the first with a
// verdict per ratio (lab_summary.h). The producer side (WorkqueueLoad, run_producers,
// produce) is shared with the datapath half (workqueue_datapath_lab.h).
#pragma once

#include <atomic>
#include <iosfwd>
#include <thread>

#include "uvhost/bench/cpu_time.h"
#include "uvhost/bench/lab/lab_engine.h"
#include "uvhost/sync/work_queue.h"

namespace uvhost::bench::lab {

// What both halves offer: strategies, repetition and the producers' load.
struct WorkqueueLoad {
  std::vector<sync::EnqueueStrategy> strategies{sync::EnqueueStrategy::kLockedWake,
                                                sync::EnqueueStrategy::kUnlockThenWake,
                                                sync::EnqueueStrategy::kLockless};
  int runs = 5;
  int duration_ms = 300;  // measured window of one run
  bool saturate = false;
  double rate = 20000;    // paced mode: signals per second, all producers together
  int work_ns = 300;      // CPU burned by one run of a work item / handler
};
// validate(): throws std::invalid_argument for an unusable load or configuration.
void validate(const WorkqueueLoad& load);
// The load's keys of the "config" JSON object.
nlohmann::json load_json(const WorkqueueLoad& load);

// The paced interval between one producer's signals (0 when saturating).
int64_t producer_interval_ns(const WorkqueueLoad& load, int producers);

// What the producers of one run did, summed after their threads are joined.
struct ProducerTotals {
  uint64_t calls = 0;
  int64_t signal_ns = 0;  // summed wall time inside signal()
  int64_t cpu_ns = 0;
  int64_t wall_ns = 0;    // the measured window
  double per_s(uint64_t count) const { return per_second(static_cast<double>(count), wall_ns); }
  // `ns` of CPU as % of one core over the window.
  double cpu_pct(int64_t ns) const { return 100.0 * static_cast<double>(ns) / static_cast<double>(wall_ns); }
  double mean_signal_ns() const { return calls > 0 ? static_cast<double>(signal_ns) / static_cast<double>(calls) : 0.0; }
};

// A producer's loop until `stop`: paced (one signal() per interval_ns, sleeping to
// absolute deadlines from first_deadline_ns; far behind, it skips the missed slots
// instead of bursting) or saturating (signal() in batches of `batch`, one clock pair
// per batch).
template <class Signal>
void produce(const std::atomic<bool>& stop, bool saturate, int batch, int64_t interval_ns, int64_t first_deadline_ns,
             ProducerTotals& counts, Signal&& signal) {
  fine_timer_slack();
  const int64_t cpu_start = thread_cpu_ns();
  int64_t deadline = first_deadline_ns;
  // relaxed: a stop request only needs to be noticed eventually.
  while (!stop.load(std::memory_order_relaxed)) {
    int n = batch;
    if (!saturate) {
      const int64_t now = monotonic_ns();
      if (now < deadline) {
        sleep_until_ns(deadline);
        continue;
      }
      n = 1;
      deadline += interval_ns;
      if (deadline < now - 8 * interval_ns) deadline = now;
    }
    const int64_t before = monotonic_ns();
    for (int i = 0; i < n; ++i) signal();
    counts.signal_ns += monotonic_ns() - before;
    counts.calls += static_cast<uint64_t>(n);
  }
  counts.cpu_ns = thread_cpu_ns() - cpu_start;
}

// Runs `count` producers, producer i calling signal(i) in produce(), paced phases spread
// over one interval: window_start() just before they are let go, window_end() after the
// load's duration (the window ends when it returns); then stops and joins them.
template <class Signal, class WindowStart, class WindowEnd>
ProducerTotals run_producers(const WorkqueueLoad& load, int count, int batch, Signal&& signal,
                             WindowStart&& window_start, WindowEnd&& window_end) {
  const int64_t interval_ns = producer_interval_ns(load, count);
  std::vector<ProducerTotals> counts(static_cast<std::size_t>(count));
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> start_ns{0};
  std::vector<std::thread> threads;
  threads.reserve(counts.size());
  for (int i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      go.wait(false, std::memory_order_acquire);  // acquire: pairs with the release below
      produce(stop, load.saturate, batch, interval_ns,
              start_ns.load(std::memory_order_relaxed) + interval_ns * i / count, counts[static_cast<std::size_t>(i)],
              [&] { signal(i); });
    });
  }
  start_ns.store(monotonic_ns(), std::memory_order_relaxed);  // relaxed: published by go's release store
  window_start();
  const int64_t t0 = monotonic_ns();
  go.store(true, std::memory_order_release);
  go.notify_all();
  std::this_thread::sleep_for(std::chrono::milliseconds(load.duration_ms));
  window_end();
  ProducerTotals total;
  total.wall_ns = monotonic_ns() - t0;
  stop.store(true, std::memory_order_relaxed);  // relaxed: join() below orders the results
  for (auto& t : threads) t.join();
  for (const ProducerTotals& c : counts) {
    total.calls += c.calls;
    total.signal_ns += c.signal_ns;
    total.cpu_ns += c.cpu_ns;
  }
  return total;
}

struct WorkqueueLabConfig : WorkqueueLoad {
  std::vector<int> threads{1, 8, 64, 256};
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
  const WorkqueueLabCell* find(int threads, sync::EnqueueStrategy strategy) const noexcept {
    return find_cell(cells, [&](const WorkqueueLabCell& c) { return c.threads == threads && c.strategy == strategy; });
  }
};

void validate(const WorkqueueLabConfig& config);

WorkqueueRunSample run_workqueue_once(const WorkqueueLabConfig& config, int threads, sync::EnqueueStrategy strategy);
WorkqueueLabResult run_workqueue_lab(const WorkqueueLabConfig& config, const LabProgress& progress = {});

// print_variant_sweep() (lab_summary.h) for the producer counts, then a detail table.
void print_workqueue_tables(const WorkqueueLabResult& result, std::ostream& out);

// Throughput and worker CPU per producer count, a bar per strategy with its 95% CI.
std::vector<BarChart> workqueue_charts(const WorkqueueLabResult& result);

nlohmann::json workqueue_lab_json(const WorkqueueLabResult& result);

}  // namespace uvhost::bench::lab
