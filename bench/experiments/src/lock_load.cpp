// lock_load.cpp - see lock_load.h.
#include "uvhost/experiments/lock_load.h"

#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "uvhost/backends/switch_mac_table.h"
#include "uvhost/experiments/packet_pool.h"
#include "uvhost/experiments/thread_clock.h"
#include "uvhost/sync/cpu_relax.h"

namespace uvhost::experiments {
namespace {

// What a thread counts; padded so threads never share a cache line.
struct alignas(64) ThreadRecord {
  uint64_t ops = 0, items = 0, offered = 0, bursts = 0, full = 0, retries = 0, dropped_bursts = 0;
  uint64_t conflicts = 0;  // pool: stamps found overwritten
  std::array<uint64_t, backends::kLearnResultCount> learn_results{};  // learning: per LearnResult
};

// run_threads_for() with one ThreadRecord per thread; the totals of the first `workers`
// records and the CPU of all threads.
template <class Body>
LoadCounts run_recorded(std::size_t count, std::size_t workers, int duration_ms, std::vector<ThreadRecord>& records,
                        Body body) {
  records.assign(count, ThreadRecord{});
  std::atomic<bool> stop{false};
  std::vector<int64_t> cpu_ns;
  LoadCounts s;
  s.wall_ns = run_threads_for(count, duration_ms, stop, cpu_ns, [&](std::size_t i) { body(i, records[i], stop); });
  for (std::size_t i = 0; i < count; ++i) {
    const ThreadRecord& r = records[i];
    s.cpu_ns += cpu_ns[i];
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
void txq_backoff(std::size_t k) {
  if (k < 3) {
    for (std::size_t i = 0, n = std::size_t{64} << k; i < n; ++i) sync::cpu_relax();
  } else if (k < 5) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(std::min<std::size_t>(std::size_t{16} << (k - 5), 1000)));
  }
}

uint64_t stamp_of(std::size_t thread, uint64_t cycle) { return (uint64_t(thread) << 40) ^ cycle; }

}  // namespace

int64_t run_threads_for(std::size_t count, int duration_ms, std::atomic<bool>& stop, std::vector<int64_t>& cpu_ns,
                        const std::function<void(std::size_t index)>& body) {
  cpu_ns.assign(count, 0);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      go.wait(false, std::memory_order_acquire);  // acquire: see the structure fully built
      const int64_t cpu_start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
      body(i);
      cpu_ns[i] = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
    });
  }
  const int64_t start = clock_ns(CLOCK_MONOTONIC);
  go.store(true, std::memory_order_release);
  go.notify_all();
  std::this_thread::sleep_for(std::chrono::milliseconds(duration_ms));
  stop.store(true, std::memory_order_relaxed);  // relaxed: a hint to finish; join() orders the results
  for (auto& t : threads) t.join();
  return clock_ns(CLOCK_MONOTONIC) - start;
}

LoadCounts run_pool_load(const PoolLoad& load, const NamedSectionLock& lock) {
  const auto threads = static_cast<std::size_t>(load.threads);
  PacketPoolOptions po;
  po.buffer_size = load.buffer_size;
  po.cache_capacity = load.cache_capacity;
  po.batch = load.batch;
  // Room for every thread's ring and a full cache: a get never finds the pool empty
  // unless buffers were lost (which the invariant check would then report).
  po.buffers = threads * (load.ring + load.cache_capacity + load.batch);
  PacketPool pool(po, lock.make());
  std::atomic<uint64_t> sink{0};
  std::vector<ThreadRecord> records;
  const LoadCounts s = run_recorded(threads, threads, load.duration_ms, records,
                                    [&](std::size_t index, ThreadRecord& r, const std::atomic<bool>& stop) {
    PacketPool::Cache cache(pool);
    std::vector<BufferId> ring;
    ring.reserve(load.ring);
    uint64_t h = 0;
    uint64_t cycle = 0;
    do {  // relaxed: see run_threads_for()
      const uint64_t stamp = stamp_of(index, cycle);
      // Post the ring: get buffers, write the owner stamp into each (the header a
      // receive path would write).
      for (std::size_t i = 0; i < load.ring; ++i) {
        const BufferId id = cache.get();
        if (id == kNoBuffer) break;
        std::memcpy(pool.data(id).data(), &stamp, sizeof stamp);
        ring.push_back(id);
        if ((i + 1) % load.batch == 0) h += private_work({}, load.private_work, h + i);
      }
      // Complete it: the stamp must be ours still, then the buffer goes back.
      for (std::size_t i = 0; i < ring.size(); ++i) {
        uint64_t seen;
        std::memcpy(&seen, pool.data(ring[i]).data(), sizeof seen);
        if (seen != stamp) ++r.conflicts;
        cache.put(ring[i]);
        if ((i + 1) % load.batch == 0) h += private_work({}, load.private_work, h + i);
      }
      r.items += ring.size();
      ring.clear();
      ++cycle;
    } while (!stop.load(std::memory_order_relaxed));
    cache.drain();  // inside the window: the last flushes are sections too
    r.ops = cache.stats().refills + cache.stats().flushes;
    sink.fetch_add(h, std::memory_order_relaxed);  // relaxed: only defeats dead-code elimination
  });

  uint64_t conflicts = 0;
  for (const auto& r : records) conflicts += r.conflicts;
  std::string why;
  if (conflicts != 0)
    throw std::runtime_error(fmt::format("pool under {}: {} buffers were handed to two threads at once", lock.name,
                                         conflicts));
  if (!pool.check_invariants({}, why)) throw std::runtime_error(fmt::format("pool under {}: {}", lock.name, why));
  return s;
}

