// lock_load.h - the delegation lab's load generators: threads driving one shared
// structure (slab_pool.h, packet_pool.h, shared_tx_queue.h) under one lock for a timed
// window, then the structure's invariants checked.
//
//  - run_threads_for(): `count` threads started together, told to stop after the
//    window, timed until the last one has finished (finishing an operation queued
//    behind a lock after the stop is part of its cost); each thread's CPU time.
//  - private_work(): the work between critical sections.
//  - run_slab_load<Runner>(): each thread alternates a refill and a flush of `batch`
//    objects on a SharedPool (SLAB's sections) with private work between; an op is one
//    section.
//  - run_pool_load(): each thread gets `ring` buffers from a PacketPool through its own
//    cache, stamps each with its owner, checks the stamps and puts them back; an op is
//    one refill or flush section.
//  - run_txq_load(): workers push bursts of `batch` descriptors into one SharedTxQueue,
//    backing off and retrying the rest of a burst that found it full up to `txq_retries`
//    times before dropping it; one consumer pops bursts under the same lock and checks
//    every worker's descriptors arrive once and in order. An op is one push section.
//  - run_learning_load(): the switch's MAC table (backends/switch_mac_table.h) with the
//    lock as its writers' lock, under a MAC-flapping load: every thread is a port and
//    sends bursts of `batch` frames whose source addresses cycle through the same
//    `flapping_macs` MACs, so nearly every learn() moves a MAC to its port (a write
//    under the lock); each frame also looks up a destination, as forwarding does. An op
//    is one learn(); items are the learns that wrote. The table's own counters must
//    match the threads' count of moves and new entries, and every MAC be bound to one
//    of the ports at the end.
// Every thread completes at least one cycle or burst, even one first scheduled after
// the stop, so every thread has figures. A broken invariant throws std::runtime_error.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "uvhost/experiments/lock_runners.h"
#include "uvhost/experiments/shared_tx_queue.h"
#include "uvhost/experiments/slab_pool.h"

