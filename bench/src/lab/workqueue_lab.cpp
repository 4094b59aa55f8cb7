// workqueue_lab.cpp - the WorkQueue enqueue-strategy lab (see workqueue_lab.h).
#include "uvhost/bench/lab/workqueue_lab.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>
#include <tuple>

#include <fmt/format.h>

#include "uvhost/experiments/round_robin_items.h"

namespace uvhost::bench::lab {
namespace {

using sync::EnqueueStrategy;

constexpr int kMaxWindowExtensionMs = 10'000;

// A producer stands for a guest flow kicking its virtqueues: it signals its own
// items round-robin. It gets enough items that each is offered at most
// kMaxOffersPerItem times a second, so in paced mode an offer almost never finds
// its item still queued (coalesced) and throughput equals the offered rate for
// every strategy - the upstream patch's "same throughput" condition.
constexpr double kMaxOffersPerItem = 1000;

// The figures of a run, each summarized per cell (mean and 95% CI over the runs).
using Field = LabField<WorkqueueRunSample, WorkqueueLabCell>;
constexpr Field kFields[] = {
    {"offered_per_s", &WorkqueueRunSample::offered_per_s, &WorkqueueLabCell::offered_per_s},
    {"throughput", &WorkqueueRunSample::throughput, &WorkqueueLabCell::throughput},
    {"worker_cpu_pct", &WorkqueueRunSample::worker_cpu_pct, &WorkqueueLabCell::worker_cpu_pct},
    {"producer_cpu_pct", &WorkqueueRunSample::producer_cpu_pct, &WorkqueueLabCell::producer_cpu_pct},
    {"enqueue_ns", &WorkqueueRunSample::enqueue_ns, &WorkqueueLabCell::enqueue_ns},
    {"wakeups_per_s", &WorkqueueRunSample::wakeups_per_s, &WorkqueueLabCell::wakeups_per_s},
    {"parks_per_s", &WorkqueueRunSample::parks_per_s, &WorkqueueLabCell::parks_per_s},
};

VariantFigures figures(const WorkqueueLabCell& cell) { return {&cell.throughput, &cell.worker_cpu_pct}; }

}  // namespace

void validate(const WorkqueueLoad& load) {
  require(!load.strategies.empty(), "no strategies");
  require(load.runs >= 1, "runs must be >= 1");
  require(load.duration_ms >= 1, "duration must be >= 1 ms");
  require(load.work_ns >= 0, "work must be >= 0 ns");
  require(load.saturate || load.rate > 0, "rate must be > 0");
}

nlohmann::json load_json(const WorkqueueLoad& load) {
  return {{"strategies", names(load.strategies)},
          {"runs", load.runs},
          {"duration_ms", load.duration_ms},
          {"mode", load.saturate ? "saturate" : "paced"},
          {"rate", load.rate},
          {"work_ns", load.work_ns}};
}

int64_t producer_interval_ns(const WorkqueueLoad& load, int producers) {
  return load.saturate ? 0 : static_cast<int64_t>(static_cast<double>(producers) * 1e9 / load.rate);
}

void validate(const WorkqueueLabConfig& config) {
  require_counts(config.threads, 1, 4096, "thread");
  validate(static_cast<const WorkqueueLoad&>(config));
}

WorkqueueRunSample run_workqueue_once(const WorkqueueLabConfig& config, int threads, EnqueueStrategy strategy) {
  const uint64_t burn_iterations = burn_iterations_for(config.work_ns);
  sync::WorkQueue wq(strategy);
  const double offers_per_producer = config.saturate ? 0.0 : config.rate / static_cast<double>(threads);
  const auto items_per_producer =
      static_cast<std::size_t>(std::max(1.0, std::ceil(offers_per_producer / kMaxOffersPerItem)));
  std::vector<std::unique_ptr<experiments::RoundRobinItems>> items;  // per producer
  // burn() keeps its loop (an asm barrier), so its result needs no sink.
  for (int i = 0; i < threads; ++i)
    items.push_back(std::make_unique<experiments::RoundRobinItems>(items_per_producer,
                                                                   [burn_iterations] { (void)burn(burn_iterations); }));

  sync::WorkQueueStats before, after;
  const ProducerTotals t = run_producers(
      config, threads, 32, [&](int i) { wq.queue(items[static_cast<std::size_t>(i)]->next()); },
      [&] { before = wq.stats(); },
      [&] {
        after = wq.stats();
        // On an oversubscribed machine (or under a sanitizer) a short window can pass
        // before the producers or the worker ever got a CPU; a run that measured nothing
        // is not a sample. The window is then extended (bounded) until the worker has run
        // an item; rates divide by the real window, so the extension is accounted for.
        for (int waited_ms = 0; after.items_run == before.items_run && waited_ms < kMaxWindowExtensionMs;
             ++waited_ms) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          after = wq.stats();
        }
      });
  wq.flush();
  wq.stop();

