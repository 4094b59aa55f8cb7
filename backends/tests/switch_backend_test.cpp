// switch_backend_test.cpp - SwitchHub and its ports: learning and unicast, floods,
// hairpin drops, detach flushing MACs, inject failures, the offloads a port offers and
// how they are fitted per receiver (GSO segmented in software for a guest without TSO,
// no flag or gso_type a receiver did not negotiate, invalid offload headers dropped),
// MTU on ingress and per receiver, transmit from four threads while ports attach and
// detach (run it under TSan), and a tap uplink in a private network namespace (floods,
// learning, and its GSO super-frames whole or segmented per guest).
#include "uvhost/backends/switch_backend.h"

#include <net/if.h>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "collecting_injector.h"
#include "offload_frames.h"
#include "tap_test_support.h"
#include "uvhost/backends/flow_hash.h"
#include "uvhost/backends/rarp_frame.h"

namespace uvhost::backends {
namespace {

using namespace std::chrono_literals;
using testing::Bytes;
using testing::CollectingInjector;
using testing::Mac;

constexpr Mac kMacA{0x02, 0, 0, 0, 0, 0x0a};
constexpr Mac kMacB{0x02, 0, 0, 0, 0, 0x0b};
constexpr Mac kMacC{0x02, 0, 0, 0, 0, 0x0c};
constexpr Mac kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
constexpr Mac kMulticast{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};

MacAddress mac_address(const Mac& mac) { return MacAddress{mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]}; }

// A 64-byte frame with the test EtherType and a tag that says which frame it is.
Bytes frame(const Mac& destination, const Mac& source, uint8_t tag) {
  Bytes out = testing::ethernet(destination, source, testing::kTestEtherType);
  testing::put8(out, tag);
  out.resize(64, std::byte{0x33});
  return out;
}

uint8_t tag_of(const Packet& packet) { return std::to_integer<uint8_t>(packet.frame.at(testing::kEthHeader)); }

// Three attached ports a, b, c with collecting injectors.
class SwitchTest : public ::testing::Test {
 protected:
  SwitchHub hub_;
  CollectingInjector in_a_{1}, in_b_{1}, in_c_{1};
  std::unique_ptr<SwitchBackend> a_ = hub_.add_port("a", 1);
  std::unique_ptr<SwitchBackend> b_ = hub_.add_port("b", 1);
  std::unique_ptr<SwitchBackend> c_ = hub_.add_port("c", 1);

