// loopback_backend_test.cpp - LoopbackBackend: a MAC-swapped copy of every frame goes
// back through the injector into the same pair; offloads come back as they were to a
// guest that takes them and segmented / checksummed in software (byte for byte what
// a NIC would have sent) to one that does not; offload headers checked against the
// guest's own features; the headers that come back are the ones that were checked
// even when the guest rewrites them meanwhile; drops counted.
#include "uvhost/backends/loopback_backend.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "collecting_injector.h"
#include "offload_frames.h"
#include "uvhost/testing/frames.h"

namespace uvhost::backends {
namespace {

using testing::Bytes;
using testing::CollectingInjector;
using testing::OffloadFrameSpec;

constexpr uint64_t bit(unsigned b) { return uint64_t{1} << b; }
constexpr uint64_t kGuestCsum = bit(net_feature::kGuestCsum);
// A guest that sends every offload; what it takes is added per test.
constexpr uint64_t kSends = testing::kAllHostOffloads;

// A Linux guest's TCPv4 super-frame (partial checksum) to some peer.
OffloadFrameSpec tcp_spec(size_t payload = 10000) {
  OffloadFrameSpec spec;
  spec.payload = testing::payload_pattern(payload, 3);
  spec.checksum = testing::L4Checksum::kPartial;
  return spec;
}

// The same frame as the loopback sends it back: the addresses swapped.
OffloadFrameSpec reflected(OffloadFrameSpec spec) {
  std::swap(spec.source, spec.destination);
  return spec;
}

TEST(LoopbackBackend, OffersEveryOffload) {
  LoopbackBackend loopback(1);
  EXPECT_EQ(loopback.offered_features(), net_feature::kHostOffloads | net_feature::kGuestOffloads);
  EXPECT_EQ(net_feature::offload_dependency_violation(loopback.offered_features()), "");
}

// A plain frame comes back with an empty header: flags the guest set (DATA_VALID,
// which a driver must not) and stale offload fields are not reflected.
TEST(LoopbackBackend, ReflectsWithMacsSwappedIntoTheSamePair) {
  LoopbackBackend loopback(2);
  CollectingInjector injector(2);
  loopback.attach(injector);
  EXPECT_EQ(loopback.kind(), "loopback");
  const auto frame0 = uvhost::testing::make_frame(60, 1);
  const auto frame1 = uvhost::testing::make_frame(1514, 2);
  virtio::NetHeader stale;
  stale.flags = virtio::kNetHdrFlagDataValid;
  stale.hdr_len = 54;
  stale.gso_size = 1448;
  stale.num_buffers = 3;
  ASSERT_TRUE(loopback.transmit(0, stale, frame0));
  ASSERT_TRUE(loopback.transmit(1, {}, frame1));
  auto got = injector.take();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].pair, 0u);
  EXPECT_EQ(got[0].packet->frame, uvhost::testing::reflected(frame0));
  EXPECT_EQ(got[0].packet->header, virtio::NetHeader{});
  EXPECT_EQ(got[1].pair, 1u);
  EXPECT_EQ(got[1].packet->frame, uvhost::testing::reflected(frame1));
  EXPECT_EQ(got[1].packet->header, virtio::NetHeader{});
  EXPECT_EQ(loopback.reflected(), 2u);
  EXPECT_EQ(loopback.stats().at("reflected_bytes"), 60 + 1514);
  loopback.detach();
}

// ---- offloads ----------------------------------------------------------------------------

TEST(LoopbackBackend, GsoComesBackWholeToAGuestThatTakesIt) {
  LoopbackBackend loopback(1);
  CollectingInjector injector(1);
  loopback.attach(injector);
  loopback.features_changed(kSends | kGuestCsum | bit(net_feature::kGuestTso4));
  const OffloadFrameSpec spec = tcp_spec();
  virtio::NetHeader header = testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448);
  header.num_buffers = 9;
  ASSERT_TRUE(loopback.transmit(0, header, testing::offload_frame(spec)));
  auto got = injector.take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].packet->frame, testing::offload_frame(reflected(spec)));
  header.num_buffers = 0;
  EXPECT_EQ(got[0].packet->header, header);
  EXPECT_EQ(loopback.segmented(), 0u);
  EXPECT_EQ(loopback.reflected(), 1u);
}

