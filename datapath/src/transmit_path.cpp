// transmit_path.cpp - guest -> backend: one burst of a transmit vring, handed to the
// backend in place, or copied out first for at-most-once delivery (see
// device_datapath.h, tx_delivery.h). Worker thread.
#include <span>

#include "transmit_scope.h"
#include "uvhost/datapath/device_datapath.h"
#include "vring.h"

namespace uvhost::datapath {

DeviceDatapath::Burst DeviceDatapath::transmit_burst(Vring& q) {
  Burst burst;
  q.memory->read([&](const virtio::GuestMemoryMap& map) {
    // The pair's receive ring on this worker takes the frames a backend hands straight
    // back (loopback, see transmit_scope.h): its next chain's lines start loading now,
    // while this burst waits for the guest's transmit lines.
    Vring& rx = *vrings_[2 * q.pair];
    if (rx.worker == q.worker && rx.running()) rx.ring->prefetch_next_chain(map);
    const size_t popped = q.ring->pop_burst(map, std::span(q.chains), virtio::ChainDirection::kReadableOnly);
    if (popped == 0) return;
    burst.entries = popped;
    // A disabled ring: "process and discard" transmit, uncounted (vhost-user spec).
    if (!q.enabled) {
      q.ring->add_used(std::span<const virtio::DescriptorChain>(q.chains.data(), popped), 0);
      publish_and_signal(q, map);
      return;
    }
    size_t count = 0;
    uint64_t dropped = 0;
    for (size_t i = 0; i < popped; ++i) {
      const virtio::IoVector& readable = q.chains[i].readable;
      const size_t total = readable.total_bytes();
      if (total <= q.header_size || total - q.header_size > kMaxFrame) {
        ++dropped;  // no header, an empty frame, or too large to move
        continue;
      }
      const auto header = static_cast<uint32_t>(q.header_size);
      q.frames[count] = q.bounce ? q.bounce->stage(count, readable.pieces(), header, static_cast<uint32_t>(total))
                                 : backends::TxFrame{readable.pieces(), header, static_cast<uint32_t>(total - header)};
      ++count;
    }
    // At most once: the copies are ours, so the chains go back to the guest before
    // anything is sent; a daemon killed from here on never sends these frames again.
    const bool published_first = q.bounce != nullptr;
    if (published_first) {
      q.ring->add_used(std::span<const virtio::DescriptorChain>(q.chains.data(), popped), 0);
      publish_and_signal(q, map);
    }
    if (count > 0) {
      // While the backend runs, frames it hands back to this port (loopback) may go
      // straight into a receive ring of this worker, under this map.
      TransmitScope scope(*this, *q.worker, *q.memory, map);
      const backends::TxBurstResult taken =
          backend_.transmit_burst(q.pair, std::span<const backends::TxFrame>(q.frames.data(), count));
      scope.finish();
      dropped += count - taken.frames;
      q.counters.packets.add(taken.frames);
      q.counters.bytes.add(taken.bytes);
      burst.bytes = taken.bytes;
    }
    if (dropped > 0) q.counters.dropped.add(dropped);
    // In place: the guest's buffers were read by the backend until here; a daemon
    // killed before this publication has the burst sent again after a reconnect.
    if (!published_first) {
      q.ring->add_used(std::span<const virtio::DescriptorChain>(q.chains.data(), popped), 0);
      publish_and_signal(q, map);
    }
  });
  return burst;
}

}  // namespace uvhost::datapath
