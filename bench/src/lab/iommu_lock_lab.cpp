// iommu_lock_lab.cpp - the read-mostly mapping-table lab (see iommu_lock_lab.h).
#include "uvhost/bench/lab/iommu_lock_lab.h"

#include <algorithm>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "uvhost/bench/lab/lab_engine.h"
#include "uvhost/bench/latency_histogram.h"
#include "uvhost/bench/table.h"
#include "uvhost/experiments/iommu_load.h"

namespace uvhost::bench::lab {

using sync::GuardPolicy;

namespace {

// The figures of a run, each summarized per cell (mean and 95% CI over the runs).
using Field = LabField<IommuRunSample, IommuLockLabCell>;
constexpr Field kFields[] = {
    {"translations_per_s", &IommuRunSample::translations_per_s, &IommuLockLabCell::translations_per_s},
    {"wall_ns_per_translation", &IommuRunSample::wall_ns_per_translation,
     &IommuLockLabCell::wall_ns_per_translation},
    {"cpu_ns_per_translation", &IommuRunSample::cpu_ns_per_translation,
     &IommuLockLabCell::cpu_ns_per_translation},
    {"p999_ns", &IommuRunSample::p999_ns, &IommuLockLabCell::p999_ns},
    {"max_ns", &IommuRunSample::max_ns, &IommuLockLabCell::max_ns},
    {"updates_per_s", &IommuRunSample::updates_per_s, &IommuLockLabCell::updates_per_s},
    {"translations_per_update", &IommuRunSample::translations_per_update,
     &IommuLockLabCell::translations_per_update},
    {"writer_cpu_pct", &IommuRunSample::writer_cpu_pct, &IommuLockLabCell::writer_cpu_pct},
};


std::string mix_label(const IommuLockLabConfig& config, IommuMix mix) {
  return mix == IommuMix::kMixed ? fmt::format("{}:1", config.reads_per_update) : "read-only";
}

}  // namespace

void validate(const IommuLockLabConfig& config) {
  require_counts(config.threads, 1, 1024, "thread");
  require(!config.policies.empty(), "no policies");
  require(!config.mixes.empty(), "no mixes");
  require(config.runs >= 1, "runs must be >= 1");
  require(config.duration_ms >= 1, "duration must be >= 1 ms");
  require(config.reads_per_update >= 1, "reads per update must be >= 1");
  require(config.sample_every >= 1, "sample interval must be >= 1");
}

IommuRunSample run_iommu_once(const IommuLockLabConfig& config, const IommuTable& table, int threads, IommuMix mix,
                              GuardPolicy policy) {
  const auto load = experiments::run_iommu_load<LatencyHistogram>(
      table, policy, {threads, mix == IommuMix::kMixed, config.duration_ms, config.reads_per_update, config.sample_every});
  const auto wall = static_cast<double>(load.wall_ns);
  const auto translations = static_cast<double>(std::max<uint64_t>(load.translations, 1));
  IommuRunSample s;
  s.translations = load.translations;
  s.mismatches = load.mismatches;
  s.updates = load.updates;
  s.translations_per_s = per_second(static_cast<double>(s.translations), load.wall_ns);
  s.wall_ns_per_translation = wall * threads / translations;
  s.cpu_ns_per_translation = static_cast<double>(load.reader_cpu_ns) / translations;
  s.p999_ns = load.histogram.percentile(99.9);
  s.max_ns = static_cast<double>(load.histogram.max_ns());
  s.latency_samples = load.histogram.count();
  s.updates_per_s = per_second(static_cast<double>(s.updates), load.wall_ns);
  s.translations_per_update = s.updates > 0 ? static_cast<double>(s.translations) / static_cast<double>(s.updates) : 0;
  s.writer_cpu_pct = 100.0 * static_cast<double>(load.writer_cpu_ns) / wall;
  return s;
}

IommuLockLabResult run_iommu_lock_lab(const IommuLockLabConfig& config,
                                      const std::function<void(const std::string&)>& progress) {
  validate(config);
  IommuTable table(IommuTable::vm_layout(), config.table);
  IommuLockLabResult result{config, {}};
  run_grid(
      result.cells, config.threads, config.mixes, config.policies, config.runs, true, kFields,
      [&](const IommuLockLabCell& c) { return run_iommu_once(config, table, c.threads, c.mix, c.policy); },
      [&](IommuLockLabCell& c, const IommuRunSample& s, int run) {
        c.mismatches += s.mismatches;
        if (progress)
          progress(fmt::format("threads={} mix={} policy={} run {}/{}: {} translations/s, {:.1f} ns wall, "
                               "{:.1f} ns CPU, {} updates/s, max {} ns{}",
                               c.threads, mix_label(config, c.mix), sync::to_string(c.policy), run + 1, config.runs,
                               si(s.translations_per_s), s.wall_ns_per_translation, s.cpu_ns_per_translation,
                               si(s.updates_per_s), si(s.max_ns),
                               s.mismatches ? fmt::format(", {} MISMATCHES", s.mismatches) : ""));
      });
  return result;
}

IommuVsMutex iommu_vs_mutex(const IommuLockLabCell& cell, const IommuLockLabCell& mutex) {
  IommuVsMutex v;
  v.wall_ns = ratio_vs_baseline(cell.wall_ns_per_translation, mutex.wall_ns_per_translation,
                                Direction::kLowerIsBetter);
  v.cpu_ns =
      ratio_vs_baseline(cell.cpu_ns_per_translation, mutex.cpu_ns_per_translation, Direction::kLowerIsBetter);
  v.translations_per_s =
      ratio_vs_baseline(cell.translations_per_s, mutex.translations_per_s, Direction::kHigherIsBetter);
  if (cell.mix == IommuMix::kMixed) {
    v.updates_per_s = ratio_vs_baseline(cell.updates_per_s, mutex.updates_per_s, Direction::kHigherIsBetter);
  }
  return v;
}

void print_iommu_lock_tables(const IommuLockLabResult& result, std::ostream& out) {
  const IommuLockLabConfig& config = result.config;
  const std::vector<std::string> policies = names(config.policies);
  std::vector<std::string> headers{"policy"};
  for (int t : config.threads) headers.push_back(count_label(t, "thread"));
  for (IommuMix mix : config.mixes) {
    const bool mixed = mix == IommuMix::kMixed;
    // vfio's table shape: one row per lock (B = mutex, B+S = rwsem, ...), one column per
    // workload (here: reader threads), the cost of the lock per lookup, relative to B.
    out << fmt::format("mix {}: wall ns per translation (mean ±95% CI), (× ratio vs mutex ±CI)\n",
                       mix_label(config, mix));
    baseline_matrix<IommuLockLabCell>(
        headers, policies, &IommuLockLabCell::wall_ns_per_translation,
        [&](std::size_t p, std::size_t t) { return result.find(config.threads[t], mix, config.policies[p]); },
        [&](std::size_t, std::size_t t) { return result.find(config.threads[t], mix, GuardPolicy::kMutex); })
        .print(out);
    // Each policy but the mutex against the mutex: ns per translation and, for the mix,
    // the writer's updates/s.
    out << fmt::format("\nmix {} vs mutex: ratio of means ±95% CI and verdict - better/worse: the CI excludes 1 "
                       "(ns per translation: lower is better{}), noise: it contains 1\n",
                       mix_label(config, mix), mixed ? "; updates/s: higher is better" : "");
    std::vector<VerdictColumn<IommuLockLabCell>> columns{{"ns/translation ×mutex", "ns verdict",
                                                          &IommuLockLabCell::wall_ns_per_translation,
                                                          Direction::kLowerIsBetter}};
    if (mixed)
      columns.push_back({"updates/s ×mutex", "updates verdict", &IommuLockLabCell::updates_per_s,
                         Direction::kHigherIsBetter});
    std::vector<std::string> verdict_headers{"threads", "policy"};
    add_verdict_headers(verdict_headers, columns);
    TextTable verdicts(verdict_headers);
    bool any = false;
    for (const IommuLockLabCell& cell : result.cells) {
      const IommuLockLabCell* base = result.find(cell.threads, mix, GuardPolicy::kMutex);
      if (cell.mix != mix || base == nullptr || base == &cell) continue;
      std::vector<std::string> row{std::to_string(cell.threads), std::string(sync::to_string(cell.policy))};
      add_verdict_cells(row, cell, *base, columns);
      verdicts.add_row(std::move(row));
      any = true;
    }
    if (any) {
      verdicts.print(out);
    } else {
      out << "(no verdicts: the mutex baseline is not among the policies)\n";
    }
    out << "\n";
  }

  TextTable detail({"threads", "mix", "policy", "translations/s", "vs mutex", "wall ns", "CPU ns", "CPU vs mutex",
                    "p99.9 ns", "max ns", "updates/s", "reads/update", "writer %", "bad"});
  for (std::size_t i = 0; i < result.cells.size(); ++i) {
    const IommuLockLabCell& c = result.cells[i];
    if (i > 0 && c.threads != result.cells[i - 1].threads) detail.add_separator();
    const IommuLockLabCell* base = result.find(c.threads, c.mix, GuardPolicy::kMutex);
    auto vs_mutex = [&](Summary IommuLockLabCell::*figure) {
      if (base == nullptr) return std::string("-");
      const Ratio r = ratio_of_means(c.*figure, base->*figure);
      return with_ci(r.value, r.ci95_half);
    };
    auto if_mixed = [&](std::string text) { return c.mix == IommuMix::kMixed ? text : "-"; };
    detail.add_row({std::to_string(c.threads), mix_label(config, c.mix), std::string(sync::to_string(c.policy)),
                    si_with_ci(c.translations_per_s), vs_mutex(&IommuLockLabCell::translations_per_s),
                    ci_text(c.wall_ns_per_translation), ci_text(c.cpu_ns_per_translation),
                    vs_mutex(&IommuLockLabCell::cpu_ns_per_translation), ci_text(c.p999_ns), si_with_ci(c.max_ns),
                    if_mixed(si_with_ci(c.updates_per_s)), if_mixed(ci_text(c.translations_per_update)),
                    if_mixed(ci_text(c.writer_cpu_pct)), std::to_string(c.mismatches)});
  }
  if (!result.cells.empty()) detail.add_separator();
  detail.print(out);
}

nlohmann::json iommu_lock_lab_json(const IommuLockLabResult& result) {
  const IommuLockLabConfig& c = result.config;
  nlohmann::json j;
  j["experiment"] = "iommu-lock";
  j["seed"] = "002";  // the JSON key tools and tests read: which upstream experiment this is
  j["config"] = {{"table", std::string(experiments::to_string(c.table))},
                 {"threads", c.threads},
                 {"policies", names(c.policies)},
                 {"mixes", names(c.mixes)},
                 {"runs", c.runs},
                 {"duration_ms", c.duration_ms},
                 {"reads_per_update", c.reads_per_update},
                 {"sample_every", c.sample_every}};
  const auto counts = [](const IommuRunSample& s, nlohmann::json& sample) {
    sample.update({{"translations", s.translations},
                   {"updates", s.updates},
                   {"mismatches", s.mismatches},
                   {"latency_samples", s.latency_samples}});
  };
  j["cells"] = cells_json(result.cells, kFields, counts, [&](const IommuLockLabCell& cell, nlohmann::json& entry) {
    entry["threads"] = cell.threads;
    entry["mix"] = std::string(to_string(cell.mix));
    entry["policy"] = std::string(sync::to_string(cell.policy));
    entry["mismatches"] = cell.mismatches;
    if (const IommuLockLabCell* base = result.find(cell.threads, cell.mix, GuardPolicy::kMutex)) {
      // Each ratio with its verdict ("better": which way is better for that figure).
      const IommuVsMutex v = iommu_vs_mutex(cell, *base);
      entry["vs_mutex"] = {
          {"translations_per_s", ratio_json(v.translations_per_s)},
          {"wall_ns_per_translation", ratio_json(v.wall_ns)},
          {"cpu_ns_per_translation", ratio_json(v.cpu_ns)},
          {"p999_ns", ratio_json(ratio_vs_baseline(cell.p999_ns, base->p999_ns, Direction::kLowerIsBetter))}};
      if (cell.mix == IommuMix::kMixed) entry["vs_mutex"]["updates_per_s"] = ratio_json(v.updates_per_s);
    }
  });
  j["mismatches"] = result.total(&IommuLockLabCell::mismatches);
  return j;
}

std::vector<BarChart> iommu_lock_charts(const IommuLockLabResult& result) {
  const IommuLockLabConfig& c = result.config;
  return charts_per_variant<IommuLockLabCell>(
      c.mixes, c.threads, "thread", names(c.policies),
      [&](IommuMix mix) {
        const std::string label = mix_label(c, mix);
        return std::vector<ChartFigure<IommuLockLabCell>>{
            {fmt::format("mix {}: wall ns per translation", label), "ns (lower is better)",
             &IommuLockLabCell::wall_ns_per_translation},
            {fmt::format("mix {}: CPU ns per translation", label), "ns (lower is better)",
             &IommuLockLabCell::cpu_ns_per_translation}};
      },
      [&](IommuMix mix, int threads, std::size_t p) { return result.find(threads, mix, c.policies[p]); });
}

}  // namespace uvhost::bench::lab