TEST(LoopbackBackend, GsoComesBackSegmentedToAGuestWithoutTheFeature) {
  const OffloadFrameSpec spec = tcp_spec(65495);  // a 64 KiB datagram
  const virtio::NetHeader header = testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448);
  for (const bool guest_csum : {true, false}) {
    LoopbackBackend loopback(1);
    CollectingInjector injector(1);
    loopback.attach(injector);
    loopback.features_changed(kSends | (guest_csum ? kGuestCsum | bit(net_feature::kGuestTso6) : 0));
    ASSERT_TRUE(loopback.transmit(0, header, testing::offload_frame(spec)));
    const std::vector<Bytes> expected = testing::expected_segments(reflected(spec), 1448, guest_csum);
    const auto got = injector.take();
    ASSERT_EQ(got.size(), 46u);
    ASSERT_EQ(expected.size(), 46u);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].packet->frame, expected[i]) << i;
      EXPECT_EQ(got[i].packet->header.gso_type, virtio::kNetGsoNone) << i;
      EXPECT_EQ(got[i].packet->header.flags, guest_csum ? virtio::kNetHdrFlagNeedsCsum : 0) << i;
      if (!guest_csum) {
        EXPECT_TRUE(testing::ipv4_tcp_checksums_valid(got[i].packet->frame)) << i;
      }
    }
    EXPECT_EQ(loopback.segmented(), 1u);
    EXPECT_EQ(loopback.segments(), 46u);
    EXPECT_EQ(loopback.reflected(), 1u);
    EXPECT_EQ(loopback.stats().at("segments"), 46);
  }
}

TEST(LoopbackBackend, UdpOffloadsComeBackSegmentedWithFreshFragmentIds) {
  LoopbackBackend loopback(1);
  CollectingInjector injector(1);
  loopback.attach(injector);
  loopback.features_changed(kSends | kGuestCsum);  // no UFO, no USO
  OffloadFrameSpec spec = tcp_spec(4000);
  spec.protocol = IPPROTO_UDP;
  spec.ipv6 = true;
  // USO: one datagram per piece.
  ASSERT_TRUE(loopback.transmit(0, testing::gso_header(spec, virtio::kNetGsoUdpL4, 1452), testing::offload_frame(spec)));
  const std::vector<Bytes> uso = testing::expected_segments(reflected(spec), 1452, true);
  auto got = injector.take();
  ASSERT_EQ(got.size(), uso.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].packet->frame, uso[i]) << i;
  // UFO over IPv6, twice: fragments of one datagram each, the two with different ids.
  std::vector<uint32_t> ids;
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(loopback.transmit(0, testing::gso_header(spec, virtio::kNetGsoUdp, 1448), testing::offload_frame(spec)));
    got = injector.take();
    ASSERT_EQ(got.size(), 3u);  // 4008 datagram bytes in 1448-byte fragments
    const size_t fragment_header = testing::kEthHeader + 40;
    for (const auto& fragment : got) {
      EXPECT_EQ(testing::get8(fragment.packet->frame, testing::kEthHeader + 6), 44);  // next header: fragment
      EXPECT_EQ(testing::get32(fragment.packet->frame, fragment_header + 4), testing::get32(got[0].packet->frame, fragment_header + 4));
      EXPECT_EQ(fragment.packet->header.flags, 0);
    }
    ids.push_back(testing::get32(got[0].packet->frame, fragment_header + 4));
  }
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_EQ(loopback.segmented(), 3u);
}

