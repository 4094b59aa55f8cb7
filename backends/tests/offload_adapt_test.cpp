// offload_adapt_test.cpp - what a receiver needs done to a frame (offload_fit), the
// header it gets, IPv6 fragment ids, which GSO frames a guest may receive, segments
// injected for one that may not (partial or full checksums by its GUEST_CSUM, stopping
// at a refusal), and software completion of partial checksums for a guest without
// GUEST_CSUM.
#include "uvhost/backends/offload_adapt.h"

#include <gtest/gtest.h>

#include "collecting_injector.h"
#include "offload_frames.h"
#include "tap_test_support.h"
#include "uvhost/backends/tap_device.h"

namespace uvhost::backends {
namespace {

constexpr uint64_t bit(unsigned b) { return uint64_t{1} << b; }
constexpr uint64_t kCsum = bit(net_feature::kGuestCsum);

virtio::NetHeader gso(uint8_t type) {
  virtio::NetHeader header;
  header.flags = virtio::kNetHdrFlagNeedsCsum;
  header.gso_type = type;
  header.gso_size = 1400;
  return header;
}

TEST(OffloadAdapt, GsoNeedsTheMatchingGuestFeature) {
  using namespace net_feature;
  EXPECT_TRUE(gso_acceptable({}, 0));
  EXPECT_FALSE(gso_acceptable(gso(virtio::kNetGsoTcpV4), 0));
  EXPECT_FALSE(gso_acceptable(gso(virtio::kNetGsoTcpV4), bit(kGuestTso4)));  // without GUEST_CSUM
  EXPECT_TRUE(gso_acceptable(gso(virtio::kNetGsoTcpV4), kCsum | bit(kGuestTso4)));
  EXPECT_FALSE(gso_acceptable(gso(virtio::kNetGsoTcpV6), kCsum | bit(kGuestTso4)));
  EXPECT_TRUE(gso_acceptable(gso(virtio::kNetGsoTcpV6), kCsum | bit(kGuestTso6)));
  EXPECT_FALSE(gso_acceptable(gso(virtio::kNetGsoTcpV4 | virtio::kNetGsoEcn), kCsum | bit(kGuestTso4)));
  EXPECT_TRUE(gso_acceptable(gso(virtio::kNetGsoTcpV4 | virtio::kNetGsoEcn), kCsum | bit(kGuestTso4) | bit(kGuestEcn)));
  EXPECT_TRUE(gso_acceptable(gso(virtio::kNetGsoUdp), kCsum | bit(kGuestUfo)));
  EXPECT_FALSE(gso_acceptable(gso(virtio::kNetGsoUdpL4), kCsum | bit(kGuestUso4)));
  EXPECT_TRUE(gso_acceptable(gso(virtio::kNetGsoUdpL4), kCsum | bit(kGuestUso4) | bit(kGuestUso6)));
  EXPECT_FALSE(gso_acceptable(gso(42), ~uint64_t{0}));  // unknown type
}

// What a receiver needs done: segmentation first (a GSO frame it cannot take), then
// a checksum completed (a partial checksum without GUEST_CSUM), else nothing.
TEST(OffloadAdapt, FitSegmentsThenCompletesThenPassesAsItIs) {
  testing::OffloadFrameSpec spec;
  spec.payload = testing::payload_pattern(3000);
  spec.checksum = testing::L4Checksum::kPartial;
  const testing::Bytes frame = testing::offload_frame(spec);
  const virtio::NetHeader tso = testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448);
  const OffloadLayout gso_layout = validate_offload(tso, frame, testing::kAllHostOffloads).layout;
  const virtio::NetHeader partial = testing::gso_header(spec, virtio::kNetGsoNone, 0);
  const OffloadLayout partial_layout = validate_offload(partial, frame, testing::kAllHostOffloads).layout;
  using F = OffloadFit;
  EXPECT_EQ(offload_fit(tso, gso_layout, 0), F::kSegment);
  EXPECT_EQ(offload_fit(tso, gso_layout, kCsum), F::kSegment);
  EXPECT_EQ(offload_fit(tso, gso_layout, kCsum | bit(net_feature::kGuestTso4)), F::kAsIs);
  EXPECT_EQ(offload_fit(partial, partial_layout, 0), F::kCompleteChecksum);
  EXPECT_EQ(offload_fit(partial, partial_layout, kCsum), F::kAsIs);
  EXPECT_EQ(offload_fit({}, OffloadLayout{}, 0), F::kAsIs);
}

TEST(OffloadAdapt, DeliveredHeaderKeepsOnlyNeedsCsumAndNoBufferCount) {
  virtio::NetHeader header = gso(virtio::kNetGsoTcpV6);
  header.flags |= virtio::kNetHdrFlagDataValid | virtio::kNetHdrFlagRscInfo;
  header.num_buffers = 7;
  header.hdr_len = 74;
  virtio::NetHeader expected = header;
  expected.flags = virtio::kNetHdrFlagNeedsCsum;
  expected.num_buffers = 0;
  EXPECT_EQ(delivered_header(header), expected);
  virtio::NetHeader valid_only;
  valid_only.flags = virtio::kNetHdrFlagDataValid;
  EXPECT_EQ(delivered_header(valid_only), virtio::NetHeader{});
}

TEST(OffloadAdapt, FragmentIdsOnlyForUfoOverIpv6AndNeverTheSameTwiceInARow) {
  Ipv6FragmentIds ids;
  OffloadLayout layout;
  layout.kind = GsoKind::kUfo;
  layout.ipv6 = true;
  const uint32_t first = ids.for_layout(layout);
  EXPECT_EQ(ids.for_layout(layout), first + 1);
  layout.ipv6 = false;
  EXPECT_EQ(ids.for_layout(layout), 0u);
  layout.kind = GsoKind::kTcp;
  layout.ipv6 = true;
  EXPECT_EQ(ids.for_layout(layout), 0u);
}

TEST(OffloadAdapt, SegmentsAreInjectedInOrderWithChecksumsForTheReceiver) {
  testing::OffloadFrameSpec spec;
  spec.payload = testing::payload_pattern(5000);
  spec.checksum = testing::L4Checksum::kPartial;
  const testing::Bytes frame = testing::offload_frame(spec);
  const OffloadCheck check = validate_offload(testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448), frame,
                                              testing::kAllHostOffloads);
  ASSERT_TRUE(check.ok());
  for (const uint64_t features : {uint64_t{0}, kCsum}) {
    testing::CollectingInjector injector(2);
    EXPECT_EQ(inject_segments(injector, 1, check.layout, frame, features, 0), 4u);
    const auto injected = injector.take();
    ASSERT_EQ(injected.size(), 4u);
    uint32_t seq = spec.seq;
    for (const auto& segment : injected) {
      EXPECT_EQ(segment.pair, 1u);
      EXPECT_EQ(testing::get32(segment.packet->frame, testing::kEthHeader + 20 + 4), seq);
      seq += 1448;
      EXPECT_EQ(segment.packet->header.flags, features == 0 ? 0 : virtio::kNetHdrFlagNeedsCsum);
      EXPECT_EQ(testing::ipv4_tcp_checksums_valid(segment.packet->frame), features == 0);
    }
  }
  testing::CollectingInjector refusing(1);
  refusing.set_refuse(true);
  EXPECT_EQ(inject_segments(refusing, 0, check.layout, frame, 0, 0), 0u);
  EXPECT_EQ(refusing.refused(), 1u);
}

