// receive_steering.h - which of a switch port's receive queue pairs a frame is
// delivered to: the pair its guest last transmitted that frame's flow on, else one
// fixed by the flow's hash (flow_hash.h). What Linux's tun does with its flow table
// (tun_flow_update, tun_automq_select_queue).
//
// Why: a multiqueue guest transmits a flow on the queue of the CPU its socket's
// process runs on (XPS) and moves it when the process migrates. Delivering the flow's
// other direction on that same pair keeps all of the flow on one receive queue (one
// CPU, in order) and next to its socket. Keyed on anything the sender chooses (its own
// transmit pair), a flow the sender moves between its queues would reach the receiver
// on two receive queues, processed on two CPUs: out of order, and TCP retransmits
// although nothing was lost.
//
// Contract
// --------
//  - ReceiveSteering(queue_pairs): 1..kMaxQueuePairs (std::invalid_argument otherwise).
//    One pair: nothing to steer (no table; record_transmit() does nothing,
//    receive_pair() is 0). More: a table of kEntries std::atomic<uint32_t> (16 KiB),
//    indexed by the flow hash's low bits (kIndexBits); an entry holds the hash's top
//    16 bits (the tag, which tells most flows that share an index apart) and the pair
//    plus one (0: empty, so an empty entry never matches).
//  - record_transmit(flow_hash, pair): the port's guest transmitted a frame of that
//    flow on `pair` (< queue_pairs(); debug builds abort otherwise). The entry is
//    stored only when it differs, so a flow that stays on its queue never writes the
//    line other ports' workers read. Which frames say where the guest wants a flow is
//    the caller's choice (the switch leaves out TCP segments without payload, whose
//    queue follows whichever CPU sent them: switch_backend.h).
//  - receive_pair(flow_hash): the entry's pair when its tag is the flow's and the pair
//    is < queue_pairs(); otherwise flow_hash % queue_pairs(), so a flow that was never
//    transmitted keeps one pair for all its frames. Always < queue_pairs().
//  - Two flows with the same index and tag share an entry: the one transmitted last
//    steers both (a flow merely lands on another of the port's queues).
//
//  Threads and memory ordering: record_transmit() runs on the workers of the port's
//  own pairs (several at once, one per pair), receive_pair() on every thread that
//  delivers to the port (other ports' workers, the switch's uplink thread), all
//  concurrently. Every access is relaxed, and that is enough: an entry is a value on
//  its own that publishes no other memory, and a 32-bit atomic is never torn, so a
//  reader sees either an entry some writer stored or an empty one, and the pair it
//  takes from it is checked against queue_pairs(). A stale entry (a flow that just
//  moved, two pairs recording the same entry at once: the last store wins) only sends
//  a frame to another of this port's queues; the flow's next transmitted frame
//  corrects it. Nothing is ever corrupted or delivered out of range.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace uvhost::backends {

class ReceiveSteering {
 public:
  static constexpr uint32_t kMaxQueuePairs = 32768;  // virtio-net's limit; fits the entry's 16 bits
  static constexpr unsigned kIndexBits = 12;
  static constexpr size_t kEntries = size_t{1} << kIndexBits;

  explicit ReceiveSteering(uint32_t queue_pairs);

  uint32_t queue_pairs() const noexcept { return queue_pairs_; }

  void record_transmit(uint32_t flow_hash, uint32_t pair) noexcept;
  uint32_t receive_pair(uint32_t flow_hash) const noexcept;

 private:
  static constexpr uint32_t kTagShift = 16;
  static constexpr uint32_t kPairMask = 0xffff;

  static size_t index_of(uint32_t flow_hash) noexcept { return flow_hash & (kEntries - 1); }
  static uint32_t tag_of(uint32_t flow_hash) noexcept { return flow_hash >> kTagShift; }

  const uint32_t queue_pairs_;
  std::unique_ptr<std::atomic<uint32_t>[]> entries_;  // kEntries; none with one pair
};

}  // namespace uvhost::backends
