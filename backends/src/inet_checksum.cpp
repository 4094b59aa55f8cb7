// inet_checksum.cpp - the Internet checksum, 8 bytes at a time (see inet_checksum.h).
//
// The bytes are added as native 64-bit words with end-around carry, then folded to 16
// bits: a one's-complement sum does not depend on the byte order it is computed in,
// except that the result comes out byte-swapped on a little-endian host (RFC 1071,
// 2(B)), so it is swapped back once at the end.
#include "uvhost/backends/inet_checksum.h"

#include <bit>
#include <cstring>

#include "wire_bytes.h"

namespace uvhost::backends {
namespace {

// sum + value with the carry out of bit 63 added back in (cannot carry again).
inline uint64_t add_carry(uint64_t sum, uint64_t value) noexcept {
  sum += value;
  return sum + (sum < value ? 1U : 0U);
}

inline uint64_t load64(const std::byte* p) noexcept {
  uint64_t value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

uint16_t fold64(uint64_t sum) noexcept {
  sum = (sum & 0xffffffffU) + (sum >> 32);
  sum = (sum & 0xffffffffU) + (sum >> 32);
  sum = (sum & 0xffffU) + (sum >> 16);
  sum = (sum & 0xffffU) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

}  // namespace

uint16_t ones_complement_sum(std::span<const std::byte> bytes, uint16_t initial) noexcept {
  const std::byte* p = bytes.data();
  size_t left = bytes.size();
  // Two chains so consecutive additions do not wait for each other's carry.
  uint64_t a = 0;
  uint64_t b = 0;
  for (; left >= 32; p += 32, left -= 32) {
    a = add_carry(a, load64(p));
    b = add_carry(b, load64(p + 8));
    a = add_carry(a, load64(p + 16));
    b = add_carry(b, load64(p + 24));
  }
  for (; left >= 8; p += 8, left -= 8) a = add_carry(a, load64(p));
  if (left > 0) {
    uint64_t tail = 0;  // the remaining bytes at their places, zeros after them
    std::memcpy(&tail, p, left);
    b = add_carry(b, tail);
  }
  uint16_t sum = fold64(add_carry(a, b));
  if constexpr (std::endian::native == std::endian::little) sum = static_cast<uint16_t>((sum << 8) | (sum >> 8));
  return ones_complement_add(sum, initial);
}

uint16_t pseudo_header_sum(std::span<const std::byte> addresses, uint8_t protocol, uint32_t l4_length) noexcept {
  uint16_t sum = ones_complement_sum(addresses, protocol);
  sum = ones_complement_add(sum, static_cast<uint16_t>(l4_length >> 16));
  return ones_complement_add(sum, static_cast<uint16_t>(l4_length & 0xffffU));
}

bool complete_checksum(std::span<std::byte> frame, size_t start, size_t offset) noexcept {
  if (start >= frame.size() || offset > frame.size() - start || frame.size() - start - offset < 2) return false;
  uint16_t checksum = static_cast<uint16_t>(~ones_complement_sum(frame.subspan(start)));
  if (checksum == 0) checksum = 0xffff;
  store_be16(frame, start + offset, checksum);
  return true;
}

}  // namespace uvhost::backends