TEST(LoopbackBackend, PartialChecksumComesBackAsItIsOrCompleted) {
  OffloadFrameSpec spec = tcp_spec(333);
  const Bytes partial = testing::offload_frame(spec);
  const virtio::NetHeader header = testing::gso_header(spec, virtio::kNetGsoNone, 0);
  // GUEST_CSUM: the partial checksum as it was sent.
  LoopbackBackend takes(1);
  CollectingInjector in_takes(1);
  takes.attach(in_takes);
  takes.features_changed(kSends | kGuestCsum);
  ASSERT_TRUE(takes.transmit(0, header, partial));
  auto got = in_takes.take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].packet->header, header);
  EXPECT_EQ(got[0].packet->frame, testing::offload_frame(reflected(spec)));
  EXPECT_EQ(takes.checksum_completed(), 0u);
  // No GUEST_CSUM: completed, no flag.
  LoopbackBackend completes(1);
  CollectingInjector in_completes(1);
  completes.attach(in_completes);
  completes.features_changed(bit(net_feature::kCsum));
  ASSERT_TRUE(completes.transmit(0, header, partial));
  got = in_completes.take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].packet->header.flags, 0);
  spec.checksum = testing::L4Checksum::kFull;
  EXPECT_EQ(got[0].packet->frame, testing::offload_frame(reflected(spec)));
  EXPECT_TRUE(testing::ipv4_tcp_checksums_valid(got[0].packet->frame));
  EXPECT_EQ(completes.checksum_completed(), 1u);
}

TEST(LoopbackBackend, OffloadsTheGuestDidNotNegotiateOrThatDoNotFitAreDropped) {
  LoopbackBackend loopback(1);
  CollectingInjector injector(1);
  loopback.attach(injector);
  const OffloadFrameSpec spec = tcp_spec();
  const Bytes frame = testing::offload_frame(spec);
  const virtio::NetHeader header = testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448);
  loopback.features_changed(kSends & ~bit(net_feature::kHostTso4));  // sends TSO it did not negotiate
  EXPECT_FALSE(loopback.transmit(0, header, frame));
  loopback.features_changed(kSends);
  virtio::NetHeader no_size = header;
  no_size.gso_size = 0;
  EXPECT_FALSE(loopback.transmit(0, no_size, frame));
  virtio::NetHeader outside;
  outside.flags = virtio::kNetHdrFlagNeedsCsum;
  outside.csum_start = 60;
  outside.csum_offset = 16;
  EXPECT_FALSE(loopback.transmit(0, outside, uvhost::testing::make_frame(64, 1)));
  EXPECT_EQ(injector.size(), 0u);
  EXPECT_EQ(loopback.offload_invalid(OffloadReason::kGsoNotNegotiated), 1u);
  EXPECT_EQ(loopback.offload_invalid(OffloadReason::kGsoSizeZero), 1u);
  EXPECT_EQ(loopback.offload_invalid(OffloadReason::kChecksumOutsideFrame), 1u);
  const nlohmann::json stats = loopback.stats();
  EXPECT_EQ(stats.at("offload_invalid").at("gso_size_zero"), 1);
  EXPECT_FALSE(stats.at("offload_invalid").contains("ok"));
  EXPECT_EQ(stats.at("reflected"), 0);
  // Plain frames still go.
  EXPECT_TRUE(loopback.transmit(0, {}, uvhost::testing::make_frame(64, 2)));
}

// Headers longer than the loopback's head copy (an IPv6 hop-by-hop header of 208
// bytes): the frame is looked at whole, and comes back right either way.
TEST(LoopbackBackend, HeadersLongerThanTheHeadCopyAreCheckedOnTheWholeFrame) {
  OffloadFrameSpec spec = tcp_spec(6000);
  spec.ipv6 = true;
  spec.extensions = {{0, 208}};
  ASSERT_GT(testing::offsets_of(spec).payload, LoopbackBackend::kHeadBytes);
  const virtio::NetHeader header = testing::gso_header(spec, virtio::kNetGsoTcpV6, 1300);
  for (const uint64_t takes : {uint64_t{0}, kGuestCsum | bit(net_feature::kGuestTso6)}) {
    LoopbackBackend loopback(1);
    CollectingInjector injector(1);
    loopback.attach(injector);
    loopback.features_changed(kSends | takes);
    ASSERT_TRUE(loopback.transmit(0, header, testing::offload_frame(spec)));
    const auto got = injector.take();
    if (takes != 0) {
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0].packet->frame, testing::offload_frame(reflected(spec)));
      EXPECT_EQ(got[0].packet->header, header);
    } else {
      const std::vector<Bytes> expected = testing::expected_segments(reflected(spec), 1300, false);
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].packet->frame, expected[i]) << i;
    }
  }
}