  void SetUp() override {
    a_->attach(in_a_);
    b_->attach(in_b_);
    c_->attach(in_c_);
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    c_.reset();
  }
  // Tags each injector received (and forgets them).
  static std::vector<uint8_t> tags(CollectingInjector& injector) {
    std::vector<uint8_t> out;
    for (const auto& injected : injector.take()) out.push_back(tag_of(*injected.packet));
    return out;
  }
};

using Tags = std::vector<uint8_t>;

TEST_F(SwitchTest, PortsLearnAndUnicast) {
  EXPECT_EQ(a_->kind(), "switch");
  EXPECT_EQ(hub_.member_count(), 3u);
  // a's first frame: broadcast, floods to b and c; A is learned on a.
  EXPECT_TRUE(a_->transmit(0, {}, frame(kBroadcast, kMacA, 1)));
  EXPECT_EQ(tags(in_a_), Tags{});
  EXPECT_EQ(tags(in_b_), Tags{1});
  EXPECT_EQ(tags(in_c_), Tags{1});
  // b answers A: unicast to a only; B learned on b.
  EXPECT_TRUE(b_->transmit(0, {}, frame(kMacA, kMacB, 2)));
  EXPECT_EQ(tags(in_a_), Tags{2});
  EXPECT_EQ(tags(in_b_), Tags{});
  EXPECT_EQ(tags(in_c_), Tags{});
  // a to B: unicast to b only.
  EXPECT_TRUE(a_->transmit(0, {}, frame(kMacB, kMacA, 3)));
  EXPECT_EQ(tags(in_a_), Tags{});
  EXPECT_EQ(tags(in_b_), Tags{3});
  EXPECT_EQ(tags(in_c_), Tags{});

  EXPECT_EQ(a_->forwarding().count(ForwardReason::kBroadcast), 1u);
  EXPECT_EQ(a_->forwarding().count(ForwardReason::kKnownUnicast), 1u);
  EXPECT_EQ(a_->forwarding().count(LearnResult::kLearned), 1u);
  EXPECT_EQ(b_->forwarding().count(ForwardReason::kKnownUnicast), 1u);
  EXPECT_EQ(a_->delivery(switch_delivery::kDelivered), 3u);  // 2 flood copies + 1 unicast
  EXPECT_EQ(hub_.table().lookup(mac_address(kMacA), SwitchClock::now()), a_->id());
  EXPECT_EQ(hub_.table().lookup(mac_address(kMacB), SwitchClock::now()), b_->id());
}

TEST_F(SwitchTest, BroadcastMulticastAndUnknownUnicastFloodToAllOthers) {
  EXPECT_TRUE(a_->transmit(0, {}, frame(kBroadcast, kMacA, 1)));
  EXPECT_TRUE(a_->transmit(0, {}, frame(kMulticast, kMacA, 2)));
  EXPECT_TRUE(a_->transmit(0, {}, frame(kMacC, kMacA, 3)));  // C not learned yet
  EXPECT_EQ(tags(in_a_), Tags{});
  EXPECT_EQ(tags(in_b_), (Tags{1, 2, 3}));
  EXPECT_EQ(tags(in_c_), (Tags{1, 2, 3}));
  const ForwardingStats stats = a_->forwarding();
  EXPECT_EQ(stats.count(ForwardReason::kBroadcast), 1u);
  EXPECT_EQ(stats.count(ForwardReason::kMulticast), 1u);
  EXPECT_EQ(stats.count(ForwardReason::kUnknownUnicast), 1u);
}

// A guest that migrated from port a to port b: b's datapath sends its RARP announcement
// (VHOST_USER_SEND_RARP) as a frame from b. Every other port gets it whole, and the
// table moves the guest's MAC to b, so unicast to it goes to b from then on.
TEST_F(SwitchTest, RarpAnnouncementFloodsAndMovesTheMacToItsPort) {
  EXPECT_TRUE(a_->transmit(0, {}, frame(kBroadcast, kMacA, 1)));
  (void)tags(in_b_);
  (void)tags(in_c_);
  ASSERT_EQ(hub_.table().lookup(mac_address(kMacA), SwitchClock::now()), a_->id());

  const auto announcement = rarp_announcement(mac_address(kMacA));
  virtio::IoPiece piece;
  const TxFrame tx = TxFrame::contiguous(virtio::NetHeader{}, announcement, piece);
  EXPECT_EQ(b_->transmit_burst(0, std::span<const TxFrame>(&tx, 1)).frames, 1u);
  for (CollectingInjector* receiver : {&in_a_, &in_c_}) {
    const auto got = receiver->take();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(is_rarp_announcement(got[0].packet->frame, mac_address(kMacA)));
  }
  EXPECT_TRUE(in_b_.take().empty());
  EXPECT_EQ(hub_.table().lookup(mac_address(kMacA), SwitchClock::now()), b_->id());
  EXPECT_TRUE(c_->transmit(0, {}, frame(kMacA, kMacC, 2)));
  EXPECT_EQ(tags(in_b_), Tags{2});
  EXPECT_EQ(tags(in_a_), Tags{});
}

// DATA_VALID / RSC_INFO from a sender (which must not set them) would tell the receiver
// a checksum was validated: the switch validated none, so they are not forwarded.
TEST_F(SwitchTest, CopiesCarryTheHeaderWithoutNumBuffersOrDataValid) {
  virtio::NetHeader header;
  header.flags = virtio::kNetHdrFlagDataValid | virtio::kNetHdrFlagRscInfo;
  header.hdr_len = 14;
  header.num_buffers = 5;
  c_->features_changed(uint64_t{1} << net_feature::kGuestCsum);
  b_->features_changed(uint64_t{1} << net_feature::kGuestCsum);
  ASSERT_TRUE(a_->transmit(0, header, frame(kBroadcast, kMacA, 1)));
  auto got = in_b_.take();
  ASSERT_EQ(got.size(), 1u);
  virtio::NetHeader expected = header;
  expected.flags = 0;
  expected.num_buffers = 0;
  EXPECT_EQ(got[0].packet->header, expected);
  EXPECT_EQ(got[0].packet->frame, frame(kBroadcast, kMacA, 1));
}

TEST_F(SwitchTest, HairpinIsDropped) {
  EXPECT_TRUE(a_->transmit(0, {}, frame(kBroadcast, kMacA, 1)));
  (void)tags(in_b_);
  (void)tags(in_c_);
  // A is on a: a frame from a to A has nowhere to go.
  EXPECT_FALSE(a_->transmit(0, {}, frame(kMacA, kMacC, 2)));
  EXPECT_EQ(tags(in_a_), Tags{});
  EXPECT_EQ(tags(in_b_), Tags{});
  EXPECT_EQ(tags(in_c_), Tags{});
  EXPECT_EQ(a_->forwarding().count(ForwardReason::kHairpin), 1u);
  // A short frame is dropped too.
  EXPECT_FALSE(a_->transmit(0, {}, Bytes(10)));
  EXPECT_EQ(a_->forwarding().count(ForwardReason::kShortFrame), 1u);
  EXPECT_EQ(a_->stats().at("forwarding").at("hairpin"), 1);
}

TEST_F(SwitchTest, DetachedPortsMacsAreFlushedAndItGetsNothing) {
  EXPECT_TRUE(b_->transmit(0, {}, frame(kBroadcast, kMacB, 1)));
  ASSERT_EQ(hub_.table().lookup(mac_address(kMacB), SwitchClock::now()), b_->id());
  (void)tags(in_a_);
  (void)tags(in_c_);
  b_->detach();
  EXPECT_FALSE(b_->attached());
  EXPECT_EQ(hub_.member_count(), 2u);
  EXPECT_EQ(hub_.table().lookup(mac_address(kMacB), SwitchClock::now()), std::nullopt);
  EXPECT_GE(hub_.table().stats().flushed, 1u);
  // To B now: unknown unicast, flooded to the members left (c), not to b.
  EXPECT_TRUE(a_->transmit(0, {}, frame(kMacB, kMacA, 2)));
  EXPECT_EQ(tags(in_b_), Tags{});
  EXPECT_EQ(tags(in_c_), Tags{2});
  EXPECT_EQ(a_->forwarding().count(ForwardReason::kUnknownUnicast), 1u);
  // A detached port's own frames go nowhere and teach nothing.
  EXPECT_FALSE(b_->transmit(0, {}, frame(kBroadcast, kMacB, 3)));
  EXPECT_EQ(b_->delivery(switch_delivery::kIngressDetached), 1u);
  EXPECT_EQ(hub_.table().lookup(mac_address(kMacB), SwitchClock::now()), std::nullopt);
  // Attached again, it takes part again.
  b_->attach(in_b_);
  EXPECT_TRUE(a_->transmit(0, {}, frame(kBroadcast, kMacA, 4)));
  EXPECT_EQ(tags(in_b_), Tags{4});
}

TEST_F(SwitchTest, RefusingReceiverIsCountedAndAFloodStillReachesTheOthers) {
  EXPECT_TRUE(b_->transmit(0, {}, frame(kBroadcast, kMacB, 1)));
  (void)tags(in_a_);
  (void)tags(in_c_);
  in_b_.set_refuse(true);  // b's frontend is gone: its queues refuse
  EXPECT_FALSE(a_->transmit(0, {}, frame(kMacB, kMacA, 2)));  // unicast, refused
  EXPECT_TRUE(a_->transmit(0, {}, frame(kBroadcast, kMacA, 3)));  // flood: c still gets it
  EXPECT_EQ(tags(in_c_), Tags{3});
  EXPECT_EQ(a_->delivery(switch_delivery::kInjectFailed), 2u);
  EXPECT_EQ(a_->delivery(switch_delivery::kDelivered), 1u);
  EXPECT_EQ(a_->stats().at("delivery").at("inject_failed"), 2);
}

TEST(SwitchHub, FloodWithoutOtherMembersAndBadPairs) {
  SwitchHub hub;
  CollectingInjector injector(1);
  auto alone = hub.add_port("alone", 2);
  alone->attach(injector);
  EXPECT_FALSE(alone->transmit(0, {}, frame(kBroadcast, kMacA, 1)));
  EXPECT_EQ(alone->delivery(switch_delivery::kNoTarget), 1u);
  EXPECT_FALSE(alone->transmit(2, {}, frame(kBroadcast, kMacA, 1)));
  EXPECT_EQ(alone->stats().at("bad_pair"), 1);
  EXPECT_THROW((void)hub.add_port("none", 0), std::invalid_argument);
  EXPECT_THROW((void)hub.add_port("too many", ReceiveSteering::kMaxQueuePairs + 1), std::invalid_argument);
}

TEST(SwitchHub, StatsNameEveryPortAndTheTable) {
  SwitchHub hub;
  CollectingInjector in_x(1), in_y(1);
  auto x = hub.add_port("x", 1);
  auto y = hub.add_port("y", 1);
  x->attach(in_x);
  y->attach(in_y);
  ASSERT_TRUE(x->transmit(0, {}, frame(kBroadcast, kMacA, 1)));
  const nlohmann::json stats = hub.stats();
  ASSERT_EQ(stats.at("ports").size(), 2u);
  EXPECT_EQ(stats.at("ports")[0].at("name"), "x");
  EXPECT_EQ(stats.at("ports")[0].at("forwarding").at("broadcast"), 1);
  EXPECT_EQ(stats.at("ports")[0].at("learn").at("learned"), 1);
  EXPECT_EQ(stats.at("ports")[0].at("delivery").at("delivered"), 1);
  EXPECT_EQ(stats.at("ports")[1].at("name"), "y");
  EXPECT_TRUE(stats.at("uplink").is_null());
  EXPECT_EQ(stats.at("table").at("entries"), 1);
  EXPECT_EQ(stats.at("table").at("learned"), 1);
  EXPECT_EQ(stats.at("member_policy"), "rcu");
  EXPECT_NE(x->describe().find("switch port x"), std::string::npos);
}

// ---- offloads fitted to each receiver -----------------------------------------------------

constexpr uint64_t bit(unsigned b) { return uint64_t{1} << b; }
constexpr uint64_t kGuestCsum = bit(net_feature::kGuestCsum);
constexpr uint64_t kGuestTso4 = kGuestCsum | bit(net_feature::kGuestTso4);

// A TCPv4 GSO frame from a to `destination` (partial checksum, as a guest sends it).
testing::OffloadFrameSpec tso_spec(const Mac& destination, size_t payload = 10000) {
  testing::OffloadFrameSpec spec;
  spec.destination = destination;
  spec.source = kMacA;
  spec.payload = testing::payload_pattern(payload, 5);
  spec.checksum = testing::L4Checksum::kPartial;
  return spec;
}

using testing::expected_segments;

TEST_F(SwitchTest, GsoGoesWholeToGuestsThatTakeItAndSegmentedToOthers) {
  a_->features_changed(testing::kAllHostOffloads);
  b_->features_changed(kGuestTso4);
  c_->features_changed(kGuestCsum);
  const testing::OffloadFrameSpec spec = tso_spec(kBroadcast);
  const virtio::NetHeader header = testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448);
  EXPECT_TRUE(a_->transmit(0, header, testing::offload_frame(spec)));
  // b takes TSO: the frame as it came.
  auto to_b = in_b_.take();
  ASSERT_EQ(to_b.size(), 1u);
  EXPECT_EQ(to_b[0].packet->header, header);
  EXPECT_EQ(to_b[0].packet->frame, testing::offload_frame(spec));
  // c takes partial checksums only: segments with partial checksums, in order.
  const std::vector<Bytes> expected = expected_segments(spec, 1448, true);
  auto to_c = in_c_.take();
  ASSERT_EQ(to_c.size(), expected.size());
  for (size_t i = 0; i < to_c.size(); ++i) {
    EXPECT_EQ(to_c[i].packet->frame, expected[i]) << i;
    EXPECT_EQ(to_c[i].packet->header.flags, virtio::kNetHdrFlagNeedsCsum);
    EXPECT_EQ(to_c[i].packet->header.gso_type, virtio::kNetGsoNone);
    EXPECT_EQ(to_c[i].packet->header.csum_start, testing::kEthHeader + 20);
    EXPECT_EQ(to_c[i].packet->header.csum_offset, 16);
  }
  EXPECT_EQ(a_->delivery(switch_delivery::kDelivered), 2u);
  EXPECT_EQ(a_->delivery(switch_delivery::kSegmented), 1u);
  EXPECT_EQ(a_->delivery(switch_delivery::kSegments), expected.size());
}

