// delegation_datapath_lab.h - the delegation lab (delegation_lab.h) inside the packet
// structures where a delegation lock applies (`uvhost lab delegation --structure
// pool|txq`), under the same protocol and figures; the loads are experiments/lock_load.h's
// run_pool_load() and run_txq_load().
//  - "pool": an op is one refill or flush section of a thread's PacketPool cache; items
//    are buffers got.
//  - "txq": an op is one push section, try or retry; the consumer's CPU counts in CPU
//    ns/CS. The throughput is accepted descriptors/s (pkts/s) with its own ratio to
//    std::mutex, beside the saturation figures (dropped, pushes that found the queue
//    full, retries per burst, bursts that lost descriptors).
// "delegation-async" is skipped: the structures take their lock through
// experiments::SectionLock, which is synchronous.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "uvhost/bench/lab/delegation_lab.h"
#include "uvhost/bench/stats.h"

namespace uvhost::bench::lab {

struct DatapathLabOptions {
  std::string structure = "pool";  // "pool" or "txq"
  // threads, locks, runs, duration_ms, batch and private_work as in the slab lab
  // (private_work: iterations per `batch` buffers or per burst).
  DelegationLabOptions common;
  std::size_t ring = 256;            // pool: buffers a thread holds per cycle
  std::size_t cache_capacity = 64;   // pool: buffers per thread cache
  std::size_t buffer_size = 2048;    // pool: bytes per buffer
  std::size_t txq_capacity = 1024;   // txq: descriptors the queue holds
  std::size_t consumer_burst = 256;  // txq: most descriptors per pop
  std::size_t txq_retries = 8;       // txq: retries of a burst that found the queue full before a drop
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

struct DatapathPoint {
  DelegationPoint base;  // lock, threads, ops/s, ns/CS, CPU ns/CS, cores, fairness, vs std::mutex
  std::vector<double> items_per_s;  // pool: buffers got per s; txq: descriptors accepted per s
  std::vector<double> drop_ratio;   // txq: dropped / offered (pool: 0)
  // txq only (pool: 0): push sections that found the queue full / push sections;
  // retry sections / bursts; bursts that lost at least one descriptor / bursts.
  std::vector<double> full_ratio, retries_per_burst, burst_drop_ratio;
  Summary items_per_s_summary, drop_ratio_summary;
  Summary full_ratio_summary, retries_per_burst_summary, burst_drop_ratio_summary;
  BaselineRatio items_vs_mutex;  // items_per_s vs std::mutex's at the same thread count
  std::vector<TxqRunCounts> txq_counts;  // txq: one per run
};

struct DatapathLabReport {
  DatapathLabOptions options;
  std::vector<DatapathPoint> points;
};

// The structures `uvhost lab delegation` knows, "slab" (delegation_lab.h) first.
std::vector<std::string> delegation_structures();
// The locks this lab runs (the slab lab's, less the asynchronous variant).
std::vector<std::string> datapath_lab_locks();

// Runs the experiment for options.structure. Throws std::runtime_error on an unknown
// structure or lock, bad options, or a run that broke the structure's invariants.
DatapathLabReport run_delegation_datapath_lab(const DatapathLabOptions& options, std::ostream* progress);

void print_datapath_table(const DatapathLabReport& report, std::ostream& out);
nlohmann::json to_json(const DatapathLabReport& report);
// As delegation_charts(), panels named by the structure.
std::vector<BarChart> datapath_charts(const DatapathLabReport& report);

}  // namespace uvhost::bench::lab
