// delegation_lab.h - a delegation lock (the holder runs the waiters' critical
// sections, flat-combining / ffwd style) against spinlocks and mutexes, in four
// structures driven by experiments/lock_load.h's loads:
//  - slab: SLAB's refill/flush critical sections (run_slab_load); an op is one section;
//  - pool: a PacketPool's per-thread caches (run_pool_load); an op is one refill or
//    flush section; items are buffers got;
//  - txq: one SharedTxQueue (run_txq_load); an op is one push section, try or retry,
//    and the consumer's CPU counts in CPU ns/CS; items are accepted descriptors
//    (pkts/s, the throughput) with their own ratio to std::mutex, beside the saturation
//    figures (dropped, pushes that found the queue full, retries per burst, bursts that
//    lost descriptors);
//  - learning: the switch's MAC table with the lock as its writers' lock, under a
//    MAC-flapping load (run_learning_load); an op is one learn() of a frame's source
//    MAC; items are the learns that wrote (writes/s).
// "delegation-async" runs on slab only: the others take their lock through
// sync::SectionLock, which is synchronous.
//
// A lab on the engine (lab_engine.h): per thread count, a cell per lock, `runs` runs of
// `duration_ms` each with the locks' order rotated every run. Per cell, mean and 95% CI
// over the runs of:
//  - ops/s: critical sections per second, all threads, until the last thread has
//    finished its last operation after the stop signal (draining a queued lock counts);
//  - ns/CS: wall time per critical section; CPU ns/CS: CPU of all threads per section;
//  - cores: CPU used during the run; fairness: the slowest thread's ops / the mean's;
//  - vs std::mutex: the ops/s ratio to std::mutex's at the same thread count, with its
//    CI and verdict (lab_summary.h); invalid when std::mutex was not run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/base/name_table.h"
#include "uvhost/bench/gnuplot.h"
#include "uvhost/bench/lab/lab_engine.h"
#include "uvhost/bench/lab/lab_summary.h"
#include "uvhost/bench/stats.h"

namespace uvhost::bench::lab {

using base::to_string;

enum class LockStructure { kSlab, kPool, kTxq, kLearning };
inline constexpr auto kLockStructureNames = base::name_table<LockStructure>({{LockStructure::kSlab, "slab"},
                                                                             {LockStructure::kPool, "pool"},
                                                                             {LockStructure::kTxq, "txq"},
                                                                             {LockStructure::kLearning, "learning"}});
constexpr const auto& enum_names(LockStructure) noexcept { return kLockStructureNames; }

struct DelegationLabConfig {
  LockStructure structure = LockStructure::kSlab;
  std::vector<int> threads{2, 4, 16, 64};
  std::vector<std::string> locks;  // empty: every lock the structure runs
  int runs = 5;
  int duration_ms = 200;
  std::size_t batch = 16;  // slab: objects per refill/flush (SLAB's batchcount); txq, learning: per burst
  std::size_t private_work = 64;      // loop iterations between sections (pool: per batch; txq: per burst)
  std::size_t pool_objects = 1 << 16;  // slab
  std::size_t objects_per_slab = 32;   // slab
  std::size_t ring = 256;              // pool: buffers a thread holds per cycle
  std::size_t cache_capacity = 64;     // pool: buffers per thread cache
  std::size_t buffer_size = 2048;      // pool: bytes per buffer
  std::size_t txq_capacity = 1024;     // txq: descriptors the queue holds
  std::size_t consumer_burst = 256;    // txq: most descriptors per pop
  std::size_t txq_retries = 8;         // txq: retries of a burst that found the queue full before a drop
  std::size_t flapping_macs = 8;       // learning: source MACs every port sends from
};

// One txq run's raw counts (the queue's own counters where it keeps them).
struct TxqRunCounts {
  uint64_t offered = 0;         // descriptors the workers built (each counted once)
  uint64_t accepted = 0;        // queue: accepted
  uint64_t dropped = 0;         // queue: dropped (after the last retry)
  uint64_t pushes = 0;          // queue: push sections, tries and retries
  uint64_t full = 0;            // queue: push sections that found it full
  uint64_t bursts = 0;          // bursts the workers built
  uint64_t dropped_bursts = 0;  // bursts that lost at least one descriptor
};

// One run of one lock at one thread count.
struct DelegationSample {
  double ops_per_s = 0, ns_per_cs = 0, cpu_ns_per_cs = 0, cores = 0, fairness = 0;
  double items_per_s = 0;  // pool: buffers got per s; txq: descriptors accepted per s; learning: writes per s
  // txq (0 elsewhere): dropped / offered; push sections that found the queue full / push
  // sections; retry sections / bursts; bursts that lost a descriptor / bursts.
  double drop_ratio = 0, full_ratio = 0, retries_per_burst = 0, burst_drop_ratio = 0;
  TxqRunCounts counts;  // txq
};

struct DelegationCell : LabCell<DelegationSample> {
  LockStructure structure = LockStructure::kSlab;
  int threads = 0;
  std::string lock;
  Summary ops_per_s, ns_per_cs, cpu_ns_per_cs, cores, fairness, items_per_s, drop_ratio, full_ratio,
      retries_per_burst, burst_drop_ratio;
  BaselineRatio vs_mutex;        // ops/s against std::mutex's at the same thread count
  BaselineRatio items_vs_mutex;  // items/s the same way
  auto key() const noexcept { return std::tie(structure, threads, lock); }
  auto key() noexcept { return std::tie(structure, threads, lock); }
};

// Cells thread-count-major, then lock (config order); find(structure, threads, lock).
using DelegationLabResult = LabResult<DelegationLabConfig, DelegationCell>;

// Names of the locks `structure` runs, in table order ("std::mutex" first).
std::vector<std::string> delegation_lab_locks(LockStructure structure = LockStructure::kSlab);

// Runs the lab on config.structure; `progress` gets one line per finished run. Throws
// std::runtime_error for an unknown lock, none that runs on the structure, a count
// below 1 (runs, duration, batch, a thread count), a pool ring of 0 or a cache smaller
// than the batch, a txq without capacity or consumer burst, or a run that broke the
// structure's invariants.
DelegationLabResult run_delegation_lab(const DelegationLabConfig& config, const LabProgress& progress);

// Every cell's vs_mutex and items_vs_mutex from its summaries.
void set_vs_mutex(DelegationLabResult& result);

// What the structure is, then a row per cell (a separator between thread counts):
// threads | lock | ops/s | ns/CS | CPU ns/CS | cores | fairness | vs std::mutex |
// verdict, then buffers/s (pool), writes/s (learning), or pkts/s | dropped | full | retries/burst | pkts/s vs
// std::mutex (txq).
void print_delegation_table(const DelegationLabResult& result, std::ostream& out);
// {"experiment", "seed", "structure", "options", "points": [the structure's figures,
// "vs_mutex", "samples"]}.
nlohmann::json delegation_lab_json(const DelegationLabResult& result);
// ops/s and CPU ns per critical section, a group per thread count, a bar per lock.
std::vector<BarChart> delegation_charts(const DelegationLabResult& result);

}  // namespace uvhost::bench::lab