  WorkqueueRunSample s;
  s.offered_per_s = t.per_s(t.calls);
  s.throughput = t.per_s(after.items_run - before.items_run);
  s.worker_cpu_pct = t.cpu_pct(after.worker_cpu_ns - before.worker_cpu_ns);
  s.producer_cpu_pct = t.cpu_pct(t.cpu_ns);
  s.enqueue_ns = t.mean_signal_ns();
  s.wakeups_per_s = t.per_s(after.wakeups - before.wakeups);
  s.parks_per_s = t.per_s(after.parks - before.parks);
  return s;
}

WorkqueueLabResult run_workqueue_lab(const WorkqueueLabConfig& config, const LabProgress& progress) {
  validate(config);
  WorkqueueLabResult result{config, {}};
  burn_iterations_per_ns();  // calibrate before the first measured run
  for (int threads : config.threads) {
    const std::size_t first = result.cells.size();
    for (EnqueueStrategy strategy : config.strategies) {
      auto& cell = result.cells.emplace_back();
      std::tie(cell.threads, cell.strategy) = std::tuple(threads, strategy);
    }
    run_cells(
        result.cells, first, config.runs, false, kFields,
        [&](const WorkqueueLabCell& cell) { return run_workqueue_once(config, threads, cell.strategy); },
        [&](const WorkqueueLabCell& cell, const WorkqueueRunSample& s, int run) {
          if (progress)
            progress(fmt::format("threads={} strategy={} run {}/{}: {:.0f} items/s, worker {:.1f}%", threads,
                                 sync::to_string(cell.strategy), run + 1, config.runs, s.throughput,
                                 s.worker_cpu_pct));
        });
  }
  return result;
}

void print_workqueue_tables(const WorkqueueLabResult& result, std::ostream& out) {
  const auto& c = result.config;
  const auto at = [&](int threads, std::size_t k) { return result.find(threads, c.strategies[k]); };
  print_variant_sweep({"threads", "strategy", "tp (items/s)", "throughput"}, c.threads,
                      names(c.strategies),
                      [&](int threads, std::size_t k) { return figures(*at(threads, k)); }, out);
  field_table({"threads", "strategy", "offered/s", "tp (items/s)", "worker %", "producers %", "enqueue ns", "wakeups/s",
               "parks/s"},
              c.threads, names(c.strategies), kFields, at,
              [](const WorkqueueLabCell&) { return std::vector<std::string>{}; })
      .print(out);
}

nlohmann::json workqueue_lab_json(const WorkqueueLabResult& result) {
  const WorkqueueLabConfig& c = result.config;
  nlohmann::json j;
  j["experiment"] = "workqueue";
  j["seed"] = "000";  // the JSON key tools and tests read: which upstream experiment this is
  j["config"] = load_json(c);
  j["config"]["threads"] = c.threads;
  j["cells"] = cells_json(result.cells, kFields, [&](const WorkqueueLabCell& cell, nlohmann::json& entry) {
    entry["threads"] = cell.threads;
    entry["strategy"] = std::string(sync::to_string(cell.strategy));
    if (const WorkqueueLabCell* base = result.find(cell.threads, c.strategies.front()))
      entry["vs_first_strategy"] = variant_vs_first(figures(cell), figures(*base), "strategy",
                                                    sync::to_string(c.strategies.front()), "throughput");
  });
  return j;
}

std::vector<BarChart> workqueue_charts(const WorkqueueLabResult& result) {
  const auto& c = result.config;
  std::vector<std::string> groups;
  for (int threads : c.threads) groups.push_back(count_label(threads, "producer"));
  return grouped_charts<WorkqueueLabCell>(
      {{"WorkQueue: throughput", "work items run per second", &WorkqueueLabCell::throughput},
       {"WorkQueue: worker CPU", "% of one core (lower is better)", &WorkqueueLabCell::worker_cpu_pct}},
      groups, names(c.strategies),
      [&](std::size_t g, std::size_t s) { return result.find(c.threads[g], c.strategies[s]); });
}

}  // namespace uvhost::bench::lab
