// workqueue_datapath_lab.cpp - the work-queue lab on the datapath Worker (see
// workqueue_datapath_lab.h for the method).
#include "uvhost/bench/lab/workqueue_datapath_lab.h"

#include <memory>
#include <ostream>
#include <tuple>

#include <fmt/format.h>
#include "uvhost/datapath/worker.h"
#include "uvhost/experiments/kicked_queue.h"

namespace uvhost::bench::lab {

using sync::EnqueueStrategy;

namespace {

using experiments::KickedQueue;
using Queues = std::vector<std::unique_ptr<KickedQueue>>;

// One signal: what a guest (eventfd) or a host-side producer (inject) does.
void signal(datapath::Worker& worker, KickedQueue& q, KickPath path) noexcept {
  if (path == KickPath::kEventfd) {
    q.signal_eventfd();
  } else {
    q.add_pending();
    worker.queue(q.handler());
  }
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

VariantFigures figures(const WorkqueueDatapathCell& cell) {
  return {&cell.kicks_handled_per_s, &cell.worker_cpu_pct};
}

}  // namespace

void validate(const WorkqueueDatapathConfig& config) {
  require_counts(config.queues, 1, 1024, "queue");
  require(!config.paths.empty(), "no kick paths");
  validate(static_cast<const WorkqueueLoad&>(config));
}

WorkqueueDatapathSample run_workqueue_datapath_once(const WorkqueueDatapathConfig& config, KickPath path,
                                                    int queue_count, EnqueueStrategy strategy) {
  const uint64_t burn_iterations = burn_iterations_for(config.work_ns);

  // Declared before the worker: the worker (and its queued items) goes first.
  Queues queues;
  for (int i = 0; i < queue_count; ++i) {
    // burn() keeps its loop (an asm barrier), so its result needs no sink.
    queues.push_back(
        std::make_unique<KickedQueue>(path == KickPath::kEventfd, [burn_iterations] { (void)burn(burn_iterations); }));
  }
  datapath::Worker worker(fmt::format("lab-wq-{}", queue_count), strategy);
  if (path == KickPath::kEventfd) {
    worker.run([&] {
      for (auto& q : queues) {
        KickedQueue* raw = q.get();
        // DeviceDatapath::on_kick: drain the eventfd, count, queue the handler.
        worker.watch(raw->kick_fd(), [raw, &worker] {
          raw->drain_kick();
          worker.queue(raw->handler());
        });
      }
    });
  }
  datapath::WorkerStats before, after;
  experiments::KickTotals totals_before, totals_after;
  const ProducerTotals total = run_producers(
      config, queue_count, 16, [&](int i) { signal(worker, *queues[static_cast<std::size_t>(i)], path); },
      [&] { std::tie(before, totals_before) = std::tuple(worker.stats(), experiments::kick_totals(queues)); },
      [&] { std::tie(after, totals_after) = std::tuple(worker.stats(), experiments::kick_totals(queues)); });

  const uint64_t written = total.calls;
  // Drain: every kick written must be consumed by some handler run / on_ready (a kick
  // left in an eventfd or a pending count nobody runs for is a lost wake-up). 5 s is
  // far beyond any backlog a run builds.
  const int64_t give_up = monotonic_ns() + 5'000'000'000;
  while (experiments::kick_totals(queues).consumed < written && monotonic_ns() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  worker.work_queue().flush();  // handlers queued by the last on_ready have run
  if (path == KickPath::kEventfd) {
    worker.run([&] {
      for (auto& q : queues) worker.unwatch(q->kick_fd());
    });
  }
  const experiments::KickTotals final_totals = experiments::kick_totals(queues);

  WorkqueueDatapathSample s;
  s.kicks_written_per_s = total.per_s(written);
  s.kicks_handled_per_s = total.per_s(totals_after.consumed - totals_before.consumed);
  s.handler_runs_per_s = total.per_s(totals_after.runs - totals_before.runs);
  s.worker_cpu_pct = total.cpu_pct(after.queue.worker_cpu_ns - before.queue.worker_cpu_ns);
  s.producer_cpu_pct = total.cpu_pct(total.cpu_ns);
  s.signal_ns = total.mean_signal_ns();
  s.wakeups_per_s = total.per_s(after.queue.wakeups - before.queue.wakeups);
  s.epoll_waits_per_s = total.per_s(after.epoll_waits - before.epoll_waits);
  s.kicks_written = written;
  s.kicks_consumed = final_totals.consumed;
  s.handler_runs = final_totals.runs;
  s.lost = written > final_totals.consumed ? written - final_totals.consumed : 0;
  return s;
}

WorkqueueDatapathResult run_workqueue_datapath_lab(const WorkqueueDatapathConfig& config,
                                                   const LabProgress& progress) {
  validate(config);
  WorkqueueDatapathResult result{config, {}};
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

void print_workqueue_datapath_tables(const WorkqueueDatapathResult& result, std::ostream& out) {
  const auto& c = result.config;
  for (KickPath path : c.paths) {
    out << fmt::format("datapath Worker, kick path {}: {}\n", to_string(path),
                       path == KickPath::kEventfd ? "producers write kick eventfds, the worker's epoll queues handlers"
                                                  : "producers queue the handler on the Worker themselves");
    const auto at = [&](int queues, std::size_t k) { return result.find(path, queues, c.strategies[k]); };
    print_variant_sweep({"queues", "strategy", "kicks/s", "kicks handled/s"}, c.queues,
                        names(c.strategies),
                        [&](int queues, std::size_t k) { return figures(*at(queues, k)); }, out);
    field_table({"queues", "strategy", "written/s", "handled/s", "handler runs/s", "worker %", "producers %",
                 "signal ns", "wakeups/s", "epoll waits/s", "lost"},
                c.queues, names(c.strategies), kFields, at,
                [](const WorkqueueDatapathCell& cell) { return std::vector<std::string>{std::to_string(cell.lost)}; })
        .print(out);
    out << "\n";
  }
}

nlohmann::json workqueue_datapath_json(const WorkqueueDatapathResult& result) {
  const WorkqueueDatapathConfig& c = result.config;
  nlohmann::json j;
  j["config"] = load_json(c);
  j["config"]["queues"] = c.queues;
  j["config"]["paths"] = names(c.paths);
  j["cells"] = cells_json(result.cells, kFields, [&](const WorkqueueDatapathCell& cell, nlohmann::json& entry) {
    for (std::size_t i = 0; i < cell.samples.size(); ++i) {
      const WorkqueueDatapathSample& s = cell.samples[i];
      entry["samples"][i].update({{"kicks_written", s.kicks_written}, {"kicks_consumed", s.kicks_consumed},
                                  {"handler_runs", s.handler_runs}, {"lost", s.lost}});
    }
    entry["path"] = std::string(to_string(cell.path));
    entry["queues"] = cell.queues;
    entry["strategy"] = std::string(sync::to_string(cell.strategy));
    entry["lost"] = cell.lost;
    if (const WorkqueueDatapathCell* base = result.find(cell.path, cell.queues, c.strategies.front())) {
      entry["vs_first_strategy"] = variant_vs_first(figures(cell), figures(*base), "strategy",
                                                    sync::to_string(c.strategies.front()), "kicks_handled_per_s");
      entry["vs_first_strategy"]["producer_cpu_pct"] = ratio_json(
          ratio_vs_baseline(cell.producer_cpu_pct, base->producer_cpu_pct, Direction::kLowerIsBetter));
    }
  });
  j["lost"] = result.total_lost();
  return j;
}

std::vector<BarChart> workqueue_datapath_charts(const WorkqueueDatapathResult& result) {
  const auto& c = result.config;
  return charts_per_variant<WorkqueueDatapathCell>(
      c.paths, c.queues, "queue", names(c.strategies),
      [](KickPath path) {
        const std::string prefix = fmt::format("datapath Worker, {} kicks: ", to_string(path));
        return std::vector<ChartFigure<WorkqueueDatapathCell>>{
            {prefix + "kicks handled", "kicks per second", &WorkqueueDatapathCell::kicks_handled_per_s},
            {prefix + "worker CPU", "% of one core (lower is better)", &WorkqueueDatapathCell::worker_cpu_pct}};
      },
      [&](KickPath path, int queues, std::size_t s) { return result.find(path, queues, c.strategies[s]); });
}

}  // namespace uvhost::bench::lab