TEST_F(SwitchTest, TsoGuestToAGuestWithoutOffloadsGetsChecksummedSegments) {
  a_->features_changed(testing::kAllHostOffloads);
  b_->features_changed(0);
  ASSERT_TRUE(b_->transmit(0, {}, frame(kBroadcast, kMacB, 1)));  // the switch learns b
  in_a_.take();
  in_c_.take();
  const testing::OffloadFrameSpec spec = tso_spec(kMacB, 65495);  // a 64 KiB datagram
  EXPECT_TRUE(a_->transmit(0, testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448), testing::offload_frame(spec)));
  const std::vector<Bytes> expected = expected_segments(spec, 1448, false);
  auto to_b = in_b_.take();
  ASSERT_EQ(to_b.size(), 46u);
  ASSERT_EQ(expected.size(), 46u);
  for (size_t i = 0; i < to_b.size(); ++i) {
    EXPECT_EQ(to_b[i].packet->frame, expected[i]) << i;
    EXPECT_EQ(to_b[i].packet->header, virtio::NetHeader{}) << i;
    EXPECT_TRUE(testing::ipv4_tcp_checksums_valid(to_b[i].packet->frame)) << i;
  }
  EXPECT_EQ(in_c_.size(), 0u);
  EXPECT_EQ(a_->delivery(switch_delivery::kSegments), 46u);
  EXPECT_EQ(a_->stats().at("delivery").at("segmented"), 1);
}

TEST_F(SwitchTest, SegmentRefusedByTheReceiverEndsThatCopy) {
  a_->features_changed(testing::kAllHostOffloads);
  b_->features_changed(0);
  c_->features_changed(0);
  in_c_.set_refuse(true);
  const testing::OffloadFrameSpec spec = tso_spec(kBroadcast);
  EXPECT_TRUE(a_->transmit(0, testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448), testing::offload_frame(spec)));
  EXPECT_EQ(in_b_.take().size(), 7u);
  EXPECT_EQ(in_c_.refused(), 1u);  // the first segment; nothing after it was tried
  EXPECT_EQ(a_->delivery(switch_delivery::kInjectFailed), 1u);
  EXPECT_EQ(a_->delivery(switch_delivery::kDelivered), 1u);
  EXPECT_EQ(a_->delivery(switch_delivery::kSegments), 7u);
}

TEST_F(SwitchTest, InvalidOffloadHeadersAreDroppedAndNeverForwarded) {
  b_->features_changed(kGuestTso4);
  c_->features_changed(0);
  const testing::OffloadFrameSpec spec = tso_spec(kBroadcast);
  const Bytes gso_frame = testing::offload_frame(spec);
  const virtio::NetHeader header = testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448);
  // a did not negotiate HOST_TSO4: not even b, which takes TSO, gets the frame.
  a_->features_changed(testing::kAllHostOffloads & ~bit(net_feature::kHostTso4));
  EXPECT_FALSE(a_->transmit(0, header, gso_frame));
  // A checksum field outside the frame, from a sender that may send partial checksums.
  a_->features_changed(testing::kAllHostOffloads);
  virtio::NetHeader outside;
  outside.flags = virtio::kNetHdrFlagNeedsCsum;
  outside.csum_start = 60;
  outside.csum_offset = 16;
  EXPECT_FALSE(a_->transmit(0, outside, frame(kBroadcast, kMacA, 2)));
  // gso_size 0.
  virtio::NetHeader no_size = header;
  no_size.gso_size = 0;
  EXPECT_FALSE(a_->transmit(0, no_size, gso_frame));
  EXPECT_EQ(in_b_.size(), 0u);
  EXPECT_EQ(in_c_.size(), 0u);
  EXPECT_EQ(a_->delivery(switch_delivery::kOffloadInvalid), 3u);
  EXPECT_EQ(a_->offload_invalid(OffloadReason::kGsoNotNegotiated), 1u);
  EXPECT_EQ(a_->offload_invalid(OffloadReason::kChecksumOutsideFrame), 1u);
  EXPECT_EQ(a_->offload_invalid(OffloadReason::kGsoSizeZero), 1u);
  const nlohmann::json stats = a_->stats();
  EXPECT_EQ(stats.at("delivery").at("offload_invalid"), 3);
  EXPECT_EQ(stats.at("offload_invalid").at("gso_not_negotiated"), 1);
  EXPECT_EQ(stats.at("offload_invalid").at("checksum_outside_frame"), 1);
  EXPECT_FALSE(stats.at("offload_invalid").contains("ok"));
  // Plain frames are not affected.
  EXPECT_TRUE(a_->transmit(0, {}, frame(kBroadcast, kMacA, 3)));
  EXPECT_EQ(in_b_.size(), 1u);
}

