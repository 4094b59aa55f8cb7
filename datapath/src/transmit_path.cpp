// transmit_path.cpp - guest -> backend: one burst of a transmit vring (see
// device_datapath.h). Worker thread.
#include <span>

#include "uvhost/datapath/device_datapath.h"
#include "uvhost/virtio/io_vector.h"
#include "uvhost/virtio/net_header.h"
#include "vring.h"

namespace uvhost::datapath {

DeviceDatapath::Burst DeviceDatapath::transmit_burst(Vring& q) {
  Burst burst;
  q.memory->read([&](const virtio::GuestMemoryMap& map) {
    virtio::DescriptorChain& chain = q.chain;  // reused: no allocation once warm
    size_t done = 0;
    size_t moved = 0;
    while (done < options_.burst && q.ring->pop(map, chain, virtio::ChainDirection::kReadableOnly)) {
      ++done;
      // A disabled ring: "process and discard" transmit, uncounted (vhost-user spec).
      if (q.enabled) {
        const auto pieces = chain.readable.pieces();
        const size_t total = chain.readable.total_bytes();
        const size_t frame_len = total > q.header_size ? total - q.header_size : 0;
        const auto header = virtio::read_net_header(pieces, q.header_size);
        if (!header || frame_len == 0 || frame_len > kMaxFrame) {
          q.counters.dropped.add();  // no header, an empty frame, or too large to move
        } else {
          // Copy once out of guest memory: the guest may rewrite its buffer while the
          // backend looks at the frame (a switch decision must see one header).
          std::span<std::byte> frame(q.frame_buffer.get(), frame_len);
          (void)virtio::copy_from_pieces(pieces, q.header_size, frame);
          if (backend_.transmit(q.pair, *header, frame)) {
            ++moved;
            burst.bytes += frame_len;
          } else {
            q.counters.dropped.add();
          }
        }
      }
      add_used(q, map, chain.head, 0);
    }
    if (done > 0) publish_and_signal(q, map);
    q.counters.packets.add(moved);
    q.counters.bytes.add(burst.bytes);
    burst.entries = done;
  });
  return burst;
}

}  // namespace uvhost::datapath
