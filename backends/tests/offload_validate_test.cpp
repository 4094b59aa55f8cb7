// offload_validate_test.cpp - every reason validate_offload() refuses a guest's
// offload header for, each provoked by one wrong field of an otherwise valid frame,
// and the layouts of valid TCPv4 / TCPv6 / UFO / USO frames (VLAN tags, IPv4 and TCP
// options, IPv6 extension headers, hdr_len as a hint, one-segment frames).
#include "uvhost/backends/offload_validate.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "offload_frames.h"
#include "uvhost/backends/net_features.h"

namespace uvhost::backends {

void PrintTo(OffloadReason reason, std::ostream* out) { *out << to_string(reason); }

namespace {

using testing::Bytes;
using testing::OffloadFrameSpec;
using R = OffloadReason;

constexpr uint64_t bit(unsigned b) { return uint64_t{1} << b; }
constexpr uint64_t kAllHost = testing::kAllHostOffloads;

OffloadFrameSpec tcp4(size_t payload = 3000) {
  OffloadFrameSpec spec;
  spec.payload = testing::payload_pattern(payload);
  spec.checksum = testing::L4Checksum::kPartial;
  return spec;
}
OffloadFrameSpec with(OffloadFrameSpec spec, bool ipv6, uint8_t protocol) {
  spec.ipv6 = ipv6;
  spec.protocol = protocol;
  return spec;
}

using testing::gso_header;

// The first `bytes` bytes of a frame: one cut short.
Bytes prefix(const Bytes& frame, size_t bytes) { return Bytes(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(bytes)); }

R reason(const virtio::NetHeader& header, const Bytes& frame, uint64_t features = kAllHost,
         const OffloadLimits& limits = {}) {
  return validate_offload(header, frame, features, limits).reason;
}
R reason(const OffloadFrameSpec& spec, uint8_t gso_type, uint64_t features = kAllHost) {
  return reason(gso_header(spec, gso_type), testing::offload_frame(spec), features);
}

TEST(OffloadValidate, EveryReasonHasItsOwnName) {
  std::set<std::string> names;
  for (size_t i = 0; i < kOffloadReasonCount; ++i) {
    const std::string name(to_string(static_cast<R>(i)));
    EXPECT_NE(name, base::kUnknownEnumName) << i;
    EXPECT_TRUE(names.insert(name).second) << name;
  }
  EXPECT_EQ(to_string(R::kChecksumOutsideFrame), "checksum_outside_frame");
}

TEST(OffloadValidate, PartialChecksumNeedsTheFeatureAndAFieldInsideTheFrame) {
  const Bytes frame(100, std::byte{0});
  virtio::NetHeader header;
  header.flags = virtio::kNetHdrFlagNeedsCsum;
  header.csum_start = 50;
  header.csum_offset = 48;  // field at 98..99
  EXPECT_EQ(reason(header, frame), R::kOk);
  EXPECT_EQ(reason(header, frame, kAllHost & ~bit(net_feature::kCsum)), R::kChecksumNotNegotiated);
  header.csum_offset = 49;  // 99..100
  EXPECT_EQ(reason(header, frame), R::kChecksumOutsideFrame);
  header.csum_start = 100;
  header.csum_offset = 0;
  EXPECT_EQ(reason(header, frame), R::kChecksumOutsideFrame);
  header.csum_start = 65535;
  header.csum_offset = 65535;
  EXPECT_EQ(reason(header, frame), R::kChecksumOutsideFrame);
  // Without NEEDS_CSUM the checksum fields mean nothing; other flags are ignored.
  header.flags = virtio::kNetHdrFlagDataValid;
  const OffloadCheck plain = validate_offload(header, frame, 0);
  EXPECT_TRUE(plain.ok());
  EXPECT_EQ(plain.layout.kind, GsoKind::kNone);
  EXPECT_EQ(plain.layout.frame_bytes, 100u);
}

TEST(OffloadValidate, GsoTypeMustBeKnownAndNegotiated) {
  const OffloadFrameSpec spec = tcp4();
  EXPECT_EQ(reason(spec, virtio::kNetGsoTcpV4), R::kOk);
  for (uint8_t type : {uint8_t{2}, uint8_t{6}, uint8_t{0x7f}, virtio::kNetGsoEcn}) EXPECT_EQ(reason(spec, type), R::kUnknownGsoType) << int{type};
  EXPECT_EQ(reason(spec, virtio::kNetGsoTcpV4, kAllHost & ~bit(net_feature::kHostTso4)), R::kGsoNotNegotiated);
  EXPECT_EQ(reason(with(spec, true, IPPROTO_TCP), virtio::kNetGsoTcpV6, kAllHost & ~bit(net_feature::kHostTso6)),
            R::kGsoNotNegotiated);
  EXPECT_EQ(reason(with(spec, false, IPPROTO_UDP), virtio::kNetGsoUdp, kAllHost & ~bit(net_feature::kHostUfo)),
            R::kGsoNotNegotiated);
  EXPECT_EQ(reason(with(spec, false, IPPROTO_UDP), virtio::kNetGsoUdpL4, kAllHost & ~bit(net_feature::kHostUso)),
            R::kGsoNotNegotiated);
}

TEST(OffloadValidate, EcnOnlyOnTcpAndOnlyWhenNegotiated) {
  const OffloadFrameSpec spec = tcp4();
  const uint8_t tcp_ecn = virtio::kNetGsoTcpV4 | virtio::kNetGsoEcn;
  EXPECT_EQ(reason(spec, tcp_ecn), R::kOk);
  EXPECT_EQ(reason(spec, tcp_ecn, kAllHost & ~bit(net_feature::kHostEcn)), R::kEcnNotNegotiated);
  const OffloadFrameSpec udp = with(spec, false, IPPROTO_UDP);
  EXPECT_EQ(reason(udp, virtio::kNetGsoUdp | virtio::kNetGsoEcn), R::kEcnNotTcp);
  EXPECT_EQ(reason(udp, virtio::kNetGsoUdpL4 | virtio::kNetGsoEcn), R::kEcnNotTcp);
}

TEST(OffloadValidate, GsoNeedsAPartialChecksumAndAGsoSize) {
  const OffloadFrameSpec spec = tcp4();
  const Bytes frame = testing::offload_frame(spec);
  virtio::NetHeader header = gso_header(spec, virtio::kNetGsoTcpV4);
  header.flags = 0;
  EXPECT_EQ(reason(header, frame), R::kGsoWithoutChecksum);
  header = gso_header(spec, virtio::kNetGsoTcpV4, 0);
  EXPECT_EQ(reason(header, frame), R::kGsoSizeZero);
}

TEST(OffloadValidate, HdrLenIsAHintButNotBeyondTheFrame) {
  const OffloadFrameSpec spec = tcp4();
  const Bytes frame = testing::offload_frame(spec);
  virtio::NetHeader header = gso_header(spec, virtio::kNetGsoTcpV4);
  for (size_t hdr_len : {size_t{0}, size_t{14}, size_t{200}, frame.size()}) {
    header.hdr_len = static_cast<uint16_t>(hdr_len);
    const OffloadCheck check = validate_offload(header, frame, kAllHost);
    ASSERT_TRUE(check.ok()) << hdr_len;
    EXPECT_EQ(check.layout.payload_offset, testing::offsets_of(spec).payload) << hdr_len;
  }
  header.hdr_len = static_cast<uint16_t>(frame.size() + 1);
  EXPECT_EQ(reason(header, frame), R::kHdrLenBeyondFrame);
}

TEST(OffloadValidate, FrameMustBeEthernetWithTheRightIpVersion) {
  const OffloadFrameSpec v4 = tcp4();
  EXPECT_EQ(reason(with(v4, true, IPPROTO_TCP), virtio::kNetGsoTcpV4), R::kNotIp);
  EXPECT_EQ(reason(v4, virtio::kNetGsoTcpV6), R::kNotIp);
  Bytes frame = testing::offload_frame(v4);
  const virtio::NetHeader header = gso_header(v4, virtio::kNetGsoTcpV4);
  testing::set16(frame, 12, 0x0806);  // ARP
  EXPECT_EQ(reason(header, frame), R::kNotIp);
  // Three VLAN tags: the third is taken for the EtherType.
  OffloadFrameSpec tagged = v4;
  tagged.vlans = {{0x88a8, 1}, {0x8100, 2}, {0x8100, 3}};
  EXPECT_EQ(reason(tagged, virtio::kNetGsoTcpV4), R::kNotIp);
  // Cut inside the Ethernet header or a VLAN tag.
  frame = testing::offload_frame(v4);
  virtio::NetHeader small = header;
  small.csum_start = 0;
  small.csum_offset = 0;
  small.hdr_len = 0;
  EXPECT_EQ(reason(small, prefix(frame, 13)), R::kNotIp);
  tagged.vlans = {{0x8100, 7}};
  frame = testing::offload_frame(tagged);
  EXPECT_EQ(reason(small, prefix(frame, 17)), R::kNotIp);
}

TEST(OffloadValidate, IpHeaderMustBeWhole) {
  const OffloadFrameSpec spec = tcp4();
  const virtio::NetHeader header = gso_header(spec, virtio::kNetGsoTcpV4);
  const size_t l3 = testing::kEthHeader;
  Bytes frame = testing::offload_frame(spec);
  frame[l3] = std::byte{0x55};  // version 5
  EXPECT_EQ(reason(header, frame), R::kBadIpHeader);
  frame[l3] = std::byte{0x44};  // header length 16
  EXPECT_EQ(reason(header, frame), R::kBadIpHeader);
  frame[l3] = std::byte{0x4f};  // header length 60, cut by the frame's end
  virtio::NetHeader small = header;
  small.csum_start = 0;
  small.csum_offset = 0;
  small.hdr_len = 0;
  EXPECT_EQ(reason(small, prefix(frame, l3 + 40)), R::kBadIpHeader);
  EXPECT_EQ(reason(small, prefix(frame, l3 + 19)), R::kBadIpHeader);

  const OffloadFrameSpec v6 = with(spec, true, IPPROTO_TCP);
  frame = testing::offload_frame(v6);
  frame[l3] = std::byte{0x40};  // version 4 behind EtherType IPv6
  EXPECT_EQ(reason(gso_header(v6, virtio::kNetGsoTcpV6), frame), R::kBadIpHeader);
  EXPECT_EQ(reason(small, prefix(frame, l3 + 39)), R::kNotIp);  // small says TCPV4
  small.gso_type = virtio::kNetGsoTcpV6;
  EXPECT_EQ(reason(small, prefix(frame, l3 + 39)), R::kBadIpHeader);
}

TEST(OffloadValidate, FragmentsAreNotSegmented) {
  OffloadFrameSpec spec = tcp4();
  spec.ip_fragment = 0x2000;  // MF
  EXPECT_EQ(reason(spec, virtio::kNetGsoTcpV4), R::kIpFragment);
  spec.ip_fragment = 0x0001;  // offset 8
  EXPECT_EQ(reason(spec, virtio::kNetGsoTcpV4), R::kIpFragment);
  spec.ip_fragment = 0x4000;  // DF alone is fine
  EXPECT_EQ(reason(spec, virtio::kNetGsoTcpV4), R::kOk);
  OffloadFrameSpec v6 = with(spec, true, IPPROTO_UDP);
  v6.fragment = testing::Ipv6Fragment{0, true, 99};
  EXPECT_EQ(reason(v6, virtio::kNetGsoUdp), R::kIpFragment);
}

TEST(OffloadValidate, Ipv6ExtensionHeaders) {
  OffloadFrameSpec spec = with(tcp4(), true, IPPROTO_TCP);
  spec.extensions = {{0, 8}, {60, 16}, {60, 24}, {60, 8}};  // four: the most we walk
  EXPECT_EQ(reason(spec, virtio::kNetGsoTcpV6), R::kOk);
  spec.extensions.push_back({60, 8});
  EXPECT_EQ(reason(spec, virtio::kNetGsoTcpV6), R::kIpv6ExtensionHeader);
  spec.extensions = {{0, 8}, {43, 24}};  // routing
  EXPECT_EQ(reason(spec, virtio::kNetGsoTcpV6), R::kIpv6ExtensionHeader);
  // An extension header cut by the frame's end (its length byte says 2048 bytes).
  spec.extensions = {{0, 8}};
  spec.payload = testing::payload_pattern(100);
  Bytes frame = testing::offload_frame(spec);
  const size_t extension = testing::kEthHeader + 40;
  frame[extension + 1] = std::byte{255};
  virtio::NetHeader header = gso_header(spec, virtio::kNetGsoTcpV6);
  EXPECT_EQ(reason(header, frame), R::kIpv6ExtensionHeader);
  header.csum_start = 0;
  header.csum_offset = 0;
  header.hdr_len = 0;
  EXPECT_EQ(reason(header, prefix(frame, extension + 7)), R::kIpv6ExtensionHeader);
}

TEST(OffloadValidate, TransportMustBeTheOneTheTypeNames) {
  EXPECT_EQ(reason(with(tcp4(), false, IPPROTO_UDP), virtio::kNetGsoTcpV4), R::kWrongTransport);
  EXPECT_EQ(reason(tcp4(), virtio::kNetGsoUdp), R::kWrongTransport);
  EXPECT_EQ(reason(tcp4(), virtio::kNetGsoUdpL4), R::kWrongTransport);
  OffloadFrameSpec icmp6 = with(tcp4(), true, 58);
  icmp6.raw_l4 = testing::payload_pattern(100);
  virtio::NetHeader header = gso_header(with(tcp4(), true, IPPROTO_UDP), virtio::kNetGsoUdpL4);
  EXPECT_EQ(reason(header, testing::offload_frame(icmp6)), R::kWrongTransport);
}

TEST(OffloadValidate, TransportHeaderMustBeWhole) {
  const OffloadFrameSpec spec = tcp4();
  const testing::FrameOffsets at = testing::offsets_of(spec);
  virtio::NetHeader header = gso_header(spec, virtio::kNetGsoTcpV4);
  header.hdr_len = 0;  // (not beyond the frames cut short below)
  Bytes frame = testing::offload_frame(spec);
  frame[at.l4 + 12] = std::byte{0x40};  // data offset 4
  EXPECT_EQ(reason(header, frame), R::kBadTransportHeader);
  frame[at.l4 + 12] = std::byte{0xf0};  // data offset 15: 60 bytes, cut by the frame's end
  EXPECT_EQ(reason(header, prefix(frame, at.l4 + 59)), R::kBadTransportHeader);
  EXPECT_EQ(reason(header, prefix(frame, at.l4 + 19)), R::kBadTransportHeader);
  const OffloadFrameSpec udp = with(spec, false, IPPROTO_UDP);
  frame = testing::offload_frame(udp);
  virtio::NetHeader small = gso_header(udp, virtio::kNetGsoUdpL4);
  small.csum_start = 0;
  small.csum_offset = 0;
  small.hdr_len = 0;
  EXPECT_EQ(reason(small, prefix(frame, at.l4 + 7)), R::kBadTransportHeader);
}

TEST(OffloadValidate, ChecksumMustBeTheTransportChecksum) {
  const OffloadFrameSpec spec = tcp4();
  const Bytes frame = testing::offload_frame(spec);
  virtio::NetHeader header = gso_header(spec, virtio::kNetGsoTcpV4);
  header.csum_start = static_cast<uint16_t>(header.csum_start + 1);
  EXPECT_EQ(reason(header, frame), R::kChecksumNotAtTransport);
  header = gso_header(spec, virtio::kNetGsoTcpV4);
  header.csum_offset = 6;
  EXPECT_EQ(reason(header, frame), R::kChecksumNotAtTransport);
  const OffloadFrameSpec udp = with(spec, false, IPPROTO_UDP);
  header = gso_header(udp, virtio::kNetGsoUdpL4);
  header.csum_offset = 16;
  EXPECT_EQ(reason(header, testing::offload_frame(udp)), R::kChecksumNotAtTransport);
}

TEST(OffloadValidate, SegmentCountIsBounded) {
  const OffloadFrameSpec spec = tcp4(65495);  // a 64 KiB IPv4 datagram
  const Bytes frame = testing::offload_frame(spec);
  // 65495 / 256 -> 256 segments: the default limit exactly.
  EXPECT_EQ(validate_offload(gso_header(spec, virtio::kNetGsoTcpV4, 256), frame, kAllHost).layout.segments, 256u);
  EXPECT_EQ(reason(gso_header(spec, virtio::kNetGsoTcpV4, 255), frame), R::kTooManySegments);
  EXPECT_EQ(reason(gso_header(spec, virtio::kNetGsoTcpV4, 1), frame), R::kTooManySegments);
  OffloadLimits limits;
  limits.max_segments = 65495;
  EXPECT_EQ(reason(gso_header(spec, virtio::kNetGsoTcpV4, 1), frame, kAllHost, limits), R::kOk);
  limits.max_segments = 46;
  EXPECT_EQ(reason(gso_header(spec, virtio::kNetGsoTcpV4, 1448), frame, kAllHost, limits), R::kOk);  // 45.2 -> 46
  limits.max_segments = 45;
  EXPECT_EQ(reason(gso_header(spec, virtio::kNetGsoTcpV4, 1448), frame, kAllHost, limits), R::kTooManySegments);
  // UFO fragments carry multiples of 8 bytes.
  const OffloadFrameSpec udp = with(spec, false, IPPROTO_UDP);
  EXPECT_EQ(reason(gso_header(udp, virtio::kNetGsoUdp, 7), testing::offload_frame(udp)), R::kGsoSizeTooSmall);
}

TEST(OffloadValidate, SegmentsMustFitTheIpLengthFields) {
  // A frame longer than any IP datagram: fine when cut small, refused when a piece is
  // longer than an IP length field holds, and always for UFO (one datagram).
  const OffloadFrameSpec spec = tcp4(70000);
  const Bytes frame = testing::offload_frame(spec);
  EXPECT_EQ(reason(gso_header(spec, virtio::kNetGsoTcpV4, 1448), frame), R::kOk);
  EXPECT_EQ(reason(gso_header(spec, virtio::kNetGsoTcpV4, 65495), frame), R::kOk);  // IP length 65535
  EXPECT_EQ(reason(gso_header(spec, virtio::kNetGsoTcpV4, 65496), frame), R::kSegmentTooLarge);
  const OffloadFrameSpec v6 = with(spec, true, IPPROTO_TCP);
  EXPECT_EQ(reason(gso_header(v6, virtio::kNetGsoTcpV6, 65515), testing::offload_frame(v6)), R::kOk);
  EXPECT_EQ(reason(gso_header(v6, virtio::kNetGsoTcpV6, 65516), testing::offload_frame(v6)), R::kSegmentTooLarge);
  const OffloadFrameSpec udp = with(spec, false, IPPROTO_UDP);
  EXPECT_EQ(reason(gso_header(udp, virtio::kNetGsoUdpL4, 1472), testing::offload_frame(udp)), R::kOk);
  EXPECT_EQ(reason(gso_header(udp, virtio::kNetGsoUdp, 1480), testing::offload_frame(udp)), R::kSegmentTooLarge);
  const OffloadFrameSpec fits = with(tcp4(65507), false, IPPROTO_UDP);  // IP length 65535
  EXPECT_EQ(reason(gso_header(fits, virtio::kNetGsoUdp, 1480), testing::offload_frame(fits)), R::kOk);
  const OffloadFrameSpec over = with(tcp4(65508), false, IPPROTO_UDP);
  EXPECT_EQ(reason(gso_header(over, virtio::kNetGsoUdp, 1480), testing::offload_frame(over)), R::kSegmentTooLarge);
}

TEST(OffloadValidate, LayoutOfTaggedTcpV4WithOptions) {
  OffloadFrameSpec spec = tcp4(10000);
  spec.vlans = {{0x88a8, 100}, {0x8100, 200}};
  spec.ipv4_options = Bytes(8, std::byte{1});
  spec.tcp_options = Bytes(12, std::byte{1});
  const testing::FrameOffsets at = testing::offsets_of(spec);
  const Bytes frame = testing::offload_frame(spec);
  const OffloadCheck check = validate_offload(gso_header(spec, virtio::kNetGsoTcpV4, 1000), frame, kAllHost);
  ASSERT_TRUE(check.ok()) << to_string(check.reason);
  const OffloadLayout& layout = check.layout;
  EXPECT_EQ(layout.kind, GsoKind::kTcp);
  EXPECT_FALSE(layout.ipv6);
  EXPECT_EQ(layout.frame_bytes, frame.size());
  EXPECT_EQ(layout.l3_offset, 22u);
  EXPECT_EQ(layout.protocol_field, 22u + 9);
  EXPECT_EQ(layout.l4_offset, at.l4);
  EXPECT_EQ(layout.l4_offset, 22u + 28);
  EXPECT_EQ(layout.payload_offset, at.payload);
  EXPECT_EQ(layout.piece_bytes, 1000u);
  EXPECT_EQ(layout.segments, 10u);
  EXPECT_EQ(layout.max_segment_bytes, at.payload + 1000);
}

TEST(OffloadValidate, LayoutOfTcpV6WithExtensionHeaders) {
  OffloadFrameSpec spec = with(tcp4(5000), true, IPPROTO_TCP);
  spec.extensions = {{0, 8}, {60, 16}};
  const testing::FrameOffsets at = testing::offsets_of(spec);
  const OffloadCheck check =
      validate_offload(gso_header(spec, virtio::kNetGsoTcpV6, 1440), testing::offload_frame(spec), kAllHost);
  ASSERT_TRUE(check.ok()) << to_string(check.reason);
  EXPECT_TRUE(check.layout.ipv6);
  EXPECT_EQ(check.layout.protocol_field, 14u + 40 + 8);  // the destination options' next header
  EXPECT_EQ(check.layout.l4_offset, 14u + 40 + 24);
  EXPECT_EQ(check.layout.payload_offset, at.payload);
  EXPECT_EQ(check.layout.segments, 4u);
}

TEST(OffloadValidate, LayoutOfUfoRoundsPiecesToEightBytes) {
  const OffloadFrameSpec spec = with(tcp4(4000), false, IPPROTO_UDP);
  const testing::FrameOffsets at = testing::offsets_of(spec);
  const OffloadCheck check =
      validate_offload(gso_header(spec, virtio::kNetGsoUdp, 1477), testing::offload_frame(spec), kAllHost);
  ASSERT_TRUE(check.ok()) << to_string(check.reason);
  EXPECT_EQ(check.layout.kind, GsoKind::kUfo);
  EXPECT_EQ(check.layout.piece_bytes, 1472u);
  EXPECT_EQ(check.layout.segments, 3u);  // 4008 datagram bytes
  EXPECT_EQ(check.layout.max_segment_bytes, at.l4 + 1472);
  const OffloadFrameSpec v6 = with(spec, true, IPPROTO_UDP);
  const OffloadCheck check6 =
      validate_offload(gso_header(v6, virtio::kNetGsoUdp, 1477), testing::offload_frame(v6), kAllHost);
  ASSERT_TRUE(check6.ok());
  EXPECT_EQ(check6.layout.max_segment_bytes, testing::offsets_of(v6).l4 + 8 + 1472);  // a fragment header
}

TEST(OffloadValidate, PayloadThatFitsOneSegmentIsOneSegment) {
  for (size_t payload : {size_t{0}, size_t{1}, size_t{1448}}) {
    const OffloadFrameSpec spec = tcp4(payload);
    const Bytes frame = testing::offload_frame(spec);
    const OffloadCheck check = validate_offload(gso_header(spec, virtio::kNetGsoTcpV4, 1448), frame, kAllHost);
    ASSERT_TRUE(check.ok()) << payload;
    EXPECT_EQ(check.layout.segments, 1u);
    EXPECT_EQ(check.layout.max_segment_bytes, frame.size());
  }
  // UFO: a datagram of at most gso_size bytes is not fragmented, even past the rounding.
  const OffloadFrameSpec udp = with(tcp4(1475), false, IPPROTO_UDP);  // 1483 datagram bytes
  EXPECT_EQ(validate_offload(gso_header(udp, virtio::kNetGsoUdp, 1483), testing::offload_frame(udp), kAllHost)
                .layout.segments,
            1u);
  EXPECT_EQ(validate_offload(gso_header(udp, virtio::kNetGsoUdp, 1482), testing::offload_frame(udp), kAllHost)
                .layout.segments,
            2u);
}

// Only the headers at hand (a copy of the frame's first bytes): the same layout as with
// the whole frame; headers cut off by the head are refused as a frame cut there would be.
TEST(OffloadValidate, HeadHoldingTheHeadersGivesTheWholeFramesLayout) {
  OffloadFrameSpec spec = tcp4(20000);
  spec.tcp_options = Bytes(12, std::byte{1});
  const Bytes frame = testing::offload_frame(spec);
  const virtio::NetHeader header = gso_header(spec, virtio::kNetGsoTcpV4, 1448);
  const OffloadCheck whole = validate_offload(header, frame, kAllHost);
  ASSERT_TRUE(whole.ok());
  const size_t headers = testing::offsets_of(spec).payload;
  const OffloadCheck head = validate_offload_head(header, prefix(frame, headers), frame.size(), kAllHost);
  ASSERT_TRUE(head.ok()) << to_string(head.reason);
  EXPECT_EQ(head.layout.frame_bytes, frame.size());
  EXPECT_EQ(head.layout.payload_offset, whole.layout.payload_offset);
  EXPECT_EQ(head.layout.segments, whole.layout.segments);
  EXPECT_EQ(head.layout.max_segment_bytes, whole.layout.max_segment_bytes);
  // The TCP header's options not all in the head: refused like a frame cut there.
  EXPECT_EQ(validate_offload_head(header, prefix(frame, headers - 1), frame.size(), kAllHost).reason,
            R::kBadTransportHeader);
  EXPECT_EQ(validate_offload_head(header, prefix(frame, 20), frame.size(), kAllHost).reason, R::kBadIpHeader);
  // Ranges and lengths are the whole frame's, not the head's.
  virtio::NetHeader partial;
  partial.flags = virtio::kNetHdrFlagNeedsCsum;
  partial.csum_start = static_cast<uint16_t>(frame.size() - 10);
  partial.csum_offset = 8;
  EXPECT_TRUE(validate_offload_head(partial, prefix(frame, 64), frame.size(), kAllHost).ok());
  partial.csum_offset = 9;
  EXPECT_EQ(validate_offload_head(partial, prefix(frame, 64), frame.size(), kAllHost).reason,
            R::kChecksumOutsideFrame);
  // A head longer than the frame is cut to the frame: no header read past frame_bytes.
  virtio::NetHeader no_hint = header;
  no_hint.hdr_len = 0;
  EXPECT_EQ(validate_offload_head(no_hint, frame, headers - 1, kAllHost).reason, R::kBadTransportHeader);
}

TEST(OffloadValidate, HasOffloadsIsNeedsCsumOrAGsoType) {
  virtio::NetHeader header;
  EXPECT_FALSE(has_offloads(header));
  header.flags = virtio::kNetHdrFlagDataValid;
  EXPECT_FALSE(has_offloads(header));
  header.flags = virtio::kNetHdrFlagNeedsCsum;
  EXPECT_TRUE(has_offloads(header));
  header.flags = 0;
  header.gso_type = virtio::kNetGsoEcn;  // the ECN bit alone: validation refuses it
  EXPECT_TRUE(has_offloads(header));
}

TEST(OffloadValidate, RefusedLayoutIsEmpty) {
  const OffloadFrameSpec spec = tcp4();
  const OffloadCheck check = validate_offload(gso_header(spec, virtio::kNetGsoTcpV4, 0), testing::offload_frame(spec), kAllHost);
  EXPECT_EQ(check.reason, R::kGsoSizeZero);
  EXPECT_EQ(check.layout.segments, 0u);
  EXPECT_EQ(check.layout.kind, GsoKind::kNone);
}

}  // namespace
}  // namespace uvhost::backends
