// net_rx.cpp - virtio-net receive, with and without MRG_RXBUF.
#include "uvhost/virtio/net_rx.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace uvhost::virtio {

// Reads an RxSource front to back, copying into buffer pieces.
class NetReceiveWriter::SourceCursor {
 public:
  explicit SourceCursor(const RxSource& source) : source_(source), left_(source.size) {
    piece_offset_ = source.rest_offset;
  }

  // Copies the next `len` bytes (fewer if the source ends) into `dst` from `dst_offset`
  // on; returns how many.
  size_t copy_to(std::span<const IoPiece> dst, size_t dst_offset, size_t len) noexcept {
    size_t done = 0;
    for (const IoPiece& piece : dst) {
      if (done == len) break;
      if (dst_offset >= piece.len) {
        dst_offset -= piece.len;
        continue;
      }
      std::byte* out = piece.data + dst_offset;
      size_t room = std::min(piece.len - dst_offset, len - done);
      dst_offset = 0;
      while (room > 0) {
        const std::span<const std::byte> from = segment();
        if (from.empty()) return done;
        const size_t n = std::min(room, from.size());
        // memmove: a guest-to-guest source lies in guest memory, and a guest can make
        // its receive buffer overlap the frame it sent.
        std::memmove(out, from.data(), n);
        advance(n);
        out += n;
        room -= n;
        done += n;
      }
    }
    return done;
  }

 private:
  // The contiguous bytes that come next (empty at the end).
  std::span<const std::byte> segment() noexcept {
    if (left_ == 0) return {};
    if (head_offset_ < source_.head.size()) {
      return source_.head.subspan(head_offset_, std::min(source_.head.size() - head_offset_, left_));
    }
    while (piece_ < source_.rest.size() && piece_offset_ >= source_.rest[piece_].len) {
      piece_offset_ -= source_.rest[piece_].len;
      ++piece_;
    }
    if (piece_ == source_.rest.size()) return {};
    const IoPiece& piece = source_.rest[piece_];
    return {piece.data + piece_offset_, std::min(piece.len - piece_offset_, left_)};
  }
  void advance(size_t n) noexcept {
    left_ -= n;
    if (head_offset_ < source_.head.size()) {
      head_offset_ += n;
    } else {
      piece_offset_ += n;
    }
  }

  const RxSource& source_;
  size_t left_;
  size_t head_offset_ = 0;
  size_t piece_ = 0;
  size_t piece_offset_ = 0;
};

namespace {

// Copies the whole source into `out` (contiguous, large enough). copy_bytes: short
// pieces (a loopback's swapped addresses, a small frame) are moved inline; it allows
// overlap as memmove does for long ones (see SourceCursor::copy_to).
void copy_whole(std::byte* out, const RxSource& source) noexcept {
  size_t left = source.size;
  const size_t head = std::min(source.head.size(), left);
  if (head > 0) copy_bytes(out, source.head.data(), head);
  out += head;
  left -= head;
  size_t skip = source.rest_offset;
  for (const IoPiece& piece : source.rest) {
    if (left == 0) break;
    if (skip >= piece.len) {
      skip -= piece.len;
      continue;
    }
    const size_t n = std::min(piece.len - skip, left);
    copy_bytes(out, piece.data + skip, n);
    out += n;
    left -= n;
    skip = 0;
  }
}

}  // namespace

NetReceiveWriter::NetReceiveWriter(RxOptions options) : options_(options) {
  if (options_.reserve == 0) options_.reserve = 1;
  reserved_.resize(options_.reserve);
}

DescriptorChain* NetReceiveWriter::take(DeviceQueue& queue, const GuestMemoryMap& memory, size_t bytes_left) {
  if (next_ == count_) {
    // As many chains as the rest of this packet needs by the largest buffer seen (one
    // when none was seen), at most `reserve`: a chain popped and given back would be
    // walked again.
    // (No division when one chain is enough: it is the common case, and a 64-bit
    // division would sit on every receive's path.)
    const size_t per_chain = std::max<size_t>(largest_buffer_, 1);
    const size_t wanted = bytes_left <= per_chain ? 1
                                                  : std::clamp<size_t>((bytes_left + per_chain - 1) / per_chain, 1,
                                                                       reserved_.size());
    next_ = 0;
    count_ = queue.pop_burst(memory, std::span<DescriptorChain>(reserved_).first(wanted),
                             ChainDirection::kWritableOnly);
    if (count_ == 0) return nullptr;
  }
  return &reserved_[next_++];
}

void NetReceiveWriter::give_back(DeviceQueue& queue, size_t taken) noexcept {
  queue.unpop(static_cast<uint16_t>(taken + (count_ - next_)));
  next_ = count_ = 0;
}

void NetReceiveWriter::release(DeviceQueue& queue) noexcept { give_back(queue, 0); }

RxResult NetReceiveWriter::deliver(DeviceQueue& queue, const GuestMemoryMap& memory, const NetHeader& header,
                                   const RxSource& frame) {
  written_.clear();
  const RxResult result = options_.mrg_rxbuf ? deliver_merged(queue, memory, header, frame)
                                             : deliver_single(queue, memory, header, frame);
  if (options_.reserve == 1 && result.status != RxStatus::kQueueBroken) release(queue);
  return result;
}

