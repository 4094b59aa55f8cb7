// delegation_lab.cpp - the delegation-lock lab on SLAB sections (see delegation_lab.h).
#include "uvhost/bench/lab/delegation_lab.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "uvhost/bench/lab/lab_engine.h"
#include "uvhost/bench/table.h"
#include "uvhost/experiments/lock_load.h"

namespace uvhost::bench::lab {
namespace {

using TrialFn = experiments::LoadCounts (*)(const experiments::SlabLoad&);

struct LockEntry {
  std::string name;
  TrialFn run;
};

const std::vector<LockEntry>& all_locks() {
  static const std::vector<LockEntry> entries = [] {
    std::vector<LockEntry> out;
    experiments::for_each_runner([&]<class Runner>() { out.push_back({Runner::kName, &experiments::run_slab_load<Runner>}); });
    return out;
  }();
  return entries;
}

}  // namespace

std::vector<std::string> delegation_lab_locks() {
  return names(all_locks(), [](const LockEntry& e) { return e.name; });
}

void check_common(const DelegationLabOptions& options) {
  require<std::runtime_error>(options.runs >= 1 && options.duration_ms >= 1 && options.batch >= 1 &&
                                  !options.threads.empty(),
                              "delegation lab: runs, duration, batch and threads must be positive");
  for (int t : options.threads)
    require<std::runtime_error>(t >= 1, "delegation lab: thread counts must be >= 1");
}

DelegationLabReport run_delegation_lab(const DelegationLabOptions& options, std::ostream* progress) {
  check_common(options);
  std::vector<const LockEntry*> chosen;
  for (const auto& name : options.locks.empty() ? delegation_lab_locks() : options.locks) {
    const LockEntry* entry = find_cell(all_locks(), [&](const LockEntry& e) { return e.name == name; });
    require<std::runtime_error>(entry != nullptr, fmt::format("delegation lab: unknown lock '{}'", name));
    chosen.push_back(entry);
  }
  DelegationLabReport report;
  report.options = options;
  report.points = run_points<DelegationPoint>(
      options.threads, names(chosen, [](const LockEntry* e) { return e->name; }), options.runs,
      [](DelegationPoint& p) -> DelegationPoint& { return p; },
      [&](DelegationPoint& p, std::size_t i, int thread_count, int run) {
        const experiments::LoadCounts s = chosen[i]->run(
            {{thread_count, options.duration_ms, options.batch, options.private_work}, options.pool_objects,
             options.objects_per_slab});
        record_run(p, s.ops, s.min_ops, s.cpu_ns, s.wall_ns);
        if (progress)
          *progress << fmt::format("  threads={:<3} run {}/{} {:<16} {:>10} ops/s\n", thread_count, run + 1,
                                   options.runs, p.lock, si(p.ops_per_s.back()))
                    << std::flush;
      },
      [](std::vector<DelegationPoint>&) {});
  return report;
}

void record_run(DelegationPoint& p, uint64_t ops, uint64_t min_ops, int64_t cpu_ns, int64_t wall_ns) {
  const double sections = static_cast<double>(std::max<uint64_t>(ops, 1));
  const double wall = static_cast<double>(wall_ns);
  const double mean_ops = static_cast<double>(ops) / p.threads;
  p.ops_per_s.push_back(static_cast<double>(ops) * 1e9 / wall);
  p.ns_per_cs.push_back(wall / sections);
  p.cpu_ns_per_cs.push_back(static_cast<double>(cpu_ns) / sections);
  p.cores.push_back(static_cast<double>(cpu_ns) / wall);
  p.fairness.push_back(mean_ops > 0 ? static_cast<double>(min_ops) / mean_ops : 0);
}

void summarize_point(DelegationPoint& p) {
  p.ops_per_s_summary = summarize(p.ops_per_s);
  p.ns_per_cs_summary = summarize(p.ns_per_cs);
  p.cpu_ns_per_cs_summary = summarize(p.cpu_ns_per_cs);
  p.cores_summary = summarize(p.cores);
  p.fairness_summary = summarize(p.fairness);
}

void set_vs_mutex(const std::vector<DelegationPoint*>& points) {
  const DelegationPoint* mutex_point = nullptr;
  for (const DelegationPoint* p : points)
    if (p->lock == "std::mutex") mutex_point = p;
  for (DelegationPoint* p : points) {
    p->vs_mutex = mutex_point != nullptr ? ratio_vs_baseline(p->ops_per_s_summary, mutex_point->ops_per_s_summary,
                                                             Direction::kHigherIsBetter)
                                         : BaselineRatio{};
  }
}

std::vector<std::string> point_headers() {
  return {"threads", "lock", "ops/s", "ns/CS", "CPU ns/CS", "cores", "fairness", "vs std::mutex", "verdict"};
}

std::vector<std::string> point_cells(const DelegationPoint& p) {
  std::vector<std::string> cells{std::to_string(p.threads),
                                 p.lock,
                                 si_with_relative_ci(p.ops_per_s_summary),
                                 with_ci(p.ns_per_cs_summary),
                                 with_ci(p.cpu_ns_per_cs_summary),
                                 fmt::format("{:.2f}", p.cores_summary.mean),
                                 fmt::format("{:.2f}", p.fairness_summary.mean)};
  for (auto& cell : baseline_cells(p.vs_mutex, p.lock == "std::mutex")) cells.push_back(std::move(cell));
  return cells;
}

std::string verdict_note() {
  return "verdict: ops/s vs std::mutex at the same thread count (higher is better) - better/worse when the "
         "ratio's 95% CI excludes 1, noise when it contains 1.";
}

nlohmann::json report_json(const DelegationLabOptions& o) {
  return {{"experiment", "delegation"},
          {"seed", "004"},  // the JSON key tools and tests read: which upstream experiment this is
          {"options",
           {{"threads", o.threads},
            {"runs", o.runs},
            {"duration_ms", o.duration_ms},
            {"batch", o.batch},
            {"private_work", o.private_work}}},
          {"points", nlohmann::json::array()}};
}

nlohmann::json point_json(const DelegationPoint& p) {
  nlohmann::json vs = ratio_json(p.vs_mutex);
  vs["ratio"] = p.vs_mutex.value;  // the name earlier versions wrote
  return {{"lock", p.lock},
          {"threads", p.threads},
          {"ops_per_s", summary_json(p.ops_per_s_summary)},
          {"ns_per_cs", summary_json(p.ns_per_cs_summary)},
          {"cpu_ns_per_cs", summary_json(p.cpu_ns_per_cs_summary)},
          {"cores", summary_json(p.cores_summary)},
          {"fairness", summary_json(p.fairness_summary)},
          {"vs_mutex", vs},
          {"samples", {{"ops_per_s", p.ops_per_s}, {"cpu_ns_per_cs", p.cpu_ns_per_cs}}}};
}

std::vector<BarChart> point_charts(const std::string& structure, const std::vector<const DelegationPoint*>& points) {
  std::vector<int> thread_counts;
  std::vector<std::string> locks, groups;
  for (const DelegationPoint* p : points) {
    if (std::find(thread_counts.begin(), thread_counts.end(), p->threads) == thread_counts.end())
      thread_counts.push_back(p->threads);
    if (std::find(locks.begin(), locks.end(), p->lock) == locks.end()) locks.push_back(p->lock);
  }
  for (int t : thread_counts) groups.push_back(count_label(t, "thread"));
  return grouped_charts<DelegationPoint>(
      {{structure + ": critical sections per second (higher is better)", "ops/s", &DelegationPoint::ops_per_s_summary},
       {structure + ": CPU ns per critical section (lower is better)", "CPU ns",
        &DelegationPoint::cpu_ns_per_cs_summary}},
      groups, locks, [&](std::size_t g, std::size_t l) -> const DelegationPoint* {
        for (const DelegationPoint* p : points)
          if (p->lock == locks[l] && p->threads == thread_counts[g]) return p;
        return nullptr;
      });
}

void print_delegation_table(const DelegationLabReport& report, std::ostream& out) {
  const auto& o = report.options;
  out << fmt::format(
      "Delegation lock: SLAB refill/flush critical sections ({} objects/batch, {} private-work iterations),\n"
      "{} runs x {} ms per point, locks interleaved; mean ±95% CI (Student t). {} CPUs online.\n\n",
      o.batch, o.private_work, o.runs, o.duration_ms, std::thread::hardware_concurrency());
  print_points(
      out, point_headers(), report.points, [](const DelegationPoint& p) -> const DelegationPoint& { return p; },
      point_cells);
}

std::vector<BarChart> delegation_charts(const DelegationLabReport& report) {
  std::vector<const DelegationPoint*> points;
  for (const auto& p : report.points) points.push_back(&p);
  return point_charts("slab", points);
}

nlohmann::json to_json(const DelegationLabReport& report) {
  const auto& o = report.options;
  nlohmann::json j = report_json(o);
  j["options"]["pool_objects"] = o.pool_objects;
  j["options"]["objects_per_slab"] = o.objects_per_slab;
  for (const auto& p : report.points) j["points"].push_back(point_json(p));
  return j;
}

}  // namespace uvhost::bench::lab
