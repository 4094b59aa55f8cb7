// workqueue_datapath_lab.h - the work-queue lab (workqueue_lab.h) on the real
// datapath::Worker, the datapath half of `uvhost lab workqueue`: Q queues (1, 8, 64, 256
// by default), one producer thread each, all served by ONE datapath::Worker built with
// the strategy under test; each queue's handler burns `work_ns` of CPU. Kick paths:
//  - eventfd (a guest kick): the producer writes the queue's kick eventfd; the Worker's
//    epoll sees it, drains it on the worker thread and queues the handler
//    (DeviceDatapath::on_kick). The enqueue happens on the worker itself (no contention,
//    no wake-up; waking is eventfd -> epoll), unlike the kernel, where the eventfd's
//    wait-queue callback runs vhost_work_queue() in the kicker's context: the lab
//    measures whether the strategy matters here.
//  - inject (a host-side producer: RxInjector, the switch, another worker): the
//    producer bumps the queue's pending count and calls Worker::queue(handler) itself
//    (DeviceDatapath::inject): the strategy runs in the producer.
// Kicks written, kicks handled (eventfd counts or pending exchanges consumed, so
// coalesced kicks are counted) and handler runs are counted apart, exactly once. After
// each window the lab waits until every kick written is consumed; what is left (`lost`,
// a lost wake-up) must be 0. Modes, method and verdicts as in the sync half, kicks
// handled/s being the throughput; a fresh Worker and fresh eventfds per run.
#pragma once

#include <string_view>
#include <tuple>

#include "uvhost/base/name_table.h"
#include "uvhost/bench/lab/lab_engine.h"
#include "uvhost/bench/lab/workqueue_lab.h"

namespace uvhost::bench::lab {

enum class KickPath { kEventfd, kInject };
inline constexpr auto kKickPathNames =
    base::name_table<KickPath>({{KickPath::kEventfd, "eventfd"}, {KickPath::kInject, "inject"}});
constexpr const auto& enum_names(KickPath) noexcept { return kKickPathNames; }
using base::to_string;

// The load's rate is kicks per second, all producers together.
struct WorkqueueDatapathConfig : WorkqueueLoad {
  std::vector<int> queues{1, 8, 64, 256};
  std::vector<KickPath> paths{KickPath::kEventfd, KickPath::kInject};
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

struct WorkqueueDatapathCell : LabCell<WorkqueueDatapathSample> {
  KickPath path = KickPath::kEventfd;
  int queues = 0;
  sync::EnqueueStrategy strategy = sync::EnqueueStrategy::kLockless;
  Summary kicks_written_per_s, kicks_handled_per_s, handler_runs_per_s, worker_cpu_pct, producer_cpu_pct, signal_ns,
      wakeups_per_s, epoll_waits_per_s;
  uint64_t lost = 0;  // over all runs
  auto key() const noexcept { return std::tuple(path, queues, strategy); }
};

// Cells path-major, then queues, then strategy; find(path, queues, strategy).
struct WorkqueueDatapathResult : LabResult<WorkqueueDatapathConfig, WorkqueueDatapathCell> {
  uint64_t total_lost() const noexcept { return total(&WorkqueueDatapathCell::lost); }
};

void validate(const WorkqueueDatapathConfig& config);  // as validate(WorkqueueLoad)

WorkqueueDatapathSample run_workqueue_datapath_once(const WorkqueueDatapathConfig& config, KickPath path, int queues,
                                                    sync::EnqueueStrategy strategy);
WorkqueueDatapathResult run_workqueue_datapath_lab(const WorkqueueDatapathConfig& config,
                                                   const LabProgress& progress = {});

// Per path: print_variant_sweep() (lab_summary.h) for the queue counts, then a detail table.
void print_workqueue_datapath_tables(const WorkqueueDatapathResult& result, std::ostream& out);

// Per path: kicks handled/s and worker CPU per queue count, a bar per strategy with its
// 95% CI.
std::vector<BarChart> workqueue_datapath_charts(const WorkqueueDatapathResult& result);

nlohmann::json workqueue_datapath_json(const WorkqueueDatapathResult& result);

}  // namespace uvhost::bench::lab
