// frame_ring.h - a bounded multi-producer, single-consumer queue of packets: how frames
// reach a receive virtqueue from other threads (the switch forwarding from another
// port's worker, loopback with the pair's queues on different workers, a tap uplink).
//
// Contract
// --------
//  - push() may run on any number of threads at once; pop() on one thread at a time
//    (the worker owning the receive queue). Capacity is a power of two, fixed.
//  - push() never blocks: on a full ring it returns the packet back (the caller counts
//    the drop). A packet pushed happens-before its pop() (release/acquire on the
//    cell's sequence): its bytes are visible to the consumer.
//  - Lock-free: one CAS on the producer side per push (retried only against other
//    producers), none on the consumer side. FIFO per producer.
//  - The destructor frees packets still queued; no push()/pop() may run then.
//
// Design note: Dmitry Vyukov's bounded MPMC array queue, with the consumer side
// simplified for one consumer. Each cell has a sequence number: cell i is free for
// the producer of ticket t when seq == t, and full for the consumer of ticket t when
// seq == t + 1. A producer claims ticket t with a CAS on the tail, writes the packet,
// then publishes seq = t + 1 (release); the consumer reads seq (acquire), takes the
// packet, and frees the cell for ticket t + capacity (release). No ABA: tickets are
// 64-bit and never reused. Why not a mutex + deque: producers are workers of other
// ports; a preempted lock holder on a 2-core machine would stall them all.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "uvhost/backends/packet.h"

namespace uvhost::datapath {

class FrameRing {
 public:
  explicit FrameRing(size_t capacity);  // rounded up to a power of two, at least 2
  ~FrameRing();
  FrameRing(const FrameRing&) = delete;
  FrameRing& operator=(const FrameRing&) = delete;

  // nullptr: queued. Otherwise the ring was full and the packet comes back.
  backends::PacketPtr push(backends::PacketPtr packet) noexcept;
  // nullptr when empty. Consumer only.
  backends::PacketPtr pop() noexcept;
  // Consumer only. false: pop() will succeed. true: nothing now (a concurrent push
  // may land right after).
  bool empty() const noexcept;
  size_t capacity() const noexcept { return mask_ + 1; }

 private:
  struct Cell {
    std::atomic<uint64_t> sequence;
    backends::Packet* packet;
  };

  std::unique_ptr<Cell[]> cells_;
  size_t mask_;
  alignas(64) std::atomic<uint64_t> tail_{0};  // producers' next ticket
  alignas(64) uint64_t head_ = 0;              // consumer's next ticket (consumer only)
};

}  // namespace uvhost::datapath
