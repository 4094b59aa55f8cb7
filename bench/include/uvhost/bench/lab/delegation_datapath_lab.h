// delegation_datapath_lab.h - seed 004's experiment on the datapath structures where
// a delegation lock applies (`uvhost lab delegation --structure pool|txq`).
//
// The sync-level lab (delegation_lab.h, structure "slab") times bare SLAB-style
// refill/flush sections. This one puts each lab lock inside the real datapath
// structures and times them under the same protocol (threads sweep, `runs` runs of
// `duration_ms`, locks interleaved in a rotating order, mean and 95% CI, ratio to
// std::mutex with its verdict, fairness, CPU per critical section, invariants checked
// after each run):
//
//  - "pool": experiments::PacketPool (2 KiB buffers, per-thread caches of
//    `cache_capacity`, refilled / flushed `batch` at a time under the lock). Each
//    thread models a queue that posts `ring` receive buffers and then completes them:
//    it gets `ring` buffers (stamping each with its owner), then checks each stamp and
//    puts them all back. With ring > cache_capacity its cache refills and flushes about
//    (ring - cache_capacity) / batch times per cycle, as a worker's does when the
//    buffers it allocates are freed elsewhere. An op is one refill or flush section.
//    After each run: every buffer back on the shared list exactly once, and no stamp
//    overwritten while its owner held the buffer (no buffer handed out twice).
//  - "txq": experiments::SharedTxQueue (`txq_capacity` descriptors) shared by all the
//    `threads` workers (more workers than queues: one queue), plus one consumer thread
//    draining it in bursts of up to `consumer_burst` (each pop a section under the same
//    lock: the consumer contends with the workers), popping again at once while its
//    pops come back full. Each worker builds a burst of `batch` descriptors (worker id
//    + sequence number) and pushes it in one section. A worker that finds the queue
//    full keeps the rest of its burst, backs off (spin, then yield, then sleep, growing
//    each time) and retries it, as a TX path under backpressure does; only after
//    `txq_retries` retries is what still does not fit dropped (txq_retries = 0: a full
//    queue drops at once, the lab's first design, where 96-100% of bursts at 2-16
//    workers found it full and ops/s timed the drop path). An op is one worker's push
//    section, first try or retry (both take the lock); the consumer's CPU counts in
//    CPU ns/CS. The throughput is accepted descriptors per second (pkts/s), with its
//    own ratio to std::mutex; the saturation figures are reported beside it: dropped
//    descriptors, push sections that found the queue full, retries per burst, bursts
//    that lost descriptors. After each run: every accepted descriptor popped exactly
//    once, each worker's in order, accepted + dropped == offered (per worker and in
//    the queue's counters).
//
// Every thread completes at least one cycle (pool) or burst (txq), even one first
// scheduled after the stop signal on a loaded machine, so every thread has figures.
//
// The asynchronous variant ("delegation-async") belongs to the slab structure: the
// pool and the queue take their lock through experiments::SectionLock, which runs
// sections synchronously, so that lock is skipped here.
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
