// delegation_datapath_lab.cpp - the delegation lab on the packet pool and the shared
// TX queue (see delegation_datapath_lab.h for the workloads and what is reported).
#include "uvhost/bench/lab/delegation_datapath_lab.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "uvhost/bench/cpu_time.h"
#include "uvhost/bench/lab/lab_engine.h"
#include "uvhost/bench/table.h"
#include "uvhost/experiments/lock_runners.h"
#include "uvhost/experiments/packet_pool.h"
#include "uvhost/experiments/shared_tx_queue.h"
#include "uvhost/sync/cpu_relax.h"

namespace uvhost::bench::lab {
namespace {

using experiments::BufferId;
using experiments::kNoBuffer;
using experiments::PacketPool;
using experiments::SharedTxQueue;
using experiments::TxDescriptor;

using LockEntry = experiments::NamedSectionLock;

// The datapath figures beside the slab lab's: one value per run, summarized per point.
constexpr std::pair<std::vector<double> DatapathPoint::*, Summary DatapathPoint::*> kExtraFigures[] = {
    {&DatapathPoint::items_per_s, &DatapathPoint::items_per_s_summary},
    {&DatapathPoint::drop_ratio, &DatapathPoint::drop_ratio_summary},
    {&DatapathPoint::full_ratio, &DatapathPoint::full_ratio_summary},
    {&DatapathPoint::retries_per_burst, &DatapathPoint::retries_per_burst_summary},
    {&DatapathPoint::burst_drop_ratio, &DatapathPoint::burst_drop_ratio_summary}};

// What a thread counts (see the header for each structure); a run's totals over the workers.
struct Counts {
  uint64_t ops = 0;             // critical sections
  uint64_t items = 0;           // buffers got / descriptors accepted
  uint64_t offered = 0;         // txq: descriptors offered
  uint64_t bursts = 0;          // txq: bursts built (each offered once, retried or not)
  uint64_t full = 0;            // txq: push sections that found the queue full
  uint64_t retries = 0;         // txq: push sections that retried part of a burst
  uint64_t dropped_bursts = 0;  // txq: bursts that lost at least one descriptor
};

// What each thread records; padded so threads never share a cache line.
struct alignas(64) ThreadRecord : Counts {
  int64_t cpu_ns = 0;
  uint64_t conflicts = 0;  // pool: stamps found overwritten
};

// One run of one lock at one thread count.
struct TrialSample : Counts {
  uint64_t min_ops = UINT64_MAX;          // the slowest worker's
  experiments::SharedTxQueueStats queue;  // txq: the queue's counters after the run
  int64_t cpu_ns = 0;                     // all threads
  int64_t wall_ns = 0;
};

// The totals of the first `workers` records (the CPU of all of them).
TrialSample totals(const std::vector<ThreadRecord>& records, std::size_t workers, int64_t wall_ns) {
  TrialSample s;
  s.wall_ns = wall_ns;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const ThreadRecord& r = records[i];
    s.cpu_ns += r.cpu_ns;
    if (i >= workers) continue;
    s.ops += r.ops;
    s.min_ops = std::min(s.min_ops, r.ops);
    s.items += r.items;
    s.offered += r.offered;
    s.bursts += r.bursts;
    s.full += r.full;
    s.retries += r.retries;
    s.dropped_bursts += r.dropped_bursts;
  }
  return s;
}

// A worker's back-off before retry `k` (0, 1, ...) of a burst that found the TX queue
// full: spin a growing while (the consumer may be draining on another core), then
// yield, then sleep a growing while (with more threads than cores the consumer needs
// the CPU; a sleeping worker also leaves the lock to it).
inline void txq_backoff(std::size_t k) {
  if (k < 3) {
    for (std::size_t i = 0, n = std::size_t{64} << k; i < n; ++i) sync::cpu_relax();
  } else if (k < 5) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(std::min<std::size_t>(std::size_t{16} << (k - 5), 1000)));
  }
}

// The engine's run_threads_for(), with one ThreadRecord per thread (its CPU filled in).
template <class Body>
int64_t run_threads(std::size_t count, int duration_ms, std::atomic<bool>& stop, std::vector<ThreadRecord>& records,
                    Body body) {
  records.assign(count, ThreadRecord{});
  std::vector<int64_t> cpu_ns;
  const int64_t wall = run_threads_for(count, duration_ms, stop, cpu_ns, [&](std::size_t i) { body(i, records[i]); });
  for (std::size_t i = 0; i < count; ++i) records[i].cpu_ns = cpu_ns[i];
  return wall;
}

uint64_t stamp_of(std::size_t thread, uint64_t cycle) { return (uint64_t(thread) << 40) ^ cycle; }

