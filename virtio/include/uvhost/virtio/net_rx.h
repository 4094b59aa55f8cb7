// net_rx.h - delivering one received packet into a virtio-net receive queue.
//
// Contract
// --------
//  - deliver() writes virtio_net_hdr + frame into device-writable chains popped from
//    the receive queue and adds a used element for each chain (with the bytes written
//    to it). It does not publish: call DeviceQueue::publish_used() once per batch.
//  - Without VIRTIO_NET_F_MRG_RXBUF the packet must fit one chain. With it, the packet
//    is spread over as many chains as needed and num_buffers in the header (first
//    chain) says how many; every chain must be at least header-sized (spec).
//  - The offload fields of `header` are written exactly as given; num_buffers is
//    filled in by deliver() (1 without MRG_RXBUF when the header has the field).
//  - Outcomes:
//      kDelivered   - used elements added for `buffers` chains;
//      kNoBuffers   - not enough receive buffers posted right now: every chain popped
//                     for this packet is given back (unpop), nothing is added; retry
//                     after the guest kicks. This is back-pressure, not a guest fault;
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
};

class NetReceiveWriter {
 public:
  explicit NetReceiveWriter(RxOptions options) : options_(options) {}

  RxResult deliver(DeviceQueue& queue, const GuestMemoryMap& memory, const NetHeader& header,
                   std::span<const std::byte> frame);

  void record_writes(bool on) noexcept { record_writes_ = on; }
  // Host ranges written by the last successful deliver() (empty unless recording).
  std::span<const IoPiece> written() const noexcept { return written_; }

 private:
  RxResult deliver_single(DeviceQueue& queue, const GuestMemoryMap& memory, const NetHeader& header,
                          std::span<const std::byte> frame);
  RxResult deliver_merged(DeviceQueue& queue, const GuestMemoryMap& memory, const NetHeader& header,
                          std::span<const std::byte> frame);

  // Appends the first `len` bytes of `pieces` to written_ (when recording).
  void note_written(std::span<const IoPiece> pieces, size_t len);

  RxOptions options_;
  DescriptorChain first_;
  DescriptorChain next_;
  std::vector<UsedElement> pending_;
  bool record_writes_ = false;
  std::vector<IoPiece> written_;
};

}  // namespace uvhost::virtio
