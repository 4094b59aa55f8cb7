// net_rx.cpp - virtio-net receive, with and without MRG_RXBUF.
#include "uvhost/virtio/net_rx.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace uvhost::virtio {

RxResult NetReceiveWriter::deliver(DeviceQueue& queue, const GuestMemoryMap& memory, const NetHeader& header,
                                   std::span<const std::byte> frame) {
  written_.clear();
  return options_.mrg_rxbuf ? deliver_merged(queue, memory, header, frame)
                            : deliver_single(queue, memory, header, frame);
}

RxResult NetReceiveWriter::deliver_single(DeviceQueue& queue, const GuestMemoryMap& memory, const NetHeader& header,
                                          std::span<const std::byte> frame) {
  if (!queue.pop(memory, first_, ChainDirection::kWritableOnly)) {
    return {queue.is_broken() ? RxStatus::kQueueBroken : RxStatus::kNoBuffers, 0};
  }
  const size_t needed = options_.header_size + frame.size();
  if (first_.writable.total_bytes() < needed) {
    queue.unpop(1);
    spdlog::debug("virtio queue '{}': dropped a {}-byte packet: receive buffer holds {} bytes", queue.name(),
                  frame.size(), first_.writable.total_bytes());
    return {RxStatus::kDropped, 0};
  }
  NetHeader out = header;
  out.num_buffers = 1;
  const auto pieces = first_.writable.pieces();
  (void)write_net_header(out, options_.header_size, pieces);  // fits: checked above
  copy_to_pieces(pieces, options_.header_size, frame);
  note_written(pieces, needed);
  queue.add_used(memory, first_.head, static_cast<uint32_t>(needed));
  return {RxStatus::kDelivered, 1};
}

RxResult NetReceiveWriter::deliver_merged(DeviceQueue& queue, const GuestMemoryMap& memory, const NetHeader& header,
                                          std::span<const std::byte> frame) {
  pending_.clear();
  size_t copied = 0;
  for (;;) {
    DescriptorChain& chain = pending_.empty() ? first_ : next_;
    if (!queue.pop(memory, chain, ChainDirection::kWritableOnly)) {
      if (queue.is_broken()) return {RxStatus::kQueueBroken, 0};
      const auto popped = static_cast<uint16_t>(pending_.size());
      queue.unpop(popped);
      if (popped >= queue.config().size) {
        spdlog::debug("virtio queue '{}': dropped a {}-byte packet: larger than the whole ring", queue.name(),
                      frame.size());
        return {RxStatus::kDropped, 0};
      }
      return {RxStatus::kNoBuffers, 0};
    }
    const size_t capacity = chain.writable.total_bytes();
    if (capacity < options_.header_size) {
      queue.mark_broken(QueueError::kRxBufferTooSmall,
                        fmt::format("head {}: {} bytes, header is {}", chain.head, capacity, options_.header_size));
      return {RxStatus::kQueueBroken, 0};
    }
    const size_t offset = pending_.empty() ? options_.header_size : 0;
    const size_t take = std::min(capacity - offset, frame.size() - copied);
    copy_to_pieces(chain.writable.pieces(), offset, frame.subspan(copied, take));
    copied += take;
    note_written(chain.writable.pieces(), offset + take);  // the header part is written below
    pending_.push_back(UsedElement{chain.head, static_cast<uint32_t>(offset + take)});
    if (copied == frame.size()) break;
  }
  NetHeader out = header;
  out.num_buffers = static_cast<uint16_t>(pending_.size());
  (void)write_net_header(out, options_.header_size, first_.writable.pieces());  // fits: checked above
  for (const UsedElement& used : pending_) queue.add_used(memory, static_cast<uint16_t>(used.id), used.len);
  return {RxStatus::kDelivered, out.num_buffers};
}

void NetReceiveWriter::note_written(std::span<const IoPiece> pieces, size_t len) {
  if (!record_writes_) return;
  for (const IoPiece& piece : pieces) {
    if (len == 0) break;
    const size_t take = std::min(piece.len, len);
    written_.push_back(IoPiece{piece.data, take});
    len -= take;
  }
}

}  // namespace uvhost::virtio