RxResult NetReceiveWriter::deliver_single(DeviceQueue& queue, const GuestMemoryMap& memory, const NetHeader& header,
                                          const RxSource& frame) {
  more_wanted_ = 1;
  found_when_short_ = 0;
  const DescriptorChain* chain = take(queue, memory, 1);
  if (chain == nullptr) return {queue.is_broken() ? RxStatus::kQueueBroken : RxStatus::kNoBuffers, 0};
  const size_t needed = options_.header_size + frame.size;
  if (chain->writable.total_bytes() < needed) {
    --next_;  // not used: the next packet may fit it
    spdlog::debug("virtio queue '{}': dropped a {}-byte packet: receive buffer holds {} bytes", queue.name(),
                  frame.size, chain->writable.total_bytes());
    return {RxStatus::kDropped, 0};
  }
  NetHeader out = header;
  out.num_buffers = 1;
  const auto pieces = chain->writable.pieces();
  (void)write_net_header(out, options_.header_size, pieces);  // fits: checked above
  SourceCursor(frame).copy_to(pieces, options_.header_size, frame.size);
  note_written(pieces, needed);
  queue.add_used(memory, chain->head, static_cast<uint32_t>(needed));
  return {RxStatus::kDelivered, 1};
}

RxResult NetReceiveWriter::deliver_merged(DeviceQueue& queue, const GuestMemoryMap& memory, const NetHeader& header,
                                          const RxSource& frame) {
  // The common case first: header and frame fit the first buffer's first piece.
  const DescriptorChain* chain = take(queue, memory, frame.size + options_.header_size);
  if (chain != nullptr && chain->writable.total_bytes() >= options_.header_size &&
      chain->writable[0].len >= options_.header_size + frame.size) [[likely]] {
    const IoPiece& first_piece = chain->writable[0];
    largest_buffer_ = std::max(largest_buffer_, chain->writable.total_bytes());
    NetHeader out = header;
    out.num_buffers = 1;
    encode_net_header(out, options_.header_size, std::span(first_piece.data, options_.header_size));
    copy_whole(first_piece.data + options_.header_size, frame);
    const size_t written = options_.header_size + frame.size;
    note_written(chain->writable.pieces(), written);
    queue.add_used(memory, chain->head, static_cast<uint32_t>(written));
    return {RxStatus::kDelivered, 1};
  }
  return deliver_merged_spread(queue, memory, header, frame, chain);
}

RxResult NetReceiveWriter::deliver_merged_spread(DeviceQueue& queue, const GuestMemoryMap& memory,
                                                 const NetHeader& header, const RxSource& frame,
                                                 const DescriptorChain* first_chain) {
  pending_.clear();
  SourceCursor cursor(frame);
  size_t copied = 0;
  bool first_taken = true;  // the first chain is first_chain, taken by deliver_merged()
  for (;;) {
    const size_t bytes_left = frame.size - copied + (pending_.empty() ? options_.header_size : 0);
    const DescriptorChain* chain = first_taken ? first_chain : take(queue, memory, bytes_left);
    first_taken = false;
    if (chain == nullptr) {
      if (queue.is_broken()) return {RxStatus::kQueueBroken, 0};
      const size_t taken = pending_.size();
      give_back(queue, taken);
      if (taken >= queue.config().size) {
        spdlog::debug("virtio queue '{}': dropped a {}-byte packet: larger than the whole ring", queue.name(),
                      frame.size);
        return {RxStatus::kDropped, 0};
      }
      // As many more buffers as the largest seen so far says, and no more than the
      // guest can still post (it holds the rest of the ring), or it would never kick.
      const size_t left = frame.size - copied + (taken == 0 ? options_.header_size : 0);
      const size_t per_buffer = std::max(largest_buffer_, options_.header_size + 1);
      const size_t wanted = std::max<size_t>(1, (left + per_buffer - 1) / per_buffer);
      more_wanted_ = static_cast<uint16_t>(std::min<size_t>(wanted, queue.config().size - taken));
      found_when_short_ = static_cast<uint16_t>(taken);
      return {RxStatus::kNoBuffers, 0};
    }
    const size_t capacity = chain->writable.total_bytes();
    largest_buffer_ = std::max(largest_buffer_, capacity);
    if (capacity < options_.header_size) {
      queue.mark_broken(QueueError::kRxBufferTooSmall,
                        fmt::format("head {}: {} bytes, header is {}", chain->head, capacity, options_.header_size));
      return {RxStatus::kQueueBroken, 0};
    }
    const bool first = pending_.empty();
    if (first) {
      // Remember where the header goes; num_buffers is known only at the end.
      header_piece_count_ = 0;
      size_t need = options_.header_size;
      for (const IoPiece& piece : chain->writable.pieces()) {
        if (need == 0) break;
        const size_t n = std::min(piece.len, need);
        header_pieces_[header_piece_count_++] = IoPiece{piece.data, n};
        need -= n;
      }
    }
    const size_t offset = first ? options_.header_size : 0;
    const size_t take_bytes = std::min(capacity - offset, frame.size - copied);
    (void)cursor.copy_to(chain->writable.pieces(), offset, take_bytes);
    copied += take_bytes;
    note_written(chain->writable.pieces(), offset + take_bytes);  // the header part is written below
    pending_.push_back(UsedElement{chain->head, static_cast<uint32_t>(offset + take_bytes)});
    if (copied >= frame.size) break;
  }
  NetHeader out = header;
  out.num_buffers = static_cast<uint16_t>(pending_.size());
  (void)write_net_header(out, options_.header_size,
                         std::span<const IoPiece>(header_pieces_.data(), header_piece_count_));  // fits: checked
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
