// frontend_frame.h - the frames uvhost-frontend-send sends, and the check of every
// frame that comes back to it (testpmd io / macswap, uvhost's loopback).
//
// Layout (size >= kMinFrameSize):
//   0..5    destination MAC 02:00:00:00:00:02
//   6..11   source MAC      02:00:00:00:00:01
//   12..13  EtherType 0x88B5 (IEEE local experimental: nothing else on the path sends it)
//   14..21  sequence number (64 bits, little-endian)
//   22..25  FNV-1a (32 bits, little-endian) of bytes 14..21 and 26..end
//   26..    filler derived from the sequence number (byte i: low byte of seq * 131 + i)
// A reflected frame must be the frame that was sent, byte for byte, with the MACs kept
// (io) or exchanged (macswap); the checksum catches a damaged sequence number, the filler
// a frame whose bytes belong to another sequence number.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace frontend_frame {

inline constexpr size_t kMinFrameSize = 26;
inline constexpr std::array<std::byte, 6> kDst{std::byte{2}, std::byte{0}, std::byte{0},
                                               std::byte{0}, std::byte{0}, std::byte{2}};
inline constexpr std::array<std::byte, 6> kSrc{std::byte{2}, std::byte{0}, std::byte{0},
                                               std::byte{0}, std::byte{0}, std::byte{1}};

inline uint64_t load_le(std::span<const std::byte> bytes, size_t at, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= static_cast<uint64_t>(bytes[at + i]) << (8 * i);
  return v;
}

inline void store_le(std::span<std::byte> bytes, size_t at, size_t width, uint64_t v) {
  for (size_t i = 0; i < width; ++i) bytes[at + i] = static_cast<std::byte>(v >> (8 * i));
}

inline std::byte filler(uint64_t seq, size_t i) { return static_cast<std::byte>(seq * 131 + i); }

// FNV-1a over the sequence number and the filler (everything but the MACs, the
// EtherType and the checksum field itself).
inline uint32_t checksum(std::span<const std::byte> frame) {
  uint32_t h = 2166136261u;
  auto mix = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) h = (h ^ static_cast<uint32_t>(frame[i])) * 16777619u;
  };
  mix(14, 22);
  mix(26, frame.size());
  return h;
}

// Writes frame number `seq` into `frame` (its size is the frame's size).
inline void build(std::span<std::byte> frame, uint64_t seq) {
  std::memcpy(frame.data(), kDst.data(), 6);
  std::memcpy(frame.data() + 6, kSrc.data(), 6);
  frame[12] = std::byte{0x88};
  frame[13] = std::byte{0xB5};
  store_le(frame, 14, 8, seq);
  for (size_t i = 26; i < frame.size(); ++i) frame[i] = filler(seq, i);
  store_le(frame, 22, 4, checksum(frame));
}

enum class MacOrder { kAsSent, kSwapped, kEither };

// What the receiver tallies over every frame that came back.
struct EchoCheck {
  size_t size = 0;
  MacOrder macs = MacOrder::kEither;
  uint64_t next = 0;          // the sequence number expected next
  uint64_t bad = 0;           // wrong size, MACs, EtherType, checksum or filler
  uint64_t out_of_order = 0;  // a sequence number other than the one expected
  uint64_t duplicates = 0;    // ...of those, one that came back before (lower than expected)

  bool macs_ok(std::span<const std::byte> f) const {
    const bool as_sent = std::memcmp(f.data(), kDst.data(), 6) == 0 && std::memcmp(f.data() + 6, kSrc.data(), 6) == 0;
    const bool swapped = std::memcmp(f.data(), kSrc.data(), 6) == 0 && std::memcmp(f.data() + 6, kDst.data(), 6) == 0;
    switch (macs) {
      case MacOrder::kAsSent: return as_sent;
      case MacOrder::kSwapped: return swapped;
      case MacOrder::kEither: return as_sent || swapped;
    }
    return false;
  }

  bool content_ok(std::span<const std::byte> f) const {
    if (f.size() != size || !macs_ok(f) || f[12] != std::byte{0x88} || f[13] != std::byte{0xB5}) return false;
    if (load_le(f, 22, 4) != checksum(f)) return false;
    const uint64_t seq = load_le(f, 14, 8);
    for (size_t i = 26; i < f.size(); ++i) {
      if (f[i] != filler(seq, i)) return false;
    }
    return true;
  }

  // One frame back: its content checked, then its place in the sequence (a single queue
  // reflects in order, so frame k must be the k-th to come back).
  void take(std::span<const std::byte> f) {
    if (!content_ok(f)) {
      ++bad;
      return;
    }
    const uint64_t seq = load_le(f, 14, 8);
    if (seq != next) {
      ++out_of_order;
      if (seq < next) {
        ++duplicates;
        return;
      }
    }
    next = seq + 1;
  }

  bool clean() const { return bad == 0 && out_of_order == 0; }
};

}  // namespace frontend_frame
