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
//  - "pool": datapath::PacketPool (2 KiB buffers, per-thread caches of
//    `cache_capacity`, refilled / flushed `batch` at a time under the lock). Each
//    thread models a queue that posts `ring` receive buffers and then completes them:
//    it gets `ring` buffers (stamping each with its owner), then checks each stamp and
//    puts them all back. With ring > cache_capacity its cache refills and flushes about
//    (ring - cache_capacity) / batch times per cycle, as a worker's does when the
//    buffers it allocates are freed elsewhere. An op is one refill or flush section.
//    After each run: every buffer back on the shared list exactly once, and no stamp
//    overwritten while its owner held the buffer (no buffer handed out twice).
//  - "txq": datapath::SharedTxQueue (`txq_capacity` descriptors) shared by all the
//    `threads` workers (more workers than queues: one queue), plus one consumer thread
//    draining it `consumer_burst` at a time. Each worker builds a burst of `batch`
//    descriptors (worker id + sequence number) and pushes it in one section; a full
//    queue drops. An op is one worker's push section; the consumer's CPU counts in
//    CPU ns/CS. After each run: every accepted descriptor popped exactly once, each
//    worker's in order, accepted + dropped == offered.
//
// Every thread completes at least one cycle (pool) or burst (txq), even one first
// scheduled after the stop signal on a loaded machine, so every thread has figures.
//
// The asynchronous variant ("delegation-async") belongs to the slab structure: the
// pool and the queue take their lock through datapath::SectionLock, which runs
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
  std::size_t consumer_burst = 64;   // txq: descriptors per pop
};

struct DatapathPoint {
  DelegationPoint base;  // lock, threads, ops/s, ns/CS, CPU ns/CS, cores, fairness, vs std::mutex
  std::vector<double> items_per_s;  // pool: buffers got per s; txq: descriptors accepted per s
  std::vector<double> drop_ratio;   // txq: dropped / offered (pool: 0)
  Summary items_per_s_summary, drop_ratio_summary;
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