TEST(OffloadAdapt, ChecksumCompletedOnlyForGuestsWithoutGuestCsum) {
  testing::TcpFrameSpec spec;
  spec.payload = 333;  // odd length: the last byte is padded
  const testing::Bytes partial = testing::tcp_frame(spec);
  virtio::NetHeader header;
  header.flags = virtio::kNetHdrFlagNeedsCsum;
  header.csum_start = testing::kEthHeader + testing::kIpHeader;
  header.csum_offset = 16;

  Packet as_is(header, partial);
  EXPECT_EQ(adapt_checksum(as_is, kCsum), ChecksumAdapt::kAsIs);
  EXPECT_EQ(as_is.header, header);
  EXPECT_EQ(as_is.frame, partial);

  Packet completed(header, partial);
  EXPECT_EQ(adapt_checksum(completed, 0), ChecksumAdapt::kCompleted);
  EXPECT_EQ(completed.header.flags, 0);
  EXPECT_TRUE(testing::ipv4_tcp_checksums_valid(completed.frame));
  spec.partial_checksum = false;
  EXPECT_EQ(completed.frame, testing::tcp_frame(spec));

  // Flags without NEEDS_CSUM are cleared for such a guest; nothing else changes.
  virtio::NetHeader valid;
  valid.flags = virtio::kNetHdrFlagDataValid;
  Packet plain(valid, partial);
  EXPECT_EQ(adapt_checksum(plain, 0), ChecksumAdapt::kAsIs);
  EXPECT_EQ(plain.header.flags, 0);
  EXPECT_EQ(plain.frame, partial);
}

TEST(OffloadAdapt, ChecksumFieldOutsideTheFrameIsABadRange) {
  const testing::Bytes small(60, std::byte{1});
  virtio::NetHeader header;
  header.flags = virtio::kNetHdrFlagNeedsCsum;
  header.csum_start = 50;
  header.csum_offset = 9;  // field at 59..60: one byte past the end
  Packet packet(header, small);
  EXPECT_EQ(adapt_checksum(packet, 0), ChecksumAdapt::kBadRange);
  header.csum_offset = 8;  // 58..59: fits
  Packet fits(header, small);
  EXPECT_EQ(adapt_checksum(fits, 0), ChecksumAdapt::kCompleted);
  header.csum_start = 60;
  header.csum_offset = 0;
  Packet past(header, small);
  EXPECT_EQ(adapt_checksum(past, 0), ChecksumAdapt::kBadRange);
}

}  // namespace
}  // namespace uvhost::backends
