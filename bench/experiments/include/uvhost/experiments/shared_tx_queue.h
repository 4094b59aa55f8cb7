// shared_tx_queue.h - a bounded transmit queue of packet descriptors shared by more
// workers than there are queues (a tap or NIC queue that W workers transmit into),
// drained by a consumer, every access under one lock chosen at construction.
//
// CONTRACT
//
//   SharedTxQueue txq(1024, sync::make_section_lock<sync::DelegationLock>());
//   std::size_t sent = txq.push_burst(burst);   // worker: burst[0, sent) accepted,
//                                               // burst[sent, end) dropped (free them)
//   std::size_t n = txq.pop_burst(out);         // consumer: out[0, n), oldest first
//   std::size_t k = txq.try_push_burst(burst);  // worker: burst[0, k) accepted,
//                                               // burst[k, end) still the caller's
//                                               // (back off and retry; not a drop)
//
//  - push_burst() appends the longest prefix of the burst that fits, in order, in ONE
//    critical section, and counts the rest as dropped (a full queue drops, as a NIC's
//    tx_burst returns fewer than asked and the caller frees the rest). It never waits
//    for room. With a delegation lock a waiting worker's burst is pushed by the holder.
//  - try_push_burst() is push_burst() for a caller that backs off and retries when
//    the queue is full (a worker's TX path under backpressure): it queues the same
//    prefix, but leaves the rest with the caller, counted as `refused`, not dropped.
//    A caller that gives up drops through push_burst() (its last attempt), so
//    accepted + dropped still counts each descriptor once. Both count `full`: push
//    sections that found less room than the burst.
//  - pop_burst() removes up to out.size() descriptors, oldest first, in one section.
//    Any number of threads may push and pop at once.
//  - Exactly once: every accepted descriptor is popped exactly once (or is still
//    queued); dropped ones are never queued. Order: FIFO in the lock's order of the
//    sections, so one worker's descriptors come out in the order it pushed them.
//  - Memory: what a worker wrote before push_burst() (the descriptor, the packet
//    bytes it points at) is visible to the thread that pops it (release / acquire
//    through the lock).
//  - stats() is a consistent snapshot taken under the lock:
//    accepted == popped + size, and accepted + dropped == every descriptor offered
//    (a descriptor refused by try_push_burst() and offered again counts once).
//  - Sections copy descriptors and update counters: no allocation, no system call.
//
// DESIGN NOTE
//
// A ring of `capacity` descriptors with a head and a count, all plain fields guarded
// by the lock (no atomics: the lock orders every access). Why a lock at all when a
// lock-free MPSC ring exists (frame_ring.h)? This structure is the lab's model of the
// case a delegation lock is meant for: a short section on data that many threads hit, where
// the lock word and the ring's lines bounce between cores; a delegation lock keeps
// them in the combiner's cache. A burst is pushed in one section, so the lock is
// taken once per burst, not per packet.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "uvhost/sync/section_lock.h"

namespace uvhost::experiments {

// One packet to transmit. `cookie` is the caller's (the lab stores worker and
// sequence number there to check exactly-once delivery).
struct TxDescriptor {
  uint32_t buffer = 0;  // a PacketPool BufferId, or any handle the caller uses
  uint32_t length = 0;
  uint64_t cookie = 0;
};

struct SharedTxQueueStats {
  uint64_t accepted = 0;  // descriptors queued by push_burst()
  uint64_t dropped = 0;   // descriptors refused because the queue was full
  uint64_t refused = 0;   // descriptors try_push_burst() left with the caller (to retry)
  uint64_t full = 0;      // push sections (either kind) that found less room than the burst
  uint64_t popped = 0;    // descriptors handed to consumers
  uint64_t push_bursts = 0;
  uint64_t pop_bursts = 0;
  std::size_t size = 0;   // queued now
};

class SharedTxQueue {
 public:
  // Throws std::invalid_argument if capacity is 0 or there is no lock.
  SharedTxQueue(std::size_t capacity, std::unique_ptr<sync::SectionLock> lock);
  SharedTxQueue(const SharedTxQueue&) = delete;
  SharedTxQueue& operator=(const SharedTxQueue&) = delete;

  // Returns how many of burst's descriptors (a prefix) were queued.
  std::size_t push_burst(std::span<const TxDescriptor> burst);
  // As push_burst(), but what does not fit stays the caller's (refused, not dropped).
  std::size_t try_push_burst(std::span<const TxDescriptor> burst);
  // Returns how many descriptors were written to out (a prefix).
  std::size_t pop_burst(std::span<TxDescriptor> out);

  SharedTxQueueStats stats();
  std::size_t capacity() const noexcept { return ring_.size(); }
  sync::SectionLock& lock() noexcept { return *lock_; }

 private:
  // Critical sections (run under lock_, possibly on another thread).
  std::size_t push_locked(std::span<const TxDescriptor> burst, bool drop_rest) noexcept;
  std::size_t pop_locked(std::span<TxDescriptor> out) noexcept;

  std::unique_ptr<sync::SectionLock> lock_;
  // Everything below is touched only inside lock_'s sections.
  std::vector<TxDescriptor> ring_;
  std::size_t head_ = 0;   // index of the oldest descriptor
  std::size_t count_ = 0;  // descriptors queued
  SharedTxQueueStats stats_;
};

// One consumer draining `queue` in bursts of up to `burst` until `workers_left` is 0
// and the queue is empty (popping again at once while pops bring descriptors back,
// yielding on an empty pop), checking that each worker's descriptors (cookie =
// worker << 32 | sequence number) arrive once and in order.
struct TxqDrained {
  std::vector<uint64_t> per_worker;  // descriptors consumed
  uint64_t order_errors = 0;         // duplicated, out of order or from no known worker
};
TxqDrained drain_in_order(SharedTxQueue& queue, std::size_t workers, std::size_t burst,
                          const std::atomic<std::size_t>& workers_left);

}  // namespace uvhost::experiments
