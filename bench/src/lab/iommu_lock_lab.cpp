// iommu_lock_lab.cpp - the read-mostly mapping-table lab (see iommu_lock_lab.h).
#include "uvhost/bench/lab/iommu_lock_lab.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <ostream>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "uvhost/bench/cpu_time.h"
#include "uvhost/bench/lab/lab_engine.h"
#include "uvhost/bench/latency_histogram.h"
#include "uvhost/bench/table.h"
#include "uvhost/virtio/guarded_guest_memory.h"

namespace uvhost::bench::lab {

using sync::GuardPolicy;

// ---- One run -----------------------------------------------------------------------

namespace {

// Translations of one reader: a power of two, cycled through.
constexpr std::size_t kAccessesPerReader = 4096;

struct alignas(64) ReaderSlot {
  // Translations so far, published every sample_every translations for the writer.
  std::atomic<uint64_t> published{0};
  alignas(64) uint64_t translations = 0;
  uint64_t mismatches = 0;
  int64_t cpu_ns = 0;
  LatencyHistogram histogram;
  std::vector<IommuTable::Access> accesses;
};

struct RunShared {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
};

void wait_for_go(const std::atomic<bool>& go) {
  go.wait(false, std::memory_order_acquire);  // acquire: pairs with the main thread's release
}

void reader_main(const virtio::GuardedGuestMemory& memory, const IommuTable& table, ReaderSlot& slot,
                 RunShared& shared, int sample_every) {
  virtio::IoVector scratch(4);
  const std::vector<IommuTable::Access>& accesses = slot.accesses;
  // The datapath's shape: one read section per descriptor, translate, use the result.
  auto translate = [&](const IommuTable::Access& access) {
    return memory.read([&](const virtio::GuestMemoryMap& map) { return table.check(map, access, scratch); });
  };
  (void)translate(accesses[0]);  // untimed: registers this thread with liburcu (RCU)
  // release: the main thread (acquire) opens the window only after this first read.
  shared.ready.fetch_add(1, std::memory_order_release);
  shared.ready.notify_all();
  wait_for_go(shared.go);

  const int64_t cpu_start = thread_cpu_ns();
  uint64_t done = 0;
  uint64_t bad = 0;
  std::size_t next = 0;
  // relaxed: a stop request only needs to be noticed eventually.
  while (!shared.stop.load(std::memory_order_relaxed)) {
    // One timed translation, then sample_every - 1 untimed ones.
    const int64_t t0 = monotonic_ns();
    bad += translate(accesses[next++ & (kAccessesPerReader - 1)]) ? 0u : 1u;
    slot.histogram.record(static_cast<uint64_t>(monotonic_ns() - t0));
    for (int k = 1; k < sample_every; ++k) {
      bad += translate(accesses[next++ & (kAccessesPerReader - 1)]) ? 0u : 1u;
    }
    done += static_cast<uint64_t>(sample_every);
    // relaxed: a progress count for the writer's pacing; it orders nothing.
    slot.published.store(done, std::memory_order_relaxed);
  }
  slot.cpu_ns = thread_cpu_ns() - cpu_start;
  slot.translations = done;
  slot.mismatches = bad;
}

struct WriterResult {
  uint64_t updates = 0;
  int64_t cpu_ns = 0;
};

// Publishes version 1, 2, ... each time the readers together have done another
// reads_per_update translations; sleeps in between for about the time the readers
// need to get there.
void writer_main(virtio::GuardedGuestMemory& memory, const IommuTable& table,
                 const std::vector<std::unique_ptr<ReaderSlot>>& slots, RunShared& shared, int reads_per_update,
                 WriterResult& out) {
  fine_timer_slack();
  wait_for_go(shared.go);
  const int64_t cpu_start = thread_cpu_ns();
  const int64_t t0 = monotonic_ns();
  uint64_t updates = 0;
  while (!shared.stop.load(std::memory_order_relaxed)) {  // relaxed: see reader_main()
    uint64_t total = 0;
    // relaxed: progress counts only (see reader_main()).
    for (const auto& slot : slots) total += slot->published.load(std::memory_order_relaxed);
    const uint64_t target = (updates + 1) * static_cast<uint64_t>(reads_per_update);
    if (total >= target) {
      memory.replace(table.build(updates + 1));  // SET_MEM_TABLE: a new map, the old one retired
      ++updates;
      continue;
    }
    // Sleep for the readers' expected time to reach the target, 2 us .. 1 ms.
    const int64_t elapsed = std::max<int64_t>(monotonic_ns() - t0, 1);
    const double rate = static_cast<double>(total) / static_cast<double>(elapsed);  // per ns
    const double wait = rate > 0 ? static_cast<double>(target - total) / rate : 1e6;
    const auto ns = static_cast<int64_t>(std::clamp(wait, 2e3, 1e6));
    timespec ts{0, static_cast<long>(ns)};
    nanosleep(&ts, nullptr);
  }
  out.updates = updates;
  out.cpu_ns = thread_cpu_ns() - cpu_start;
}

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

const IommuLockLabCell* IommuLockLabResult::find(int threads, IommuMix mix, GuardPolicy policy) const noexcept {
  return find_cell(cells, [&](const IommuLockLabCell& c) {
    return c.threads == threads && c.mix == mix && c.policy == policy;
  });
}

uint64_t IommuLockLabResult::total_mismatches() const noexcept {
  uint64_t total = 0;
  for (const auto& cell : cells) total += cell.mismatches;
  return total;
}

IommuRunSample run_iommu_once(const IommuLockLabConfig& config, const IommuTable& table, int threads, IommuMix mix,
                              GuardPolicy policy) {
  virtio::GuardedGuestMemory memory(policy, table.build(0));
  RunShared shared;
  std::vector<std::unique_ptr<ReaderSlot>> slots;
  slots.reserve(static_cast<std::size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    auto slot = std::make_unique<ReaderSlot>();
    slot->accesses = table.make_accesses(kAccessesPerReader, uint64_t{0x5eed0002} * 1000 + static_cast<uint64_t>(i));
    slots.push_back(std::move(slot));
  }

  std::vector<std::thread> readers;
  readers.reserve(slots.size());
  for (auto& slot : slots) {
    readers.emplace_back(
        [&, s = slot.get()] { reader_main(memory, table, *s, shared, config.sample_every); });
  }
  // Every reader has done its untimed first read before the window opens.
  for (int r = shared.ready.load(std::memory_order_acquire); r < threads;
       r = shared.ready.load(std::memory_order_acquire)) {
    shared.ready.wait(r, std::memory_order_acquire);  // acquire: pairs with the readers' release
  }
  WriterResult writer_result;
  std::thread writer;
  if (mix == IommuMix::kMixed) {
    writer = std::thread(
        [&] { writer_main(memory, table, slots, shared, config.reads_per_update, writer_result); });
  }

  const int64_t t0 = monotonic_ns();
  shared.go.store(true, std::memory_order_release);  // release: the readers' accesses are built
  shared.go.notify_all();
  std::this_thread::sleep_for(std::chrono::milliseconds(config.duration_ms));
  shared.stop.store(true, std::memory_order_relaxed);  // relaxed: join() below orders the results
  const int64_t wall = monotonic_ns() - t0;
  for (auto& t : readers) t.join();
  if (writer.joinable()) writer.join();

  IommuRunSample s;
  LatencyHistogram histogram;
  int64_t reader_cpu = 0;
  for (const auto& slot : slots) {
    s.translations += slot->translations;
    s.mismatches += slot->mismatches;
    reader_cpu += slot->cpu_ns;
    histogram.merge(slot->histogram);
  }
  const auto translations = static_cast<double>(std::max<uint64_t>(s.translations, 1));
  s.translations_per_s = per_second(static_cast<double>(s.translations), wall);
  s.wall_ns_per_translation = static_cast<double>(wall) * threads / translations;
  s.cpu_ns_per_translation = static_cast<double>(reader_cpu) / translations;
  s.p999_ns = histogram.percentile(99.9);
  s.max_ns = static_cast<double>(histogram.max_ns());
  s.latency_samples = histogram.count();
  s.updates = writer_result.updates;
  s.updates_per_s = per_second(static_cast<double>(s.updates), wall);
  s.translations_per_update = s.updates > 0 ? static_cast<double>(s.translations) / static_cast<double>(s.updates) : 0;
  s.writer_cpu_pct = 100.0 * static_cast<double>(writer_result.cpu_ns) / static_cast<double>(wall);
  return s;
}

IommuLockLabResult run_iommu_lock_lab(const IommuLockLabConfig& config,
                                      const std::function<void(const std::string&)>& progress) {
  validate(config);
  IommuTable table;
  IommuLockLabResult result;
  result.config = config;
  for (int threads : config.threads) {
    for (IommuMix mix : config.mixes) {
      const std::size_t first = result.cells.size();
      for (GuardPolicy policy : config.policies) {
        auto& cell = result.cells.emplace_back();
        std::tie(cell.threads, cell.mix, cell.policy) = std::tuple(threads, mix, policy);
      }
      run_cells(
          result.cells, first, config.runs, true, kFields,
          [&](const IommuLockLabCell& cell) { return run_iommu_once(config, table, threads, mix, cell.policy); },
          [&](IommuLockLabCell& cell, const IommuRunSample& s, int run) {
            cell.mismatches += s.mismatches;
            if (progress)
              progress(fmt::format("threads={} mix={} policy={} run {}/{}: {} translations/s, {:.1f} ns wall, "
                                   "{:.1f} ns CPU, {} updates/s, max {} ns{}",
                                   threads, mix_label(config, mix), sync::to_string(cell.policy), run + 1,
                                   config.runs, si(s.translations_per_s), s.wall_ns_per_translation,
                                   s.cpu_ns_per_translation, si(s.updates_per_s), si(s.max_ns),
                                   s.mismatches ? fmt::format(", {} MISMATCHES", s.mismatches) : ""));
          });
    }
  }
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
  const std::vector<std::string> policies = names(config.policies, sync::to_string<sync::GuardPolicy>);
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
  j["config"] = {{"threads", c.threads},
                 {"policies", names(c.policies, sync::to_string<sync::GuardPolicy>)},
                 {"mixes", names(c.mixes, [](IommuMix m) { return to_string(m); })},
                 {"runs", c.runs},
                 {"duration_ms", c.duration_ms},
                 {"reads_per_update", c.reads_per_update},
                 {"sample_every", c.sample_every}};
  j["cells"] = cells_json(result.cells, kFields, [&](const IommuLockLabCell& cell, nlohmann::json& entry) {
    for (std::size_t i = 0; i < cell.samples.size(); ++i) {
      const IommuRunSample& s = cell.samples[i];
      nlohmann::json& sample = entry["samples"][i];
      sample["translations"] = s.translations;
      sample["updates"] = s.updates;
      sample["mismatches"] = s.mismatches;
      sample["latency_samples"] = s.latency_samples;
    }
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
  j["mismatches"] = result.total_mismatches();
  return j;
}

std::vector<BarChart> iommu_lock_charts(const IommuLockLabResult& result) {
  const IommuLockLabConfig& c = result.config;
  std::vector<std::string> groups;
  for (int t : c.threads) groups.push_back(count_label(t, "thread"));
  std::vector<BarChart> charts;
  for (IommuMix mix : c.mixes) {
    const std::string label = mix_label(c, mix);
    for (auto& chart : grouped_charts<IommuLockLabCell>(
             {{fmt::format("mix {}: wall ns per translation", label), "ns (lower is better)",
               &IommuLockLabCell::wall_ns_per_translation},
              {fmt::format("mix {}: CPU ns per translation", label), "ns (lower is better)",
               &IommuLockLabCell::cpu_ns_per_translation}},
             groups, names(c.policies, sync::to_string<sync::GuardPolicy>),
             [&](std::size_t g, std::size_t p) { return result.find(c.threads[g], mix, c.policies[p]); }))
      charts.push_back(std::move(chart));
  }
  return charts;
}

}  // namespace uvhost::bench::lab