TEST_F(SwitchTest, PartialChecksumIsCompletedForAGuestWithoutGuestCsum) {
  a_->features_changed(bit(net_feature::kCsum));
  b_->features_changed(kGuestCsum);
  c_->features_changed(0);
  testing::OffloadFrameSpec spec = tso_spec(kBroadcast, 101);
  const Bytes partial = testing::offload_frame(spec);
  virtio::NetHeader header = testing::gso_header(spec, virtio::kNetGsoNone, 0);
  header.flags |= virtio::kNetHdrFlagDataValid;  // a driver must not set it: not forwarded
  EXPECT_TRUE(a_->transmit(0, header, partial));
  auto to_b = in_b_.take();
  auto to_c = in_c_.take();
  ASSERT_EQ(to_b.size(), 1u);
  ASSERT_EQ(to_c.size(), 1u);
  // b negotiated GUEST_CSUM: the partial checksum as it came (NEEDS_CSUM alone).
  virtio::NetHeader as_sent = header;
  as_sent.flags = virtio::kNetHdrFlagNeedsCsum;
  EXPECT_EQ(to_b[0].packet->header, as_sent);
  EXPECT_EQ(to_b[0].packet->frame, partial);
  // c did not: completed, flags cleared.
  EXPECT_EQ(to_c[0].packet->header.flags, 0);
  EXPECT_TRUE(testing::ipv4_tcp_checksums_valid(Bytes(to_c[0].packet->frame)));
  spec.checksum = testing::L4Checksum::kFull;
  EXPECT_EQ(to_c[0].packet->frame, testing::offload_frame(spec));
  EXPECT_EQ(a_->delivery(switch_delivery::kChecksumCompleted), 1u);
  // The same from a sender that did not negotiate VIRTIO_NET_F_CSUM: dropped.
  a_->features_changed(0);
  EXPECT_FALSE(a_->transmit(0, header, partial));
  EXPECT_EQ(a_->offload_invalid(OffloadReason::kChecksumNotNegotiated), 1u);
}

TEST_F(SwitchTest, OffersEveryOffloadItCanFitToAReceiver) {
  EXPECT_EQ(a_->offered_features(), net_feature::kHostOffloads | net_feature::kGuestOffloads);
  EXPECT_EQ(net_feature::offload_dependency_violation(a_->offered_features()), "");
}

// One guest's frame of each kind the switch fits, sent with the header a Linux guest
// uses (kAllHostOffloads negotiated).
struct GuestFrame {
  std::string what;
  testing::OffloadFrameSpec spec;
  virtio::NetHeader header;
};

std::vector<GuestFrame> every_kind_of_frame() {
  std::vector<GuestFrame> out;
  const auto add = [&](std::string what, bool ipv6, uint8_t protocol, size_t payload, uint8_t gso_type,
                       uint16_t gso_size) {
    testing::OffloadFrameSpec spec = tso_spec(kBroadcast, payload);
    spec.ipv6 = ipv6;
    spec.protocol = protocol;
    if ((gso_type & virtio::kNetGsoEcn) != 0) spec.tcp_flags |= 0x80;  // CWR
    out.push_back({std::move(what), spec, testing::gso_header(spec, gso_type, gso_size)});
  };
  add("tso4", false, IPPROTO_TCP, 5000, virtio::kNetGsoTcpV4, 1448);
  add("tso4-ecn", false, IPPROTO_TCP, 5000, virtio::kNetGsoTcpV4 | virtio::kNetGsoEcn, 1448);
  add("tso6", true, IPPROTO_TCP, 5000, virtio::kNetGsoTcpV6, 1428);
  add("ufo4", false, IPPROTO_UDP, 4000, virtio::kNetGsoUdp, 1480);
  add("ufo6", true, IPPROTO_UDP, 4000, virtio::kNetGsoUdp, 1448);
  add("uso4", false, IPPROTO_UDP, 4000, virtio::kNetGsoUdpL4, 1472);
  add("uso6", true, IPPROTO_UDP, 4000, virtio::kNetGsoUdpL4, 1452);
  add("partial-tcp", false, IPPROTO_TCP, 300, virtio::kNetGsoNone, 0);
  add("partial-udp6", true, IPPROTO_UDP, 300, virtio::kNetGsoNone, 0);
  // A plain frame whose sender set DATA_VALID (a driver must not).
  testing::OffloadFrameSpec plain = tso_spec(kBroadcast, 300);
  plain.checksum = testing::L4Checksum::kFull;
  virtio::NetHeader data_valid;
  data_valid.flags = virtio::kNetHdrFlagDataValid;
  out.push_back({"plain-data-valid", plain, data_valid});
  return out;
}

// What a receiver with `features` may be handed with gso_type, written out from the
// spec (virtio 1.2, 5.1.6.4), apart from the switch's own gso_acceptable.
bool may_receive_gso(uint8_t gso_type, uint64_t features) {
  const auto has = [features](unsigned b) { return net_feature::has(features, b); };
  if (gso_type == virtio::kNetGsoNone) return true;
  if (!has(net_feature::kGuestCsum)) return false;
  if ((gso_type & virtio::kNetGsoEcn) != 0 && !has(net_feature::kGuestEcn)) return false;
  switch (gso_type & ~virtio::kNetGsoEcn) {
    case virtio::kNetGsoTcpV4: return has(net_feature::kGuestTso4);
    case virtio::kNetGsoTcpV6: return has(net_feature::kGuestTso6);
    case virtio::kNetGsoUdp: return has(net_feature::kGuestUfo);
    case virtio::kNetGsoUdpL4: return has(net_feature::kGuestUso4) && has(net_feature::kGuestUso6);
    default: return false;
  }
}

// Every kind of frame from a guest with every transmit offload, to receivers with
// every shape of receive features: no receiver ever gets a flag without GUEST_CSUM,
// any flag but NEEDS_CSUM, or a gso_type it did not negotiate; whatever it gets without
// a flag has a correct transport checksum (IP fragments aside: their checksum spans
// the datagram); and every copy is delivered.
TEST_F(SwitchTest, NoGuestGetsAFlagOrGsoItDidNotNegotiate) {
  namespace nf = net_feature;
  using nf::kGuestOffloads;
  a_->features_changed(testing::kAllHostOffloads);
  const std::vector<uint64_t> receivers = {
      0,
      bit(nf::kGuestCsum),
      bit(nf::kGuestCsum) | bit(nf::kGuestTso4),
      bit(nf::kGuestCsum) | bit(nf::kGuestTso4) | bit(nf::kGuestTso6) | bit(nf::kGuestEcn),
      bit(nf::kGuestCsum) | bit(nf::kGuestUfo) | bit(nf::kGuestUso4),  // USO needs both: none
      kGuestOffloads,
  };
  const std::vector<GuestFrame> frames = every_kind_of_frame();
  size_t sent = 0;
  for (const uint64_t features : receivers) {
    b_->features_changed(features);
    c_->features_changed(kGuestOffloads & ~features);
    for (const GuestFrame& frame : frames) {
      ASSERT_TRUE(a_->transmit(0, frame.header, testing::offload_frame(frame.spec))) << frame.what;
      ++sent;
      for (auto [injector, taker] : {std::pair{&in_b_, features}, std::pair{&in_c_, kGuestOffloads & ~features}}) {
        const auto got = injector->take();
        ASSERT_FALSE(got.empty()) << frame.what;
        const testing::FrameOffsets at = testing::offsets_of(frame.spec);
        for (const auto& injected : got) {
          const virtio::NetHeader& h = injected.packet->header;
          const std::string where = frame.what + fmt::format(" to features {:#x}", taker);
          EXPECT_EQ(h.flags & ~virtio::kNetHdrFlagNeedsCsum, 0) << where;
          if (!nf::has(taker, nf::kGuestCsum)) {
            EXPECT_EQ(h.flags, 0) << where;
          }
          EXPECT_TRUE(may_receive_gso(h.gso_type, taker)) << where << " got gso_type " << int{h.gso_type};
          const bool fragment = (frame.header.gso_type & ~virtio::kNetGsoEcn) == virtio::kNetGsoUdp && got.size() > 1;
          if (h.flags == 0 && !fragment) {
            EXPECT_TRUE(testing::transport_checksum_valid(injected.packet->frame, at.l3, at.l4, frame.spec.ipv6,
                                                          frame.spec.protocol))
                << where;
          }
        }
      }
    }
  }
  EXPECT_EQ(a_->delivery(switch_delivery::kDelivered), 2 * sent);
  EXPECT_EQ(a_->delivery(switch_delivery::kOffloadInvalid), 0u);
  EXPECT_GT(a_->delivery(switch_delivery::kSegmented), 0u);
  EXPECT_GT(a_->delivery(switch_delivery::kChecksumCompleted), 0u);
}