// An injector that lets the guest rewrite its frame (in guest memory: the TxFrame's
// bytes) at the worst moment - after the loopback checked it, while the frame is copied
// back - and then copies as the datapath does.
class RewritingInjector final : public RxInjector {
 public:
  RewritingInjector(Bytes& guest_memory, size_t at, std::byte value)
      : guest_memory_(guest_memory), at_(at), value_(value) {}
  bool inject(uint32_t pair, PacketPtr packet) noexcept override { return collected.inject(pair, std::move(packet)); }
  bool inject_frame(uint32_t pair, const virtio::NetHeader& header, std::span<const std::byte> prefix,
                    const TxFrame& source) noexcept override {
    guest_memory_[at_] = value_;
    return RxInjector::inject_frame(pair, header, prefix, source);
  }
  uint32_t queue_pairs() const noexcept override { return 1; }
  CollectingInjector collected{1};

 private:
  Bytes& guest_memory_;
  size_t at_;
  std::byte value_;
};

TEST(LoopbackBackend, HeadersRewrittenAfterTheCheckDoNotComeBack) {
  const OffloadFrameSpec spec = tcp_spec();
  Bytes guest_memory = testing::offload_frame(spec);
  const testing::FrameOffsets at = testing::offsets_of(spec);
  // The TCP data offset made 15 words (60 bytes, past what was checked) after the check.
  RewritingInjector injector(guest_memory, at.l4 + 12, std::byte{0xf0});
  LoopbackBackend loopback(1);
  loopback.attach(injector);
  loopback.features_changed(kSends | kGuestCsum | bit(net_feature::kGuestTso4));
  const virtio::NetHeader header = testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448);
  virtio::IoPiece piece;
  const TxFrame frame = TxFrame::contiguous(header, guest_memory, piece);
  EXPECT_EQ(loopback.transmit_burst(0, std::span<const TxFrame>(&frame, 1)).frames, 1u);
  EXPECT_EQ(testing::get8(guest_memory, at.l4 + 12), 0xf0);  // the guest did rewrite it
  const auto got = injector.collected.take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].packet->frame, testing::offload_frame(reflected(spec)));  // as checked
}

// ---- drops and threads -------------------------------------------------------------------

// A refused inject is the receiving queue's drop (the datapath counts it there), so
// transmit() still says "taken": each lost frame is counted once.
TEST(LoopbackBackend, InjectFailureIsCountedOnceOnTheReceiveSide) {
  LoopbackBackend loopback(1);
  CollectingInjector injector(1);
  loopback.attach(injector);
  injector.set_refuse(true);
  EXPECT_TRUE(loopback.transmit(0, {}, uvhost::testing::make_frame(64, 3)));
  EXPECT_TRUE(loopback.transmit(0, {}, uvhost::testing::make_frame(64, 4)));
  // A segmented frame whose first segment is refused: one frame lost, counted once.
  loopback.features_changed(kSends);
  const OffloadFrameSpec spec = tcp_spec();
  EXPECT_TRUE(loopback.transmit(0, testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448), testing::offload_frame(spec)));
  EXPECT_EQ(injector.refused(), 3u);
  EXPECT_EQ(loopback.inject_failed(), 3u);
  EXPECT_EQ(loopback.reflected(), 0u);
  injector.set_refuse(false);
  EXPECT_TRUE(loopback.transmit(0, {}, uvhost::testing::make_frame(64, 5)));
  EXPECT_EQ(loopback.reflected(), 1u);
  EXPECT_EQ(loopback.stats().at("inject_failed"), 3);
}