TrialSample run_pool_trial(const DatapathLabOptions& options, int thread_count, const LockEntry& lock) {
  const auto& c = options.common;
  const auto threads = static_cast<std::size_t>(thread_count);
  experiments::PacketPoolOptions po;
  po.buffer_size = options.buffer_size;
  po.cache_capacity = options.cache_capacity;
  po.batch = c.batch;
  // Room for every thread's ring and a full cache: a get never finds the pool empty
  // unless buffers were lost (which the invariant check would then report).
  po.buffers = threads * (options.ring + options.cache_capacity + c.batch);
  PacketPool pool(po, lock.make());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sink{0};
  std::vector<ThreadRecord> records;

  const int64_t wall = run_threads(threads, c.duration_ms, stop, records, [&](std::size_t index, ThreadRecord& r) {
    PacketPool::Cache cache(pool);
    std::vector<BufferId> ring;
    ring.reserve(options.ring);
    uint64_t h = 0;
    // At least one cycle, even for a thread first scheduled after `stop` (a loaded
    // machine): every thread then has figures. relaxed: see run_threads.
    uint64_t cycle = 0;
    do {
      const uint64_t stamp = stamp_of(index, cycle);
      // Post the ring: get buffers, write the owner stamp into each (the header a
      // receive path would write).
      for (std::size_t i = 0; i < options.ring; ++i) {
        const BufferId id = cache.get();
        if (id == kNoBuffer) break;
        std::memcpy(pool.data(id).data(), &stamp, sizeof stamp);
        ring.push_back(id);
        if ((i + 1) % c.batch == 0) h += private_work({}, c.private_work, h + i);
      }
      // Complete it: the stamp must be ours still, then the buffer goes back.
      for (std::size_t i = 0; i < ring.size(); ++i) {
        uint64_t seen;
        std::memcpy(&seen, pool.data(ring[i]).data(), sizeof seen);
        if (seen != stamp) ++r.conflicts;
        cache.put(ring[i]);
        if ((i + 1) % c.batch == 0) h += private_work({}, c.private_work, h + i);
      }
      r.items += ring.size();
      ring.clear();
      ++cycle;
    } while (!stop.load(std::memory_order_relaxed));
    cache.drain();  // inside the window: the last flushes are sections too
    r.ops = cache.stats().refills + cache.stats().flushes;
    sink.fetch_add(h, std::memory_order_relaxed);  // relaxed: only defeats dead-code elimination
  });

  const TrialSample s = totals(records, records.size(), wall);
  uint64_t conflicts = 0;
  for (const auto& r : records) conflicts += r.conflicts;
  std::string why;
  if (conflicts != 0)
    throw std::runtime_error(fmt::format("pool under {}: {} buffers were handed to two threads at once", lock.name,
                                         conflicts));
  if (!pool.check_invariants({}, why))
    throw std::runtime_error(fmt::format("pool under {}: {}", lock.name, why));
  return s;
}