namespace uvhost::experiments {

// Returns the wall time in ns; cpu_ns[index] is each thread's CPU time.
int64_t run_threads_for(std::size_t count, int duration_ms, std::atomic<bool>& stop, std::vector<int64_t>& cpu_ns,
                        const std::function<void(std::size_t index)>& body);

// Mixing the compiler cannot drop; with `objects`, touching the objects the thread
// holds, as a caller of kmem_cache_alloc would, so their cache lines move to this core.
inline uint64_t private_work(std::span<const uint32_t> objects, std::size_t iterations, uint64_t seed) {
  uint64_t h = seed;
  for (std::size_t i = 0; i < iterations; ++i) {
    h ^= objects.empty() ? i : objects[i % objects.size()];
    h *= 0x100000001b3ULL;  // FNV-style mixing
  }
  return h;
}

struct LoadShape {
  int threads = 2;
  int duration_ms = 200;
  std::size_t batch = 16;         // objects per refill/flush, descriptors per burst
  std::size_t private_work = 64;  // iterations between sections (pool, txq: per batch)
};

struct SlabLoad : LoadShape {
  std::size_t pool_objects = 1 << 16;
  std::size_t objects_per_slab = 32;
};

struct PoolLoad : LoadShape {
  std::size_t ring = 256;           // buffers a thread holds per cycle
  std::size_t cache_capacity = 64;  // buffers per thread cache
  std::size_t buffer_size = 2048;
};

struct TxqLoad : LoadShape {
  std::size_t txq_capacity = 1024;
  std::size_t consumer_burst = 256;
  std::size_t txq_retries = 8;
};

struct LearningLoad : LoadShape {
  std::size_t flapping_macs = 8;  // source MACs every port sends from
};

// One run's totals over the workers (cpu_ns: every thread's, the txq consumer's too).
struct LoadCounts {
  uint64_t ops = 0;             // critical sections
  uint64_t min_ops = UINT64_MAX;  // the slowest worker's
  uint64_t items = 0;           // pool: buffers got; txq: descriptors accepted; learning: writes
  uint64_t offered = 0;         // txq: descriptors offered
  uint64_t bursts = 0;          // txq: bursts built (each offered once, retried or not)
  uint64_t full = 0;            // txq: push sections that found the queue full
  uint64_t retries = 0;         // txq: push sections that retried part of a burst
  uint64_t dropped_bursts = 0;  // txq: bursts that lost at least one descriptor
  SharedTxQueueStats queue;     // txq: the queue's counters after the run
  int64_t cpu_ns = 0;
  int64_t wall_ns = 0;
};

LoadCounts run_pool_load(const PoolLoad& load, const NamedSectionLock& lock);
LoadCounts run_txq_load(const TxqLoad& load, const NamedSectionLock& lock);
LoadCounts run_learning_load(const LearningLoad& load, const NamedSectionLock& lock);

template <class Runner>
LoadCounts run_slab_load(const SlabLoad& load) {
  // What each thread records; padded so threads never share a cache line.
  struct alignas(64) ThreadRecord {
    uint64_t ops = 0;
    std::vector<uint32_t> cache;     // the thread's array cache, left for the invariant check
    std::vector<uint32_t> outgoing;  // delegation-async: the batch of the flush in flight
  };
  SharedPool pool(load.pool_objects, load.objects_per_slab);
  Runner runner;
  std::vector<ThreadRecord> records(static_cast<std::size_t>(load.threads));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sink{0};
  std::vector<int64_t> cpu_ns;
  const int64_t wall = run_threads_for(records.size(), load.duration_ms, stop, cpu_ns, [&](std::size_t index) {
    ThreadRecord& record = records[index];
    record.cache.reserve(load.batch * 2);
    uint64_t ops = 0;
    uint64_t h = 0;
    [[maybe_unused]] sync::Completion<void> in_flight;
    do {  // relaxed: `stop` is only a hint to finish; results are read after the join
      runner.run([&] { pool.refill(record.cache, load.batch); });
      h += private_work(record.cache, load.private_work, ops);
      if constexpr (Runner::kAsyncFlush) {
        // Hand the batch to the lock and keep working; the previous flush must have run
        // before its buffer is reused (one flush in flight per thread).
        if (in_flight.valid()) in_flight.get();
        const std::size_t n = std::min(load.batch, record.cache.size());
        record.outgoing.assign(record.cache.end() - static_cast<std::ptrdiff_t>(n), record.cache.end());
        record.cache.resize(record.cache.size() - n);
        in_flight = runner.lock.submit([&pool, &record, n] { pool.flush(record.outgoing, n); });
      } else {
        runner.run([&] { pool.flush(record.cache, load.batch); });
      }
      h += private_work(record.cache, load.private_work, ops + 1);
      ops += 2;
    } while (!stop.load(std::memory_order_relaxed));
    if constexpr (Runner::kAsyncFlush) {
      if (in_flight.valid()) in_flight.get();
    }
    record.ops = ops;
    sink.fetch_add(h, std::memory_order_relaxed);
  });

  std::vector<uint32_t> held;
  LoadCounts counts;
  counts.wall_ns = wall;
  for (std::size_t i = 0; i < records.size(); ++i) {
    held.insert(held.end(), records[i].cache.begin(), records[i].cache.end());
    held.insert(held.end(), records[i].outgoing.begin(), records[i].outgoing.end());
    counts.ops += records[i].ops;
    counts.min_ops = std::min(counts.min_ops, records[i].ops);
    counts.cpu_ns += cpu_ns[i];
  }
  std::string why;
  if (!pool.check_invariants(held, why))
    throw std::runtime_error(fmt::format("lock {} broke mutual exclusion: {}", Runner::kName, why));
  return counts;
}

}  // namespace uvhost::experiments
