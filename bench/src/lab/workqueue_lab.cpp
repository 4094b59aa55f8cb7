// workqueue_lab.cpp - the WorkQueue enqueue-strategy lab (see workqueue_lab.h).
#include "uvhost/bench/lab/workqueue_lab.h"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstdint>
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

namespace uvhost::bench::lab {
namespace {

using sync::EnqueueStrategy;

constexpr int kMaxWindowExtensionMs = 10'000;

// ---- One run -----------------------------------------------------------------

struct ProducerResult {
  uint64_t calls = 0;
  int64_t enqueue_ns = 0;  // summed wall time inside queue()
  int64_t cpu_ns = 0;
};

// A producer stands for a guest flow kicking its virtqueues: it signals its own
// items round-robin. It gets enough items that each is offered at most
// kMaxOffersPerItem times a second, so in paced mode an offer almost never finds
// its item still queued (coalesced) and throughput equals the offered rate for
// every strategy - the upstream patch's "same throughput" condition.
constexpr double kMaxOffersPerItem = 1000;

struct Producer {
  Producer(uint64_t burn_iterations, std::size_t item_count) {
    for (std::size_t i = 0; i < item_count; ++i) {
      items.push_back(std::make_unique<sync::WorkItem>([burn_iterations, this] { sink = burn(burn_iterations); }));
    }
  }
  sync::WorkItem& next_item() noexcept {
    sync::WorkItem& item = *items[cursor];
    cursor = cursor + 1 == items.size() ? 0 : cursor + 1;
    return item;
  }
  uint64_t sink = 0;  // written by the worker only
  std::vector<std::unique_ptr<sync::WorkItem>> items;
  std::size_t cursor = 0;
  ProducerResult result;
};

void paced_loop(sync::WorkQueue& wq, Producer& p, const std::atomic<bool>& stop, int64_t interval_ns,
                int64_t first_deadline_ns) {
  fine_timer_slack();
  int64_t deadline = first_deadline_ns;
  // relaxed: a stop request only needs to be noticed eventually.
  while (!stop.load(std::memory_order_relaxed)) {
    int64_t now = monotonic_ns();
    if (now < deadline) {
      sleep_until_ns(deadline);
      continue;
    }
    int64_t before = monotonic_ns();
    wq.queue(p.next_item());
    p.result.enqueue_ns += monotonic_ns() - before;
    ++p.result.calls;
    deadline += interval_ns;
    // Far behind (descheduled): skip the missed slots instead of bursting.
    if (deadline < now - 8 * interval_ns) deadline = now;
  }
}

void saturating_loop(sync::WorkQueue& wq, Producer& p, const std::atomic<bool>& stop) {
  constexpr int kBatch = 32;  // one clock pair per batch keeps timing overhead small
  while (!stop.load(std::memory_order_relaxed)) {  // relaxed: see paced_loop()
    int64_t before = monotonic_ns();
    for (int i = 0; i < kBatch; ++i) wq.queue(p.next_item());
    p.result.enqueue_ns += monotonic_ns() - before;
    p.result.calls += kBatch;
  }
}

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

StrategyFigures figures(const WorkqueueLabCell& cell) { return {&cell.throughput, &cell.worker_cpu_pct}; }

}  // namespace

void validate(const WorkqueueLabConfig& config) {
  if (config.threads.empty()) throw std::invalid_argument("no thread counts");
  for (int t : config.threads) {
    if (t < 1 || t > 4096) throw std::invalid_argument(fmt::format("thread count {} not in [1, 4096]", t));
  }
  if (config.strategies.empty()) throw std::invalid_argument("no strategies");
  if (config.runs < 1) throw std::invalid_argument("runs must be >= 1");
  if (config.duration_ms < 1) throw std::invalid_argument("duration must be >= 1 ms");
  if (config.work_ns < 0) throw std::invalid_argument("work must be >= 0 ns");
  if (!config.saturate && !(config.rate > 0)) throw std::invalid_argument("rate must be > 0");
}

const WorkqueueLabCell* WorkqueueLabResult::find(int threads, EnqueueStrategy strategy) const noexcept {
  for (const auto& cell : cells) {
    if (cell.threads == threads && cell.strategy == strategy) return &cell;
  }
  return nullptr;
}

WorkqueueRunSample run_workqueue_once(const WorkqueueLabConfig& config, int threads, EnqueueStrategy strategy) {
  const uint64_t burn_iterations = burn_iterations_for(config.work_ns);
  const int64_t interval_ns =
      config.saturate ? 0 : static_cast<int64_t>(static_cast<double>(threads) * 1e9 / config.rate);

  sync::WorkQueue wq(strategy);
  std::vector<std::unique_ptr<Producer>> producers;
  producers.reserve(static_cast<std::size_t>(threads));
  const double offers_per_producer = config.saturate ? 0.0 : config.rate / static_cast<double>(threads);
  const auto items_per_producer =
      static_cast<std::size_t>(std::max(1.0, std::ceil(offers_per_producer / kMaxOffersPerItem)));
  for (int i = 0; i < threads; ++i) {
    producers.push_back(std::make_unique<Producer>(burn_iterations, items_per_producer));
  }

  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> start_ns{0};
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] {
      Producer& p = *producers[static_cast<std::size_t>(i)];
      go.wait(false, std::memory_order_acquire);  // acquire: pairs with the release below
      int64_t cpu_start = thread_cpu_ns();
      if (config.saturate) {
        saturating_loop(wq, p, stop);
      } else {
        // Spread the producers' phases over one interval.
        int64_t offset = interval_ns * i / threads;
        paced_loop(wq, p, stop, interval_ns, start_ns.load(std::memory_order_relaxed) + offset);
      }
      p.result.cpu_ns = thread_cpu_ns() - cpu_start;
    });
  }

  // relaxed: published by go's release store.
  start_ns.store(monotonic_ns(), std::memory_order_relaxed);
  sync::WorkQueueStats before = wq.stats();
  int64_t t0 = monotonic_ns();
  go.store(true, std::memory_order_release);  // release: start_ns is visible to producers
  go.notify_all();
  std::this_thread::sleep_for(std::chrono::milliseconds(config.duration_ms));
  sync::WorkQueueStats after = wq.stats();
  // On an oversubscribed machine (or under a sanitizer) a short window can pass before
  // the producers or the worker ever got a CPU; a run that measured nothing is not a
  // sample. The window is then extended (bounded) until the worker has run an item;
  // rates divide by the real window, so the extension is accounted for.
  for (int waited_ms = 0; after.items_run == before.items_run && waited_ms < kMaxWindowExtensionMs; ++waited_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    after = wq.stats();
  }
  int64_t wall = monotonic_ns() - t0;
  stop.store(true, std::memory_order_relaxed);  // relaxed: join() below orders the results
  for (auto& t : workers) t.join();
  wq.flush();
  wq.stop();

  uint64_t calls = 0;
  int64_t enqueue_ns = 0;
  int64_t producer_cpu = 0;
  for (const auto& p : producers) {
    calls += p->result.calls;
    enqueue_ns += p->result.enqueue_ns;
    producer_cpu += p->result.cpu_ns;
  }
  WorkqueueRunSample s;
  s.offered_per_s = per_second(static_cast<double>(calls), wall);
  s.throughput = per_second(static_cast<double>(after.items_run - before.items_run), wall);
  s.worker_cpu_pct = 100.0 * static_cast<double>(after.worker_cpu_ns - before.worker_cpu_ns) /
                     static_cast<double>(wall);
  s.producer_cpu_pct = 100.0 * static_cast<double>(producer_cpu) / static_cast<double>(wall);
  s.enqueue_ns = calls > 0 ? static_cast<double>(enqueue_ns) / static_cast<double>(calls) : 0.0;
  s.wakeups_per_s = per_second(static_cast<double>(after.wakeups - before.wakeups), wall);
  s.parks_per_s = per_second(static_cast<double>(after.parks - before.parks), wall);
  return s;
}

