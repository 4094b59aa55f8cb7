// tx_frame.cpp - reading a transmitted frame in place (see tx_frame.h).
#include "uvhost/backends/tx_frame.h"

#include <array>

namespace uvhost::backends {

virtio::NetHeader TxFrame::read_header() const noexcept {
  if (header_size == 0) return header;
  // Each byte is read once either way: straight from the first piece when it holds the
  // whole header (the common case), else gathered into a local first.
  if (pieces[0].len >= header_size && header_size <= virtio::kNetHeaderSizeMrg) {
    return virtio::decode_net_header(std::span<const std::byte>(pieces[0].data, header_size), header_size);
  }
  std::array<std::byte, virtio::kNetHeaderSizeMrg> bytes{};
  const size_t size = header_size < bytes.size() ? header_size : bytes.size();
  (void)virtio::copy_from_pieces(pieces, 0, std::span(bytes).first(size));
  return virtio::decode_net_header(bytes, size);
}

size_t TxFrame::frame_iovecs(size_t offset, std::span<iovec> out) const noexcept {
  size_t skip = header_size + offset;
  size_t left = offset < frame_len ? frame_len - offset : 0;
  size_t used = 0;
  for (const virtio::IoPiece& piece : pieces) {
    if (left == 0) break;
    if (skip >= piece.len) {
      skip -= piece.len;
      continue;
    }
    if (used == out.size()) return 0;
    const size_t take = piece.len - skip < left ? piece.len - skip : left;
    out[used++] = iovec{piece.data + skip, take};
    left -= take;
    skip = 0;
  }
  return used;
}

}  // namespace uvhost::backends