// ---- MTU ---------------------------------------------------------------------------------

// A plain frame of `bytes` from a to `destination`.
Bytes sized(const Mac& destination, size_t bytes) {
  Bytes out = frame(destination, kMacA, 7);
  out.resize(bytes, std::byte{0x44});
  return out;
}

TEST_F(SwitchTest, FramesLongerThanTheReceiversMtuAreNotDeliveredToIt) {
  b_->mtu_changed(1500);  // c: no MTU
  EXPECT_EQ(b_->mtu(), 1500u);
  EXPECT_EQ(b_->stats().at("mtu"), 1500);
  ASSERT_TRUE(a_->transmit(0, {}, sized(kBroadcast, 1500 + kMtuFrameOverhead)));  // one VLAN tag's room
  EXPECT_EQ(in_b_.take().size(), 1u);
  EXPECT_EQ(in_c_.take().size(), 1u);
  ASSERT_TRUE(a_->transmit(0, {}, sized(kBroadcast, 1500 + kMtuFrameOverhead + 1)));
  EXPECT_EQ(in_b_.take().size(), 0u);
  EXPECT_EQ(in_c_.take().size(), 1u);
  EXPECT_EQ(a_->delivery(switch_delivery::kOverMtu), 1u);
  EXPECT_EQ(a_->stats().at("delivery").at("over_mtu"), 1);
  // To b alone: nothing delivered, so not taken.
  ASSERT_TRUE(b_->transmit(0, {}, frame(kBroadcast, kMacB, 1)));
  (void)in_a_.take();
  (void)in_c_.take();
  EXPECT_FALSE(a_->transmit(0, {}, sized(kMacB, 3000)));
  EXPECT_EQ(a_->delivery(switch_delivery::kOverMtu), 2u);
}

// Segments keep the gso_size the sender set; a receiver whose MTU they do not fit gets
// nothing (whole or segmented), one whose MTU they fit gets them.
TEST_F(SwitchTest, GsoSegmentsLongerThanTheReceiversMtuAreNotDeliveredToIt) {
  a_->features_changed(testing::kAllHostOffloads);
  b_->features_changed(kGuestTso4);  // takes the frame whole
  c_->features_changed(0);           // gets segments
  const testing::OffloadFrameSpec spec = tso_spec(kBroadcast);
  const virtio::NetHeader header = testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448);  // 1502-byte segments
  b_->mtu_changed(1500);
  c_->mtu_changed(1500);
  ASSERT_TRUE(a_->transmit(0, header, testing::offload_frame(spec)));
  EXPECT_EQ(in_b_.take().size(), 1u);
  const auto to_c = in_c_.take();
  ASSERT_EQ(to_c.size(), 7u);
  for (const auto& segment : to_c) EXPECT_LE(segment.packet->frame.size(), 1502u);
  b_->mtu_changed(1483);  // 1501-byte frames: one byte short
  c_->mtu_changed(1483);
  EXPECT_FALSE(a_->transmit(0, header, testing::offload_frame(spec)));
  EXPECT_EQ(in_b_.size(), 0u);
  EXPECT_EQ(in_c_.size(), 0u);
  EXPECT_EQ(a_->delivery(switch_delivery::kOverMtu), 2u);
  EXPECT_EQ(a_->delivery(switch_delivery::kSegmented), 1u);
}

// A sender longer than its own MTU: dropped before the switch looks at it (nothing
// learned, nothing delivered); GSO whose segments would be, too.
TEST_F(SwitchTest, FramesLongerThanTheSendersMtuAreDropped) {
  a_->features_changed(testing::kAllHostOffloads);
  a_->mtu_changed(1500);
  EXPECT_FALSE(a_->transmit(0, {}, sized(kBroadcast, 1519)));
  EXPECT_FALSE(hub_.table().lookup(mac_address(kMacA), SwitchClock::now()));
  const testing::OffloadFrameSpec spec = tso_spec(kBroadcast);
  EXPECT_FALSE(a_->transmit(0, testing::gso_header(spec, virtio::kNetGsoTcpV4, 1465), testing::offload_frame(spec)));
  EXPECT_EQ(in_b_.size() + in_c_.size(), 0u);
  EXPECT_EQ(a_->delivery(switch_delivery::kIngressOverMtu), 2u);
  EXPECT_EQ(a_->stats().at("delivery").at("ingress_over_mtu"), 2);
  EXPECT_EQ(a_->forwarding().frames(), 0u);
  // Within it: forwarded (segments of 14 + 20 + 20 + 1464 bytes: the MTU frame).
  EXPECT_TRUE(a_->transmit(0, {}, sized(kBroadcast, 1518)));
  EXPECT_TRUE(a_->transmit(0, testing::gso_header(spec, virtio::kNetGsoTcpV4, 1464), testing::offload_frame(spec)));
}

TEST(SwitchHub, PortsTakeTheirMtuFromAddPortUntilTheFrontendSetsOne) {
  SwitchHub hub;
  auto jumbo = hub.add_port("jumbo", 1, 9000);
  auto open = hub.add_port("open", 1);
  EXPECT_EQ(jumbo->mtu(), 9000u);
  EXPECT_EQ(open->mtu(), 0u);  // none: no limit
  EXPECT_NE(jumbo->describe().find("MTU 9000"), std::string::npos) << jumbo->describe();
  jumbo->mtu_changed(1500);
  EXPECT_EQ(jumbo->mtu(), 1500u);
}

// ---- receive pairs: each receiver's steering ------------------------------------------------

constexpr uint32_t kIpA = 0x0a000a0a;  // 10.0.10.10, guest A's
constexpr uint32_t kIpB = 0x0a000a0b;  // 10.0.10.11, guest B's
constexpr uint16_t kServerPort = 5001;

// A TCP frame of the conversation A:client_port <-> B:5001, sent by A or by B.
Bytes a_to_b(uint16_t client_port, const Mac& destination = kMacB) {
  return testing::tcp_frame({.destination = destination, .source = kMacA, .ip_source = kIpA, .ip_destination = kIpB,
                             .port_source = client_port, .port_destination = kServerPort, .payload = 100});
}
Bytes b_to_a(uint16_t client_port) {
  return testing::tcp_frame({.destination = kMacA, .source = kMacB, .ip_source = kIpB, .ip_destination = kIpA,
                             .port_source = kServerPort, .port_destination = client_port, .payload = 100});
}

// The first client port from `from` on whose conversation's hash alone picks `pair` of two.
uint16_t client_port_hashed_to(uint32_t pair, uint16_t from = 40000) {
  for (uint16_t port = from;; ++port) {
    if (flow_hash(a_to_b(port)) % 2 == pair) return port;
  }
}

// The pairs inject() was asked for, in order (and forgets the frames).
std::vector<uint32_t> pairs_asked(CollectingInjector& injector) {
  std::vector<uint32_t> out;
  for (const auto& injected : injector.take()) out.push_back(injected.asked);
  return out;
}
using Pairs = std::vector<uint32_t>;

// Two 2-pair ports a and b, attached.
class SwitchSteeringTest : public ::testing::Test {
 protected:
  SwitchHub hub_;
  CollectingInjector in_a_{2}, in_b_{2};
  std::unique_ptr<SwitchBackend> a_ = hub_.add_port("a", 2);
  std::unique_ptr<SwitchBackend> b_ = hub_.add_port("b", 2);