TrialSample run_txq_trial(const DatapathLabOptions& options, int thread_count, const LockEntry& lock) {
  const auto& c = options.common;
  const auto workers = static_cast<std::size_t>(thread_count);
  SharedTxQueue queue(options.txq_capacity, lock.make());
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> workers_left{workers};
  std::atomic<uint64_t> sink{0};
  std::vector<uint64_t> consumed(workers, 0);
  uint64_t order_errors = 0;
  std::vector<ThreadRecord> records;

  // Thread `workers` is the consumer; the others are workers.
  const int64_t wall = run_threads(workers + 1, c.duration_ms, stop, records, [&](std::size_t index, ThreadRecord& r) {
    if (index == workers) {
      std::vector<TxDescriptor> out(options.consumer_burst);
      std::vector<int64_t> last_seq(workers, -1);
      for (;;) {
        // acquire: pairs with each worker's release when it leaves; read BEFORE the
        // pop, so a pass that sees 0 workers left and an empty queue has seen all.
        const bool last_pass = workers_left.load(std::memory_order_acquire) == 0;
        const std::size_t n = queue.pop_burst(out);
        for (std::size_t i = 0; i < n; ++i) {
          const auto worker = static_cast<std::size_t>(out[i].cookie >> 32);
          const auto seq = static_cast<int64_t>(out[i].cookie & 0xffffffffu);
          if (worker >= workers || seq <= last_seq[worker]) {
            ++order_errors;
            continue;
          }
          last_seq[worker] = seq;
          ++consumed[worker];
        }
        // Drain in bursts: pop again at once while pops bring descriptors back (each
        // pop takes the lock the workers push under); an empty pop yields.
        if (n == 0) {
          if (last_pass) break;
          std::this_thread::yield();  // an idle NIC queue: let the workers run
        }
      }
      return;
    }
    std::vector<TxDescriptor> burst(c.batch);
    uint32_t seq = 0;
    uint64_t h = 0;
    do {  // at least one burst, as in the pool's loop; relaxed: see run_threads
      for (auto& d : burst) {
        d.buffer = seq;
        d.length = 64;
        d.cookie = (uint64_t(index) << 32) | seq;
        ++seq;
      }
      h += private_work({}, c.private_work, h + seq);
      // Push, and while the queue is full back off and retry the rest of the burst;
      // the last allowed try (push_burst) drops what still does not fit.
      std::span<const TxDescriptor> rest(burst);
      for (std::size_t attempt = 0;; ++attempt) {
        const bool last = attempt >= options.txq_retries;
        const std::size_t sent = last ? queue.push_burst(rest) : queue.try_push_burst(rest);
        ++r.ops;
        if (attempt > 0) ++r.retries;
        r.items += sent;
        rest = rest.subspan(sent);
        if (rest.empty()) break;
        ++r.full;
        if (last) {
          ++r.dropped_bursts;
          break;
        }
        txq_backoff(attempt);
      }
      r.offered += burst.size();
      ++r.bursts;
    } while (!stop.load(std::memory_order_relaxed));
    sink.fetch_add(h, std::memory_order_relaxed);   // relaxed: only defeats dead-code elimination
    workers_left.fetch_sub(1, std::memory_order_release);  // release: our pushes before the consumer's last pass
  });

  TrialSample s = totals(records, workers, wall);  // the consumer's CPU too
  const auto stats = queue.stats();
  std::string why;
  if (order_errors != 0) why = fmt::format("{} descriptors duplicated or out of order", order_errors);
  for (std::size_t w = 0; w < workers && why.empty(); ++w)
    if (consumed[w] != records[w].items)
      why = fmt::format("worker {}: {} accepted but {} consumed", w, records[w].items, consumed[w]);
  if (why.empty() && (stats.accepted != s.items || stats.accepted + stats.dropped != s.offered ||
                      stats.popped != s.items || stats.size != 0 || stats.full != s.full ||
                      stats.push_bursts != s.ops))
    why = fmt::format(
        "queue counters disagree: accepted {} dropped {} popped {} queued {} full {} pushes {}; workers accepted {} of "
        "{}, {} full in {} pushes",
        stats.accepted, stats.dropped, stats.popped, stats.size, stats.full, stats.push_bursts, s.items, s.offered,
        s.full, s.ops);
  if (!why.empty()) throw std::runtime_error(fmt::format("txq under {}: {}", lock.name, why));
  s.queue = stats;
  return s;
}


}  // namespace

std::vector<std::string> delegation_structures() { return {"slab", "pool", "txq"}; }

std::vector<std::string> datapath_lab_locks() {
  return names(experiments::section_lock_set(), [](const LockEntry& e) { return e.name; });
}

DatapathLabReport run_delegation_datapath_lab(const DatapathLabOptions& options, std::ostream* progress) {
  const auto& c = options.common;
  if (options.structure != "pool" && options.structure != "txq")
    throw std::runtime_error(fmt::format("delegation lab: unknown datapath structure '{}' (pool, txq)", options.structure));
  check_common(c);
  if (options.structure == "pool" && (options.ring < 1 || options.cache_capacity < c.batch))
    throw std::runtime_error("delegation lab: pool needs ring >= 1 and cache capacity >= batch");
  if (options.structure == "txq" && (options.txq_capacity < 1 || options.consumer_burst < 1))
    throw std::runtime_error("delegation lab: txq needs a capacity and a consumer burst >= 1");
  std::vector<const LockEntry*> chosen;
  for (const auto& entry : experiments::section_lock_set())
    if (c.locks.empty() || std::find(c.locks.begin(), c.locks.end(), entry.name) != c.locks.end())
      chosen.push_back(&entry);
  for (const auto& name : c.locks) {
    const auto known = delegation_lab_locks();
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw std::runtime_error(fmt::format("delegation lab: unknown lock '{}'", name));
  }
  if (chosen.empty())
    throw std::runtime_error(fmt::format("delegation lab: none of the locks asked for runs on '{}'", options.structure));
  const auto trial = options.structure == "pool" ? &run_pool_trial : &run_txq_trial;

  DatapathLabReport report;
  report.options = options;
  report.points = run_points<DatapathPoint>(
      c.threads, names(chosen, [](const LockEntry* e) { return e->name; }), c.runs,
      [](DatapathPoint& p) -> DelegationPoint& { return p.base; },
      [&](DatapathPoint& p, std::size_t i, int thread_count, int run) {
        const TrialSample s = trial(options, thread_count, *chosen[i]);
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
