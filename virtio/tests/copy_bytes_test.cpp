// copy_bytes_test.cpp - copy_bytes copies exactly n bytes for every size it branches on
// (0 to 3, 4 to 7, 8 to 16, 17 to 32, 33 to 64, longer), at every alignment, and
// writes nothing outside them; copy_from_pieces / copy_to_pieces through it.
#include <array>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "uvhost/virtio/copy_bytes.h"
#include "uvhost/virtio/io_vector.h"

namespace uvhost::virtio {
namespace {

constexpr std::byte kGuard{0xEE};

std::vector<std::byte> numbered(size_t n, uint8_t seed) {
  std::vector<std::byte> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = std::byte(static_cast<uint8_t>(seed + i * 7));
  return bytes;
}

TEST(CopyBytes, EverySizeAndAlignmentCopiesExactlyNBytes) {
  constexpr size_t kMaxSize = 200;
  constexpr size_t kSlack = 40;
  const std::vector<std::byte> source = numbered(kMaxSize + 16, 3);
  for (size_t n = 0; n <= kMaxSize; ++n) {
    for (size_t src_offset = 0; src_offset < 8; ++src_offset) {
      for (size_t dst_offset = 0; dst_offset < 8; ++dst_offset) {
        std::vector<std::byte> dst(kSlack + kMaxSize + kSlack, kGuard);
        copy_bytes(dst.data() + kSlack + dst_offset, source.data() + src_offset, n);
        for (size_t i = 0; i < dst.size(); ++i) {
          const size_t start = kSlack + dst_offset;
          const std::byte want = (i >= start && i < start + n) ? source[src_offset + i - start] : kGuard;
          ASSERT_EQ(dst[i], want) << "n " << n << " src+" << src_offset << " dst+" << dst_offset << " byte " << i;
        }
      }
    }
  }
}

TEST(CopyBytes, SmallFixedDestinationsTakeOnlyTheirSize) {
  // The shapes the datapath copies into: a 12-byte array (MAC addresses, a header).
  const std::vector<std::byte> source = numbered(64, 9);
  std::array<std::byte, 12 + 4> dst;
  dst.fill(kGuard);
  copy_bytes(dst.data(), source.data(), 12);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(dst[i], source[i]);
  for (size_t i = 12; i < dst.size(); ++i) EXPECT_EQ(dst[i], kGuard);
}

TEST(CopyBytes, PiecesCopyAcrossEveryBoundary) {
  // A 12-byte header piece, then 1-, 5-, 33- and 70-byte pieces: every branch of
  // copy_bytes is taken by some (offset, length) below.
  std::vector<std::byte> a = numbered(12, 1), b = numbered(1, 50), c = numbered(5, 60), d = numbered(33, 70),
                         e = numbered(70, 90);
  const std::array<IoPiece, 5> pieces{IoPiece{a.data(), a.size()}, IoPiece{b.data(), b.size()},
                                      IoPiece{c.data(), c.size()}, IoPiece{d.data(), d.size()},
                                      IoPiece{e.data(), e.size()}};
  std::vector<std::byte> flat;
  for (const IoPiece& piece : pieces) flat.insert(flat.end(), piece.data, piece.data + piece.len);
  for (size_t offset = 0; offset <= flat.size(); ++offset) {
    for (size_t len = 0; offset + len <= flat.size() + 3; len += 1 + len / 8) {
      std::vector<std::byte> out(len + 8, kGuard);
      const size_t copied = copy_from_pieces(pieces, offset, std::span(out).first(len));
      ASSERT_EQ(copied, std::min(len, flat.size() - offset));
      for (size_t i = 0; i < copied; ++i) ASSERT_EQ(out[i], flat[offset + i]) << offset << "+" << i;
      for (size_t i = copied; i < out.size(); ++i) ASSERT_EQ(out[i], kGuard);
    }
  }
  // And back: writing a pattern into the pieces changes exactly the bytes addressed.
  const std::vector<std::byte> pattern = numbered(flat.size(), 200);
  for (size_t offset = 0; offset < flat.size(); offset += 3) {
    const size_t len = std::min<size_t>(41, flat.size() - offset);
    std::vector<std::byte> before;
    for (const IoPiece& piece : pieces) before.insert(before.end(), piece.data, piece.data + piece.len);
    ASSERT_EQ(copy_to_pieces(pieces, offset, std::span(pattern).subspan(offset, len)), len);
    size_t at = 0;
    for (const IoPiece& piece : pieces) {
      for (size_t i = 0; i < piece.len; ++i, ++at) {
        const std::byte want = (at >= offset && at < offset + len) ? pattern[at] : before[at];
        ASSERT_EQ(piece.data[i], want) << "offset " << offset << " byte " << at;
      }
    }
  }
}

}  // namespace
}  // namespace uvhost::virtio
