// iommu_load.h - the iommu-lock lab's load on the read-mostly guest memory table: one
// run of `readers` threads translating through a virtio::GuardedGuestMemory under one
// guard policy, with or without a writer replacing the map.
//
//  - Readers translate the datapath's way: one read() section, translate() into a
//    reused IoVector, use the result, each translation checked inside its section
//    against the map version it saw (IommuTable::check; a failure is a mismatch). Each
//    reader first does one read() before the window opens (RCU registration); then
//    every `sample_every`-th translation is timed alone into `Histogram` (record(ns),
//    merge()).
//  - The writer publishes the table's next map (IommuTable::Publisher: a new memory
//    table, or an IOTLB update's view) each time the readers together have done
//    another `reads_per_update` translations, sleeping in between for about the time
//    the readers need to get there.
#pragma once

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "uvhost/experiments/iommu_table.h"
#include "uvhost/experiments/thread_clock.h"
#include "uvhost/virtio/guarded_guest_memory.h"

namespace uvhost::experiments {

struct IommuLoad {
  int readers = 1;
  bool writer = true;
  int duration_ms = 200;
  int reads_per_update = 372;
  int sample_every = 64;
};

template <class Histogram>
struct IommuLoadCounts {
  uint64_t translations = 0;
  uint64_t mismatches = 0;  // failed checks: must be 0
  uint64_t updates = 0;
  int64_t reader_cpu_ns = 0;  // all readers
  int64_t writer_cpu_ns = 0;
  int64_t wall_ns = 0;  // the window
  Histogram histogram;  // the sampled single translations, all readers
};

namespace iommu_load_detail {

// Translations of one reader: a power of two, cycled through.
constexpr std::size_t kAccessesPerReader = 4096;

template <class Histogram>
struct alignas(64) ReaderSlot {
  // Translations so far, published every sample_every translations for the writer.
  std::atomic<uint64_t> published{0};
  alignas(64) uint64_t translations = 0;
  uint64_t mismatches = 0;
  int64_t cpu_ns = 0;
  Histogram histogram;
  std::vector<IommuTable::Access> accesses;
};

struct RunShared {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  void wait_for_go() const { go.wait(false, std::memory_order_acquire); }  // acquire: pairs with the release
};

template <class Histogram>
void reader_main(const virtio::GuardedGuestMemory& memory, const IommuTable& table, ReaderSlot<Histogram>& slot,
                 RunShared& shared, int sample_every) {
  virtio::IoVector scratch(4);
  const std::vector<IommuTable::Access>& accesses = slot.accesses;
  auto translate = [&](const IommuTable::Access& access) {
    return memory.read([&](const virtio::GuestMemoryMap& map) { return table.check(map, access, scratch); });
  };
  (void)translate(accesses[0]);  // untimed: registers this thread with liburcu (RCU)
  // release: the main thread (acquire) opens the window only after this first read.
  shared.ready.fetch_add(1, std::memory_order_release);
  shared.ready.notify_all();
  shared.wait_for_go();

  const int64_t cpu_start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  uint64_t done = 0;
  uint64_t bad = 0;
  std::size_t next = 0;
  // relaxed: a stop request only needs to be noticed eventually.
  while (!shared.stop.load(std::memory_order_relaxed)) {
    // One timed translation, then sample_every - 1 untimed ones.
    const int64_t t0 = clock_ns(CLOCK_MONOTONIC);
    bad += translate(accesses[next++ & (kAccessesPerReader - 1)]) ? 0u : 1u;
    slot.histogram.record(static_cast<uint64_t>(clock_ns(CLOCK_MONOTONIC) - t0));
    for (int k = 1; k < sample_every; ++k) {
      bad += translate(accesses[next++ & (kAccessesPerReader - 1)]) ? 0u : 1u;
    }
    done += static_cast<uint64_t>(sample_every);
    // relaxed: a progress count for the writer's pacing; it orders nothing.
    slot.published.store(done, std::memory_order_relaxed);
  }
  slot.cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
  slot.translations = done;
  slot.mismatches = bad;
}

template <class Slots, class Counts>
void writer_main(virtio::GuardedGuestMemory& memory, IommuTable::Publisher& publisher, const Slots& slots,
                 RunShared& shared, int reads_per_update, Counts& out) {
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);  // 1 us (default 50 us): the paced sleeps end on time
  shared.wait_for_go();
  const int64_t cpu_start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  const int64_t t0 = clock_ns(CLOCK_MONOTONIC);
  uint64_t updates = 0;
  while (!shared.stop.load(std::memory_order_relaxed)) {  // relaxed: see reader_main()
    uint64_t total = 0;
    // relaxed: progress counts only (see reader_main()).
    for (const auto& slot : slots) total += slot->published.load(std::memory_order_relaxed);
    const uint64_t target = (updates + 1) * static_cast<uint64_t>(reads_per_update);
    if (total >= target) {
      memory.replace(publisher.next());  // SET_MEM_TABLE or IOTLB_MSG: a new map, the old one retired
      ++updates;
      continue;
    }
    // Sleep for the readers' expected time to reach the target, 2 us .. 1 ms.
    const int64_t elapsed = std::max<int64_t>(clock_ns(CLOCK_MONOTONIC) - t0, 1);
    const double rate = static_cast<double>(total) / static_cast<double>(elapsed);  // per ns
    const double wait = rate > 0 ? static_cast<double>(target - total) / rate : 1e6;
    const auto ns = static_cast<int64_t>(std::clamp(wait, 2e3, 1e6));
    timespec ts{0, static_cast<long>(ns)};
    nanosleep(&ts, nullptr);
  }
  out.updates = updates;
  out.writer_cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
}

}  // namespace iommu_load_detail