  void SetUp() override {
    a_->attach(in_a_);
    b_->attach(in_b_);
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
  }
};

// Guest b transmits the conversation on its pair 1 (the one its hash would not pick):
// a's frames of it reach b on pair 1 whichever pair a sends them from; when b moves it
// to pair 0, they follow. And a's own record steers b's answers the same way.
TEST_F(SwitchSteeringTest, AFlowArrivesOnThePairItsReceiverTransmitsItOn) {
  const uint16_t client = client_port_hashed_to(0);
  ASSERT_TRUE(b_->transmit(1, {}, b_to_a(client)));
  EXPECT_EQ(pairs_asked(in_a_), Pairs{0});  // a never sent it: its hash's pair
  for (const uint32_t pair : {0U, 1U, 1U, 0U, 1U}) ASSERT_TRUE(a_->transmit(pair, {}, a_to_b(client)));
  EXPECT_EQ(pairs_asked(in_b_), (Pairs{1, 1, 1, 1, 1}));

  ASSERT_TRUE(b_->transmit(0, {}, b_to_a(client)));  // b's process moved to the other CPU
  EXPECT_EQ(pairs_asked(in_a_), Pairs{1});           // a sent the flow on pair 1 last
  for (const uint32_t pair : {1U, 0U, 1U}) ASSERT_TRUE(a_->transmit(pair, {}, a_to_b(client)));
  EXPECT_EQ(pairs_asked(in_b_), (Pairs{0, 0, 0}));

  // Another conversation between the same guests is steered on its own.
  const uint16_t other = client_port_hashed_to(1);
  ASSERT_TRUE(a_->transmit(0, {}, a_to_b(other)));
  EXPECT_EQ(pairs_asked(in_b_), Pairs{1});
}

// b's TCP segments without payload (its ACKs, sent from whichever CPU took the data
// in) do not move the conversation: only segments with data (and other frames) do.
TEST_F(SwitchSteeringTest, TcpSegmentsWithoutPayloadDoNotMoveTheFlow) {
  const uint16_t client = client_port_hashed_to(0);
  Bytes pure_ack = testing::tcp_frame({.destination = kMacA, .source = kMacB, .ip_source = kIpB, .ip_destination = kIpA,
                                       .port_source = kServerPort, .port_destination = client, .payload = 0});
  pure_ack.resize(60);  // Ethernet padding: still no payload
  ASSERT_TRUE(frame_flow(pure_ack).tcp_without_payload);
  ASSERT_TRUE(b_->transmit(1, {}, pure_ack));
  ASSERT_TRUE(a_->transmit(1, {}, a_to_b(client)));
  EXPECT_EQ(pairs_asked(in_b_), Pairs{0});  // not recorded: the hash's pair
  ASSERT_TRUE(b_->transmit(1, {}, b_to_a(client)));  // data on pair 1: recorded
  ASSERT_TRUE(b_->transmit(0, {}, pure_ack));        // an ACK from the other CPU
  ASSERT_TRUE(a_->transmit(0, {}, a_to_b(client)));
  EXPECT_EQ(pairs_asked(in_b_), Pairs{1});
}

// Nobody on b sent the conversation: every frame of it takes the pair its hash picks,
// whatever pair a sends it from; conversations with different hashes use both pairs.
TEST_F(SwitchSteeringTest, AFlowTheReceiverNeverSentKeepsItsHashsPair) {
  for (const uint32_t hashed : {0U, 1U}) {
    const uint16_t client = client_port_hashed_to(hashed);
    for (const uint32_t pair : {0U, 1U, 1U, 0U}) ASSERT_TRUE(a_->transmit(pair, {}, a_to_b(client)));
    EXPECT_EQ(pairs_asked(in_b_), Pairs(4, hashed)) << client;
  }
  // Not IP: the MACs' hash, the same for every frame of that pair of hosts.
  const uint32_t macs = flow_hash(frame(kMacB, kMacA, 0)) % 2;
  for (const uint32_t pair : {0U, 1U}) ASSERT_TRUE(a_->transmit(pair, {}, frame(kMacB, kMacA, 1)));
  EXPECT_EQ(pairs_asked(in_b_), Pairs(2, macs));
}

// A flood's copies: each on its own receiver's pair for the flow.
TEST(SwitchSteering, EachFloodCopyTakesItsReceiversPair) {
  SwitchHub hub;
  CollectingInjector in_a(2), in_b(2), in_c(2);
  auto a = hub.add_port("a", 2);
  auto b = hub.add_port("b", 2);
  auto c = hub.add_port("c", 2);
  a->attach(in_a);
  b->attach(in_b);
  c->attach(in_c);
  const uint16_t client = client_port_hashed_to(0);
  ASSERT_TRUE(b->transmit(1, {}, b_to_a(client)));
  (void)in_a.take();
  (void)in_c.take();
  // To a MAC nobody has sent from: flooded to b and c.
  ASSERT_TRUE(a->transmit(0, {}, a_to_b(client, kMacC)));
  EXPECT_EQ(pairs_asked(in_b), Pairs{1});  // b sends the flow on pair 1
  EXPECT_EQ(pairs_asked(in_c), Pairs{0});  // c never did: the hash's pair
  a.reset();
  b.reset();
  c.reset();
}

// A port with one pair gets everything on pair 0, and its transmits steer nothing.
TEST(SwitchSteering, OnePairPortsTakeEveryFrameOnPairZero) {
  SwitchHub hub;
  CollectingInjector in_two(2), in_one(1);
  auto two = hub.add_port("two", 2);
  auto one = hub.add_port("one", 1);
  two->attach(in_two);
  one->attach(in_one);
  const uint16_t client = client_port_hashed_to(1);
  ASSERT_TRUE(one->transmit(0, {}, b_to_a(client)));
  EXPECT_EQ(pairs_asked(in_two), Pairs{1});  // the hash's pair of the 2-pair port
  for (const uint32_t pair : {0U, 1U, 1U}) ASSERT_TRUE(two->transmit(pair, {}, a_to_b(client, kMacB)));
  ASSERT_TRUE(two->transmit(1, {}, frame(kBroadcast, kMacA, 1)));
  EXPECT_EQ(pairs_asked(in_one), (Pairs{0, 0, 0, 0}));
  two.reset();
  one.reset();
}

// A super-frame segmented for a receiver without TSO: every segment on the pair that
// receiver sends the flow on.
TEST_F(SwitchSteeringTest, EverySegmentOfACopyTakesTheSteeredPair) {
  a_->features_changed(testing::kAllHostOffloads);
  b_->features_changed(0);
  const testing::OffloadFrameSpec spec = tso_spec(kMacB);  // kIpv4Source:40000 -> kIpv4Destination:5001
  const Bytes answer = testing::tcp_frame({.destination = kMacA, .source = kMacB,
                                           .ip_source = testing::kIpv4Destination, .ip_destination = testing::kIpv4Source,
                                           .port_source = spec.port_destination, .port_destination = spec.port_source,
                                           .payload = 10});
  ASSERT_EQ(flow_hash(answer), flow_hash(testing::offload_frame(spec)));
  const uint32_t steered = 1 - flow_hash(answer) % 2;  // not the hash's pair
  ASSERT_TRUE(b_->transmit(steered, {}, answer));
  ASSERT_TRUE(a_->transmit(0, testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448), testing::offload_frame(spec)));
  EXPECT_EQ(pairs_asked(in_b_), Pairs(7, steered));  // 10000 bytes in 1448-byte segments
  EXPECT_EQ(a_->delivery(switch_delivery::kSegments), 7u);
}