LoadCounts run_txq_load(const TxqLoad& load, const NamedSectionLock& lock) {
  const auto workers = static_cast<std::size_t>(load.threads);
  SharedTxQueue queue(load.txq_capacity, lock.make());
  std::atomic<std::size_t> workers_left{workers};
  std::atomic<uint64_t> sink{0};
  TxqDrained drained;
  std::vector<ThreadRecord> records;

  // Thread `workers` is the consumer; the others are workers.
  LoadCounts s = run_recorded(workers + 1, workers, load.duration_ms, records,
                              [&](std::size_t index, ThreadRecord& r, const std::atomic<bool>& stop) {
    if (index == workers) {
      drained = drain_in_order(queue, workers, load.consumer_burst, workers_left);
      return;
    }
    std::vector<TxDescriptor> burst(load.batch);
    uint32_t seq = 0;
    uint64_t h = 0;
    do {  // at least one burst; relaxed: see run_threads_for()
      for (auto& d : burst) {
        d.buffer = seq;
        d.length = 64;
        d.cookie = (uint64_t(index) << 32) | seq;
        ++seq;
      }
      h += private_work({}, load.private_work, h + seq);
      // Push, and while the queue is full back off and retry the rest of the burst;
      // the last allowed try (push_burst) drops what still does not fit.
      std::span<const TxDescriptor> rest(burst);
      for (std::size_t attempt = 0;; ++attempt) {
        const bool last = attempt >= load.txq_retries;
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
    sink.fetch_add(h, std::memory_order_relaxed);          // relaxed: only defeats dead-code elimination
    workers_left.fetch_sub(1, std::memory_order_release);  // release: our pushes before the consumer's last pass
  });

  const auto stats = queue.stats();
  std::string why;
  if (drained.order_errors != 0)
    why = fmt::format("{} descriptors duplicated or out of order", drained.order_errors);
  for (std::size_t w = 0; w < workers && why.empty(); ++w)
    if (drained.per_worker[w] != records[w].items)
      why = fmt::format("worker {}: {} accepted but {} consumed", w, records[w].items, drained.per_worker[w]);
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

LoadCounts run_learning_load(const LearningLoad& load, const NamedSectionLock& lock) {
  using backends::LearnResult;
  const auto threads = static_cast<std::size_t>(load.threads);
  if (load.flapping_macs == 0) throw std::runtime_error("learning: needs at least one flapping MAC");
  backends::MacTable table({}, lock.make());
  std::vector<backends::MacAddress> macs(load.flapping_macs);
  for (std::size_t i = 0; i < macs.size(); ++i)
    macs[i] = {0x52, 0x54, 0x00, 0x00, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i)};
  std::atomic<uint64_t> sink{0};
  std::vector<ThreadRecord> records;
  const LoadCounts s = run_recorded(threads, threads, load.duration_ms, records,
                                    [&](std::size_t index, ThreadRecord& r, const std::atomic<bool>& stop) {
    const auto port = static_cast<backends::PortId>(index);
    std::size_t next = index;  // threads start on different MACs
    uint64_t h = 0;
    do {  // relaxed: see run_threads_for()
      const backends::SwitchTime now = backends::SwitchClock::now();  // once per burst, as the switch does
      for (std::size_t i = 0; i < load.batch; ++i) {
        const LearnResult result = table.learn(macs[next % macs.size()], port, now);
        ++r.learn_results[static_cast<std::size_t>(result)];
        const std::optional<backends::PortId> to = table.lookup(macs[(next + 1) % macs.size()], now);
        h += to.value_or(backends::kNoPort);
        ++next;
      }
      r.ops += load.batch;
      h += private_work({}, load.private_work, h + next);
    } while (!stop.load(std::memory_order_relaxed));
    for (const LearnResult wrote : {LearnResult::kMoved, LearnResult::kLearned, LearnResult::kRefreshed})
      r.items += r.learn_results[static_cast<std::size_t>(wrote)];
    sink.fetch_add(h, std::memory_order_relaxed);  // relaxed: only defeats dead-code elimination
  });

  const auto total = [&](LearnResult result) {
    uint64_t n = 0;
    for (const auto& r : records) n += r.learn_results[static_cast<std::size_t>(result)];
    return n;
  };
  const backends::MacTableStats stats = table.stats();
  std::string why;
  if (stats.moved != total(LearnResult::kMoved) || stats.learned != total(LearnResult::kLearned))
    why = fmt::format("the table counted {} moves and {} new entries, the ports {} and {}", stats.moved,
                      stats.learned, total(LearnResult::kMoved), total(LearnResult::kLearned));
  for (const backends::MacAddress& mac : macs) {
    const std::optional<backends::PortId> bound = table.lookup(mac, backends::SwitchClock::now());
    if (why.empty() && (!bound || *bound >= threads))
      why = fmt::format("{} is bound to no port of the run", backends::to_string(mac));
  }
  if (!why.empty()) throw std::runtime_error(fmt::format("learning under {}: {}", lock.name, why));
  return s;
}

}  // namespace uvhost::experiments
