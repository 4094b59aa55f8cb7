// io_vector.cpp - copying across IoPiece lists.
#include "uvhost/virtio/io_vector.h"

#include <algorithm>
#include <cstring>

namespace uvhost::virtio {

size_t copy_from_pieces(std::span<const IoPiece> pieces, size_t offset, std::span<std::byte> dst) noexcept {
  size_t copied = 0;
  for (const IoPiece& piece : pieces) {
    if (copied == dst.size()) break;
    if (offset >= piece.len) {
      offset -= piece.len;
      continue;
    }
    const size_t n = std::min(piece.len - offset, dst.size() - copied);
    std::memcpy(dst.data() + copied, piece.data + offset, n);
    copied += n;
    offset = 0;
  }
  return copied;
}

size_t copy_to_pieces(std::span<const IoPiece> pieces, size_t offset, std::span<const std::byte> src) noexcept {
  size_t copied = 0;
  for (const IoPiece& piece : pieces) {
    if (copied == src.size()) break;
    if (offset >= piece.len) {
      offset -= piece.len;
      continue;
    }
    const size_t n = std::min(piece.len - offset, src.size() - copied);
    std::memcpy(piece.data + offset, src.data() + copied, n);
    copied += n;
    offset = 0;
  }
  return copied;
}

}  // namespace uvhost::virtio
