// delegation_datapath_lab.cpp - the delegation lab on the packet pool and the shared
// TX queue (see delegation_datapath_lab.h for the workloads and what is reported).
#include "uvhost/bench/lab/delegation_datapath_lab.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "uvhost/bench/lab/lab_engine.h"
#include "uvhost/bench/table.h"
#include "uvhost/experiments/lock_load.h"

namespace uvhost::bench::lab {
namespace {

using LockEntry = experiments::NamedSectionLock;

// The datapath figures beside the slab lab's: one value per run, summarized per point.
constexpr std::pair<std::vector<double> DatapathPoint::*, Summary DatapathPoint::*> kExtraFigures[] = {
    {&DatapathPoint::items_per_s, &DatapathPoint::items_per_s_summary},
    {&DatapathPoint::drop_ratio, &DatapathPoint::drop_ratio_summary},
    {&DatapathPoint::full_ratio, &DatapathPoint::full_ratio_summary},
    {&DatapathPoint::retries_per_burst, &DatapathPoint::retries_per_burst_summary},
    {&DatapathPoint::burst_drop_ratio, &DatapathPoint::burst_drop_ratio_summary}};

// One run of one lock at one thread count.
experiments::LoadCounts run_trial(const DatapathLabOptions& o, int threads, const LockEntry& lock) {
  const auto& c = o.common;
  const experiments::LoadShape shape{threads, c.duration_ms, c.batch, c.private_work};
  if (o.structure == "pool")
    return experiments::run_pool_load({shape, o.ring, o.cache_capacity, o.buffer_size}, lock);
  return experiments::run_txq_load({shape, o.txq_capacity, o.consumer_burst, o.txq_retries}, lock);
}

}  // namespace

std::vector<std::string> delegation_structures() { return {"slab", "pool", "txq"}; }

std::vector<std::string> datapath_lab_locks() {
  return names(experiments::section_lock_set(), [](const LockEntry& e) { return e.name; });
}

DatapathLabReport run_delegation_datapath_lab(const DatapathLabOptions& options, std::ostream* progress) {
  const auto& c = options.common;
  const bool pool = options.structure == "pool";
  require<std::runtime_error>(pool || options.structure == "txq",
                              fmt::format("delegation lab: unknown datapath structure '{}' (pool, txq)",
                                          options.structure));
  check_common(c);
  require<std::runtime_error>(!pool || (options.ring >= 1 && options.cache_capacity >= c.batch),
                              "delegation lab: pool needs ring >= 1 and cache capacity >= batch");
  require<std::runtime_error>(pool || (options.txq_capacity >= 1 && options.consumer_burst >= 1),
                              "delegation lab: txq needs a capacity and a consumer burst >= 1");
  const auto known = delegation_lab_locks();
  for (const auto& name : c.locks)
    require<std::runtime_error>(std::find(known.begin(), known.end(), name) != known.end(),
                                fmt::format("delegation lab: unknown lock '{}'", name));
  std::vector<const LockEntry*> chosen;
  for (const auto& entry : experiments::section_lock_set())
    if (c.locks.empty() || std::find(c.locks.begin(), c.locks.end(), entry.name) != c.locks.end())
      chosen.push_back(&entry);
  require<std::runtime_error>(!chosen.empty(), fmt::format("delegation lab: none of the locks asked for runs on '{}'",
                                                          options.structure));
  DatapathLabReport report;
  report.options = options;
  report.points = run_points<DatapathPoint>(
      c.threads, names(chosen, [](const LockEntry* e) { return e->name; }), c.runs,
      [](DatapathPoint& p) -> DelegationPoint& { return p.base; },
      [&](DatapathPoint& p, std::size_t i, int thread_count, int run) {
        const experiments::LoadCounts s = run_trial(options, thread_count, *chosen[i]);
        record_run(p.base, s.ops, s.min_ops, s.cpu_ns, s.wall_ns);
        const double bursts = static_cast<double>(std::max<uint64_t>(s.bursts, 1));
        p.items_per_s.push_back(static_cast<double>(s.items) * 1e9 / static_cast<double>(s.wall_ns));
        p.drop_ratio.push_back(
            s.offered > 0 ? static_cast<double>(s.offered - s.items) / static_cast<double>(s.offered) : 0);
        p.full_ratio.push_back(static_cast<double>(s.full) / static_cast<double>(std::max<uint64_t>(s.ops, 1)));
        p.retries_per_burst.push_back(static_cast<double>(s.retries) / bursts);
        p.burst_drop_ratio.push_back(static_cast<double>(s.dropped_bursts) / bursts);
        if (options.structure == "txq")
          p.txq_counts.push_back({s.offered, s.queue.accepted, s.queue.dropped, s.queue.push_bursts, s.queue.full,
                                  s.bursts, s.dropped_bursts});
        if (progress)
          *progress << fmt::format("  {} threads={:<3} run {}/{} {:<16} {:>10} ops/s{}\n", options.structure,
                                   thread_count, run + 1, c.runs, p.base.lock, si(p.base.ops_per_s.back()),
                                   options.structure == "txq"
                                       ? fmt::format(" {:>10} pkts/s, {:.1f}% dropped, {:.1f}% pushes full",
                                                     si(p.items_per_s.back()), 100 * p.drop_ratio.back(),
                                                     100 * p.full_ratio.back())
                                       : std::string())
                    << std::flush;
      },
      [](std::vector<DatapathPoint>& points) {
        for (auto& p : points)
          for (const auto& [values, summary] : kExtraFigures) p.*summary = summarize(p.*values);
        // The throughput's own ratio: accepted descriptors per second vs std::mutex's.
        const DatapathPoint* mutex_point =
            find_cell(points, [](const DatapathPoint& p) { return p.base.lock == "std::mutex"; });
        for (auto& p : points)
          p.items_vs_mutex = mutex_point != nullptr ? ratio_vs_baseline(p.items_per_s_summary,
                                                                        mutex_point->items_per_s_summary,
                                                                        Direction::kHigherIsBetter)
                                                    : BaselineRatio{};
      });
  return report;
}

void print_datapath_table(const DatapathLabReport& report, std::ostream& out) {
  const auto& o = report.options;
  const auto& c = o.common;
  const bool pool = o.structure == "pool";
  if (pool) {
    out << fmt::format(
        "Delegation lock on the datapath: PacketPool ({} B buffers, per-thread caches of {}, refill/flush {} at a time),\n"
        "each thread gets {} buffers then puts them back; an op is one refill or flush section.\n",
        o.buffer_size, o.cache_capacity, c.batch, o.ring);
  } else {
    out << fmt::format(
        "Delegation lock on the datapath: SharedTxQueue ({} descriptors) shared by all workers, one consumer popping up to\n"
        "{} at a time under the same lock; each worker pushes bursts of {}, and on a full queue backs off and retries\n"
        "the rest up to {} times before dropping it. An op is one push section, try or retry (CPU includes the\n"
        "consumer's); pkts/s = accepted descriptors/s (the throughput), full = push sections that found the queue full.\n",
        o.txq_capacity, o.consumer_burst, c.batch, o.txq_retries);
  }
  out << fmt::format(
      "{} private-work iterations per {}, {} runs x {} ms per point, locks interleaved; mean ±95% CI (Student t).\n"
      "{} CPUs online. delegation-async runs on the slab structure only.\n\n",
      c.private_work, pool ? "batch" : "burst", c.runs, c.duration_ms, std::thread::hardware_concurrency());
  std::vector<std::string> headers = point_headers();
  headers.push_back(pool ? "buffers/s" : "pkts/s");
  if (!pool) {
    headers.push_back("dropped");
    headers.push_back("full");
    headers.push_back("retries/burst");
    headers.push_back("pkts/s vs std::mutex");
  }
  auto base = [](const DatapathPoint& dp) -> const DelegationPoint& { return dp.base; };
  print_points(out, headers, report.points, base, [&](const DatapathPoint& dp) {
    std::vector<std::string> row = point_cells(dp.base);
    row.push_back(si_with_relative_ci(dp.items_per_s_summary));
    if (pool) return row;
    row.push_back(fmt::format("{:.1f}%", 100 * dp.drop_ratio_summary.mean));
    row.push_back(fmt::format("{:.1f}%", 100 * dp.full_ratio_summary.mean));
    row.push_back(fmt::format("{:.2f}", dp.retries_per_burst_summary.mean));
    const auto vs = baseline_cells(dp.items_vs_mutex, dp.base.lock == "std::mutex");
    row.push_back(dp.base.lock == "std::mutex" ? vs[0] : vs[0] + " " + vs[1]);
    return row;
  });
  if (!pool)
    out << "pkts/s vs std::mutex: the same test on accepted descriptors per second, the txq's throughput.\n";
}

std::vector<BarChart> datapath_charts(const DatapathLabReport& report) {
  std::vector<const DelegationPoint*> points;
  for (const auto& dp : report.points) points.push_back(&dp.base);
  return point_charts(report.options.structure, points);
}

nlohmann::json to_json(const DatapathLabReport& report) {
  const auto& o = report.options;
  const auto& c = o.common;
  nlohmann::json j = report_json(c);
  j["structure"] = o.structure;
  if (o.structure == "pool") {
    j["options"]["ring"] = o.ring;
    j["options"]["cache_capacity"] = o.cache_capacity;
    j["options"]["buffer_size"] = o.buffer_size;
  } else {
    j["options"]["txq_capacity"] = o.txq_capacity;
    j["options"]["consumer_burst"] = o.consumer_burst;
    j["options"]["txq_retries"] = o.txq_retries;
  }
  for (const auto& dp : report.points) {
    nlohmann::json point = point_json(dp.base);
    point["items_per_s"] = summary_json(dp.items_per_s_summary);
    point["drop_ratio"] = summary_json(dp.drop_ratio_summary);
    if (o.structure == "txq") {
      point["full_ratio"] = summary_json(dp.full_ratio_summary);
      point["retries_per_burst"] = summary_json(dp.retries_per_burst_summary);
      point["burst_drop_ratio"] = summary_json(dp.burst_drop_ratio_summary);
      point["items_vs_mutex"] = ratio_json(dp.items_vs_mutex);
      point["samples"]["items_per_s"] = dp.items_per_s;
      point["samples"]["drop_ratio"] = dp.drop_ratio;
      auto& counts = point["samples"]["counts"] = nlohmann::json::array();
      for (const auto& k : dp.txq_counts)
        counts.push_back({{"offered", k.offered},
                          {"accepted", k.accepted},
                          {"dropped", k.dropped},
                          {"pushes", k.pushes},
                          {"full", k.full},
                          {"bursts", k.bursts},
                          {"dropped_bursts", k.dropped_bursts}});
    }
    j["points"].push_back(std::move(point));
  }
  return j;
}

}  // namespace uvhost::bench::lab
