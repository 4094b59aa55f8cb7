// workqueue_datapath_lab.h - seed 000's experiment on the real datapath::Worker: the
// enqueue strategies where the datapath uses them, with kicks arriving as eventfd
// writes (the datapath half of `uvhost lab workqueue`).
//
// What it measures
// ----------------
// Q queues (1, 8, 64, 256 by default), each with its own producer thread, all served
// by ONE datapath::Worker built with the enqueue strategy under test. Each queue has a
// WorkItem handler that burns `work_ns` of CPU (handle_tx's stand-in). Two kick paths,
// the two ways work reaches a datapath worker:
//  - eventfd (a guest kick): the producer writes 1 to the queue's kick eventfd, as a
//    vCPU's ioeventfd would. The Worker watches every kick fd in its epoll set; when
//    one is readable it reads (drains) the eventfd on the worker thread and queues the
//    queue's handler - DeviceDatapath::on_kick's exact shape. Note what this means for
//    seed 000: the producer never calls WorkQueue::queue(); the enqueue happens on the
//    worker itself (no contention, no wake-up), and waking the worker is the kernel's
//    eventfd -> epoll wake-up. Unlike the kernel, where the eventfd's wait-queue
//    callback runs vhost_work_queue() in the kicker's context, the strategy is
//    expected to matter little here - the lab measures whether it does.
//  - inject (a host-side producer: RxInjector, the switch, another worker): the
//    producer adds one to the queue's pending count and calls Worker::queue(handler)
//    from its own thread - DeviceDatapath::inject's shape. Here the strategy runs in
//    the producer: the list lock, and the wake of a parked worker (an eventfd write to
//    the Worker's wake fd) inside or after it.
// Counting is exactly-once on both paths: the kicks a handler or on_ready consumes are
// eventfd counts (or the pending count's exchange), summed, so coalesced kicks are
// counted, not lost: "kicks written" (producer signals), "kicks handled" (counts
// consumed by the worker) and "handler runs" (runs of the handlers: fewer when kicks
// coalesce) are reported separately. After each run's window the producers stop and the
// lab waits until every kick written has been consumed; what is left (`lost`) must be
// 0 - a lost wake-up leaves a kick unconsumed.
//
// Per run: kicks written/handled per second, handler runs per second, the worker
// thread's CPU as % of one core (CLOCK_THREAD_CPUTIME_ID of the worker thread via
// pthread_getcpuclockid, WorkQueue::stats()), producers' CPU, the mean cost of one
// signal (eventfd_write or queue()), wake-ups and epoll sleeps per second.
// Modes as in the sync lab: paced (producers together offer `rate` kicks/s: compare
// CPU) or saturating (tight loops: compare throughput).
//
// Method: every (path, queues, strategy) cell runs `runs` times, strategies interleaved
// (a b c a b c ...); mean and 95% CI per figure, ratios vs the first strategy
// (locked_wake) with ratio_of_means, and a verdict from each ratio's CI for kicks
// handled/s and worker CPU (better / worse when it excludes 1, noise when not). Each
// run uses a fresh Worker and fresh eventfds.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "uvhost/bench/gnuplot.h"
#include "uvhost/bench/lab/workqueue_lab.h"
#include "uvhost/bench/stats.h"
#include "uvhost/sync/work_queue.h"

namespace uvhost::bench::lab {

enum class KickPath { kEventfd, kInject };
std::string_view to_string(KickPath path) noexcept;  // "eventfd", "inject"

struct WorkqueueDatapathConfig {
  std::vector<int> queues{1, 8, 64, 256};
  std::vector<sync::EnqueueStrategy> strategies{sync::EnqueueStrategy::kLockedWake,
                                                sync::EnqueueStrategy::kUnlockThenWake,
                                                sync::EnqueueStrategy::kLockless};
  std::vector<KickPath> paths{KickPath::kEventfd, KickPath::kInject};
  int runs = 5;
  int duration_ms = 300;
  bool saturate = false;
  double rate = 20000;  // paced mode: kicks per second, all producers together
  int work_ns = 300;    // CPU burned by one handler run
};

struct WorkqueueDatapathSample {
  double kicks_written_per_s = 0;
  double kicks_handled_per_s = 0;  // kicks consumed by the worker in the window
  double handler_runs_per_s = 0;
  double worker_cpu_pct = 0;       // % of one core
  double producer_cpu_pct = 0;     // all producers together, % of one core
  double signal_ns = 0;            // mean wall time of one eventfd_write / queue() call
  double wakeups_per_s = 0;        // wake-ups of the parked worker through its wake fd
  double epoll_waits_per_s = 0;    // times the worker went to sleep in epoll_wait
  uint64_t kicks_written = 0;      // whole run
  uint64_t kicks_consumed = 0;     // whole run, after the drain
  uint64_t handler_runs = 0;       // whole run, after the drain
  uint64_t lost = 0;               // kicks_written - kicks_consumed: must be 0
};

struct WorkqueueDatapathCell {
  KickPath path = KickPath::kEventfd;
  int queues = 0;
  sync::EnqueueStrategy strategy = sync::EnqueueStrategy::kLockless;
  std::vector<WorkqueueDatapathSample> samples;
  Summary kicks_written_per_s, kicks_handled_per_s, handler_runs_per_s, worker_cpu_pct, producer_cpu_pct, signal_ns,
      wakeups_per_s, epoll_waits_per_s;
  uint64_t lost = 0;  // over all runs
};

struct WorkqueueDatapathResult {
  WorkqueueDatapathConfig config;
  std::vector<WorkqueueDatapathCell> cells;  // path-major, then queues, then strategy
  const WorkqueueDatapathCell* find(KickPath path, int queues, sync::EnqueueStrategy strategy) const noexcept;
  uint64_t total_lost() const noexcept;
};

// Throws std::invalid_argument for an unusable configuration.
void validate(const WorkqueueDatapathConfig& config);

WorkqueueDatapathSample run_workqueue_datapath_once(const WorkqueueDatapathConfig& config, KickPath path, int queues,
                                                    sync::EnqueueStrategy strategy);

WorkqueueDatapathResult run_workqueue_datapath_lab(const WorkqueueDatapathConfig& config,
                                                   const std::function<void(const std::string&)>& progress = {});

// A strategy against the first one at the same (path, queues): kicks handled/s (higher
// is better) and worker CPU (lower is better), with their CIs and verdicts.
StrategyVerdicts datapath_strategy_verdicts(const WorkqueueDatapathCell& cell,
                                            const WorkqueueDatapathCell& base);

// Per path: the seed's table (queues | kicks handled/s | worker % per strategy, worker
// CPU ratios vs the first strategy), the verdicts against the first strategy, then a
// detail table.
void print_workqueue_datapath_tables(const WorkqueueDatapathResult& result, std::ostream& out);

// Per path: kicks handled/s and worker CPU per queue count, a bar per strategy with its
// 95% CI.
std::vector<BarChart> workqueue_datapath_charts(const WorkqueueDatapathResult& result);

nlohmann::json workqueue_datapath_json(const WorkqueueDatapathResult& result);

}  // namespace uvhost::bench::lab
