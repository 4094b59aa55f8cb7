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
//    across pops allocates only while warming up.
//  - copy_from_pieces / copy_to_pieces copy payload bytes with memcpy. Payload is
//    guest memory the guest may be writing concurrently (a broken or hostile guest):
//    that yields torn bytes for that packet, never a wrong control decision, because
//    nothing we branch on is read from payload through these helpers more than once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace uvhost::virtio {

struct IoPiece {
  std::byte* data = nullptr;
  size_t len = 0;
};

class IoVector {
 public:
  static constexpr size_t kDefaultMaxPieces = 1024;

  explicit IoVector(size_t max_pieces = kDefaultMaxPieces) : max_pieces_(max_pieces) {}

  // false (and nothing appended) when the vector already holds max_pieces pieces.
  [[nodiscard]] bool push_back(IoPiece piece) {
    if (pieces_.size() >= max_pieces_) return false;
    pieces_.push_back(piece);
    total_bytes_ += piece.len;
    return true;
  }

  // Drops pieces beyond the first `count` (used to undo a failed translation).
  void truncate(size_t count) {
    while (pieces_.size() > count) {
      total_bytes_ -= pieces_.back().len;
      pieces_.pop_back();
    }
  }

  void clear() noexcept {
    pieces_.clear();
    total_bytes_ = 0;
  }

  std::span<const IoPiece> pieces() const noexcept { return pieces_; }
  size_t size() const noexcept { return pieces_.size(); }
  bool empty() const noexcept { return pieces_.empty(); }
  size_t total_bytes() const noexcept { return total_bytes_; }
  size_t max_pieces() const noexcept { return max_pieces_; }
  const IoPiece& operator[](size_t i) const noexcept { return pieces_[i]; }

 private:
  std::vector<IoPiece> pieces_;
  size_t max_pieces_;
  size_t total_bytes_ = 0;
};

// Copies up to dst.size() bytes starting `offset` bytes into the pieces; returns the
// number copied (less than dst.size() only when the pieces end first).
size_t copy_from_pieces(std::span<const IoPiece> pieces, size_t offset, std::span<std::byte> dst) noexcept;

// Copies up to src.size() bytes into the pieces starting at `offset`; returns the
// number copied (less than src.size() only when the pieces end first).
size_t copy_to_pieces(std::span<const IoPiece> pieces, size_t offset, std::span<const std::byte> src) noexcept;

}  // namespace uvhost::virtio
