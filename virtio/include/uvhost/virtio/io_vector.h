// io_vector.h - host-side pieces of a guest buffer (an iovec that knows its limit).
//
// Contract
// --------
//  - An IoPiece is one contiguous host range {data, len} inside a mapped guest region.
//    It is valid only while the GuestMemoryMap that produced it is alive: callers that
//    publish the map through ReadMostly must use pieces inside the same read() section.
//  - IoVector is a growable list of pieces with a hard cap (max_pieces). push_back()
//    refuses (returns false) instead of growing past the cap, so a hostile chain can
//    never make us allocate without bound. clear() keeps the capacity: a vector reused
//    across pops allocates only while warming up (growing is out of line, so the
//    append that runs once per descriptor stays a compare and two stores).
//  - copy_from_pieces / copy_to_pieces copy payload bytes with memcpy. Payload is
//    guest memory the guest may be writing concurrently (a broken or hostile guest):
//    that yields torn bytes for that packet, never a wrong control decision, because
//    nothing we branch on is read from payload through these helpers more than once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "uvhost/virtio/copy_bytes.h"

namespace uvhost::virtio {

struct IoPiece {
  std::byte* data = nullptr;
  size_t len = 0;
};

class IoVector {
 public:
  static constexpr size_t kDefaultMaxPieces = 1024;

  explicit IoVector(size_t max_pieces = kDefaultMaxPieces) : max_pieces_(max_pieces) {}
  IoVector(const IoVector& other);
  IoVector& operator=(const IoVector& other);
  IoVector(IoVector&& other) noexcept = default;
  IoVector& operator=(IoVector&& other) noexcept = default;
  ~IoVector() = default;

  // false (and nothing appended) when the vector already holds max_pieces pieces.
  // Inline and branch-light: it runs once per descriptor.
  [[nodiscard, gnu::always_inline]] bool push_back(IoPiece piece) {
    if (size_ == capacity_) [[unlikely]] {
      if (!grow()) return false;
    }
    data_[size_++] = piece;
    total_bytes_ += piece.len;
    return true;
  }

  // Drops pieces beyond the first `count` (used to undo a failed translation).
  void truncate(size_t count) {
    while (size_ > count) total_bytes_ -= data_[--size_].len;
  }

  void clear() noexcept {
    size_ = 0;
    total_bytes_ = 0;
  }

  std::span<const IoPiece> pieces() const noexcept { return {data_.get(), size_}; }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t total_bytes() const noexcept { return total_bytes_; }
  size_t max_pieces() const noexcept { return max_pieces_; }
  const IoPiece& operator[](size_t i) const noexcept { return data_[i]; }

 private:
  // Doubles the storage (at least 4 pieces), never past max_pieces; false when full.
  bool grow();

  std::unique_ptr<IoPiece[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
  size_t max_pieces_;
  size_t total_bytes_ = 0;
};

// Copies up to dst.size() bytes starting `offset` bytes into the pieces; returns the
// number copied (less than dst.size() only when the pieces end first). Inline: it runs
// once or twice per packet.
inline size_t copy_from_pieces(std::span<const IoPiece> pieces, size_t offset, std::span<std::byte> dst) noexcept {
  size_t p = 0;
  while (p < pieces.size() && offset >= pieces[p].len) offset -= pieces[p++].len;
  size_t copied = 0;
  for (; p < pieces.size() && copied < dst.size(); ++p, offset = 0) {
    const size_t n = std::min(pieces[p].len - offset, dst.size() - copied);
    copy_bytes(dst.data() + copied, pieces[p].data + offset, n);
    copied += n;
  }
  return copied;
}

// Copies up to src.size() bytes into the pieces starting at `offset`; returns the
// number copied (less than src.size() only when the pieces end first).
inline size_t copy_to_pieces(std::span<const IoPiece> pieces, size_t offset, std::span<const std::byte> src) noexcept {
  size_t p = 0;
  while (p < pieces.size() && offset >= pieces[p].len) offset -= pieces[p++].len;
  size_t copied = 0;
  for (; p < pieces.size() && copied < src.size(); ++p, offset = 0) {
    const size_t n = std::min(pieces[p].len - offset, src.size() - copied);
    copy_bytes(pieces[p].data + offset, src.data() + copied, n);
    copied += n;
  }
  return copied;
}

}  // namespace uvhost::virtio
