// gso_segment_test.cpp - software segmentation of 64 KiB TCPv4, TCPv6, USO and UFO
// frames: every segment compared byte for byte with one built independently by the
// test's frame builder (headers, sequence numbers, IP ids, flags, lengths, the short
// last segment, checksums from the builder's plain reference sum), and checked again
// on its own (IP header and transport checksums verify, payloads re-assemble to the
// original). Partial checksums for a GUEST_CSUM receiver, ECN's CWR, VLAN tags, IPv4
// options and IPv6 extension headers, one-segment frames, and a sink that stops.
#include "uvhost/backends/gso_segment.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "offload_frames.h"
#include "uvhost/backends/net_features.h"

namespace uvhost::backends {
namespace {

using testing::Bytes;
using testing::L4Checksum;
using testing::OffloadFrameSpec;
using testing::slice;

constexpr uint64_t kAllHost = testing::kAllHostOffloads;
constexpr uint8_t kFin = 0x01, kPsh = 0x08, kAck = 0x10, kCwr = 0x80;

// A guest's GSO frame: partial checksum, and (as some senders do) IP length fields of 0.
OffloadFrameSpec guest_frame(bool ipv6, uint8_t protocol, size_t payload) {
  OffloadFrameSpec spec;
  spec.ipv6 = ipv6;
  spec.protocol = protocol;
  spec.payload = testing::payload_pattern(payload, 11);
  spec.checksum = L4Checksum::kPartial;
  spec.ip_length = 0;
  return spec;
}

struct Segmented {
  OffloadLayout layout;
  std::vector<PacketPtr> segments;
};

Segmented segment(const OffloadFrameSpec& spec, uint8_t gso_type, uint16_t gso_size, SegmentOptions options = {}) {
  const Bytes frame = testing::offload_frame(spec);
  const OffloadCheck check = validate_offload(testing::gso_header(spec, gso_type, gso_size), frame, kAllHost);
  EXPECT_TRUE(check.ok()) << to_string(check.reason);
  Segmented out{check.layout, {}};
  if (!check.ok()) return out;
  PacketCollector sink(out.segments);
  EXPECT_EQ(gso_segment(check.layout, frame, options, sink), check.layout.segments);
  EXPECT_EQ(out.segments.size(), check.layout.segments);
  for (const PacketPtr& segment : out.segments) EXPECT_LE(segment->frame.size(), check.layout.max_segment_bytes);
  return out;
}

// Byte-exact comparison of every segment with its expectation, and the checks each
// segment passes on its own: checksums, lengths, the payload re-assembled.
void expect_payload_segments(const OffloadFrameSpec& spec, const Segmented& out, size_t gso_size, bool partial) {
  const testing::FrameOffsets at = testing::offsets_of(spec);
  const size_t count = (spec.payload.size() + gso_size - 1) / gso_size;
  ASSERT_EQ(out.segments.size(), std::max<size_t>(count, 1));
  Bytes reassembled;
  for (size_t i = 0; i < out.segments.size(); ++i) {
    const Packet& segment = *out.segments[i];
    const Bytes expected = testing::offload_frame(testing::segment_spec(spec, i, out.segments.size(), gso_size, partial));
    ASSERT_EQ(segment.frame, expected) << "segment " << i;
    EXPECT_TRUE(testing::ip_checksum_valid(segment.frame, at.l3)) << i;
    if (!partial) {
      EXPECT_TRUE(testing::transport_checksum_valid(segment.frame, at.l3, at.l4, spec.ipv6, spec.protocol)) << i;
    }
    const size_t ip_length = segment.frame.size() - at.l3 - (spec.ipv6 ? 40 : 0);
    EXPECT_EQ(testing::get16(segment.frame, at.l3 + (spec.ipv6 ? 4 : 2)), ip_length) << i;
    if (i + 1 < out.segments.size()) {
      EXPECT_EQ(segment.frame.size(), at.payload + gso_size) << i;
    }
    reassembled.insert(reassembled.end(), segment.frame.begin() + static_cast<std::ptrdiff_t>(at.payload),
                       segment.frame.end());
    virtio::NetHeader header;
    if (partial) {
      header.flags = virtio::kNetHdrFlagNeedsCsum;
      header.csum_start = static_cast<uint16_t>(at.l4);
      header.csum_offset = spec.protocol == IPPROTO_TCP ? 16 : 6;
    }
    EXPECT_EQ(segment.header, header) << i;
  }
  EXPECT_EQ(reassembled, spec.payload);
}

TEST(GsoSegment, TcpV4Of64KiBAtSeveralSegmentSizes) {
  const OffloadFrameSpec spec = guest_frame(false, IPPROTO_TCP, 65495);
  for (uint16_t gso_size : {uint16_t{1448}, uint16_t{1460}, uint16_t{536}, uint16_t{9000}, uint16_t{32768}, uint16_t{65494}}) {
    SCOPED_TRACE(gso_size);
    expect_payload_segments(spec, segment(spec, virtio::kNetGsoTcpV4, gso_size), gso_size, false);
  }
}

TEST(GsoSegment, TcpV4SequenceIdsAndTheShortLastSegment) {
  OffloadFrameSpec spec = guest_frame(false, IPPROTO_TCP, 65495);
  spec.seq = 0xfffff000;  // wraps within the frame
  spec.ip_id = 0xfffe;    // wraps too
  const Segmented out = segment(spec, virtio::kNetGsoTcpV4, 1448);
  ASSERT_EQ(out.segments.size(), 46u);  // 45 x 1448 + 335
  const size_t l4 = testing::kEthHeader + 20;
  for (size_t i = 0; i < out.segments.size(); ++i) {
    const Bytes& frame = out.segments[i]->frame;
    EXPECT_EQ(testing::get32(frame, l4 + 4), static_cast<uint32_t>(0xfffff000 + i * 1448)) << i;
    EXPECT_EQ(testing::get16(frame, testing::kEthHeader + 4), static_cast<uint16_t>(0xfffe + i)) << i;
    EXPECT_EQ(testing::get16(frame, testing::kEthHeader + 6), 0x4000) << i;  // DF kept
  }
  EXPECT_EQ(out.segments.back()->frame.size(), l4 + 20 + 335);
}

TEST(GsoSegment, TcpWithOptionsVlanTagsAndIpv4Options) {
  OffloadFrameSpec spec = guest_frame(false, IPPROTO_TCP, 60000);
  spec.vlans = {{0x88a8, 10}, {0x8100, 20}};
  spec.ipv4_options = {std::byte{0x94}, std::byte{0x04}, std::byte{0x00}, std::byte{0x00}};  // router alert
  spec.tcp_options = {std::byte{1}, std::byte{1}, std::byte{8}, std::byte{10}, std::byte{0x11}, std::byte{0x22},
                      std::byte{0x33}, std::byte{0x44}, std::byte{0x55}, std::byte{0x66}, std::byte{0x77},
                      std::byte{0x88}};  // NOP NOP timestamps
  expect_payload_segments(spec, segment(spec, virtio::kNetGsoTcpV4, 1436), 1436, false);
}

TEST(GsoSegment, TcpV6Of64KiBWithExtensionHeaders) {
  OffloadFrameSpec spec = guest_frame(true, IPPROTO_TCP, 65515);
  expect_payload_segments(spec, segment(spec, virtio::kNetGsoTcpV6, 1440), 1440, false);
  spec.vlans = {{0x8100, 5}};
  spec.extensions = {{0, 8}, {60, 16}};
  spec.payload = testing::payload_pattern(65491, 4);
  expect_payload_segments(spec, segment(spec, virtio::kNetGsoTcpV6, 1220), 1220, false);
}

TEST(GsoSegment, PartialChecksumsForAReceiverWithGuestCsum) {
  SegmentOptions partial;
  partial.partial_checksum = true;
  for (bool ipv6 : {false, true}) {
    SCOPED_TRACE(ipv6 ? "IPv6" : "IPv4");
    const OffloadFrameSpec spec = guest_frame(ipv6, IPPROTO_TCP, 30000);
    const Segmented out = segment(spec, ipv6 ? virtio::kNetGsoTcpV6 : virtio::kNetGsoTcpV4, 1448, partial);
    expect_payload_segments(spec, out, 1448, true);
    // Completing the checksum as the receiver would gives a valid segment.
    const testing::FrameOffsets at = testing::offsets_of(spec);
    for (const PacketPtr& segment : out.segments) {
      Bytes frame = segment->frame;
      testing::set16(frame, at.l4 + 16, testing::checksum(frame, at.l4, frame.size()));
      EXPECT_TRUE(testing::transport_checksum_valid(frame, at.l3, at.l4, ipv6, IPPROTO_TCP));
    }
  }
}

TEST(GsoSegment, EcnCwrOnlyOnTheFirstSegmentFinAndPshOnlyOnTheLast) {
  OffloadFrameSpec spec = guest_frame(false, IPPROTO_TCP, 5000);
  spec.tcp_flags = kCwr | kAck | kPsh | kFin;
  const Segmented out = segment(spec, virtio::kNetGsoTcpV4 | virtio::kNetGsoEcn, 1448);
  ASSERT_EQ(out.segments.size(), 4u);
  const size_t flags_at = testing::kEthHeader + 20 + 13;
  EXPECT_EQ(testing::get8(out.segments[0]->frame, flags_at), kCwr | kAck);
  EXPECT_EQ(testing::get8(out.segments[1]->frame, flags_at), kAck);
  EXPECT_EQ(testing::get8(out.segments[2]->frame, flags_at), kAck);
  EXPECT_EQ(testing::get8(out.segments[3]->frame, flags_at), kAck | kPsh | kFin);
  expect_payload_segments(spec, out, 1448, false);
}

TEST(GsoSegment, UsoV4AndV6Of64KiB) {
  for (bool ipv6 : {false, true}) {
    SCOPED_TRACE(ipv6 ? "IPv6" : "IPv4");
    const OffloadFrameSpec spec = guest_frame(ipv6, IPPROTO_UDP, ipv6 ? 65527 : 65507);
    for (uint16_t gso_size : {uint16_t{1472}, uint16_t{1000}, uint16_t{8952}}) {
      SCOPED_TRACE(gso_size);
      const Segmented out = segment(spec, virtio::kNetGsoUdpL4, gso_size);
      expect_payload_segments(spec, out, gso_size, false);
      const testing::FrameOffsets at = testing::offsets_of(spec);
      for (const PacketPtr& datagram : out.segments) {
        EXPECT_EQ(testing::get16(datagram->frame, at.l4 + 4), datagram->frame.size() - at.l4);  // UDP length
      }
    }
  }
}

// The UDP datagram a UFO frame carries, as a receiver re-assembles it: the length
// over the whole datagram and the full checksum.
Bytes whole_datagram(const OffloadFrameSpec& spec) {
  OffloadFrameSpec whole = spec;
  whole.checksum = L4Checksum::kFull;
  const Bytes frame = testing::offload_frame(whole);
  const size_t l4 = testing::offsets_of(whole).l4;
  return slice(frame, l4, frame.size() - l4);
}

TEST(GsoSegment, UfoV4FragmentsOneDatagram) {
  const OffloadFrameSpec spec = guest_frame(false, IPPROTO_UDP, 65507);
  const Bytes datagram = whole_datagram(spec);
  for (uint16_t gso_size : {uint16_t{1480}, uint16_t{1477}, uint16_t{4096}}) {
    SCOPED_TRACE(gso_size);
    const size_t piece = gso_size & ~7U;
    const size_t count = (datagram.size() + piece - 1) / piece;
    const Segmented out = segment(spec, virtio::kNetGsoUdp, gso_size);
    ASSERT_EQ(out.segments.size(), count);
    Bytes reassembled;
    for (size_t i = 0; i < count; ++i) {
      const bool last = i + 1 == count;
      OffloadFrameSpec expected = spec;
      expected.ip_length.reset();
      expected.raw_l4 = slice(datagram, i * piece, last ? datagram.size() - i * piece : piece);
      expected.ip_fragment = static_cast<uint16_t>((i * piece / 8) | (last ? 0 : 0x2000));  // DF cleared
      const Packet& fragment = *out.segments[i];
      ASSERT_EQ(fragment.frame, testing::offload_frame(expected)) << "fragment " << i;
      EXPECT_TRUE(testing::ip_checksum_valid(fragment.frame, testing::kEthHeader));
      EXPECT_EQ(testing::get16(fragment.frame, testing::kEthHeader + 4), spec.ip_id);  // one id for all
      EXPECT_EQ(fragment.header, virtio::NetHeader{});
      reassembled.insert(reassembled.end(), fragment.frame.begin() + testing::kEthHeader + 20, fragment.frame.end());
    }
    EXPECT_EQ(reassembled, datagram);
    EXPECT_EQ(slice(reassembled, 8, reassembled.size() - 8), spec.payload);
  }
}

TEST(GsoSegment, UfoV6FragmentHeadersAfterTheExtensionHeaders) {
  OffloadFrameSpec spec = guest_frame(true, IPPROTO_UDP, 65000);
  spec.extensions = {{0, 8}, {60, 8}};
  spec.vlans = {{0x8100, 3}};
  const Bytes datagram = whole_datagram(spec);
  SegmentOptions options;
  options.ipv6_fragment_id = 0xdeadbeef;
  options.partial_checksum = true;  // no effect on fragments
  const Segmented out = segment(spec, virtio::kNetGsoUdp, 1448, options);
  const size_t count = (datagram.size() + 1447) / 1448;
  ASSERT_EQ(out.segments.size(), count);
  Bytes reassembled;
  const size_t data_at = testing::offsets_of(spec).l4 + 8;
  for (size_t i = 0; i < count; ++i) {
    const bool last = i + 1 == count;
    OffloadFrameSpec expected = spec;
    expected.ip_length.reset();
    expected.fragment = testing::Ipv6Fragment{i * 1448, !last, 0xdeadbeef};
    expected.raw_l4 = slice(datagram, i * 1448, last ? datagram.size() - i * 1448 : 1448);
    ASSERT_EQ(out.segments[i]->frame, testing::offload_frame(expected)) << "fragment " << i;
    EXPECT_EQ(out.segments[i]->header, virtio::NetHeader{});
    reassembled.insert(reassembled.end(), out.segments[i]->frame.begin() + static_cast<std::ptrdiff_t>(data_at),
                       out.segments[i]->frame.end());
  }
  EXPECT_EQ(reassembled, datagram);
  // The re-assembled datagram's checksum verifies with the IPv6 pseudo-header.
  Bytes whole = testing::offload_frame(spec);
  const size_t l4 = testing::offsets_of(spec).l4;
  std::copy(reassembled.begin(), reassembled.end(), whole.begin() + static_cast<std::ptrdiff_t>(l4));
  EXPECT_TRUE(testing::transport_checksum_valid(whole, testing::kEthHeader + 4, l4, true, IPPROTO_UDP));
}

TEST(GsoSegment, OneSegmentFramesGoOutWhole) {
  // TCP whose payload fits one segment, a TCP frame of headers only, and a UFO datagram
  // that needs no fragmenting (DF kept, no fragment fields touched).
  for (size_t payload : {size_t{0}, size_t{700}, size_t{1448}}) {
    const OffloadFrameSpec spec = guest_frame(false, IPPROTO_TCP, payload);
    expect_payload_segments(spec, segment(spec, virtio::kNetGsoTcpV4, 1448), 1448, false);
  }
  for (bool ipv6 : {false, true}) {
    const OffloadFrameSpec udp = guest_frame(ipv6, IPPROTO_UDP, 1400);
    const Segmented out = segment(udp, virtio::kNetGsoUdp, 1480);
    ASSERT_EQ(out.segments.size(), 1u);
    OffloadFrameSpec expected = udp;
    expected.ip_length.reset();
    expected.checksum = L4Checksum::kFull;
    EXPECT_EQ(out.segments[0]->frame, testing::offload_frame(expected));
  }
}

TEST(GsoSegment, UdpChecksumOfZeroIsSentAsAllOnes) {
  // A one-datagram USO frame whose last payload word makes the checksum come out 0.
  OffloadFrameSpec spec = guest_frame(false, IPPROTO_UDP, 100);
  spec.payload[98] = spec.payload[99] = std::byte{0};
  spec.checksum = L4Checksum::kZero;
  Bytes frame = testing::offload_frame(spec);
  const testing::FrameOffsets at = testing::offsets_of(spec);
  testing::set16(frame, at.l4 + 4, 108);  // the builder's UDP length, as the segment will have it
  const uint16_t sum = testing::fold(testing::sum16(frame, at.l4, frame.size(),
                                                    testing::pseudo_sum(frame, at.l3, false, IPPROTO_UDP, 108)));
  const auto last_word = static_cast<uint16_t>(~sum);
  spec.payload[98] = std::byte{static_cast<uint8_t>(last_word >> 8)};
  spec.payload[99] = std::byte{static_cast<uint8_t>(last_word)};
  spec.checksum = L4Checksum::kPartial;
  for (uint8_t type : {virtio::kNetGsoUdpL4, virtio::kNetGsoUdp}) {
    const Segmented out = segment(spec, type, 1400);
    ASSERT_EQ(out.segments.size(), 1u);
    EXPECT_EQ(testing::get16(out.segments[0]->frame, at.l4 + 6), 0xffff);
    EXPECT_TRUE(testing::transport_checksum_valid(out.segments[0]->frame, at.l3, at.l4, false, IPPROTO_UDP));
  }
}

// A sink that takes `take` segments, then refuses (or gives no buffer).
class StoppingSink final : public SegmentSink {
 public:
  StoppingSink(size_t take, bool refuse_buffer) : take_(take), refuse_buffer_(refuse_buffer) {}
  std::span<std::byte> buffer(size_t bytes) override {
    if (refuse_buffer_ && taken_ == take_) return {};
    storage_.resize(bytes);
    return storage_;
  }
  bool commit(const virtio::NetHeader&) override {
    if (taken_ == take_) return false;
    ++taken_;
    return true;
  }
  size_t taken() const { return taken_; }

 private:
  size_t take_;
  bool refuse_buffer_;
  size_t taken_ = 0;
  Bytes storage_;
};

TEST(GsoSegment, StopsWhenTheSinkStops) {
  for (uint8_t type : {virtio::kNetGsoTcpV4, virtio::kNetGsoUdp}) {
    const OffloadFrameSpec spec = guest_frame(false, type == virtio::kNetGsoUdp ? IPPROTO_UDP : IPPROTO_TCP, 10000);
    const Bytes frame = testing::offload_frame(spec);
    const OffloadCheck check = validate_offload(testing::gso_header(spec, type, 1000), frame, kAllHost);
    ASSERT_TRUE(check.ok());
    for (bool refuse_buffer : {false, true}) {
      StoppingSink sink(3, refuse_buffer);
      EXPECT_EQ(gso_segment(check.layout, frame, {}, sink), 3u);
      EXPECT_EQ(sink.taken(), 3u);
    }
  }
}

}  // namespace
}  // namespace uvhost::backends
