// packet_pool.h - fixed-size packet buffers shared by workers, with per-thread caches
// refilled and flushed in batches under one lock (DPDK's mempool cache, SLAB's
// array_cache; the critical sections a delegation lock is meant for).
//
// CONTRACT
//
//   PacketPool pool({.buffers = 8192}, sync::make_section_lock<sync::DelegationLock>());
//   PacketPool::Cache cache(pool);            // one per thread
//   BufferId id = cache.get();                // kNoBuffer when the pool is empty
//   std::span<std::byte> bytes = pool.data(id);
//   ...
//   cache.put(id);
//
//  - Buffers: options.buffers buffers of options.buffer_size bytes (a multiple of 64,
//    so no two buffers share a cache line), carved from ONE allocation that is touched
//    at construction (no page fault later on the datapath). A buffer is named by its
//    BufferId (0 .. buffers-1); data(id) is its memory.
//  - Ownership: a buffer is in exactly one place at a time: the shared free list, one
//    cache, or the hands of the thread that got it. get() hands a buffer to exactly
//    one caller until it is put() back; buffers are never created or lost.
//    check_invariants() verifies that (see below).
//  - Cache: used by ONE thread at a time (not thread-safe; it is the thread's private
//    array). get() and put() touch only the cache while they can: get() on an empty
//    cache first refills up to `batch` buffers from the shared list in one critical
//    section; put() on a full cache (cache_capacity buffers) first flushes its `batch`
//    OLDEST buffers (the ones least likely to be in this core's cache) in one critical
//    section. So a thread takes the lock at most once per `batch` buffers.
//    A cache may get a buffer on one thread and another cache put it back on another
//    (a packet received by one worker and freed by the one that sent it).
//  - Memory: a buffer's bytes written by the thread that put it are visible to the
//    thread that gets it next (the flush and the refill are critical sections of the
//    same lock: release / acquire). Within one thread no ordering is needed.
//  - The lock: any SectionLock (section_lock.h), chosen at construction. Critical
//    sections move ids between the cache and the shared stack and nothing else: no
//    allocation, no system call, no exception.
//  - Lifetime: every Cache must be destroyed (or drained) before the pool; destroying
//    a Cache flushes its buffers back. Buffers still held by callers when the pool is
//    destroyed dangle.
//  - check_invariants(outside, why): with no get/put running, proves that the shared
//    free list, the live caches and `outside` (buffers the caller holds) together
//    contain every buffer exactly once. It sees the caches through a registry the
//    Cache constructor and destructor maintain (a mutex, off the datapath).
//
// DESIGN NOTE
//
// The shared free list is a stack of ids: LIFO gives back the buffers freed most
// recently, whose memory is most likely still cached somewhere. A cache refills from
// the stack's top and flushes its own oldest entries to the top. Ids, not pointers,
// keep the critical section's data small (4 bytes per buffer) and make the ownership
// check a bitmap over 0..buffers-1.
//
// A thread whose gets and puts balance never takes the lock once its cache is warm;
// the lock matters when buffers flow from the threads that allocate them (receive) to
// the threads that free them (transmit completion), which is the datapath's case and
// the lab's workload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "uvhost/sync/section_lock.h"

namespace uvhost::experiments {

using BufferId = uint32_t;
inline constexpr BufferId kNoBuffer = UINT32_MAX;

struct PacketPoolOptions {
  std::size_t buffers = 8192;
  std::size_t buffer_size = 2048;    // bytes; a multiple of 64
  std::size_t cache_capacity = 64;   // most buffers one cache holds
  std::size_t batch = 16;            // buffers per refill / flush; 1 .. cache_capacity
};

// One cache's counters (plain integers: the cache is single-threaded).
struct PacketCacheStats {
  uint64_t gets = 0;
  uint64_t puts = 0;
  uint64_t refills = 0;    // critical sections taken by get()
  uint64_t flushes = 0;    // critical sections taken by put() and drain()
  uint64_t exhausted = 0;  // get() found the cache and the shared list empty
};

class PacketPool {
 public:
  class Cache;

  // Throws std::invalid_argument on options outside the limits above (buffers must
  // be 1 .. UINT32_MAX - 1) and std::bad_alloc when the memory cannot be had.
  PacketPool(PacketPoolOptions options, std::unique_ptr<sync::SectionLock> lock);
  ~PacketPool();
  PacketPool(const PacketPool&) = delete;
  PacketPool& operator=(const PacketPool&) = delete;

  std::span<std::byte> data(BufferId id) const noexcept;
  const PacketPoolOptions& options() const noexcept { return options_; }
  sync::SectionLock& lock() noexcept { return *lock_; }

  // Free buffers on the shared list (takes the lock; a snapshot).
  std::size_t shared_free();

  // See the contract. Must not run concurrently with get/put on this pool.
  bool check_invariants(std::span<const BufferId> outside, std::string& why) const;

 private:
  friend class Cache;
  struct FreeAligned {
    void operator()(std::byte* p) const noexcept;
  };

  // Critical sections (run under lock_).
  void refill_locked(std::vector<BufferId>& cache, std::size_t n) noexcept;
  void flush_locked(std::vector<BufferId>& cache, std::size_t n) noexcept;

  PacketPoolOptions options_;
  std::unique_ptr<sync::SectionLock> lock_;
  std::unique_ptr<std::byte, FreeAligned> memory_;
  std::vector<BufferId> free_;  // the shared stack; only inside lock_'s sections

  // Live caches, for check_invariants only (not on the datapath).
  mutable std::mutex caches_mutex_;
  std::vector<const Cache*> caches_;
};

class PacketPool::Cache {
 public:
  explicit Cache(PacketPool& pool);
  ~Cache();  // flushes every cached buffer back (drain())
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  // A buffer, or kNoBuffer when this cache and the shared list are both empty.
  BufferId get() noexcept {
    ++stats_.gets;
    if (ids_.empty()) refill();
    if (ids_.empty()) {
      ++stats_.exhausted;
      return kNoBuffer;
    }
    const BufferId id = ids_.back();  // newest: warmest in this core's cache
    ids_.pop_back();
    return id;
  }

  // Gives a buffer back. `id` must have come from get() on this pool and not been
  // put since (debug builds check the range; check_invariants catches the rest).
  void put(BufferId id) noexcept;

  // Flushes every cached buffer to the shared list (batch by batch).
  void drain() noexcept;

  std::span<const BufferId> contents() const noexcept { return ids_; }
  const PacketCacheStats& stats() const noexcept { return stats_; }
  PacketPool& pool() const noexcept { return pool_; }

 private:
  void refill() noexcept;
  void flush_oldest(std::size_t n) noexcept;  // one critical section

  PacketPool& pool_;
  std::vector<BufferId> ids_;  // capacity reserved up front: no allocation on get/put
  PacketCacheStats stats_;
};

}  // namespace uvhost::experiments
