// offload_validate.cpp - a guest's offload header checked against its frame (see
// offload_validate.h). Every read below is preceded by a bounds check against the
// frame's size; offsets are size_t and never wrap (each is at most the frame size
// plus a small constant).
#include "uvhost/backends/offload_validate.h"

#include "uvhost/backends/net_features.h"
#include "inet_headers.h"
#include "wire_bytes.h"

namespace uvhost::backends {

namespace {

using namespace inet;

constexpr size_t kMaxVlanTags = 2;

// What the gso_type asks for.
struct GsoRequest {
  GsoKind kind = GsoKind::kNone;
  bool ipv4 = false;  // which IP versions may carry it
  bool ipv6 = false;
};

bool is_ipv6_extension_header(uint8_t next) noexcept {
  switch (next) {
    case 0: case 43: case 44: case 50: case 51: case 60: case 135: case 139: case 140: case 253: case 254:
      return true;
    default:
      return false;
  }
}

OffloadReason check_partial_checksum(const virtio::NetHeader& header, size_t frame_bytes, uint64_t features) noexcept {
  if ((header.flags & virtio::kNetHdrFlagNeedsCsum) == 0) return OffloadReason::kOk;
  if (!net_feature::has(features, net_feature::kCsum)) return OffloadReason::kChecksumNotNegotiated;
  const size_t field = size_t{header.csum_start} + header.csum_offset;
  if (header.csum_start >= frame_bytes || field + 2 > frame_bytes) return OffloadReason::kChecksumOutsideFrame;
  return OffloadReason::kOk;
}

OffloadReason classify_gso(const virtio::NetHeader& header, uint64_t features, GsoRequest& request) noexcept {
  const bool ecn = (header.gso_type & virtio::kNetGsoEcn) != 0;
  unsigned needed = 0;
  switch (static_cast<uint8_t>(header.gso_type & ~virtio::kNetGsoEcn)) {
    case virtio::kNetGsoTcpV4: request = {GsoKind::kTcp, true, false}; needed = net_feature::kHostTso4; break;
    case virtio::kNetGsoTcpV6: request = {GsoKind::kTcp, false, true}; needed = net_feature::kHostTso6; break;
    case virtio::kNetGsoUdp: request = {GsoKind::kUfo, true, true}; needed = net_feature::kHostUfo; break;
    case virtio::kNetGsoUdpL4: request = {GsoKind::kUso, true, true}; needed = net_feature::kHostUso; break;
    default: return OffloadReason::kUnknownGsoType;
  }
  if (ecn && request.kind != GsoKind::kTcp) return OffloadReason::kEcnNotTcp;
  if (ecn && !net_feature::has(features, net_feature::kHostEcn)) return OffloadReason::kEcnNotNegotiated;
  if (!net_feature::has(features, needed)) return OffloadReason::kGsoNotNegotiated;
  if ((header.flags & virtio::kNetHdrFlagNeedsCsum) == 0) return OffloadReason::kGsoWithoutChecksum;
  if (header.gso_size == 0) return OffloadReason::kGsoSizeZero;
  return OffloadReason::kOk;
}

// Ethernet and VLAN tags: where the IP header starts, and which version it is.
OffloadReason parse_link(std::span<const std::byte> frame, const GsoRequest& request, OffloadLayout& layout) noexcept {
  if (frame.size() < kEthernetHeader) return OffloadReason::kNotIp;
  size_t offset = kEthernetHeader;
  uint16_t type = load_be16(frame, kEtherTypeAt);
  for (size_t tags = 0; tags < kMaxVlanTags && (type == kEther8021Q || type == kEther8021AD); ++tags) {
    if (frame.size() < offset + kVlanTag) return OffloadReason::kNotIp;
    type = load_be16(frame, offset + 2);  // after the tag's 2-byte TCI
    offset += kVlanTag;
  }
  if (type == kEtherIpv4 && request.ipv4) {
    layout.ipv6 = false;
  } else if (type == kEtherIpv6 && request.ipv6) {
    layout.ipv6 = true;
  } else {
    return OffloadReason::kNotIp;
  }
  layout.l3_offset = offset;
  return OffloadReason::kOk;
}

OffloadReason parse_ipv4(std::span<const std::byte> frame, OffloadLayout& layout) noexcept {
  const size_t l3 = layout.l3_offset;
  if (frame.size() < l3 + kIpv4MinHeader) return OffloadReason::kBadIpHeader;
  const uint8_t version_ihl = load8(frame, l3);
  const size_t header_bytes = size_t{version_ihl & 0x0fU} * 4;
  if ((version_ihl >> 4) != 4 || header_bytes < kIpv4MinHeader || frame.size() < l3 + header_bytes) {
    return OffloadReason::kBadIpHeader;
  }
  if ((load_be16(frame, l3 + kIpv4FragmentAt) & kIpv4FragmentMask) != 0) return OffloadReason::kIpFragment;
  layout.protocol_field = l3 + kIpv4ProtocolAt;
  layout.l4_offset = l3 + header_bytes;
  return OffloadReason::kOk;
}

OffloadReason parse_ipv6(std::span<const std::byte> frame, OffloadLayout& layout) noexcept {
  const size_t l3 = layout.l3_offset;
  if (frame.size() < l3 + kIpv6Header || (load8(frame, l3) >> 4) != 6) return OffloadReason::kBadIpHeader;
  size_t field = l3 + kIpv6NextHeaderAt;
  size_t offset = l3 + kIpv6Header;
  for (size_t headers = 0;; ++headers) {
    const uint8_t next = load8(frame, field);
    if (next != kIpv6HopByHop && next != kIpv6DestinationOptions) {
      if (next == kIpv6Fragment) return OffloadReason::kIpFragment;
      if (is_ipv6_extension_header(next)) return OffloadReason::kIpv6ExtensionHeader;
      break;  // the transport (checked by the caller)
    }
    if (headers == kMaxIpv6ExtensionHeaders || frame.size() < offset + 8) return OffloadReason::kIpv6ExtensionHeader;
    const size_t length = (size_t{load8(frame, offset + 1)} + 1) * 8;  // in 8-byte units, less the first
    if (frame.size() < offset + length) return OffloadReason::kIpv6ExtensionHeader;
    field = offset;
    offset += length;
  }
  layout.protocol_field = field;
  layout.l4_offset = offset;
  return OffloadReason::kOk;
}

OffloadReason parse_transport(std::span<const std::byte> frame, const virtio::NetHeader& header,
                              OffloadLayout& layout) noexcept {
  const bool tcp = layout.kind == GsoKind::kTcp;
  if (load8(frame, layout.protocol_field) != (tcp ? kProtocolTcp : kProtocolUdp)) return OffloadReason::kWrongTransport;
  const size_t l4 = layout.l4_offset;
  size_t header_bytes = kUdpHeader;
  if (tcp) {
    if (frame.size() < l4 + kTcpMinHeader) return OffloadReason::kBadTransportHeader;
    header_bytes = size_t{load8(frame, l4 + kTcpDataOffsetAt)} / 16 * 4;
    if (header_bytes < kTcpMinHeader) return OffloadReason::kBadTransportHeader;
  }
  if (frame.size() < l4 + header_bytes) return OffloadReason::kBadTransportHeader;
  if (header.csum_start != l4 || header.csum_offset != (tcp ? kTcpChecksumAt : kUdpChecksumAt)) {
    return OffloadReason::kChecksumNotAtTransport;
  }
  layout.payload_offset = l4 + header_bytes;
  return OffloadReason::kOk;
}

// How the frame is cut, and whether every piece fits the length fields.
OffloadReason count_segments(size_t gso_size, size_t frame_bytes, const OffloadLimits& limits,
                             OffloadLayout& layout) noexcept {
  const bool ufo = layout.kind == GsoKind::kUfo;
  // UFO cuts the UDP datagram (header included) into fragments; TCP and USO the payload.
  const size_t cut_from = ufo ? layout.l4_offset : layout.payload_offset;
  const size_t bytes = frame_bytes - cut_from;
  layout.piece_bytes = ufo ? gso_size & ~size_t{7} : gso_size;
  if (layout.piece_bytes == 0) return OffloadReason::kGsoSizeTooSmall;
  if (bytes <= gso_size) {
    layout.segments = 1;
    layout.max_segment_bytes = frame_bytes;
  } else {
    layout.segments = (bytes + layout.piece_bytes - 1) / layout.piece_bytes;
    if (layout.segments > limits.max_segments) return OffloadReason::kTooManySegments;
    layout.max_segment_bytes = cut_from + layout.piece_bytes + (ufo && layout.ipv6 ? kIpv6FragmentHeader : 0);
  }
  // The IP length field of the longest segment (IPv4: header included; IPv6: not).
  const size_t ip_start = layout.l3_offset + (layout.ipv6 ? kIpv6Header : 0);
  if (layout.max_segment_bytes - ip_start > kMaxIpLength) return OffloadReason::kSegmentTooLarge;
  // A UFO datagram is reassembled whole: its UDP and IP lengths must fit too.
  if (ufo && (bytes > kMaxIpLength || frame_bytes - ip_start > kMaxIpLength)) return OffloadReason::kSegmentTooLarge;
  return OffloadReason::kOk;
}

// The headers are parsed in `head` (every read bounded by it); lengths and counts are
// those of the whole frame, frame_bytes.
OffloadReason validate(const virtio::NetHeader& header, std::span<const std::byte> head, size_t frame_bytes,
                       uint64_t features, const OffloadLimits& limits, OffloadLayout& layout) noexcept {
  layout.frame_bytes = frame_bytes;
  if (const OffloadReason reason = check_partial_checksum(header, frame_bytes, features); reason != OffloadReason::kOk) {
    return reason;
  }
  if (header.gso_type == virtio::kNetGsoNone) return OffloadReason::kOk;
  GsoRequest request;
  if (const OffloadReason reason = classify_gso(header, features, request); reason != OffloadReason::kOk) return reason;
  if (header.hdr_len > frame_bytes) return OffloadReason::kHdrLenBeyondFrame;
  layout.kind = request.kind;
  OffloadReason reason = parse_link(head, request, layout);
  if (reason == OffloadReason::kOk) reason = layout.ipv6 ? parse_ipv6(head, layout) : parse_ipv4(head, layout);
  if (reason == OffloadReason::kOk) reason = parse_transport(head, header, layout);
  if (reason == OffloadReason::kOk) reason = count_segments(header.gso_size, frame_bytes, limits, layout);
  return reason;
}

}  // namespace

OffloadCheck validate_offload(const virtio::NetHeader& header, std::span<const std::byte> frame,
                              uint64_t sender_features, const OffloadLimits& limits) noexcept {
  return validate_offload_head(header, frame, frame.size(), sender_features, limits);
}

OffloadCheck validate_offload_head(const virtio::NetHeader& header, std::span<const std::byte> head,
                                   size_t frame_bytes, uint64_t sender_features, const OffloadLimits& limits) noexcept {
  OffloadCheck check;
  if (head.size() > frame_bytes) head = head.first(frame_bytes);
  check.reason = validate(header, head, frame_bytes, sender_features, limits, check.layout);
  if (!check.ok()) check.layout = OffloadLayout{};
  return check;
}

}  // namespace uvhost::backends
