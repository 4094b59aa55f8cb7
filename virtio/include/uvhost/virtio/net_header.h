// net_header.h - struct virtio_net_hdr and moving it across buffer pieces.
//
// Contract
// --------
//  - NetHeader is the decoded header: flags (NEEDS_CSUM, DATA_VALID, RSC_INFO),
//    gso_type, hdr_len, gso_size, csum_start, csum_offset, num_buffers. uvhost carries
//    the offload fields through untouched: it never interprets or "fixes" them.
//  - On the wire it is little-endian and either 10 bytes (legacy, no num_buffers) or
//    12 bytes (with num_buffers: VIRTIO_NET_F_MRG_RXBUF or VIRTIO_F_VERSION_1).
//  - write/read helpers work on IoPiece lists: the header may be split across pieces
//    (a guest may give a 3-byte first descriptor). They fail (false / nullopt) when the
//    pieces hold fewer bytes than the header, never writing or reading past them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "uvhost/virtio/io_vector.h"

namespace uvhost::virtio {

inline constexpr unsigned kNetFeatureMrgRxbuf = 15;

inline constexpr uint8_t kNetHdrFlagNeedsCsum = 1;
inline constexpr uint8_t kNetHdrFlagDataValid = 2;
inline constexpr uint8_t kNetHdrFlagRscInfo = 4;

inline constexpr uint8_t kNetGsoNone = 0;
inline constexpr uint8_t kNetGsoTcpV4 = 1;
inline constexpr uint8_t kNetGsoUdp = 3;
inline constexpr uint8_t kNetGsoTcpV6 = 4;
inline constexpr uint8_t kNetGsoUdpL4 = 5;
inline constexpr uint8_t kNetGsoEcn = 0x80;

inline constexpr size_t kNetHeaderSizeLegacy = 10;  // without num_buffers
inline constexpr size_t kNetHeaderSizeMrg = 12;     // with num_buffers
inline constexpr size_t kNetHeaderNumBuffersOffset = 10;

constexpr size_t net_header_size(bool has_num_buffers) noexcept {
  return has_num_buffers ? kNetHeaderSizeMrg : kNetHeaderSizeLegacy;
}

struct NetHeader {
  uint8_t flags = 0;
  uint8_t gso_type = 0;
  uint16_t hdr_len = 0;
  uint16_t gso_size = 0;
  uint16_t csum_start = 0;
  uint16_t csum_offset = 0;
  uint16_t num_buffers = 0;  // only on the wire when header_size == 12

  friend bool operator==(const NetHeader&, const NetHeader&) = default;
};

// header_size must be 10 or 12; `out` / `in` must hold at least header_size bytes.
void encode_net_header(const NetHeader& header, size_t header_size, std::span<std::byte> out) noexcept;
NetHeader decode_net_header(std::span<const std::byte> in, size_t header_size) noexcept;

// Writes the header at the start of the pieces. false if they are too short.
[[nodiscard]] bool write_net_header(const NetHeader& header, size_t header_size, std::span<const IoPiece> pieces) noexcept;
// Reads the header from the start of the pieces. nullopt if they are too short.
std::optional<NetHeader> read_net_header(std::span<const IoPiece> pieces, size_t header_size) noexcept;

}  // namespace uvhost::virtio
