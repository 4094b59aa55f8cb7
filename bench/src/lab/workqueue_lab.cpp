// workqueue_lab.cpp - seed 000's experiment (see workqueue_lab.h for the method).
#include "uvhost/bench/lab/workqueue_lab.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "uvhost/bench/cpu_time.h"
#include "uvhost/bench/table.h"

namespace uvhost::bench::lab {
namespace {

using sync::EnqueueStrategy;

// ---- Simulated handle_tx: a fixed amount of dependent arithmetic -------------

uint64_t burn(uint64_t iterations) noexcept {
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (uint64_t i = 0; i < iterations; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    asm volatile("" : "+r"(x));  // keep the loop: the result is "used"
  }
  return x;
}

// Iterations of burn() per nanosecond on this machine, measured once.
double burn_iterations_per_ns() {
  static const double rate = [] {
    constexpr uint64_t kIterations = 2'000'000;
    double best = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {  // best of 3: least disturbed
      int64_t start = thread_cpu_ns();
      burn(kIterations);
      int64_t elapsed = std::max<int64_t>(thread_cpu_ns() - start, 1);
      best = std::max(best, static_cast<double>(kIterations) / static_cast<double>(elapsed));
    }
    return best;
  }();
  return rate;
}

constexpr int kMaxWindowExtensionMs = 10'000;

void sleep_until_ns(int64_t deadline_ns) noexcept {
  timespec ts{deadline_ns / 1'000'000'000, deadline_ns % 1'000'000'000};
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
}

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
// every strategy - the seed's "same throughput" condition.
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
  // A 1 us timer slack (default 50 us) so sleeps end close to their deadline.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
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

StrategyVerdicts cell_verdicts(const WorkqueueLabCell& cell, const WorkqueueLabCell& base) {
  return strategy_verdicts(cell.throughput, base.throughput, cell.worker_cpu_pct, base.worker_cpu_pct);
}

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
  const auto burn_iterations =
      static_cast<uint64_t>(static_cast<double>(config.work_ns) * burn_iterations_per_ns());
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
      WorkqueueLabCell cell;
      cell.threads = threads;
      cell.strategy = strategy;
      result.cells.push_back(cell);
    }
    for (int run = 0; run < config.runs; ++run) {
      for (std::size_t k = 0; k < config.strategies.size(); ++k) {  // interleaved: a b c a b c
        WorkqueueLabCell& cell = result.cells[first + k];
        WorkqueueRunSample s = run_workqueue_once(config, threads, cell.strategy);
        cell.samples.push_back(s);
        if (progress) {
          progress(fmt::format("threads={} strategy={} run {}/{}: {:.0f} items/s, worker {:.1f}%",
                               threads, sync::to_string(cell.strategy), run + 1, config.runs, s.throughput,
                               s.worker_cpu_pct));
        }
      }
    }
    for (std::size_t k = 0; k < config.strategies.size(); ++k)
      summarize_fields(result.cells[first + k], kFields);
  }
  return result;
}

StrategyVerdicts strategy_verdicts(const Summary& throughput, const Summary& base_throughput,
                                   const Summary& worker_cpu, const Summary& base_worker_cpu) {
  return {ratio_vs_baseline(throughput, base_throughput, Direction::kHigherIsBetter),
          ratio_vs_baseline(worker_cpu, base_worker_cpu, Direction::kLowerIsBetter)};
}

void print_strategy_verdicts(const std::string& count_header, const std::string& throughput_name,
                             EnqueueStrategy baseline, const std::vector<StrategyVerdictRow>& rows,
                             std::ostream& out) {
  const std::string base(sync::to_string(baseline));
  out << fmt::format(
      "vs {}: ratio of means ±95% CI and verdict - better/worse: the CI excludes 1 ({}: higher "
      "is better; worker CPU: lower is better), noise: it contains 1\n",
      base, throughput_name);
  TextTable table(
      {count_header, "strategy", throughput_name + " ×" + base, "verdict", "worker CPU ×" + base, "verdict"});
  int last = -1;
  for (const StrategyVerdictRow& row : rows) {
    if (last != -1 && row.count != last) table.add_separator();
    last = row.count;
    table.add_row(
        {std::to_string(row.count), std::string(sync::to_string(row.strategy)),
         ratio_text(row.verdicts.throughput), std::string(to_string(row.verdicts.throughput.verdict)),
         ratio_text(row.verdicts.worker_cpu), std::string(to_string(row.verdicts.worker_cpu.verdict))});
  }
  table.print(out);
  out << "\n";
}