WorkqueueLabResult run_workqueue_lab(const WorkqueueLabConfig& config,
                                     const std::function<void(const std::string&)>& progress) {
  validate(config);
  WorkqueueLabResult result;
  result.config = config;
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

StrategyVerdicts strategy_verdicts(const Summary& throughput, const Summary& base_throughput,
                                   const Summary& worker_cpu, const Summary& base_worker_cpu) {
  return {ratio_vs_baseline(throughput, base_throughput, Direction::kHigherIsBetter),
          ratio_vs_baseline(worker_cpu, base_worker_cpu, Direction::kLowerIsBetter)};
}

void print_strategy_sweep(const StrategySweepNames& names, const std::vector<int>& counts,
                          const std::vector<EnqueueStrategy>& strategies, const StrategyCellAt& at, std::ostream& out) {
  // The upstream table: count | throughput | worker % per strategy, then worker-CPU ratios
  // against the first strategy (the "original" column of the upstream measurement).
  const std::string base(sync::to_string(strategies[0]));
  std::vector<std::string> headers{names.count_header};
  for (EnqueueStrategy s : strategies) {
    headers.push_back(fmt::format("{} {}", sync::to_string(s), names.tp_column));
    headers.push_back(fmt::format("{} worker %", sync::to_string(s)));
  }
  for (std::size_t k = 1; k < strategies.size(); ++k)
    headers.push_back(fmt::format("worker {}/{}", sync::to_string(strategies[k]), base));
  TextTable table(headers);
  for (int count : counts) {
    std::vector<std::string> row{std::to_string(count)};
    for (EnqueueStrategy s : strategies) {
      row.push_back(ci_text(*at(count, s).throughput));
      row.push_back(ci_text(*at(count, s).worker_cpu));
    }
    for (std::size_t k = 1; k < strategies.size(); ++k) {
      const Ratio r = ratio_of_means(*at(count, strategies[k]).worker_cpu, *at(count, strategies[0]).worker_cpu);
      row.push_back(with_ci(r.value, r.ci95_half));
    }
    table.add_row(std::move(row));
  }
  table.print(out);
  out << "\n";
  if (strategies.size() < 2) return;

  out << fmt::format(
      "vs {}: ratio of means ±95% CI and verdict - better/worse: the CI excludes 1 ({}: higher "
      "is better; worker CPU: lower is better), noise: it contains 1\n",
      base, names.throughput_name);
  TextTable verdicts({names.count_header, "strategy", names.throughput_name + " ×" + base, "verdict",
                      "worker CPU ×" + base, "verdict"});
  for (int count : counts) {
    if (count != counts.front()) verdicts.add_separator();
    const StrategyFigures b = at(count, strategies[0]);
    for (std::size_t k = 1; k < strategies.size(); ++k) {
      const StrategyFigures c = at(count, strategies[k]);
      const StrategyVerdicts v = strategy_verdicts(*c.throughput, *b.throughput, *c.worker_cpu, *b.worker_cpu);
      verdicts.add_row({std::to_string(count), std::string(sync::to_string(strategies[k])),
                        ratio_text(v.throughput), std::string(to_string(v.throughput.verdict)),
                        ratio_text(v.worker_cpu), std::string(to_string(v.worker_cpu.verdict))});
    }
  }
  verdicts.print(out);
  out << "\n";
}

nlohmann::json strategy_vs_first(const StrategyFigures& cell, const StrategyFigures& base,
                                 EnqueueStrategy first, const std::string& throughput_key) {
  const StrategyVerdicts v = strategy_verdicts(*cell.throughput, *base.throughput, *cell.worker_cpu, *base.worker_cpu);
  return {{"strategy", std::string(sync::to_string(first))},
          {throughput_key, ratio_json(v.throughput)},
          {"worker_cpu_pct", ratio_json(v.worker_cpu)}};
}

void print_workqueue_tables(const WorkqueueLabResult& result, std::ostream& out) {
  const auto& c = result.config;
  print_strategy_sweep({"threads", "tp (items/s)", "throughput"}, c.threads, c.strategies,
                       [&](int threads, EnqueueStrategy s) { return figures(*result.find(threads, s)); }, out);
  TextTable detail({"threads", "strategy", "offered/s", "tp (items/s)", "worker %", "producers %", "enqueue ns",
                    "wakeups/s", "parks/s"});
  for (int threads : c.threads) {
    for (EnqueueStrategy s : c.strategies) {
      const WorkqueueLabCell& cell = *result.find(threads, s);
      std::vector<std::string> row{std::to_string(threads), std::string(sync::to_string(s))};
      for (const Field& f : kFields) row.push_back(ci_text(cell.*f.summary));
      detail.add_row(std::move(row));
    }
    detail.add_separator();
  }
  detail.print(out);
}

nlohmann::json workqueue_lab_json(const WorkqueueLabResult& result) {
  const WorkqueueLabConfig& c = result.config;
  nlohmann::json j;
  j["experiment"] = "workqueue";
  j["seed"] = "000";  // the JSON key tools and tests read: which upstream experiment this is
  j["config"] = {{"threads", c.threads},         {"strategies", names(c.strategies, sync::to_string)},
                 {"runs", c.runs},               {"duration_ms", c.duration_ms},
                 {"mode", c.saturate ? "saturate" : "paced"}, {"rate", c.rate}, {"work_ns", c.work_ns}};
  j["cells"] = cells_json(result.cells, kFields, [&](const WorkqueueLabCell& cell, nlohmann::json& entry) {
    entry["threads"] = cell.threads;
    entry["strategy"] = std::string(sync::to_string(cell.strategy));
    if (const WorkqueueLabCell* base = result.find(cell.threads, c.strategies.front()))
      entry["vs_first_strategy"] = strategy_vs_first(figures(cell), figures(*base), c.strategies.front(), "throughput");
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
      groups, names(c.strategies, sync::to_string),
      [&](std::size_t g, std::size_t s) { return result.find(c.threads[g], c.strategies[s]); });
}

}  // namespace uvhost::bench::lab