// ---- threads -----------------------------------------------------------------------------

// Four threads transmit (two ports x two pairs: one thread per pair, as the datapath
// does) while the main thread attaches and detaches two other ports over and over.
// Checks: nothing is injected into a port after its detach() returned (the member
// set's grace period), every frame is accounted for, and (under TSan) no data race.
TEST(SwitchHub, TransmitFromFourThreadsWhilePortsAttachAndDetach) {
  SwitchHub hub;
  CollectingInjector in_s0(2), in_s1(2);
  in_s0.set_keep(false);
  in_s1.set_keep(false);
  auto s0 = hub.add_port("s0", 2);
  auto s1 = hub.add_port("s1", 2);
  s0->attach(in_s0);
  s1->attach(in_s1);
  constexpr size_t kChurners = 2;
  std::vector<std::unique_ptr<CollectingInjector>> churn_in;
  std::vector<std::unique_ptr<SwitchBackend>> churn;
  for (size_t i = 0; i < kChurners; ++i) {
    churn_in.push_back(std::make_unique<CollectingInjector>(1));
    churn_in.back()->set_keep(false);
    churn.push_back(hub.add_port("churn" + std::to_string(i), 1));
  }

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sent{0};
  std::vector<std::thread> senders;
  for (int t = 0; t < 4; ++t) {
    senders.emplace_back([&, t] {
      SwitchBackend& port = t < 2 ? *s0 : *s1;
      const uint32_t pair = static_cast<uint32_t>(t % 2);
      const Mac self{0x02, 0, 0, 0, 1, static_cast<uint8_t>(t)};
      const Mac peer{0x02, 0, 0, 0, 1, static_cast<uint8_t>((t + 2) % 4)};  // a sender on the other port
      const Mac churner{0x02, 0, 0, 0, 2, static_cast<uint8_t>(static_cast<size_t>(t) % kChurners)};
      uint64_t i = 0;
      while (!stop.load(std::memory_order_relaxed) || i < 2000) {
        const Mac& destination = i % 3 == 0 ? kBroadcast : i % 3 == 1 ? peer : churner;
        port.transmit(pair, {}, frame(destination, self, static_cast<uint8_t>(i)));
        ++i;
      }
      sent.fetch_add(i);
    });
  }
  int cycles = 0;
  const auto deadline = std::chrono::steady_clock::now() + 500ms;
  while (std::chrono::steady_clock::now() < deadline || cycles < 20) {
    for (size_t i = 0; i < kChurners; ++i) {
      churn_in[i]->set_gone(false);
      churn[i]->attach(*churn_in[i]);
      // The churning port speaks once, so its MAC is learned (its pair 0 is used by
      // this thread only).
      const Mac own{0x02, 0, 0, 0, 2, static_cast<uint8_t>(i)};
      churn[i]->transmit(0, {}, frame(kBroadcast, own, 0));
    }
    std::this_thread::sleep_for(1ms);
    for (size_t i = 0; i < kChurners; ++i) {
      churn[i]->detach();
      churn_in[i]->set_gone(true);  // from here on, an inject() would be a use after detach
    }
    (void)hub.stats();  // a reader of everything, concurrently
    ++cycles;
  }
  stop.store(true);
  for (auto& sender : senders) sender.join();

  for (size_t i = 0; i < kChurners; ++i) {
    EXPECT_EQ(churn_in[i]->used_after_gone(), 0u) << "churn" << i;
    EXPECT_GT(churn_in[i]->accepted(), 0u) << "churn" << i << " never received anything";
  }
  EXPECT_GT(in_s0.accepted(), 0u);
  EXPECT_GT(in_s1.accepted(), 0u);
  const ForwardingStats total = [&] {
    ForwardingStats sum = s0->forwarding();
    sum += s1->forwarding();
    return sum;
  }();
  EXPECT_EQ(total.frames(), sent.load());
  std::cout << "[ NOTE     ] " << sent.load() << " frames from 4 threads, " << cycles << " attach/detach cycles\n";
  s0.reset();
  s1.reset();
  churn.clear();
}

// ---- uplink ------------------------------------------------------------------------------

class SwitchUplinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string missing = testing::missing_privileges();
    if (!missing.empty()) GTEST_SKIP() << "tap tests need privileges: " << missing;
    sandbox_.emplace();
    if (!sandbox_->ok()) GTEST_SKIP() << "cannot create a private network namespace: " << sandbox_->error();
  }
  void TearDown() override { sandbox_.reset(); }
  std::optional<testing::NetnsSandbox> sandbox_;
};

TEST_F(SwitchUplinkTest, TapUplinkSeesFloodsAndItsFramesReachThePort) {
  auto hub = std::make_unique<SwitchHub>();
  TapBackendOptions options;
  options.name = "uvsw-up";
  std::string error;
  ASSERT_TRUE(hub->add_tap_uplink(options, error)) << error;
  EXPECT_FALSE(hub->add_tap_uplink(options, error));  // one uplink only
  EXPECT_NE(error.find("already"), std::string::npos) << error;
  const TapBackend* tap = hub->uplink_tap();
  ASSERT_NE(tap, nullptr);
  EXPECT_EQ(tap->name(), "uvsw-up");
  base::UniqueFd wire = testing::packet_socket(tap->ifindex());
  ASSERT_TRUE(wire.valid());

  CollectingInjector in_a(1);
  auto a = hub->add_port("a", 1);
  a->attach(in_a);
  EXPECT_EQ(hub->member_count(), 2u);

  // A broadcast from the port floods to the uplink: the host sees it on the tap.
  const Bytes from_port = frame(kBroadcast, kMacA, 0x41);
  ASSERT_TRUE(a->transmit(0, {}, from_port));
  const auto seen = testing::packet_receive(wire.get(), [](const Bytes& f) {
    return f.size() > testing::kEthHeader && testing::get16(f, 12) == testing::kTestEtherType &&
           testing::get8(f, testing::kEthHeader) == 0x41;
  });
  ASSERT_TRUE(seen) << "the tap never saw the flooded frame";
  EXPECT_EQ(*seen, from_port);

  // The host sends to A (learned on the port): the uplink thread forwards it there.
  const Bytes to_a = frame(kMacA, kMacC, 0x42);
  ASSERT_TRUE(testing::packet_send(wire.get(), tap->ifindex(), to_a));
  ASSERT_TRUE(in_a.wait_for(1, 2s)) << "the port never got the uplink's frame";
  auto got = in_a.take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].packet->frame, to_a);
  // ... and the host's MAC was learned on the uplink: unicast back goes to the tap only.
  const auto table_port = hub->table().lookup(mac_address(kMacC), SwitchClock::now());
  ASSERT_TRUE(table_port);
  EXPECT_NE(*table_port, a->id());
  ASSERT_TRUE(a->transmit(0, {}, frame(kMacC, kMacA, 0x43)));
  EXPECT_TRUE(testing::packet_receive(wire.get(), [](const Bytes& f) {
    return f.size() > testing::kEthHeader && testing::get16(f, 12) == testing::kTestEtherType &&
           testing::get8(f, testing::kEthHeader) == 0x43;
  }));

  // The uplink thread counts a frame after its write returned, so the host may see the
  // frame before the count: wait for it.
  const auto sent = [&] { return hub->stats().at("uplink").at("tap").at("tx").at("sent").get<uint64_t>(); };
  for (const auto deadline = testing::Clock::now() + 2s; sent() < 2 && testing::Clock::now() < deadline;) {
    std::this_thread::sleep_for(1ms);
  }
  const nlohmann::json stats = hub->stats();
  EXPECT_EQ(stats.at("uplink").at("name"), "uplink:uvsw-up");
  EXPECT_GE(stats.at("uplink").at("tap").at("tx").at("sent").get<uint64_t>(), 2u);
  EXPECT_GE(stats.at("uplink").at("delivery").at("delivered").get<uint64_t>(), 1u);
  EXPECT_EQ(stats.at("uplink").at("forwarding").at("known-unicast"), 1);

  // Teardown order: ports first, then the hub (which stops the uplink thread).
  a.reset();
  hub.reset();
  EXPECT_EQ(::if_nametoindex("uvsw-up"), 0u);
}

