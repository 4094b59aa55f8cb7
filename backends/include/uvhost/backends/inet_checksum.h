// inet_checksum.h - the Internet checksum (RFC 1071) of IPv4 headers and of TCP/UDP
// with their pseudo-header, as software checksum offload needs it.
//
// Contract
// --------
//  - A "sum" here is the 16-bit one's-complement sum of big-endian 16-bit words, folded
//    (end-around carries added back) and not inverted, as a host-order uint16_t. A
//    checksum field holds the inverted sum of everything it covers (the field itself
//    counted as 0); summing the covered bytes with a correct field gives 0xffff.
//  - ones_complement_sum(bytes, initial): the sum of `bytes` plus `initial` (itself a
//    sum, e.g. a pseudo-header's). A lone last byte counts as the high byte of a word
//    whose low byte is 0. The words pair up from bytes[0], so a range that starts at an
//    odd offset of a packet must not be summed separately and added (sum it with the
//    bytes before it, or use whole ranges as below). Reads 8 bytes at a time: it runs
//    on 64 KiB frames.
//  - pseudo_header_sum(addresses, protocol, l4_length): the sum of a TCP/UDP
//    pseudo-header. `addresses` are the source and destination addresses as they lie
//    next to each other in the IP header (8 bytes for IPv4, 32 for IPv6); the IPv4
//    (RFC 793/768) and IPv6 (RFC 8200, 8.1) pseudo-headers sum to the same value.
//  - complete_checksum(frame, start, offset): what a device does for a virtio-net
//    header with NEEDS_CSUM (virtio 1.2, 5.1.6.2): the checksum field at start+offset
//    becomes the inverted sum of frame[start, end), the field as the sender left it
//    included (a pseudo-header sum, so the result is the full TCP/UDP checksum). A
//    result of 0 is stored as 0xffff (the same for TCP, and "checksummed" for UDP,
//    where 0 would mean "no checksum"). false, frame untouched, when start is not
//    inside the frame or the 2-byte field is not.
//  - Plain functions, no state, no allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uvhost::backends {

constexpr uint16_t ones_complement_add(uint16_t a, uint16_t b) noexcept {
  const uint32_t sum = uint32_t{a} + b;
  return static_cast<uint16_t>((sum & 0xffffU) + (sum >> 16));
}

uint16_t ones_complement_sum(std::span<const std::byte> bytes, uint16_t initial = 0) noexcept;

uint16_t pseudo_header_sum(std::span<const std::byte> addresses, uint8_t protocol, uint32_t l4_length) noexcept;

[[nodiscard]] bool complete_checksum(std::span<std::byte> frame, size_t start, size_t offset) noexcept;

}  // namespace uvhost::backends
