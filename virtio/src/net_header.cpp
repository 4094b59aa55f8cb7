// net_header.cpp - virtio_net_hdr encoding (little-endian, 10 or 12 bytes).
#include "uvhost/virtio/net_header.h"

#include <array>

namespace uvhost::virtio {
namespace {

void put_le16(std::span<std::byte> out, size_t offset, uint16_t value) noexcept {
  out[offset] = static_cast<std::byte>(value & 0xffu);
  out[offset + 1] = static_cast<std::byte>(value >> 8);
}

uint16_t get_le16(std::span<const std::byte> in, size_t offset) noexcept {
  return static_cast<uint16_t>(std::to_integer<uint16_t>(in[offset]) |
                               (std::to_integer<uint16_t>(in[offset + 1]) << 8));
}

}  // namespace

void encode_net_header(const NetHeader& header, size_t header_size, std::span<std::byte> out) noexcept {
  out[0] = std::byte{header.flags};
  out[1] = std::byte{header.gso_type};
  put_le16(out, 2, header.hdr_len);
  put_le16(out, 4, header.gso_size);
  put_le16(out, 6, header.csum_start);
  put_le16(out, 8, header.csum_offset);
  if (header_size >= kNetHeaderSizeMrg) put_le16(out, kNetHeaderNumBuffersOffset, header.num_buffers);
}

NetHeader decode_net_header(std::span<const std::byte> in, size_t header_size) noexcept {
  NetHeader header;
  header.flags = std::to_integer<uint8_t>(in[0]);
  header.gso_type = std::to_integer<uint8_t>(in[1]);
  header.hdr_len = get_le16(in, 2);
  header.gso_size = get_le16(in, 4);
  header.csum_start = get_le16(in, 6);
  header.csum_offset = get_le16(in, 8);
  if (header_size >= kNetHeaderSizeMrg) header.num_buffers = get_le16(in, kNetHeaderNumBuffersOffset);
  return header;
}

bool write_net_header(const NetHeader& header, size_t header_size, std::span<const IoPiece> pieces) noexcept {
  std::array<std::byte, kNetHeaderSizeMrg> bytes{};
  encode_net_header(header, header_size, bytes);
  size_t total = 0;
  for (const IoPiece& piece : pieces) total += piece.len;
  if (total < header_size) return false;
  return copy_to_pieces(pieces, 0, std::span(bytes).first(header_size)) == header_size;
}

std::optional<NetHeader> read_net_header(std::span<const IoPiece> pieces, size_t header_size) noexcept {
  std::array<std::byte, kNetHeaderSizeMrg> bytes{};
  if (copy_from_pieces(pieces, 0, std::span(bytes).first(header_size)) != header_size) return std::nullopt;
  return decode_net_header(bytes, header_size);
}

}  // namespace uvhost::virtio
