// gso_segment.cpp - a validated GSO frame cut into segments (see gso_segment.h).
//
// Every segment is written whole into the sink's buffer: the headers copied from the
// frame, the piece copied after them, then the length / id / sequence / flag fields
// patched and the checksums computed over the finished bytes. The offsets come from
// validate_offload() on this very frame, so they all lie inside it.
#include "uvhost/backends/gso_segment.h"

#include <array>
#include <cstring>

#include "uvhost/backends/inet_checksum.h"
#include "uvhost/sync/misuse.h"
#include "inet_headers.h"
#include "wire_bytes.h"

namespace uvhost::backends {

std::span<std::byte> PacketSink::buffer(size_t bytes) {
  pending_ = std::make_unique<Packet>();
  pending_->frame.resize(bytes);
  return pending_->frame;
}

bool PacketSink::commit(const virtio::NetHeader& header) {
  pending_->header = header;
  return take(std::move(pending_));
}

namespace {

using namespace inet;

// Where the checksum of this layout's transport lies, relative to its header.
size_t checksum_offset(const OffloadLayout& layout) noexcept {
  return layout.kind == GsoKind::kTcp ? kTcpChecksumAt : kUdpChecksumAt;
}
uint8_t protocol(const OffloadLayout& layout) noexcept {
  return layout.kind == GsoKind::kTcp ? kProtocolTcp : kProtocolUdp;
}

// The source and destination addresses, next to each other in the IP header.
std::span<const std::byte> addresses(std::span<const std::byte> packet, const OffloadLayout& layout) noexcept {
  return layout.ipv6 ? packet.subspan(layout.l3_offset + kIpv6AddressesAt, 32)
                     : packet.subspan(layout.l3_offset + kIpv4AddressesAt, 8);
}

// The IP length field and (IPv4) id and header checksum of a finished segment.
void finish_ip(std::span<std::byte> out, const OffloadLayout& layout, uint16_t ipv4_id) noexcept {
  const size_t l3 = layout.l3_offset;
  if (layout.ipv6) {
    store_be16(out, l3 + kIpv6PayloadLengthAt, static_cast<uint16_t>(out.size() - l3 - kIpv6Header));
    return;
  }
  const size_t header_bytes = layout.l4_offset - l3;
  store_be16(out, l3 + kIpv4TotalLengthAt, static_cast<uint16_t>(out.size() - l3));
  store_be16(out, l3 + kIpv4IdAt, ipv4_id);
  store_be16(out, l3 + kIpv4ChecksumAt, 0);
  store_be16(out, l3 + kIpv4ChecksumAt, static_cast<uint16_t>(~ones_complement_sum(out.subspan(l3, header_bytes))));
}

// The TCP/UDP checksum of a segment whose transport header is at layout.l4_offset and
// runs to the end of `out`: complete, or left partial for a GUEST_CSUM receiver.
void finish_transport_checksum(std::span<std::byte> out, const OffloadLayout& layout, bool partial) noexcept {
  const size_t l4 = layout.l4_offset;
  const size_t field = l4 + checksum_offset(layout);
  const uint16_t pseudo = pseudo_header_sum(addresses(out, layout), protocol(layout), static_cast<uint32_t>(out.size() - l4));
  if (partial) {
    store_be16(out, field, pseudo);
    return;
  }
  store_be16(out, field, 0);
  uint16_t checksum = static_cast<uint16_t>(~ones_complement_sum(out.subspan(l4), pseudo));
  if (checksum == 0 && layout.kind != GsoKind::kTcp) checksum = 0xffff;
  store_be16(out, field, checksum);
}

virtio::NetHeader segment_header(const OffloadLayout& layout, bool partial) noexcept {
  virtio::NetHeader header;
  if (partial) {
    UVHOST_MISUSE_CHECK(layout.l4_offset <= UINT16_MAX, "gso_segment: transport header beyond csum_start's range");
    header.flags = virtio::kNetHdrFlagNeedsCsum;
    header.csum_start = static_cast<uint16_t>(layout.l4_offset);
    header.csum_offset = static_cast<uint16_t>(checksum_offset(layout));
  }
  return header;
}

// The piece [offset, offset + bytes) of the cut range, for segment `index`.
struct Piece {
  size_t index = 0;
  size_t offset = 0;
  size_t bytes = 0;
  bool first() const noexcept { return index == 0; }
};

Piece piece(const OffloadLayout& layout, size_t index, size_t total) noexcept {
  const size_t offset = index * layout.piece_bytes;
  const bool last = index + 1 == layout.segments;
  return Piece{index, offset, last ? total - offset : layout.piece_bytes};
}

// TCP segments and UDP datagrams (USO, and a UFO frame that needs no fragmenting): the
// headers up to the payload repeated, one piece of payload each.
size_t segment_payload(const OffloadLayout& layout, std::span<const std::byte> frame, bool partial,
                       SegmentSink& sink) {
  const size_t head = layout.payload_offset;
  const size_t total = frame.size() - head;
  const size_t l3 = layout.l3_offset;
  const size_t l4 = layout.l4_offset;
  const bool tcp = layout.kind == GsoKind::kTcp;
  const uint16_t first_id = layout.ipv6 ? 0 : load_be16(frame, l3 + kIpv4IdAt);
  const uint32_t first_seq = tcp ? load_be32(frame, l4 + kTcpSeqAt) : 0;
  const uint8_t tcp_flags = tcp ? load8(frame, l4 + kTcpFlagsAt) : 0;
  const virtio::NetHeader header = segment_header(layout, partial);
  for (size_t i = 0; i < layout.segments; ++i) {
    const Piece p = piece(layout, i, total);
    const std::span<std::byte> out = sink.buffer(head + p.bytes);
    if (out.size() != head + p.bytes) return i;
    std::memcpy(out.data(), frame.data(), head);
    std::memcpy(out.data() + head, frame.data() + head + p.offset, p.bytes);
    if (tcp) {
      uint8_t flags = tcp_flags;
      if (i + 1 != layout.segments) flags &= static_cast<uint8_t>(~(kTcpFin | kTcpPsh));
      if (!p.first()) flags &= static_cast<uint8_t>(~kTcpCwr);
      store_be32(out, l4 + kTcpSeqAt, first_seq + static_cast<uint32_t>(p.offset));
      store8(out, l4 + kTcpFlagsAt, flags);
    } else {
      store_be16(out, l4 + kUdpLengthAt, static_cast<uint16_t>(out.size() - l4));
    }
    finish_ip(out, layout, static_cast<uint16_t>(first_id + i));
    finish_transport_checksum(out, layout, partial);
    if (!sink.commit(header)) return i;
  }
  return layout.segments;
}

// UFO: the UDP datagram (header with its length and full checksum, then the payload)
// cut into IP fragments.
size_t segment_fragments(const OffloadLayout& layout, std::span<const std::byte> frame, uint32_t ipv6_fragment_id,
                         SegmentSink& sink) {
  const size_t head = layout.l4_offset;  // everything before the datagram
  const size_t total = frame.size() - head;
  const size_t l3 = layout.l3_offset;
  const size_t fragment_header = layout.ipv6 ? kIpv6FragmentHeader : 0;

  std::array<std::byte, kUdpHeader> udp;
  std::memcpy(udp.data(), frame.data() + head, kUdpHeader);
  store_be16(udp, kUdpLengthAt, static_cast<uint16_t>(total));
  store_be16(udp, kUdpChecksumAt, 0);
  const uint16_t pseudo = pseudo_header_sum(addresses(frame, layout), kProtocolUdp, static_cast<uint32_t>(total));
  uint16_t checksum = static_cast<uint16_t>(
      ~ones_complement_sum(udp, ones_complement_sum(frame.subspan(head + kUdpHeader), pseudo)));
  store_be16(udp, kUdpChecksumAt, checksum == 0 ? 0xffff : checksum);

  const uint16_t id = layout.ipv6 ? 0 : load_be16(frame, l3 + kIpv4IdAt);
  for (size_t i = 0; i < layout.segments; ++i) {
    const Piece p = piece(layout, i, total);
    const bool last = i + 1 == layout.segments;
    const size_t data_at = head + fragment_header;
    const std::span<std::byte> out = sink.buffer(data_at + p.bytes);
    if (out.size() != data_at + p.bytes) return i;
    std::memcpy(out.data(), frame.data(), head);
    // The piece of the datagram; the first one starts with the rebuilt UDP header (a
    // piece is at least 8 bytes: validation refused smaller ones).
    const size_t from_udp = p.first() ? kUdpHeader : 0;
    std::memcpy(out.data() + data_at, udp.data(), from_udp);
    std::memcpy(out.data() + data_at + from_udp, frame.data() + head + p.offset + from_udp, p.bytes - from_udp);
    if (layout.ipv6) {
      // The fragment header: next header, reserved, offset (8-byte units) | M, identification.
      store8(out, layout.protocol_field, kIpv6Fragment);
      store8(out, head, kProtocolUdp);
      store8(out, head + 1, 0);
      store_be16(out, head + 2, static_cast<uint16_t>(p.offset | (last ? 0U : 1U)));
      store_be32(out, head + 4, ipv6_fragment_id);
    } else {
      store_be16(out, l3 + kIpv4FragmentAt, static_cast<uint16_t>((p.offset / 8) | (last ? 0U : kIpv4MoreFragments)));
    }
    finish_ip(out, layout, id);
    if (!sink.commit(segment_header(layout, false))) return i;
  }
  return layout.segments;
}

}  // namespace

size_t gso_segment(const OffloadLayout& layout, std::span<const std::byte> frame, const SegmentOptions& options,
                   SegmentSink& sink) {
  UVHOST_MISUSE_CHECK(layout.kind != GsoKind::kNone && layout.segments > 0, "gso_segment: the frame asks for no GSO");
  UVHOST_MISUSE_CHECK(layout.frame_bytes == frame.size(), "gso_segment: the layout is of another frame");
  if (layout.kind == GsoKind::kUfo && layout.segments > 1) {
    return segment_fragments(layout, frame, options.ipv6_fragment_id, sink);
  }
  return segment_payload(layout, frame, options.partial_checksum, sink);
}

}  // namespace uvhost::backends