// Frames from the host take the receiving port's steering too: the pair its guest sends
// that conversation on, else the one the conversation's hash picks.
TEST_F(SwitchUplinkTest, TapUplinkFramesTakeTheReceivingPortsSteeredPair) {
  auto hub = std::make_unique<SwitchHub>();
  TapBackendOptions options;
  options.name = "uvsw-mq";
  std::string error;
  ASSERT_TRUE(hub->add_tap_uplink(options, error)) << error;
  const TapBackend* tap = hub->uplink_tap();
  base::UniqueFd wire = testing::packet_socket(tap->ifindex());
  ASSERT_TRUE(wire.valid());
  CollectingInjector in_a(2);
  auto a = hub->add_port("a", 2);
  a->attach(in_a);

  // Two conversations whose hashes pick pair 0; the guest sends the first on pair 1 (it
  // goes out through the tap, and A is learned on a).
  const uint16_t steered = client_port_hashed_to(0);
  const uint16_t unsteered = client_port_hashed_to(0, steered + 1);
  ASSERT_TRUE(a->transmit(1, {}, a_to_b(steered)));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(testing::packet_send(wire.get(), tap->ifindex(), b_to_a(steered)));
    ASSERT_TRUE(testing::packet_send(wire.get(), tap->ifindex(), b_to_a(unsteered)));
  }
  // The host's own frames (IPv6 neighbour discovery, ...) may reach a too: only the
  // conversations' frames count.
  std::vector<testing::Injected> answers;
  for (const auto deadline = testing::Clock::now() + 2s; answers.size() < 6 && testing::Clock::now() < deadline;) {
    (void)in_a.wait_for(1, 100ms);
    for (auto& injected : in_a.take()) {
      const Bytes& f = injected.packet->frame;
      if (f.size() >= 38 && testing::get16(f, 12) == ETHERTYPE_IP && testing::get16(f, 34) == kServerPort) {
        answers.push_back(std::move(injected));
      }
    }
  }
  ASSERT_EQ(answers.size(), 6u);
  for (const testing::Injected& answer : answers) {
    const uint16_t client = testing::get16(answer.packet->frame, 36);
    EXPECT_EQ(answer.asked, client == steered ? 1u : 0u) << client;
  }
  a.reset();
  hub.reset();
}

// The uplink's tap hands the switch GSO super-frames (its TUNSETOFFLOAD takes every
// receive offload): a guest that negotiated TSO4 gets one whole, a guest without any
// receive offload gets it segmented, with full checksums.
TEST_F(SwitchUplinkTest, TapUplinkGsoGoesWholeToAGuestWithTsoAndSegmentedToOneWithout) {
  auto hub = std::make_unique<SwitchHub>();
  TapBackendOptions options;
  options.name = "uvsw-gso";
  std::string error;
  ASSERT_TRUE(hub->add_tap_uplink(options, error)) << error;
  const TapBackend* tap = hub->uplink_tap();
  const unsigned flags = hub->stats().at("uplink").at("tap").at("offload_flags").get<unsigned>();
  constexpr unsigned kWanted = tun_offload::kCsum | tun_offload::kTso4 | tun_offload::kTso6 | tun_offload::kTsoEcn;
  EXPECT_EQ(flags & kWanted, kWanted) << std::hex << flags;
  base::UniqueFd host = testing::packet_socket(tap->ifindex(), /*vnet_hdr=*/true);
  ASSERT_TRUE(host.valid());

  CollectingInjector in_a(1), in_b(1);
  auto a = hub->add_port("a", 1);
  auto b = hub->add_port("b", 1);
  a->features_changed(kGuestTso4);
  b->features_changed(0);
  a->attach(in_a);
  b->attach(in_b);
  ASSERT_TRUE(a->transmit(0, {}, frame(kBroadcast, kMacA, 1)));  // learned: A on a, B on b
  ASSERT_TRUE(b->transmit(0, {}, frame(kBroadcast, kMacB, 2)));
  (void)in_a.take();
  (void)in_b.take();

  const auto send_gso = [&](const Mac& destination) {
    testing::OffloadFrameSpec spec = tso_spec(destination, 10000);
    spec.source = kMacC;
    Bytes sent = testing::packet_vnet_header(testing::gso_header(spec, virtio::kNetGsoTcpV4, 1448));
    const Bytes gso_frame = testing::offload_frame(spec);
    sent.insert(sent.end(), gso_frame.begin(), gso_frame.end());
    EXPECT_TRUE(testing::packet_send(host.get(), tap->ifindex(), sent)) << std::strerror(errno);
    return spec;
  };
  const testing::OffloadFrameSpec to_a = send_gso(kMacA);
  ASSERT_TRUE(in_a.wait_for(1, 2s)) << "a never got the uplink's super-frame";
  auto got_a = in_a.take();
  ASSERT_EQ(got_a.size(), 1u);
  EXPECT_EQ(got_a[0].packet->frame, testing::offload_frame(to_a));
  EXPECT_EQ(got_a[0].packet->header.gso_type, virtio::kNetGsoTcpV4);
  EXPECT_EQ(got_a[0].packet->header.gso_size, 1448);
  EXPECT_EQ(got_a[0].packet->header.flags, virtio::kNetHdrFlagNeedsCsum);

  const testing::OffloadFrameSpec to_b = send_gso(kMacB);
  const std::vector<Bytes> expected = expected_segments(to_b, 1448, false);
  ASSERT_TRUE(in_b.wait_for(expected.size(), 2s)) << "b got " << in_b.size() << " segments";
  auto got_b = in_b.take();
  ASSERT_EQ(got_b.size(), expected.size());
  for (size_t i = 0; i < got_b.size(); ++i) {
    EXPECT_EQ(got_b[i].packet->frame, expected[i]) << i;
    EXPECT_EQ(got_b[i].packet->header, virtio::NetHeader{}) << i;
    EXPECT_TRUE(testing::ipv4_tcp_checksums_valid(got_b[i].packet->frame)) << i;
  }
  // The uplink thread counts a delivery after its injections returned: wait for it.
  const auto delivered = [&] { return hub->stats().at("uplink").at("delivery").at("delivered").get<uint64_t>(); };
  for (const auto deadline = testing::Clock::now() + 2s; delivered() < 2 && testing::Clock::now() < deadline;) {
    std::this_thread::sleep_for(1ms);
  }
  const nlohmann::json uplink = hub->stats().at("uplink");
  EXPECT_EQ(uplink.at("delivery").at("segmented"), 1);
  EXPECT_EQ(uplink.at("delivery").at("segments"), expected.size());
  EXPECT_EQ(uplink.at("delivery").at("delivered"), 2);
  a.reset();
  b.reset();
  hub.reset();
}

}  // namespace
}  // namespace uvhost::backends
