// workqueue_datapath_lab.cpp - the work-queue lab on the datapath Worker (see
// workqueue_datapath_lab.h for the method).
#include "uvhost/bench/lab/workqueue_datapath_lab.h"

#include <sys/eventfd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "uvhost/bench/cpu_time.h"
#include "uvhost/bench/lab/lab_engine.h"
#include "uvhost/bench/table.h"
#include "uvhost/datapath/worker.h"
#include "uvhost/base/unique_fd.h"

namespace uvhost::bench::lab {

using sync::EnqueueStrategy;

std::string_view to_string(KickPath path) noexcept { return path == KickPath::kEventfd ? "eventfd" : "inject"; }

namespace {

// Worker-only counter, read by the main thread for reporting.
void bump(std::atomic<uint64_t>& counter, uint64_t by) noexcept {
  // relaxed: single writer (the worker); the drain's flush and the final join order
  // the last values before they are read for the exactly-once check.
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

// One virtqueue of the lab: a kick eventfd (eventfd path) or a pending count (inject
// path), the handler, and what the worker consumed.
struct LabQueue {
  base::UniqueFd kick;
  // Inject path: kicks signalled and not yet consumed (a frame ring's fill level).
  alignas(64) std::atomic<uint64_t> pending{0};
  // Written by the worker only.
  alignas(64) std::atomic<uint64_t> consumed{0};
  std::atomic<uint64_t> runs{0};
  std::unique_ptr<sync::WorkItem> handler;
  uint64_t sink = 0;  // the handler's burn result (worker only)
  // Producer side, read after join.
  uint64_t written = 0;
  int64_t signal_ns = 0;
  int64_t cpu_ns = 0;
};

struct Totals {
  uint64_t consumed = 0;
  uint64_t runs = 0;
};

Totals totals(const std::vector<std::unique_ptr<LabQueue>>& queues) {
  Totals t;
  for (const auto& q : queues) {
    // relaxed: reporting reads of monotonic counters.
    t.consumed += q->consumed.load(std::memory_order_relaxed);
    t.runs += q->runs.load(std::memory_order_relaxed);
  }
  return t;
}

// One signal: what a guest (eventfd) or a host-side producer (inject) does.
void signal(datapath::Worker& worker, LabQueue& q, KickPath path) noexcept {
  if (path == KickPath::kEventfd) {
    (void)::eventfd_write(q.kick.get(), 1);
  } else {
    // relaxed: the count itself is exact (RMWs on one atomic lose no increment), and
    // WorkQueue::queue() orders the handler's next run after it (no lost wake-up).
    q.pending.fetch_add(1, std::memory_order_relaxed);
    worker.queue(*q.handler);
  }
}

void producer_main(datapath::Worker& worker, LabQueue& q, KickPath path, const std::atomic<bool>& stop,
                   bool saturate, int64_t interval_ns, int64_t first_deadline_ns) {
  fine_timer_slack();
  const int64_t cpu_start = thread_cpu_ns();
  int64_t deadline = first_deadline_ns;
  // relaxed: a stop request only needs to be noticed eventually.
  while (!stop.load(std::memory_order_relaxed)) {
    if (saturate) {
      constexpr int kBatch = 16;  // one clock pair per batch
      const int64_t before = monotonic_ns();
      for (int i = 0; i < kBatch; ++i) signal(worker, q, path);
      q.signal_ns += monotonic_ns() - before;
      q.written += static_cast<uint64_t>(kBatch);
      continue;
    }
    const int64_t now = monotonic_ns();
    if (now < deadline) {
      sleep_until_ns(deadline);
      continue;
    }
    const int64_t before = monotonic_ns();
    signal(worker, q, path);
    q.signal_ns += monotonic_ns() - before;
    ++q.written;
    deadline += interval_ns;
    if (deadline < now - 8 * interval_ns) deadline = now;  // far behind: skip, do not burst
  }
  q.cpu_ns = thread_cpu_ns() - cpu_start;
}

// The figures of a run, each summarized per cell (mean and 95% CI over the runs).
using Field = LabField<WorkqueueDatapathSample, WorkqueueDatapathCell>;
constexpr Field kFields[] = {
    {"kicks_written_per_s", &WorkqueueDatapathSample::kicks_written_per_s,
     &WorkqueueDatapathCell::kicks_written_per_s},
    {"kicks_handled_per_s", &WorkqueueDatapathSample::kicks_handled_per_s,
     &WorkqueueDatapathCell::kicks_handled_per_s},
    {"handler_runs_per_s", &WorkqueueDatapathSample::handler_runs_per_s,
     &WorkqueueDatapathCell::handler_runs_per_s},
    {"worker_cpu_pct", &WorkqueueDatapathSample::worker_cpu_pct, &WorkqueueDatapathCell::worker_cpu_pct},
    {"producer_cpu_pct", &WorkqueueDatapathSample::producer_cpu_pct,
     &WorkqueueDatapathCell::producer_cpu_pct},
    {"signal_ns", &WorkqueueDatapathSample::signal_ns, &WorkqueueDatapathCell::signal_ns},
    {"wakeups_per_s", &WorkqueueDatapathSample::wakeups_per_s, &WorkqueueDatapathCell::wakeups_per_s},
    {"epoll_waits_per_s", &WorkqueueDatapathSample::epoll_waits_per_s,
     &WorkqueueDatapathCell::epoll_waits_per_s},
};

StrategyFigures figures(const WorkqueueDatapathCell& cell) {
  return {&cell.kicks_handled_per_s, &cell.worker_cpu_pct};
}

}  // namespace

void validate(const WorkqueueDatapathConfig& config) {
  if (config.queues.empty()) throw std::invalid_argument("no queue counts");
  for (int q : config.queues) {
    if (q < 1 || q > 1024) throw std::invalid_argument(fmt::format("queue count {} not in [1, 1024]", q));
  }
  if (config.strategies.empty()) throw std::invalid_argument("no strategies");
  if (config.paths.empty()) throw std::invalid_argument("no kick paths");
  if (config.runs < 1) throw std::invalid_argument("runs must be >= 1");
  if (config.duration_ms < 1) throw std::invalid_argument("duration must be >= 1 ms");
  if (config.work_ns < 0) throw std::invalid_argument("work must be >= 0 ns");
  if (!config.saturate && !(config.rate > 0)) throw std::invalid_argument("rate must be > 0");
}

const WorkqueueDatapathCell* WorkqueueDatapathResult::find(KickPath path, int queues,
                                                           EnqueueStrategy strategy) const noexcept {
  for (const auto& cell : cells) {
    if (cell.path == path && cell.queues == queues && cell.strategy == strategy) return &cell;
  }
  return nullptr;
}

uint64_t WorkqueueDatapathResult::total_lost() const noexcept {
  uint64_t total = 0;
  for (const auto& cell : cells) total += cell.lost;
  return total;
}

WorkqueueDatapathSample run_workqueue_datapath_once(const WorkqueueDatapathConfig& config, KickPath path,
                                                    int queue_count, EnqueueStrategy strategy) {
  const uint64_t burn_iterations = burn_iterations_for(config.work_ns);
  const int64_t interval_ns =
      config.saturate ? 0 : static_cast<int64_t>(static_cast<double>(queue_count) * 1e9 / config.rate);

  // Declared before the worker: the worker (and its queued items) goes first.
  std::vector<std::unique_ptr<LabQueue>> queues;
  queues.reserve(static_cast<std::size_t>(queue_count));
  for (int i = 0; i < queue_count; ++i) {
    auto q = std::make_unique<LabQueue>();
    LabQueue* raw = q.get();
    if (path == KickPath::kEventfd) {
      const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      if (fd < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
      q->kick = base::UniqueFd(fd);
      // The handler: the queue's fixed work (the kick was drained by on_ready).
      q->handler = std::make_unique<sync::WorkItem>([raw, burn_iterations] {
        raw->sink = burn(burn_iterations);
        bump(raw->runs, 1);
      });
    } else {
      // The handler drains the pending count (a frame ring), then works.
      q->handler = std::make_unique<sync::WorkItem>([raw, burn_iterations] {
        // relaxed: see signal(); the exchange takes every increment exactly once.
        bump(raw->consumed, raw->pending.exchange(0, std::memory_order_relaxed));
        raw->sink = burn(burn_iterations);
        bump(raw->runs, 1);
      });
    }
    queues.push_back(std::move(q));
  }
  datapath::Worker worker(fmt::format("lab-wq-{}", queue_count), strategy);
  if (path == KickPath::kEventfd) {
    worker.run([&] {
      for (auto& q : queues) {
        LabQueue* raw = q.get();
        // DeviceDatapath::on_kick: drain the eventfd, count, queue the handler.
        worker.watch(raw->kick.get(), [raw, &worker] {
          eventfd_t value = 0;
          if (::eventfd_read(raw->kick.get(), &value) == 0) bump(raw->consumed, value);
          worker.queue(*raw->handler);
        });
      }
    });
  }

  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> start_ns{0};
  std::vector<std::thread> producers;
  producers.reserve(queues.size());
  for (int i = 0; i < queue_count; ++i) {
    producers.emplace_back([&, i] {
      go.wait(false, std::memory_order_acquire);  // acquire: pairs with the release below
      // Spread the producers' phases over one interval.
      const int64_t offset = interval_ns * i / queue_count;
      producer_main(worker, *queues[static_cast<std::size_t>(i)], path, stop, config.saturate, interval_ns,
                    start_ns.load(std::memory_order_relaxed) + offset);
    });
  }

  // relaxed: published by go's release store.
  start_ns.store(monotonic_ns(), std::memory_order_relaxed);
  const datapath::WorkerStats before = worker.stats();
  const Totals totals_before = totals(queues);
  const int64_t t0 = monotonic_ns();
  go.store(true, std::memory_order_release);  // release: start_ns is visible to producers
  go.notify_all();
  std::this_thread::sleep_for(std::chrono::milliseconds(config.duration_ms));
  const datapath::WorkerStats after = worker.stats();
  const Totals totals_after = totals(queues);
  const int64_t wall = monotonic_ns() - t0;
  stop.store(true, std::memory_order_relaxed);  // relaxed: join() below orders the results
  for (auto& t : producers) t.join();

  uint64_t written = 0;
  int64_t signal_ns = 0;
  int64_t producer_cpu = 0;
  for (const auto& q : queues) {
    written += q->written;
    signal_ns += q->signal_ns;
    producer_cpu += q->cpu_ns;
  }
  // Drain: every kick written must be consumed by some handler run / on_ready (a kick
  // left in an eventfd or a pending count nobody runs for is a lost wake-up). 5 s is
  // far beyond any backlog a run builds.
  const int64_t give_up = monotonic_ns() + 5'000'000'000;
  while (totals(queues).consumed < written && monotonic_ns() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  worker.work_queue().flush();  // handlers queued by the last on_ready have run
  if (path == KickPath::kEventfd) {
    worker.run([&] {
      for (auto& q : queues) worker.unwatch(q->kick.get());
    });
  }
  const Totals final_totals = totals(queues);

  WorkqueueDatapathSample s;
  s.kicks_written_per_s = per_second(static_cast<double>(written), wall);
  s.kicks_handled_per_s = per_second(static_cast<double>(totals_after.consumed - totals_before.consumed), wall);
  s.handler_runs_per_s = per_second(static_cast<double>(totals_after.runs - totals_before.runs), wall);
  s.worker_cpu_pct = 100.0 * static_cast<double>(after.queue.worker_cpu_ns - before.queue.worker_cpu_ns) /
                     static_cast<double>(wall);
  s.producer_cpu_pct = 100.0 * static_cast<double>(producer_cpu) / static_cast<double>(wall);
  s.signal_ns = written > 0 ? static_cast<double>(signal_ns) / static_cast<double>(written) : 0.0;
  s.wakeups_per_s = per_second(static_cast<double>(after.queue.wakeups - before.queue.wakeups), wall);
  s.epoll_waits_per_s = per_second(static_cast<double>(after.epoll_waits - before.epoll_waits), wall);
  s.kicks_written = written;
  s.kicks_consumed = final_totals.consumed;
  s.handler_runs = final_totals.runs;
  s.lost = written > final_totals.consumed ? written - final_totals.consumed : 0;
  return s;
}

WorkqueueDatapathResult run_workqueue_datapath_lab(const WorkqueueDatapathConfig& config,
                                                   const std::function<void(const std::string&)>& progress) {
  validate(config);
  WorkqueueDatapathResult result;
  result.config = config;
  burn_iterations_per_ns();  // calibrate before the first measured run
  for (KickPath path : config.paths) {
    for (int queues : config.queues) {
      const std::size_t first = result.cells.size();
      for (EnqueueStrategy strategy : config.strategies) {
        auto& cell = result.cells.emplace_back();
        std::tie(cell.path, cell.queues, cell.strategy) = std::tuple(path, queues, strategy);
      }
      run_cells(
          result.cells, first, config.runs, false, kFields,
          [&](const WorkqueueDatapathCell& cell) { return run_workqueue_datapath_once(config, path, queues, cell.strategy); },
          [&](WorkqueueDatapathCell& cell, const WorkqueueDatapathSample& s, int run) {
            cell.lost += s.lost;
            if (progress)
              progress(fmt::format("path={} queues={} strategy={} run {}/{}: {:.0f} kicks/s written, {:.0f} handled, "
                                   "{:.0f} handler runs/s, worker {:.1f}%{}",
                                   to_string(path), queues, sync::to_string(cell.strategy), run + 1, config.runs,
                                   s.kicks_written_per_s, s.kicks_handled_per_s, s.handler_runs_per_s,
                                   s.worker_cpu_pct, s.lost ? fmt::format(", {} KICKS LOST", s.lost) : ""));
          });
    }
  }
  return result;
}

StrategyVerdicts datapath_strategy_verdicts(const WorkqueueDatapathCell& cell,
                                            const WorkqueueDatapathCell& base) {
  return strategy_verdicts(cell.kicks_handled_per_s, base.kicks_handled_per_s, cell.worker_cpu_pct,
                           base.worker_cpu_pct);
}

void print_workqueue_datapath_tables(const WorkqueueDatapathResult& result, std::ostream& out) {
  const auto& c = result.config;
  for (KickPath path : c.paths) {
    out << fmt::format("datapath Worker, kick path {}: {}\n", to_string(path),
                       path == KickPath::kEventfd ? "producers write kick eventfds, the worker's epoll queues handlers"
                                                  : "producers queue the handler on the Worker themselves");
    print_strategy_sweep({"queues", "kicks/s", "kicks handled/s"}, c.queues, c.strategies,
                         [&](int queues, EnqueueStrategy s) { return figures(*result.find(path, queues, s)); }, out);
    TextTable detail({"queues", "strategy", "written/s", "handled/s", "handler runs/s", "worker %", "producers %",
                      "signal ns", "wakeups/s", "epoll waits/s", "lost"});
    for (int queues : c.queues) {
      for (EnqueueStrategy s : c.strategies) {
        const WorkqueueDatapathCell& cell = *result.find(path, queues, s);
        std::vector<std::string> row{std::to_string(queues), std::string(sync::to_string(s))};
        for (const Field& f : kFields) row.push_back(ci_text(cell.*f.summary));
        row.push_back(std::to_string(cell.lost));
        detail.add_row(std::move(row));
      }
      detail.add_separator();
    }
    detail.print(out);
    out << "\n";
  }
}

nlohmann::json workqueue_datapath_json(const WorkqueueDatapathResult& result) {
  const WorkqueueDatapathConfig& c = result.config;
  nlohmann::json j;
  j["config"] = {{"queues", c.queues}, {"strategies", names(c.strategies, sync::to_string)},
                 {"paths", names(c.paths, [](KickPath p) { return to_string(p); })},
                 {"runs", c.runs}, {"duration_ms", c.duration_ms}, {"mode", c.saturate ? "saturate" : "paced"},
                 {"rate", c.rate}, {"work_ns", c.work_ns}};
  j["cells"] = cells_json(result.cells, kFields, [&](const WorkqueueDatapathCell& cell, nlohmann::json& entry) {
    for (std::size_t i = 0; i < cell.samples.size(); ++i) {
      const WorkqueueDatapathSample& s = cell.samples[i];
      nlohmann::json& sample = entry["samples"][i];
      sample["kicks_written"] = s.kicks_written;
      sample["kicks_consumed"] = s.kicks_consumed;
      sample["handler_runs"] = s.handler_runs;
      sample["lost"] = s.lost;
    }
    entry["path"] = std::string(to_string(cell.path));
    entry["queues"] = cell.queues;
    entry["strategy"] = std::string(sync::to_string(cell.strategy));
    entry["lost"] = cell.lost;
    if (const WorkqueueDatapathCell* base = result.find(cell.path, cell.queues, c.strategies.front())) {
      entry["vs_first_strategy"] =
          strategy_vs_first(figures(cell), figures(*base), c.strategies.front(), "kicks_handled_per_s");
      entry["vs_first_strategy"]["producer_cpu_pct"] = ratio_json(
          ratio_vs_baseline(cell.producer_cpu_pct, base->producer_cpu_pct, Direction::kLowerIsBetter));
    }
  });
  j["lost"] = result.total_lost();
  return j;
}

std::vector<BarChart> workqueue_datapath_charts(const WorkqueueDatapathResult& result) {
  const auto& c = result.config;
  std::vector<std::string> groups;
  for (int queues : c.queues) groups.push_back(count_label(queues, "queue"));
  std::vector<BarChart> charts;
  for (KickPath path : c.paths) {
    const std::string prefix = fmt::format("datapath Worker, {} kicks: ", to_string(path));
    for (auto& chart : grouped_charts<WorkqueueDatapathCell>(
             {{prefix + "kicks handled", "kicks per second", &WorkqueueDatapathCell::kicks_handled_per_s},
              {prefix + "worker CPU", "% of one core (lower is better)", &WorkqueueDatapathCell::worker_cpu_pct}},
             groups, names(c.strategies, sync::to_string),
             [&](std::size_t g, std::size_t s) { return result.find(path, c.queues[g], c.strategies[s]); }))
      charts.push_back(std::move(chart));
  }
  return charts;
}

}  // namespace uvhost::bench::lab
