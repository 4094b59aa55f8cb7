// frames.h - test frames shared by the layers' tests: Ethernet frames whose payload
// depends on a sequence number (a frame delivered twice, out of order or torn is
// noticed), and what a MAC-swapping reflector (loopback, testpmd macswap) returns.
// Test-only: nothing outside */tests/ includes this.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace uvhost::testing {

inline constexpr std::array<uint8_t, 6> kTestDst{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
inline constexpr std::array<uint8_t, 6> kTestSrc{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};

// `size` bytes: kTestDst, kTestSrc, EtherType 0x88B5 (local experimental), then a
// payload that depends on `seq`. size must be at least 14.
inline std::vector<std::byte> make_frame(size_t size, uint32_t seq) {
  std::vector<std::byte> frame(size);
  for (size_t i = 0; i < 6; ++i) {
    frame[i] = std::byte{kTestDst[i]};
    frame[6 + i] = std::byte{kTestSrc[i]};
  }
  frame[12] = std::byte{0x88};
  frame[13] = std::byte{0xB5};
  for (size_t i = 14; i < size; ++i) frame[i] = static_cast<std::byte>((seq * 131u + i * 7u) & 0xffu);
  return frame;
}

// The same frame with destination and source MAC swapped.
inline std::vector<std::byte> reflected(std::vector<std::byte> frame) {
  std::swap_ranges(frame.begin(), frame.begin() + 6, frame.begin() + 6);
  return frame;
}

}  // namespace uvhost::testing
