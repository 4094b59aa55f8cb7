// offload_validate.h - checking a guest's virtio-net offload header against the frame
// it came with, before anything acts on it (forwarding it to a guest that takes the
// offload, completing its checksum, or segmenting it in software: gso_segment.h).
//
// Contract
// --------
//  validate_offload(header, frame, sender_features, limits) returns the first reason
//  the header does not fit the frame (OffloadReason, names from to_string), or kOk
//  with the frame's layout. The guest is hostile: every field may be wrong, and no
//  value leads to a read outside `frame` or to work beyond the limits. In order:
//  - NEEDS_CSUM: the sender must have negotiated VIRTIO_NET_F_CSUM, and the 2-byte
//    checksum field at csum_start + csum_offset must lie inside the frame.
//  - gso_type NONE: nothing more to check (kOk, layout kind kNone). Flags other than
//    NEEDS_CSUM are ignored (a driver must not set them; the device ignores them).
//  - Otherwise, as Linux's virtio_net_hdr_to_skb and the GSO code behind it accept it:
//    a known type (TCPV4, TCPV6, UDP (UFO), UDP_L4 (USO); the ECN bit alone is
//    unknown), the ECN bit only on TCP and only with HOST_ECN, the type's HOST_*
//    feature negotiated by the sender, NEEDS_CSUM set (the spec requires it with
//    GSO), gso_size not 0.
//  - hdr_len is only a hint: without VIRTIO_NET_F_GUEST_HDRLEN a driver's hdr_len need
//    not be the header length (Linux guests send the length of their skb's linear
//    part), and even with it a wrong value must not hurt. The headers are parsed
//    instead; like Linux's tun/vhost-net, hdr_len beyond the frame is refused.
//  - The frame: Ethernet, at most two VLAN tags (802.1Q / 802.1ad), then IPv4 (TCPV4;
//    UDP and UDP_L4 too) or IPv6 (TCPV6; UDP and UDP_L4 too). IPv4: version 4, header
//    length 20..60 inside the frame, not a fragment (MF or an offset), options are
//    kept and copied into every segment (as Linux's GSO does). IPv6: version 6, then at
//    most kMaxIpv6ExtensionHeaders hop-by-hop / destination-options headers (they stay
//    in front of a fragment header, as Linux puts them); routing, fragment and any
//    other header refuse the frame. The IPv4 total length / IPv6 payload length are
//    not compared with the frame (Linux ignores them for GSO: the frame's length is
//    the datagram's); segments get fresh ones.
//  - The transport: TCP (data offset 5..15, inside the frame) or UDP (8 bytes), and
//    the checksum csum_start / csum_offset describe is that transport's (csum_start at
//    its header, csum_offset 16 for TCP, 6 for UDP).
//  - Segments: TCP and USO cut the payload after the transport header into gso_size
//    pieces; UFO cuts everything after the IP headers (the UDP header included) into
//    IP fragments of gso_size rounded down to a multiple of 8 (fragment offsets count
//    8-byte units; gso_size below 8 is refused). A payload that fits in one piece is
//    one segment (Linux treats such a frame as not GSO at all). More than
//    limits.max_segments segments, or a segment (or, for UFO, the datagram) longer
//    than an IP length field holds, is refused: the work one frame causes is bounded
//    by its size and max_segments.
//  validate_offload_head(header, head, frame_bytes, ...) is the same check for a frame
//  of which only the first bytes are at hand (`head`, e.g. copied out of guest memory
//  once): the headers are read from head only, while every length, range and count is
//  the whole frame's (frame_bytes). A frame whose headers run past head is refused as
//  if it ended there (the caller may look again with all of it). validate_offload(h,
//  frame, ...) is validate_offload_head(h, frame, frame.size(), ...).
//  has_offloads(header): the header asks for something (NEEDS_CSUM or a gso_type), so
//  its frame needs this check before anything acts on it.
//  Plain functions, no state, no allocation; cost is the header parse (no payload read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "uvhost/base/name_table.h"
#include "uvhost/virtio/net_header.h"

