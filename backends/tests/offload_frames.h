// offload_frames.h - frames for the offload tests, built field by field with the plain
// reference checksum of tap_test_support.h (sum16 / fold), independently of the code
// under test: Ethernet with VLAN tags, IPv4 (options, fragment fields) or IPv6
// (hop-by-hop / destination-options / routing headers, a fragment header), TCP (with
// options) or UDP, a payload, and the transport checksum full, partial (the
// pseudo-header sum, as a guest sends it with NEEDS_CSUM) or zero. The same builder
// makes a guest's GSO frame and every segment expected from it, so a segment can be
// compared byte for byte. Test-only.
#pragma once

#include <netinet/in.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "tap_test_support.h"
#include "uvhost/backends/net_features.h"
#include "uvhost/virtio/net_header.h"

namespace uvhost::backends::testing {

struct Vlan {
  uint16_t tpid = 0x8100;
  uint16_t tci = 0;
};

struct Ipv6Extension {
  uint8_t type = 0;  // 0 hop-by-hop, 60 destination options, 43 routing
  size_t bytes = 8;  // a multiple of 8
};

struct Ipv6Fragment {
  size_t offset = 0;  // in bytes, a multiple of 8
  bool more = false;
  uint32_t id = 0;
};

enum class L4Checksum { kFull, kPartial, kZero };

struct OffloadFrameSpec {
  Mac destination{0x02, 0, 0, 0, 0, 0x0b};
  Mac source{0x02, 0, 0, 0, 0, 0x0a};
  std::vector<Vlan> vlans;
  bool ipv6 = false;
  uint8_t protocol = IPPROTO_TCP;
  // IPv4
  uint16_t ip_id = 0x1234;
  uint16_t ip_fragment = 0x4000;  // flags and fragment offset (DF)
  Bytes ipv4_options;             // a multiple of 4 bytes
  std::optional<uint16_t> ip_length;  // instead of the real total / payload length
  // IPv6
  std::vector<Ipv6Extension> extensions;
  std::optional<Ipv6Fragment> fragment;  // after the extensions
  // TCP / UDP
  uint16_t port_source = 40000;
  uint16_t port_destination = 5001;
  uint32_t seq = 1000;
  uint32_t ack = 1;
  uint8_t tcp_flags = 0x18;  // ACK | PSH
  Bytes tcp_options;         // a multiple of 4 bytes
  L4Checksum checksum = L4Checksum::kFull;
  Bytes payload;
  std::optional<Bytes> raw_l4;  // the bytes after the IP headers as they are (fragments)
};

// A sender that negotiated every transmit offload (CSUM, HOST_TSO4/TSO6/ECN/UFO/USO).
inline constexpr uint64_t kAllHostOffloads = net_feature::kHostOffloads;

inline constexpr uint32_t kIpv4Source = 0x0a4d0002;       // 10.77.0.2
inline constexpr uint32_t kIpv4Destination = 0x0a4d0001;  // 10.77.0.1

inline void put_ipv6_address(Bytes& out, uint8_t last) {
  put16(out, 0xfd00);
  for (int i = 0; i < 6; ++i) put16(out, static_cast<uint16_t>(0x1111 * (i + 1)));
  put16(out, last);
}

// `size` bytes of a pattern that does not repeat every 2^k bytes.
inline Bytes payload_pattern(size_t size, uint32_t seed = 1) {
  Bytes out(size);
  uint32_t x = seed * 2654435761U + 12345;
  for (auto& b : out) {
    x = x * 1103515245U + 12345U;
    b = std::byte{static_cast<uint8_t>(x >> 16)};
  }
  return out;
}

struct FrameOffsets {
  size_t l3 = 0;
  size_t l4 = 0;       // after the IP header(s), the fragment header included
  size_t payload = 0;  // after the TCP/UDP header
};

inline size_t ipv6_headers_bytes(const OffloadFrameSpec& spec) {
  size_t bytes = 40;
  for (const Ipv6Extension& e : spec.extensions) bytes += e.bytes;
  return bytes + (spec.fragment ? 8 : 0);
}

inline FrameOffsets offsets_of(const OffloadFrameSpec& spec) {
  FrameOffsets at;
  at.l3 = kEthHeader + 4 * spec.vlans.size();
  at.l4 = at.l3 + (spec.ipv6 ? ipv6_headers_bytes(spec) : 20 + spec.ipv4_options.size());
  at.payload = at.l4 + (spec.protocol == IPPROTO_TCP ? 20 + spec.tcp_options.size() : 8);
  return at;
}

// Sum of the pseudo-header of `l4_length` transport bytes of `frame` (IPv4 or IPv6).
inline uint32_t pseudo_sum(const Bytes& frame, size_t l3, bool ipv6, uint8_t protocol, size_t l4_length) {
  const size_t addresses = ipv6 ? l3 + 8 : l3 + 12;
  const size_t end = addresses + (ipv6 ? 32 : 8);
  const auto length = static_cast<uint32_t>(l4_length);
  return sum16(frame, addresses, end) + protocol + (length >> 16) + (length & 0xffff);
}

inline Bytes transport(const OffloadFrameSpec& spec) {
  Bytes l4;
  put16(l4, spec.port_source);
  put16(l4, spec.port_destination);
  if (spec.protocol == IPPROTO_TCP) {
    put32(l4, spec.seq);
    put32(l4, spec.ack);
    put8(l4, static_cast<uint8_t>((5 + spec.tcp_options.size() / 4) << 4));
    put8(l4, spec.tcp_flags);
    put16(l4, 65535);  // window
    put16(l4, 0);      // checksum, later
    put16(l4, 0);      // urgent pointer
    l4.insert(l4.end(), spec.tcp_options.begin(), spec.tcp_options.end());
  } else {
    put16(l4, static_cast<uint16_t>(8 + spec.payload.size()));
    put16(l4, 0);  // checksum, later
  }
  l4.insert(l4.end(), spec.payload.begin(), spec.payload.end());
  return l4;
}

inline Bytes offload_frame(const OffloadFrameSpec& spec) {
  Bytes frame;
  put_mac(frame, spec.destination);
  put_mac(frame, spec.source);
  for (const Vlan& vlan : spec.vlans) {
    put16(frame, vlan.tpid);
    put16(frame, vlan.tci);
  }
  put16(frame, spec.ipv6 ? 0x86dd : 0x0800);
  const FrameOffsets at = offsets_of(spec);
  const Bytes l4 = spec.raw_l4 ? *spec.raw_l4 : transport(spec);
  if (spec.ipv6) {
    put32(frame, 0x60012345);  // version 6, flow label
    put16(frame, spec.ip_length.value_or(static_cast<uint16_t>(ipv6_headers_bytes(spec) - 40 + l4.size())));
    std::vector<uint8_t> chain;
    for (const Ipv6Extension& e : spec.extensions) chain.push_back(e.type);
    if (spec.fragment) chain.push_back(44);
    chain.push_back(spec.protocol);
    put8(frame, chain[0]);
    put8(frame, 64);  // hop limit
    put_ipv6_address(frame, 2);
    put_ipv6_address(frame, 1);
    for (size_t i = 0; i < spec.extensions.size(); ++i) {
      put8(frame, chain[i + 1]);
      put8(frame, static_cast<uint8_t>(spec.extensions[i].bytes / 8 - 1));
      put8(frame, 1);  // PadN option filling the rest
      put8(frame, static_cast<uint8_t>(spec.extensions[i].bytes - 4));
      for (size_t k = 4; k < spec.extensions[i].bytes; ++k) put8(frame, 0);
    }
    if (spec.fragment) {
      put8(frame, spec.protocol);
      put8(frame, 0);
      put16(frame, static_cast<uint16_t>(spec.fragment->offset | (spec.fragment->more ? 1 : 0)));
      put32(frame, spec.fragment->id);
    }
  } else {
    const size_t header = 20 + spec.ipv4_options.size();
    put8(frame, static_cast<uint8_t>(0x40 | (header / 4)));
    put8(frame, 0);
    put16(frame, spec.ip_length.value_or(static_cast<uint16_t>(header + l4.size())));
    put16(frame, spec.ip_id);
    put16(frame, spec.ip_fragment);
    put8(frame, 64);
    put8(frame, spec.protocol);
    put16(frame, 0);
    put32(frame, kIpv4Source);
    put32(frame, kIpv4Destination);
    frame.insert(frame.end(), spec.ipv4_options.begin(), spec.ipv4_options.end());
    set16(frame, at.l3 + 10, checksum(frame, at.l3, at.l3 + header));
  }
  frame.insert(frame.end(), l4.begin(), l4.end());
  if (spec.raw_l4) return frame;
  const size_t field = at.l4 + (spec.protocol == IPPROTO_TCP ? 16 : 6);
  const uint32_t pseudo = pseudo_sum(frame, at.l3, spec.ipv6, spec.protocol, l4.size());
  switch (spec.checksum) {
    case L4Checksum::kFull: {
      uint16_t sum = static_cast<uint16_t>(~fold(sum16(frame, at.l4, frame.size(), pseudo)));
      if (sum == 0 && spec.protocol == IPPROTO_UDP) sum = 0xffff;
      set16(frame, field, sum);
      break;
    }
    case L4Checksum::kPartial: set16(frame, field, fold(pseudo)); break;
    case L4Checksum::kZero: break;
  }
  return frame;
}

// The header a Linux guest sends with this frame: NEEDS_CSUM at the transport checksum,
// hdr_len the length of the headers.
inline virtio::NetHeader gso_header(const OffloadFrameSpec& spec, uint8_t gso_type, uint16_t gso_size = 1448) {
  const FrameOffsets at = offsets_of(spec);
  virtio::NetHeader header;
  header.flags = virtio::kNetHdrFlagNeedsCsum;
  header.gso_type = gso_type;
  header.gso_size = gso_size;
  header.hdr_len = static_cast<uint16_t>(at.payload);
  header.csum_start = static_cast<uint16_t>(at.l4);
  header.csum_offset = spec.protocol == IPPROTO_TCP ? 16 : 6;
  return header;
}

inline Bytes slice(const Bytes& bytes, size_t offset, size_t length) {
  const auto begin = bytes.begin() + static_cast<std::ptrdiff_t>(offset);
  return Bytes(begin, begin + static_cast<std::ptrdiff_t>(length));
}

// Segment `index` of the `count` a TCP or USO frame of `spec` is cut into at gso_size,
// as software segmentation must make it: its piece of the payload, the sequence number
// and IPv4 id advanced, FIN and PSH on the last segment only, CWR on the first only,
// fresh IP lengths, the transport checksum full or partial.
inline OffloadFrameSpec segment_spec(const OffloadFrameSpec& spec, size_t index, size_t count, size_t gso_size,
                                     bool partial) {
  constexpr uint8_t kFin = 0x01, kPsh = 0x08, kCwr = 0x80;
  OffloadFrameSpec expected = spec;
  const size_t offset = index * gso_size;
  const size_t bytes = index + 1 == count ? spec.payload.size() - offset : gso_size;
  expected.payload = slice(spec.payload, offset, bytes);
  expected.seq = spec.seq + static_cast<uint32_t>(offset);
  expected.ip_id = static_cast<uint16_t>(spec.ip_id + index);
  expected.ip_length.reset();
  if (index + 1 != count) expected.tcp_flags &= static_cast<uint8_t>(~(kFin | kPsh));
  if (index != 0) expected.tcp_flags &= static_cast<uint8_t>(~kCwr);
  expected.checksum = partial ? L4Checksum::kPartial : L4Checksum::kFull;
  return expected;
}

// Every segment's frame (segment_spec), in order; at least one.
inline std::vector<Bytes> expected_segments(const OffloadFrameSpec& spec, size_t gso_size, bool partial) {
  const size_t count = std::max<size_t>((spec.payload.size() + gso_size - 1) / gso_size, 1);
  std::vector<Bytes> out;
  for (size_t i = 0; i < count; ++i) out.push_back(offload_frame(segment_spec(spec, i, count, gso_size, partial)));
  return out;
}

// The IPv4 header checksum verifies (true for IPv6, which has none).
inline bool ip_checksum_valid(const Bytes& frame, size_t l3) {
  if (get8(frame, l3) >> 4 == 6) return true;
  const size_t header = size_t{get8(frame, l3) & 0x0fU} * 4;
  return fold(sum16(frame, l3, l3 + header)) == 0xffff;
}

// The TCP/UDP checksum over [l4, end) with its pseudo-header verifies.
inline bool transport_checksum_valid(const Bytes& frame, size_t l3, size_t l4, bool ipv6, uint8_t protocol) {
  return fold(sum16(frame, l4, frame.size(), pseudo_sum(frame, l3, ipv6, protocol, frame.size() - l4))) == 0xffff;
}

}  // namespace uvhost::backends::testing
