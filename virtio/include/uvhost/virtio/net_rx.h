// net_rx.h - delivering received packets into a virtio-net receive queue.
//
// Contract
// --------
//  - deliver() writes virtio_net_hdr + frame into device-writable chains taken from
//    the receive queue and adds a used element for each chain (with the bytes written
//    to it). It does not publish: call DeviceQueue::publish_used() once per batch.
//  - The frame comes as an RxSource: contiguous bytes (a packet), or a few contiguous
//    bytes followed by pieces of another guest's memory (a frame forwarded in place,
//    with its first bytes rewritten): either way it is copied once, source to buffer.
//  - Without VIRTIO_NET_F_MRG_RXBUF the packet must fit one chain. With it, the packet
//    is spread over as many chains as needed and num_buffers in the header (first
//    chain) says how many; every chain must be at least header-sized (spec).
//  - The offload fields of `header` are written exactly as given; num_buffers is
//    filled in by deliver() (1 without MRG_RXBUF when the header has the field).
//  - Reservation (RxOptions::reserve > 1, the datapath's bursts): chains are popped
//    several at a time (DeviceQueue::pop_burst), as many as the rest of the packet
//    needs going by the largest buffer seen, at most `reserve`, and handed out in
//    ring order; release() gives the ones not used back (unpop), and must run before
//    the caller publishes, sleeps or lets the ring be stopped, so the ring's
//    last_avail counts consumed buffers only. With reserve 1 (the default) nothing
//    stays reserved after deliver() returns.
//  - Outcomes:
//      kDelivered   - used elements added for `buffers` chains;
//      kNoBuffers   - not enough receive buffers posted right now: every chain taken
//                     for this packet goes back (unpop), nothing is added; retry
//                     after the guest kicks (more_buffers_wanted() says how many more
//                     buffers it takes, as far as the buffers seen so far tell). This
//                     is back-pressure, not a guest fault;
//      kDropped     - the packet can never fit (larger than one chain without
//                     MRG_RXBUF, or larger than the whole ring with it): chains given
//                     back, packet dropped;
//      kQueueBroken - the guest violated the spec (a readable buffer, a buffer smaller
//                     than the header with MRG_RXBUF, any chain error); logged, queue
//                     broken.
//  - record_writes(): when on, each delivered packet's written host ranges (header
//    and frame, per chain) are kept in written() until the next deliver(), so a
//    migrating device can mark them dirty (GuestMemoryMap::host_to_guest()).
//  - Keeps its scratch chains between calls (no allocation once warm). One thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "uvhost/virtio/net_header.h"
#include "uvhost/virtio/split_queue.h"

namespace uvhost::virtio {

enum class RxStatus { kDelivered, kNoBuffers, kDropped, kQueueBroken };

struct RxResult {
  RxStatus status = RxStatus::kNoBuffers;
  uint16_t buffers = 0;  // chains used (num_buffers) when delivered
};

struct RxOptions {
  bool mrg_rxbuf = false;
  size_t header_size = kNetHeaderSizeMrg;  // 12 with MRG_RXBUF or VERSION_1, else 10
  size_t reserve = 1;                      // chains popped ahead (see the contract)
};

// The bytes of one frame: `head`, then `rest` from `rest_offset` on; `size` in all.
struct RxSource {
  std::span<const std::byte> head;
  std::span<const IoPiece> rest;
  size_t rest_offset = 0;
  size_t size = 0;

  static RxSource of(std::span<const std::byte> frame) noexcept { return RxSource{frame, {}, 0, frame.size()}; }
};

class NetReceiveWriter {
 public:
  explicit NetReceiveWriter(RxOptions options);

  RxResult deliver(DeviceQueue& queue, const GuestMemoryMap& memory, const NetHeader& header,
                   const RxSource& frame);
  RxResult deliver(DeviceQueue& queue, const GuestMemoryMap& memory, const NetHeader& header,
                   std::span<const std::byte> frame) {
    return deliver(queue, memory, header, RxSource::of(frame));
  }

  // Gives every reserved chain not used back to the queue.
  void release(DeviceQueue& queue) noexcept;
  // After kNoBuffers: how many more buffers the packet needs (at least 1), beyond the
  // ones it found; and how many available buffers in all that makes.
  uint16_t more_buffers_wanted() const noexcept { return more_wanted_; }
  uint16_t buffers_wanted() const noexcept { return static_cast<uint16_t>(found_when_short_ + more_wanted_); }

  void record_writes(bool on) noexcept { record_writes_ = on; }
  // Host ranges written by the last successful deliver() (empty unless recording).
  std::span<const IoPiece> written() const noexcept { return written_; }

 private:
  // Reads an RxSource front to back.
  class SourceCursor;

  // The next reserved chain, popping a new batch (sized for `bytes_left` of the
  // packet) when the reservation is used up; nullptr when the queue has none (or broke).
  DescriptorChain* take(DeviceQueue& queue, const GuestMemoryMap& memory, size_t bytes_left);
  // Gives back `taken` chains of the packet being written, and the rest reserved.
  void give_back(DeviceQueue& queue, size_t taken) noexcept;
  RxResult deliver_single(DeviceQueue& queue, const GuestMemoryMap& memory, const NetHeader& header,
                          const RxSource& frame);
  RxResult deliver_merged(DeviceQueue& queue, const GuestMemoryMap& memory, const NetHeader& header,
                          const RxSource& frame);
  // The rest of deliver_merged(): a packet over more than the first chain's first
  // piece, or no chain (`first_chain`, taken already, may be nullptr). Out of line.
  [[gnu::noinline]] RxResult deliver_merged_spread(DeviceQueue& queue, const GuestMemoryMap& memory,
                                                   const NetHeader& header, const RxSource& frame,
                                                   const DescriptorChain* first_chain);

  // Appends the first `len` bytes of `pieces` to written_ (when recording).
  void note_written(std::span<const IoPiece> pieces, size_t len);

  RxOptions options_;
  std::vector<DescriptorChain> reserved_;  // popped, in ring order
  size_t next_ = 0;                        // first reserved chain not handed out
  size_t count_ = 0;                       // reserved chains popped
  size_t largest_buffer_ = 0;              // largest chain seen: estimates more_wanted_
  uint16_t more_wanted_ = 1;
  uint16_t found_when_short_ = 0;
  std::vector<UsedElement> pending_;
  // Where the first chain's header lies (its first header_size bytes), to fill in
  // num_buffers when the packet is complete: at most one piece per byte.
  std::array<IoPiece, kNetHeaderSizeMrg> header_pieces_{};
  size_t header_piece_count_ = 0;
  bool record_writes_ = false;
  std::vector<IoPiece> written_;
};

}  // namespace uvhost::virtio
