// tx_frame.h - a frame the guest transmitted, seen where it lies: in the guest's
// buffers (a descriptor chain's readable pieces), not copied.
//
// Contract
// --------
//  - `pieces` are host ranges inside guest memory: first the virtio-net header
//    (`header_size` bytes, 10 or 12), then the Ethernet frame (`frame_len` bytes,
//    at least 1). They are valid only during the backend call that received them (the
//    datapath completes the chain right after it returns); a backend that keeps a frame
//    copies it.
//  - Guest memory is hostile and may change while it is read: read each byte that a
//    decision depends on once (read_header() copies the header out; copy the bytes you
//    branch on into your own memory first), and treat anything else as payload that
//    may come out torn, never as something to trust twice.
//  - TxFrame::contiguous() describes an ordinary buffer the same way (a frame that
//    came from somewhere else, e.g. a tap, or a test), so one code path serves both.
//    The header is then not in the pieces at all: header_size 0, and `header` holds it.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "uvhost/virtio/io_vector.h"
#include "uvhost/virtio/net_header.h"

namespace uvhost::backends {

struct TxFrame {
  std::span<const virtio::IoPiece> pieces;  // header (header_size bytes), then the frame
  uint32_t header_size = 0;                 // 10 or 12 from a guest; 0 for contiguous()
  uint32_t frame_len = 0;
  virtio::NetHeader header{};               // used only when header_size is 0

  // A frame in ordinary memory; `piece` must outlive the TxFrame (it holds the pointer).
  static TxFrame contiguous(const virtio::NetHeader& header, std::span<const std::byte> frame,
                            virtio::IoPiece& piece) noexcept {
    piece = virtio::IoPiece{const_cast<std::byte*>(frame.data()), frame.size()};
    return TxFrame{std::span<const virtio::IoPiece>(&piece, 1), 0, static_cast<uint32_t>(frame.size()), header};
  }

  // The virtio-net header, copied out of guest memory once and decoded (num_buffers as
  // the guest wrote it: meaningless on transmit).
  virtio::NetHeader read_header() const noexcept;

  // Copies frame bytes [offset, offset + dst.size()) into dst; returns how many (fewer
  // only past the end of the frame).
  size_t copy_frame(size_t offset, std::span<std::byte> dst) const noexcept {
    if (offset >= frame_len) return 0;
    if (dst.size() > frame_len - offset) dst = dst.first(frame_len - offset);
    const size_t from = header_size + offset;
    if (!pieces.empty() && pieces[0].len >= from + dst.size()) [[likely]] {  // all in the first piece
      virtio::copy_bytes(dst.data(), pieces[0].data + from, dst.size());
      return dst.size();
    }
    return virtio::copy_from_pieces(pieces, from, dst);
  }

  // Fills `out` with iovecs of frame bytes from `offset` on (the header skipped), for
  // writev; returns how many were used, or 0 when `out` is too short to hold them all.
  size_t frame_iovecs(size_t offset, std::span<iovec> out) const noexcept;
};

}  // namespace uvhost::backends