// Each run uses a fresh GuardedGuestMemory (version 0) and fresh threads.
template <class Histogram>
IommuLoadCounts<Histogram> run_iommu_load(const IommuTable& table, sync::GuardPolicy policy, const IommuLoad& load) {
  using namespace iommu_load_detail;
  IommuTable::Publisher publisher = table.publisher();
  virtio::GuardedGuestMemory memory(policy, publisher.initial());
  RunShared shared;
  std::vector<std::unique_ptr<ReaderSlot<Histogram>>> slots;
  slots.reserve(static_cast<std::size_t>(load.readers));
  for (int i = 0; i < load.readers; ++i) {
    auto slot = std::make_unique<ReaderSlot<Histogram>>();
    slot->accesses = table.make_accesses(kAccessesPerReader, uint64_t{0x5eed0002} * 1000 + static_cast<uint64_t>(i));
    slots.push_back(std::move(slot));
  }
  std::vector<std::thread> readers;
  readers.reserve(slots.size());
  for (auto& slot : slots)
    readers.emplace_back([&, s = slot.get()] { reader_main(memory, table, *s, shared, load.sample_every); });
  // Every reader has done its untimed first read before the window opens.
  for (int r = shared.ready.load(std::memory_order_acquire); r < load.readers;
       r = shared.ready.load(std::memory_order_acquire)) {
    shared.ready.wait(r, std::memory_order_acquire);  // acquire: pairs with the readers' release
  }
  IommuLoadCounts<Histogram> out;
  std::thread writer;
  if (load.writer)
    writer = std::thread([&] { writer_main(memory, publisher, slots, shared, load.reads_per_update, out); });

  const int64_t t0 = clock_ns(CLOCK_MONOTONIC);
  shared.go.store(true, std::memory_order_release);  // release: the readers' accesses are built
  shared.go.notify_all();
  std::this_thread::sleep_for(std::chrono::milliseconds(load.duration_ms));
  shared.stop.store(true, std::memory_order_relaxed);  // relaxed: join() below orders the results
  out.wall_ns = clock_ns(CLOCK_MONOTONIC) - t0;
  for (auto& t : readers) t.join();
  if (writer.joinable()) writer.join();
  for (const auto& slot : slots) {
    out.translations += slot->translations;
    out.mismatches += slot->mismatches;
    out.reader_cpu_ns += slot->cpu_ns;
    out.histogram.merge(slot->histogram);
  }
  return out;
}

}  // namespace uvhost::experiments
