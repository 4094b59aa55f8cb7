// delegation_lab.cpp - the delegation-lock lab on SLAB sections, the packet pool, the
// shared TX queue and the switch's MAC learning (see delegation_lab.h for the loads and
// the figures).
#include "uvhost/bench/lab/delegation_lab.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <span>
#include <stdexcept>
#include <thread>

#include "uvhost/bench/table.h"
#include "uvhost/experiments/lock_load.h"

namespace uvhost::bench::lab {
namespace {

constexpr const char* kBaselineLock = "std::mutex";

// A lock as the structure runs it: one load of `threads` threads.
struct LockEntry {
  std::string name;
  std::function<experiments::LoadCounts(const DelegationLabConfig&, int threads)> run;
};

experiments::LoadShape shape(const DelegationLabConfig& c, int threads) {
  return {threads, c.duration_ms, c.batch, c.private_work};
}

std::vector<LockEntry> lock_entries(LockStructure structure) {
  std::vector<LockEntry> out;
  if (structure == LockStructure::kSlab) {
    experiments::for_each_runner([&]<class Runner>() {
      out.push_back({Runner::kName, [](const DelegationLabConfig& c, int threads) {
                       return experiments::run_slab_load<Runner>({shape(c, threads), c.pool_objects,
                                                                  c.objects_per_slab});
                     }});
    });
    return out;
  }
  for (const experiments::NamedSectionLock& lock : experiments::section_lock_set()) {
    out.push_back({lock.name, [structure, &lock](const DelegationLabConfig& c, int threads) {
                     if (structure == LockStructure::kPool)
                       return experiments::run_pool_load({shape(c, threads), c.ring, c.cache_capacity, c.buffer_size},
                                                         lock);
                     if (structure == LockStructure::kLearning)
                       return experiments::run_learning_load({shape(c, threads), c.flapping_macs}, lock);
                     return experiments::run_txq_load(
                         {shape(c, threads), c.txq_capacity, c.consumer_burst, c.txq_retries}, lock);
                   }});
  }
  return out;
}

// The figures, each summarized per cell. The slab lab reports the first five, learning
// the first six (with items/s), pool the first seven (and drops), txq all of them.
using Field = LabField<DelegationSample, DelegationCell>;
constexpr Field kFields[] = {
    {"ops_per_s", &DelegationSample::ops_per_s, &DelegationCell::ops_per_s},
    {"ns_per_cs", &DelegationSample::ns_per_cs, &DelegationCell::ns_per_cs},
    {"cpu_ns_per_cs", &DelegationSample::cpu_ns_per_cs, &DelegationCell::cpu_ns_per_cs},
    {"cores", &DelegationSample::cores, &DelegationCell::cores},
    {"fairness", &DelegationSample::fairness, &DelegationCell::fairness},
    {"items_per_s", &DelegationSample::items_per_s, &DelegationCell::items_per_s},
    {"drop_ratio", &DelegationSample::drop_ratio, &DelegationCell::drop_ratio},
    {"full_ratio", &DelegationSample::full_ratio, &DelegationCell::full_ratio},
    {"retries_per_burst", &DelegationSample::retries_per_burst, &DelegationCell::retries_per_burst},
    {"burst_drop_ratio", &DelegationSample::burst_drop_ratio, &DelegationCell::burst_drop_ratio},
};

std::span<const Field> reported_fields(LockStructure structure) {
  switch (structure) {
    case LockStructure::kSlab:
      return std::span(kFields).first(5);
    case LockStructure::kLearning:
      return std::span(kFields).first(6);
    case LockStructure::kPool:
      return std::span(kFields).first(7);
    case LockStructure::kTxq:
      break;
  }
  return kFields;
}

DelegationSample sample_of(const experiments::LoadCounts& s, int threads) {
  const double sections = static_cast<double>(std::max<uint64_t>(s.ops, 1));
  const double bursts = static_cast<double>(std::max<uint64_t>(s.bursts, 1));
  const double wall = static_cast<double>(s.wall_ns);
  const double cpu = static_cast<double>(s.cpu_ns);
  const double mean_ops = static_cast<double>(s.ops) / threads;
  DelegationSample out;
  out.ops_per_s = static_cast<double>(s.ops) * 1e9 / wall;
  out.ns_per_cs = wall / sections;
  out.cpu_ns_per_cs = cpu / sections;
  out.cores = cpu / wall;
  out.fairness = mean_ops > 0 ? static_cast<double>(s.min_ops) / mean_ops : 0;
  out.items_per_s = static_cast<double>(s.items) * 1e9 / wall;
  out.drop_ratio = s.offered > 0 ? static_cast<double>(s.offered - s.items) / static_cast<double>(s.offered) : 0;
  out.full_ratio = static_cast<double>(s.full) / sections;
  out.retries_per_burst = static_cast<double>(s.retries) / bursts;
  out.burst_drop_ratio = static_cast<double>(s.dropped_bursts) / bursts;
  out.counts = {s.offered, s.queue.accepted, s.queue.dropped, s.queue.push_bursts, s.queue.full, s.bursts,
                s.dropped_bursts};
  return out;
}

void validate(const DelegationLabConfig& c) {
  require<std::runtime_error>(c.runs >= 1 && c.duration_ms >= 1 && c.batch >= 1 && !c.threads.empty(),
                              "delegation lab: runs, duration, batch and threads must be positive");
  for (int t : c.threads) require<std::runtime_error>(t >= 1, "delegation lab: thread counts must be >= 1");
  require<std::runtime_error>(c.structure != LockStructure::kPool || (c.ring >= 1 && c.cache_capacity >= c.batch),
                              "delegation lab: pool needs ring >= 1 and cache capacity >= batch");
  require<std::runtime_error>(c.structure != LockStructure::kTxq || (c.txq_capacity >= 1 && c.consumer_burst >= 1),
                              "delegation lab: txq needs a capacity and a consumer burst >= 1");
  require<std::runtime_error>(c.structure != LockStructure::kLearning || c.flapping_macs >= 1,
                              "delegation lab: learning needs at least one flapping MAC");
  const auto known = delegation_lab_locks();
  for (const auto& name : c.locks)
    require<std::runtime_error>(std::find(known.begin(), known.end(), name) != known.end(),
                                fmt::format("delegation lab: unknown lock '{}'", name));
}

}  // namespace

std::vector<std::string> delegation_lab_locks(LockStructure structure) {
  return names(lock_entries(structure), [](const LockEntry& e) { return e.name; });
}

DelegationLabResult run_delegation_lab(const DelegationLabConfig& config, const LabProgress& progress) {
  validate(config);
  const std::vector<LockEntry> entries = lock_entries(config.structure);
  std::vector<std::string> locks;  // config order; a lock the structure does not run is left out
  for (const auto& name : config.locks.empty() ? delegation_lab_locks(config.structure) : config.locks)
    if (find_cell(entries, [&](const LockEntry& e) { return e.name == name; }) != nullptr) locks.push_back(name);
  require<std::runtime_error>(!locks.empty(), fmt::format("delegation lab: none of the locks asked for runs on '{}'",
                                                          to_string(config.structure)));
  const bool txq = config.structure == LockStructure::kTxq;
  DelegationLabResult result{config, {}};
  run_grid(
      result.cells, std::vector{config.structure}, config.threads, locks, config.runs, true, kFields,
      [&](const DelegationCell& cell) {
        const LockEntry* entry = find_cell(entries, [&](const LockEntry& e) { return e.name == cell.lock; });
        return sample_of(entry->run(config, cell.threads), cell.threads);
      },
      [&](const DelegationCell& cell, const DelegationSample& s, int run) {
        if (!progress) return;
        progress(fmt::format("{} threads={:<3} run {}/{} {:<16} {:>10} ops/s{}", to_string(config.structure),
                             cell.threads, run + 1, config.runs, cell.lock, si(s.ops_per_s),
                             txq ? fmt::format(" {:>10} pkts/s, {:.1f}% dropped, {:.1f}% pushes full",
                                               si(s.items_per_s), 100 * s.drop_ratio, 100 * s.full_ratio)
                                 : std::string()));
      });
  set_vs_mutex(result);
  return result;
}

void set_vs_mutex(DelegationLabResult& result) {
  for (DelegationCell& cell : result.cells) {
    const DelegationCell* mutex = result.find(cell.structure, cell.threads, kBaselineLock);
    const auto vs = [&](Summary DelegationCell::*figure) {
      return mutex != nullptr ? ratio_vs_baseline(cell.*figure, mutex->*figure, Direction::kHigherIsBetter)
                              : BaselineRatio{};
    };
    cell.vs_mutex = vs(&DelegationCell::ops_per_s);
    cell.items_vs_mutex = vs(&DelegationCell::items_per_s);
  }
}

namespace {

void print_structure(const DelegationLabConfig& c, std::ostream& out) {
  const unsigned cpus = std::thread::hardware_concurrency();
  if (c.structure == LockStructure::kSlab) {
    out << fmt::format(
        "Delegation lock: SLAB refill/flush critical sections ({} objects/batch, {} private-work iterations),\n"
        "{} runs x {} ms per point, locks interleaved; mean ±95% CI (Student t). {} CPUs online.\n\n",
        c.batch, c.private_work, c.runs, c.duration_ms, cpus);
    return;
  }
  if (c.structure == LockStructure::kLearning) {
    out << fmt::format(
        "Delegation lock on the switch's MAC learning: the MacTable's writers' lock, under MAC flapping. Each thread\n"
        "is a port sending bursts of {} frames whose source MACs cycle through the same {} addresses, so nearly\n"
        "every learn moves a MAC (a write under the lock); each frame also looks up a destination. An op is one\n"
        "learn; writes/s counts the learns that wrote. {} private-work iterations per burst, {} runs x {} ms per\n"
        "point, locks interleaved; mean ±95% CI (Student t). {} CPUs online.\n\n",
        c.batch, c.flapping_macs, c.private_work, c.runs, c.duration_ms, cpus);
    return;
  }
  const bool pool = c.structure == LockStructure::kPool;
  if (pool) {
    out << fmt::format(
        "Delegation lock on the datapath: PacketPool ({} B buffers, per-thread caches of {}, refill/flush {} at a time),\n"
        "each thread gets {} buffers then puts them back; an op is one refill or flush section.\n",
        c.buffer_size, c.cache_capacity, c.batch, c.ring);
  } else {
    out << fmt::format(
        "Delegation lock on the datapath: SharedTxQueue ({} descriptors) shared by all workers, one consumer popping up to\n"
        "{} at a time under the same lock; each worker pushes bursts of {}, and on a full queue backs off and retries\n"
        "the rest up to {} times before dropping it. An op is one push section, try or retry (CPU includes the\n"
        "consumer's); pkts/s = accepted descriptors/s (the throughput), full = push sections that found the queue full.\n",
        c.txq_capacity, c.consumer_burst, c.batch, c.txq_retries);
  }
  out << fmt::format(
      "{} private-work iterations per {}, {} runs x {} ms per point, locks interleaved; mean ±95% CI (Student t).\n"
      "{} CPUs online. delegation-async runs on the slab structure only.\n\n",
      c.private_work, pool ? "batch" : "burst", c.runs, c.duration_ms, cpus);
}

std::vector<std::string> row_of(const DelegationCell& cell) {
  const bool is_baseline = cell.lock == kBaselineLock;
  std::vector<std::string> row{std::to_string(cell.threads),
                               cell.lock,
                               si_with_relative_ci(cell.ops_per_s),
                               with_ci(cell.ns_per_cs),
                               with_ci(cell.cpu_ns_per_cs),
                               fmt::format("{:.2f}", cell.cores.mean),
                               fmt::format("{:.2f}", cell.fairness.mean)};
  for (auto& text : baseline_cells(cell.vs_mutex, is_baseline)) row.push_back(std::move(text));
  if (cell.structure == LockStructure::kSlab) return row;
  row.push_back(si_with_relative_ci(cell.items_per_s));
  if (cell.structure != LockStructure::kTxq) return row;
  row.push_back(fmt::format("{:.1f}%", 100 * cell.drop_ratio.mean));
  row.push_back(fmt::format("{:.1f}%", 100 * cell.full_ratio.mean));
  row.push_back(fmt::format("{:.2f}", cell.retries_per_burst.mean));
  const auto vs = baseline_cells(cell.items_vs_mutex, is_baseline);
  row.push_back(is_baseline ? vs[0] : vs[0] + " " + vs[1]);
  return row;
}

// The locks of the result, in cell order.
std::vector<std::string> locks_of(const DelegationLabResult& result) {
  std::vector<std::string> locks;
  for (const DelegationCell& cell : result.cells)
    if (std::find(locks.begin(), locks.end(), cell.lock) == locks.end()) locks.push_back(cell.lock);
  return locks;
}

}  // namespace

void print_delegation_table(const DelegationLabResult& result, std::ostream& out) {
  const LockStructure structure = result.config.structure;
  print_structure(result.config, out);
  std::vector<std::string> headers{"threads", "lock",     "ops/s",         "ns/CS",  "CPU ns/CS",
                                   "cores",   "fairness", "vs std::mutex", "verdict"};
  if (structure == LockStructure::kPool) headers.push_back("buffers/s");
  if (structure == LockStructure::kLearning) headers.push_back("writes/s");
  if (structure == LockStructure::kTxq)
    headers.insert(headers.end(), {"pkts/s", "dropped", "full", "retries/burst", "pkts/s vs std::mutex"});
  TextTable table(std::move(headers));
  for (std::size_t i = 0; i < result.cells.size(); ++i) {
    if (i > 0 && result.cells[i].threads != result.cells[i - 1].threads) table.add_separator();
    table.add_row(row_of(result.cells[i]));
  }
  table.print(out);
  out << "verdict: ops/s vs std::mutex at the same thread count (higher is better) - better/worse when the "
         "ratio's 95% CI excludes 1, noise when it contains 1.\n";
  if (structure == LockStructure::kTxq)
    out << "pkts/s vs std::mutex: the same test on accepted descriptors per second, the txq's throughput.\n";
}

nlohmann::json delegation_lab_json(const DelegationLabResult& result) {
  const DelegationLabConfig& c = result.config;
  nlohmann::json options = {
      {"threads", c.threads}, {"runs", c.runs}, {"duration_ms", c.duration_ms}, {"batch", c.batch},
      {"private_work", c.private_work}};
  if (c.structure == LockStructure::kSlab)
    options.update({{"pool_objects", c.pool_objects}, {"objects_per_slab", c.objects_per_slab}});
  if (c.structure == LockStructure::kPool)
    options.update({{"ring", c.ring}, {"cache_capacity", c.cache_capacity}, {"buffer_size", c.buffer_size}});
  if (c.structure == LockStructure::kTxq)
    options.update(
        {{"txq_capacity", c.txq_capacity}, {"consumer_burst", c.consumer_burst}, {"txq_retries", c.txq_retries}});
  if (c.structure == LockStructure::kLearning) options["flapping_macs"] = c.flapping_macs;
  nlohmann::json j = {{"experiment", "delegation"},
                      {"seed", "004"},  // the JSON key tools and tests read: which upstream experiment this is
                      {"structure", to_string(c.structure)},
                      {"options", std::move(options)},
                      {"points", nlohmann::json::array()}};
  for (const DelegationCell& cell : result.cells) {
    const auto samples = [&](double DelegationSample::*figure) {
      std::vector<double> values;
      for (const DelegationSample& s : cell.samples) values.push_back(s.*figure);
      return values;
    };
    nlohmann::json point = fields_json(cell, reported_fields(c.structure));
    point["lock"] = cell.lock;
    point["threads"] = cell.threads;
    point["vs_mutex"] = ratio_json(cell.vs_mutex);
    point["vs_mutex"]["ratio"] = cell.vs_mutex.value;  // the name earlier versions wrote
    point["samples"] = {{"ops_per_s", samples(&DelegationSample::ops_per_s)},
                        {"cpu_ns_per_cs", samples(&DelegationSample::cpu_ns_per_cs)}};
    if (c.structure == LockStructure::kTxq) {
      point["items_vs_mutex"] = ratio_json(cell.items_vs_mutex);
      point["samples"]["items_per_s"] = samples(&DelegationSample::items_per_s);
      point["samples"]["drop_ratio"] = samples(&DelegationSample::drop_ratio);
      auto& counts = point["samples"]["counts"] = nlohmann::json::array();
      for (const DelegationSample& s : cell.samples)
        counts.push_back({{"offered", s.counts.offered},
                          {"accepted", s.counts.accepted},
                          {"dropped", s.counts.dropped},
                          {"pushes", s.counts.pushes},
                          {"full", s.counts.full},
                          {"bursts", s.counts.bursts},
                          {"dropped_bursts", s.counts.dropped_bursts}});
    }
    j["points"].push_back(std::move(point));
  }
  return j;
}

std::vector<BarChart> delegation_charts(const DelegationLabResult& result) {
  const DelegationLabConfig& c = result.config;
  const std::string structure(to_string(c.structure));
  const std::vector<std::string> locks = locks_of(result);
  std::vector<std::string> groups;
  for (int t : c.threads) groups.push_back(count_label(t, "thread"));
  return grouped_charts<DelegationCell>(
      {{structure + ": critical sections per second (higher is better)", "ops/s", &DelegationCell::ops_per_s},
       {structure + ": CPU ns per critical section (lower is better)", "CPU ns", &DelegationCell::cpu_ns_per_cs}},
      groups, locks,
      [&](std::size_t g, std::size_t l) { return result.find(c.structure, c.threads[g], locks[l]); });
}

}  // namespace uvhost::bench::lab
