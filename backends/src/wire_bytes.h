// wire_bytes.h (private to the backends library) - big-endian fields of packet headers
// read from and written to byte spans. The caller has checked that the field lies
// inside the span (these do not check, in release builds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uvhost::backends {

inline uint8_t load8(std::span<const std::byte> bytes, size_t at) noexcept { return std::to_integer<uint8_t>(bytes[at]); }

inline uint16_t load_be16(std::span<const std::byte> bytes, size_t at) noexcept {
  return static_cast<uint16_t>((std::to_integer<unsigned>(bytes[at]) << 8) | std::to_integer<unsigned>(bytes[at + 1]));
}

inline uint32_t load_be32(std::span<const std::byte> bytes, size_t at) noexcept {
  return (uint32_t{load_be16(bytes, at)} << 16) | load_be16(bytes, at + 2);
}

inline void store8(std::span<std::byte> bytes, size_t at, uint8_t value) noexcept { bytes[at] = std::byte{value}; }

inline void store_be16(std::span<std::byte> bytes, size_t at, uint16_t value) noexcept {
  bytes[at] = std::byte{static_cast<uint8_t>(value >> 8)};
  bytes[at + 1] = std::byte{static_cast<uint8_t>(value)};
}

inline void store_be32(std::span<std::byte> bytes, size_t at, uint32_t value) noexcept {
  store_be16(bytes, at, static_cast<uint16_t>(value >> 16));
  store_be16(bytes, at + 2, static_cast<uint16_t>(value));
}

}  // namespace uvhost::backends