void print_workqueue_tables(const WorkqueueLabResult& result, std::ostream& out) {
  const auto& strategies = result.config.strategies;
  // The seed's table: thread_num | tp | worker% for each strategy, then worker-CPU
  // ratios against the first strategy (the "original" column of the seed).
  std::vector<std::string> headers{"threads"};
  for (EnqueueStrategy s : strategies) {
    headers.push_back(fmt::format("{} tp (items/s)", sync::to_string(s)));
    headers.push_back(fmt::format("{} worker %", sync::to_string(s)));
  }
  for (std::size_t k = 1; k < strategies.size(); ++k) {
    headers.push_back(fmt::format("worker {}/{}", sync::to_string(strategies[k]), sync::to_string(strategies[0])));
  }
  TextTable seed_table(headers);
  for (int threads : result.config.threads) {
    std::vector<std::string> row{std::to_string(threads)};
    for (EnqueueStrategy s : strategies) {
      const WorkqueueLabCell* cell = result.find(threads, s);
      row.push_back(with_ci(cell->throughput.mean, cell->throughput.ci95_half));
      row.push_back(with_ci(cell->worker_cpu_pct.mean, cell->worker_cpu_pct.ci95_half));
    }
    const WorkqueueLabCell* base = result.find(threads, strategies[0]);
    for (std::size_t k = 1; k < strategies.size(); ++k) {
      Ratio r = ratio_of_means(result.find(threads, strategies[k])->worker_cpu_pct, base->worker_cpu_pct);
      row.push_back(with_ci(r.value, r.ci95_half));
    }
    seed_table.add_row(std::move(row));
  }
  seed_table.print(out);
  out << "\n";

  if (strategies.size() > 1) {
    std::vector<StrategyVerdictRow> rows;
    for (int threads : result.config.threads) {
      const WorkqueueLabCell* base = result.find(threads, strategies[0]);
      for (std::size_t k = 1; k < strategies.size(); ++k) {
        rows.push_back({threads, strategies[k], cell_verdicts(*result.find(threads, strategies[k]), *base)});
      }
    }
    print_strategy_verdicts("threads", "throughput", strategies[0], rows, out);
  }

  TextTable detail({"threads", "strategy", "offered/s", "tp (items/s)", "worker %", "producers %",
                    "enqueue ns", "wakeups/s", "parks/s"});
  for (int threads : result.config.threads) {
    for (EnqueueStrategy s : strategies) {
      const WorkqueueLabCell* c = result.find(threads, s);
      detail.add_row({std::to_string(threads), std::string(sync::to_string(s)),
                      with_ci(c->offered_per_s.mean, c->offered_per_s.ci95_half),
                      with_ci(c->throughput.mean, c->throughput.ci95_half),
                      with_ci(c->worker_cpu_pct.mean, c->worker_cpu_pct.ci95_half),
                      with_ci(c->producer_cpu_pct.mean, c->producer_cpu_pct.ci95_half),
                      with_ci(c->enqueue_ns.mean, c->enqueue_ns.ci95_half),
                      with_ci(c->wakeups_per_s.mean, c->wakeups_per_s.ci95_half),
                      with_ci(c->parks_per_s.mean, c->parks_per_s.ci95_half)});
    }
    detail.add_separator();
  }
  detail.print(out);
}

nlohmann::json workqueue_lab_json(const WorkqueueLabResult& result) {
  const WorkqueueLabConfig& c = result.config;
  nlohmann::json strategies = nlohmann::json::array();
  for (EnqueueStrategy s : c.strategies) strategies.push_back(std::string(sync::to_string(s)));
  nlohmann::json j;
  j["experiment"] = "workqueue";
  j["seed"] = "000";
  j["config"] = {{"threads", c.threads}, {"strategies", strategies},   {"runs", c.runs},
                 {"duration_ms", c.duration_ms}, {"mode", c.saturate ? "saturate" : "paced"},
                 {"rate", c.rate},       {"work_ns", c.work_ns}};
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& cell : result.cells) {
    nlohmann::json samples = nlohmann::json::array();
    for (const auto& s : cell.samples) samples.push_back(sample_json(s, kFields));
    nlohmann::json entry = fields_json(cell, kFields);
    entry["threads"] = cell.threads;
    entry["strategy"] = std::string(sync::to_string(cell.strategy));
    entry["samples"] = std::move(samples);
    if (const WorkqueueLabCell* base = result.find(cell.threads, c.strategies.front())) {
      const StrategyVerdicts v = cell_verdicts(cell, *base);
      entry["vs_first_strategy"] = {{"strategy", std::string(sync::to_string(c.strategies.front()))},
                                    {"throughput", ratio_json(v.throughput)},
                                    {"worker_cpu_pct", ratio_json(v.worker_cpu)}};
    }
    cells.push_back(std::move(entry));
  }
  j["cells"] = cells;
  return j;
}

std::vector<BarChart> workqueue_charts(const WorkqueueLabResult& result) {
  BarChart throughput{"WorkQueue: throughput", "work items run per second", {}, {}};
  BarChart cpu{"WorkQueue: worker CPU", "% of one core (lower is better)", {}, {}};
  for (int threads : result.config.threads) {
    throughput.groups.push_back(fmt::format("{} producer{}", threads, threads == 1 ? "" : "s"));
    cpu.groups.push_back(throughput.groups.back());
  }
  for (EnqueueStrategy strategy : result.config.strategies) {
    BarSeries tp{std::string(sync::to_string(strategy)), {}, {}};
    BarSeries worker{tp.name, {}, {}};
    for (int threads : result.config.threads) {
      const WorkqueueLabCell* cell = result.find(threads, strategy);
      add_bar(tp, cell->throughput);
      add_bar(worker, cell->worker_cpu_pct);
    }
    throughput.series.push_back(std::move(tp));
    cpu.series.push_back(std::move(worker));
  }
  return {std::move(throughput), std::move(cpu)};
}

}  // namespace uvhost::bench::lab