namespace uvhost::backends {

using base::to_string;

enum class OffloadReason : uint8_t {
  kOk,
  kChecksumNotNegotiated,   // NEEDS_CSUM without VIRTIO_NET_F_CSUM
  kChecksumOutsideFrame,    // csum_start / csum_offset: the field is not inside the frame
  kUnknownGsoType,          // not TCPV4, TCPV6, UDP or UDP_L4 (with or without ECN)
  kEcnNotTcp,               // the ECN bit on UDP or UDP_L4
  kEcnNotNegotiated,        // the ECN bit without VIRTIO_NET_F_HOST_ECN
  kGsoNotNegotiated,        // a GSO type without its VIRTIO_NET_F_HOST_* feature
  kGsoWithoutChecksum,      // a GSO type without NEEDS_CSUM
  kGsoSizeZero,             // a GSO type with gso_size 0
  kHdrLenBeyondFrame,       // hdr_len larger than the frame
  kNotIp,                   // not (VLAN-tagged) Ethernet carrying the IP version the type needs
  kBadIpHeader,             // IP version, header length, or a header cut off by the frame's end
  kIpFragment,              // already an IPv4 fragment
  kIpv6ExtensionHeader,     // an IPv6 extension header we do not segment (routing, fragment, ...)
  kWrongTransport,          // not TCP for TCPV4/TCPV6, not UDP for UDP/UDP_L4
  kBadTransportHeader,      // TCP data offset below 5, or the TCP/UDP header cut off
  kChecksumNotAtTransport,  // csum_start / csum_offset do not name the TCP/UDP checksum
  kGsoSizeTooSmall,         // UFO with gso_size below 8
  kTooManySegments,         // more than limits.max_segments segments
  kSegmentTooLarge,         // a segment (UFO: the datagram) longer than an IP length field holds
  kCount
};
inline constexpr size_t kOffloadReasonCount = static_cast<size_t>(OffloadReason::kCount);
// Metric labels and log names of the reasons (every value but kCount).
inline constexpr auto kOffloadReasonNames = base::name_table<OffloadReason>({
    {OffloadReason::kOk, "ok"},
    {OffloadReason::kChecksumNotNegotiated, "checksum_not_negotiated"},
    {OffloadReason::kChecksumOutsideFrame, "checksum_outside_frame"},
    {OffloadReason::kUnknownGsoType, "unknown_gso_type"},
    {OffloadReason::kEcnNotTcp, "ecn_not_tcp"},
    {OffloadReason::kEcnNotNegotiated, "ecn_not_negotiated"},
    {OffloadReason::kGsoNotNegotiated, "gso_not_negotiated"},
    {OffloadReason::kGsoWithoutChecksum, "gso_without_checksum"},
    {OffloadReason::kGsoSizeZero, "gso_size_zero"},
    {OffloadReason::kHdrLenBeyondFrame, "hdr_len_beyond_frame"},
    {OffloadReason::kNotIp, "not_ip"},
    {OffloadReason::kBadIpHeader, "bad_ip_header"},
    {OffloadReason::kIpFragment, "ip_fragment"},
    {OffloadReason::kIpv6ExtensionHeader, "ipv6_extension_header"},
    {OffloadReason::kWrongTransport, "wrong_transport"},
    {OffloadReason::kBadTransportHeader, "bad_transport_header"},
    {OffloadReason::kChecksumNotAtTransport, "checksum_not_at_transport"},
    {OffloadReason::kGsoSizeTooSmall, "gso_size_too_small"},
    {OffloadReason::kTooManySegments, "too_many_segments"},
    {OffloadReason::kSegmentTooLarge, "segment_too_large"},
});
static_assert(kOffloadReasonNames.size() == kOffloadReasonCount);

constexpr const auto& enum_names(OffloadReason) noexcept { return kOffloadReasonNames; }

enum class GsoKind : uint8_t {
  kNone,  // no segmentation asked for (a partial checksum at most)
  kTcp,   // TCPV4 / TCPV6: TCP segments
  kUfo,   // UDP: IP fragments of one UDP datagram
  kUso,   // UDP_L4: one UDP datagram per piece
};

inline constexpr size_t kMaxIpv6ExtensionHeaders = 4;

struct OffloadLimits {
  // A 64 KiB TCP frame cut at TCP's default MSS of 536 is 123 segments; Linux caps USO
  // at 64 (later 128) segments. Twice that leaves room, and caps one frame's work.
  size_t max_segments = 256;
};

// Where things are in a frame that passed validation (offsets from the frame's start).
// For kind kNone only kind and frame_bytes are set.
struct OffloadLayout {
  GsoKind kind = GsoKind::kNone;
  bool ipv6 = false;
  size_t frame_bytes = 0;      // the frame validated
  size_t l3_offset = 0;        // IP header (after Ethernet and VLAN tags)
  size_t protocol_field = 0;   // the byte that names the transport (IPv4 protocol, last IPv6 next header)
  size_t l4_offset = 0;        // TCP/UDP header
  size_t payload_offset = 0;   // after the TCP/UDP header
  size_t piece_bytes = 0;      // bytes cut per segment (TCP, USO: payload; UFO: of the UDP datagram)
  size_t segments = 0;         // segments gso_segment emits (>= 1)
  size_t max_segment_bytes = 0;  // the longest segment's frame
};

struct OffloadCheck {
  OffloadReason reason = OffloadReason::kOk;
  OffloadLayout layout;  // meaningful when ok()
  bool ok() const noexcept { return reason == OffloadReason::kOk; }
};

OffloadCheck validate_offload(const virtio::NetHeader& header, std::span<const std::byte> frame,
                              uint64_t sender_features, const OffloadLimits& limits = {}) noexcept;
OffloadCheck validate_offload_head(const virtio::NetHeader& header, std::span<const std::byte> head,
                                   size_t frame_bytes, uint64_t sender_features,
                                   const OffloadLimits& limits = {}) noexcept;

constexpr bool has_offloads(const virtio::NetHeader& header) noexcept {
  return (header.flags & virtio::kNetHdrFlagNeedsCsum) != 0 || header.gso_type != virtio::kNetGsoNone;
}

}  // namespace uvhost::backends