TEST(LoopbackBackend, WithoutAnInjectorFramesAreDropped) {
  LoopbackBackend loopback(1);
  EXPECT_FALSE(loopback.transmit(0, {}, uvhost::testing::make_frame(64, 6)));
  CollectingInjector injector(1);
  loopback.attach(injector);
  loopback.detach();
  EXPECT_FALSE(loopback.transmit(0, {}, uvhost::testing::make_frame(64, 7)));
  EXPECT_EQ(loopback.stats().at("no_injector"), 2);
  EXPECT_EQ(injector.size(), 0u);
}

TEST(LoopbackBackend, RuntsGiantsAndBadPairsAreDropped) {
  LoopbackBackend loopback(1);
  CollectingInjector injector(1);
  loopback.attach(injector);
  EXPECT_FALSE(loopback.transmit(0, {}, std::vector<std::byte>(13)));
  EXPECT_TRUE(loopback.transmit(0, {}, std::vector<std::byte>(14)));
  EXPECT_TRUE(loopback.transmit(0, {}, std::vector<std::byte>(LoopbackBackend::kMaxFrameBytes)));
  EXPECT_FALSE(loopback.transmit(0, {}, std::vector<std::byte>(LoopbackBackend::kMaxFrameBytes + 1)));
  EXPECT_FALSE(loopback.transmit(1, {}, std::vector<std::byte>(64)));
  const nlohmann::json stats = loopback.stats();
  EXPECT_EQ(stats.at("too_short"), 1);
  EXPECT_EQ(stats.at("too_long"), 1);
  EXPECT_EQ(stats.at("bad_pair"), 1);
  EXPECT_EQ(stats.at("reflected"), 2);
  EXPECT_EQ(injector.size(), 2u);
  EXPECT_THROW(LoopbackBackend(0), std::invalid_argument);
}

// Pairs in parallel, each with its own head copy: plain frames and super-frames that
// are segmented, every one back on its own pair and whole.
TEST(LoopbackBackend, PairsReflectInParallel) {
  constexpr uint32_t kPairs = 4;
  constexpr uint32_t kFrames = 600;
  LoopbackBackend loopback(kPairs);
  CollectingInjector injector(kPairs);
  loopback.attach(injector);
  loopback.features_changed(kSends);
  const OffloadFrameSpec spec = tcp_spec(3000);  // 3 segments
  const Bytes gso_frame = testing::offload_frame(spec);
  const virtio::NetHeader header = testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448);
  std::vector<std::thread> workers;
  for (uint32_t pair = 0; pair < kPairs; ++pair) {
    workers.emplace_back([&, pair] {
      for (uint32_t i = 0; i < kFrames; ++i) {
        if (i % 2 == 0) {
          loopback.transmit(pair, {}, uvhost::testing::make_frame(64, pair * kFrames + i));
        } else {
          loopback.transmit(pair, header, gso_frame);
        }
      }
    });
  }
  for (auto& worker : workers) worker.join();
  EXPECT_EQ(loopback.reflected(), uint64_t{kPairs} * kFrames);
  const auto got = injector.take();
  ASSERT_EQ(got.size(), size_t{kPairs} * kFrames / 2 * (1 + 3));
  const std::vector<Bytes> segments = testing::expected_segments(reflected(spec), 1448, false);
  std::vector<uint32_t> per_pair(kPairs, 0);
  for (const auto& injected : got) {
    ++per_pair[injected.pair];
    if (injected.packet->frame.size() > 64) {
      EXPECT_TRUE(std::find(segments.begin(), segments.end(), injected.packet->frame) != segments.end());
    }
  }
  for (uint32_t pair = 0; pair < kPairs; ++pair) EXPECT_EQ(per_pair[pair], kFrames / 2 * 4);
}

}  // namespace
}  // namespace uvhost::backends
