// net_test.cpp - virtio_net_hdr encoding across pieces, and receive with and without
// VIRTIO_NET_F_MRG_RXBUF (num_buffers, used entries per chain, offloads untouched).
#include <vector>

#include <gtest/gtest.h>

#include "test_guest.h"
#include "uvhost/virtio/net_header.h"
#include "uvhost/virtio/net_rx.h"

namespace uvhost::virtio {
namespace {

using testing::pattern;
using testing::QueuePair;
using testing::TestMemory;

const NetHeader kOffloads{kNetHdrFlagNeedsCsum, kNetGsoTcpV4 | kNetGsoEcn, 54, 1448, 34, 16, 0};

TEST(NetHeader, SizesAndLittleEndianLayout) {
  EXPECT_EQ(net_header_size(false), 10u);
  EXPECT_EQ(net_header_size(true), 12u);
  NetHeader h = kOffloads;
  h.num_buffers = 0x0102;
  std::byte bytes[12]{};
  encode_net_header(h, 12, bytes);
  EXPECT_EQ(std::to_integer<int>(bytes[0]), kNetHdrFlagNeedsCsum);
  EXPECT_EQ(std::to_integer<int>(bytes[1]), kNetGsoTcpV4 | kNetGsoEcn);
  EXPECT_EQ(std::to_integer<int>(bytes[4]), 1448 & 0xff);  // gso_size low byte first
  EXPECT_EQ(std::to_integer<int>(bytes[5]), 1448 >> 8);
  EXPECT_EQ(std::to_integer<int>(bytes[10]), 0x02);
  EXPECT_EQ(std::to_integer<int>(bytes[11]), 0x01);
  EXPECT_EQ(decode_net_header(bytes, 12), h);
  NetHeader legacy = decode_net_header(bytes, 10);
  EXPECT_EQ(legacy.num_buffers, 0) << "10-byte header has no num_buffers";
  EXPECT_EQ(legacy.gso_size, 1448);
}

TEST(NetHeader, WriteAndReadAcrossPieces) {
  std::byte a[3], b[4], c[20];
  const IoPiece pieces[] = {{a, 3}, {b, 4}, {c, 20}};
  NetHeader h = kOffloads;
  h.num_buffers = 3;
  ASSERT_TRUE(write_net_header(h, 12, pieces));
  const auto back = read_net_header(pieces, 12);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, h);
  const IoPiece too_short[] = {{a, 3}, {b, 4}};
  EXPECT_FALSE(write_net_header(h, 12, too_short));
  EXPECT_FALSE(read_net_header(too_short, 10).has_value());
}

struct RxGuest {
  TestMemory mem;
  QueuePair q;
  std::vector<DriverQueue::Buffer> posted;
  explicit RxGuest(uint16_t size = 16) : mem(), q(mem, DriverOptions{.size = size}) {}
  void post(uint32_t len, int count, bool split = false) {
    for (int i = 0; i < count; ++i) {
      if (split) {  // two descriptors per chain: 5 + rest bytes (header split too)
        const DriverQueue::Buffer bufs[] = {{mem.alloc(5), 5, true}, {mem.alloc(len - 5), len - 5, true}};
        ASSERT_TRUE(q.driver.add_chain(bufs).has_value());
        posted.push_back(bufs[0]);
        posted.push_back(bufs[1]);
      } else {
        const DriverQueue::Buffer buf{mem.alloc(len), len, true};
        ASSERT_TRUE(q.driver.add_chain({&buf, 1}).has_value());
        posted.push_back(buf);
      }
    }
    q.driver.publish();
  }
  std::vector<std::byte> read_posted(size_t index, size_t len) { return mem.read(posted[index].guest_addr, len); }
};

TEST(NetRx, SingleBufferWithoutMergeable) {
  RxGuest g;
  g.post(1526, 1);
  NetReceiveWriter writer(RxOptions{.mrg_rxbuf = false, .header_size = 10});
  const auto frame = pattern(1000, 3);
  const RxResult r = writer.deliver(g.q.device, g.mem.map(), kOffloads, frame);
  ASSERT_EQ(r.status, RxStatus::kDelivered);
  EXPECT_EQ(r.buffers, 1);
  g.q.device.publish_used(g.mem.map());
  const auto used = g.q.driver.reap();
  ASSERT_TRUE(used.has_value());
  EXPECT_EQ(used->len, 1010u);
  const auto bytes = g.read_posted(0, 1010);
  EXPECT_EQ(decode_net_header(bytes, 10), kOffloads) << "offload fields carried through untouched";
  EXPECT_EQ(std::vector<std::byte>(bytes.begin() + 10, bytes.end()), frame);
}

TEST(NetRx, TooLargeWithoutMergeableIsDroppedAndTheBufferKept) {
  RxGuest g;
  g.post(100, 1);
  NetReceiveWriter writer(RxOptions{.mrg_rxbuf = false, .header_size = 12});
  const auto frame = pattern(200, 3);
  EXPECT_EQ(writer.deliver(g.q.device, g.mem.map(), kOffloads, frame).status, RxStatus::kDropped);
  EXPECT_FALSE(g.q.device.is_broken());
  const auto small = pattern(60, 4);
  EXPECT_EQ(writer.deliver(g.q.device, g.mem.map(), kOffloads, small).status, RxStatus::kDelivered);
}

TEST(NetRx, MergeableSpreadsOnePacketOverSeveralChains) {
  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "two descriptors per chain" : "one descriptor per chain");
    RxGuest g;
    g.post(512, 6, split);
    NetReceiveWriter writer(RxOptions{.mrg_rxbuf = true, .header_size = 12});
    const auto frame = pattern(1400, 9);  // 12 + 1400 = 1412 bytes: 3 chains of 512
    const RxResult r = writer.deliver(g.q.device, g.mem.map(), kOffloads, frame);
    ASSERT_EQ(r.status, RxStatus::kDelivered);
    EXPECT_EQ(r.buffers, 3);
    g.q.device.publish_used(g.mem.map());
    std::vector<uint32_t> lens;
    while (auto used = g.q.driver.reap()) lens.push_back(used->len);
    EXPECT_EQ(lens, (std::vector<uint32_t>{512, 512, 388}));
    // Reassemble what the guest sees.
    std::vector<std::byte> seen;
    const size_t per_chain = split ? 2 : 1;
    for (size_t chain = 0; chain < 3; ++chain) {
      size_t remaining = lens[chain];
      for (size_t d = 0; d < per_chain && remaining > 0; ++d) {
        const auto& buf = g.posted[chain * per_chain + d];
        const size_t n = std::min<size_t>(buf.len, remaining);
        const auto part = g.mem.read(buf.guest_addr, n);
        seen.insert(seen.end(), part.begin(), part.end());
        remaining -= n;
      }
    }
    ASSERT_EQ(seen.size(), 1412u);
    NetHeader expected = kOffloads;
    expected.num_buffers = 3;
    EXPECT_EQ(decode_net_header(seen, 12), expected);
    EXPECT_EQ(std::vector<std::byte>(seen.begin() + 12, seen.end()), frame);
  }
}

TEST(NetRx, MergeableSmallPacketUsesOneChain) {
  RxGuest g;
  g.post(2048, 2);
  NetReceiveWriter writer(RxOptions{.mrg_rxbuf = true});
  const RxResult r = writer.deliver(g.q.device, g.mem.map(), NetHeader{}, pattern(64, 1));
  EXPECT_EQ(r.status, RxStatus::kDelivered);
  EXPECT_EQ(r.buffers, 1);
  const RxResult empty = writer.deliver(g.q.device, g.mem.map(), NetHeader{}, std::span<const std::byte>{});
  EXPECT_EQ(empty.status, RxStatus::kDelivered) << "a zero-length frame still carries its header";
  g.q.device.publish_used(g.mem.map());
  ASSERT_TRUE(g.q.driver.reap().has_value());
  const auto second = g.q.driver.reap();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->len, 12u);
}

TEST(NetRx, MergeablePacketLargerThanTheRingIsDropped) {
  RxGuest g(4);
  g.post(64, 4);
  NetReceiveWriter writer(RxOptions{.mrg_rxbuf = true});
  EXPECT_EQ(writer.deliver(g.q.device, g.mem.map(), NetHeader{}, pattern(1000, 1)).status, RxStatus::kDropped);
  EXPECT_FALSE(g.q.device.is_broken());
  EXPECT_EQ(g.q.device.available(g.mem.map()), 4) << "every chain was given back";
}

// VIRTIO_F_IN_ORDER, which every port offers (vhost_user/features.h): whatever happens
// to the frames (one buffer, several merged, a frame put off for want of buffers, a frame
// too large for a buffer), the used ring names the chains in the order they were made
// available, with the writer holding chains ahead (reserve > 1, as the datapath's does).
TEST(NetRx, UsesChainsInTheOrderTheyWereMadeAvailable) {
  for (bool mrg : {true, false}) {
    SCOPED_TRACE(mrg ? "MRG_RXBUF" : "one chain per frame");
    RxGuest g(32);
    std::vector<uint16_t> heads;
    const auto post = [&](uint32_t len, int count) {
      for (int i = 0; i < count; ++i) {
        const DriverQueue::Buffer buf{g.mem.alloc(len), len, true};
        const auto head = g.q.driver.add_chain({&buf, 1});
        ASSERT_TRUE(head.has_value());
        heads.push_back(*head);
      }
      g.q.driver.publish();
    };
    NetReceiveWriter writer(RxOptions{.mrg_rxbuf = mrg, .header_size = 12, .reserve = 8});
    const auto deliver = [&](size_t bytes) {
      return writer.deliver(g.q.device, g.mem.map(), NetHeader{}, pattern(bytes, static_cast<uint8_t>(bytes))).status;
    };
    if (mrg) {
      post(512, 6);
      EXPECT_EQ(deliver(64), RxStatus::kDelivered);     // chain 0
      EXPECT_EQ(deliver(1400), RxStatus::kDelivered);   // chains 1-3
      EXPECT_EQ(deliver(1400), RxStatus::kNoBuffers);   // 4 and 5 are not enough: given back
      post(512, 4);
      EXPECT_EQ(deliver(1400), RxStatus::kDelivered);   // chains 4-6
      EXPECT_EQ(deliver(64), RxStatus::kDelivered);     // chain 7
    } else {
      post(100, 1);
      post(2048, 3);
      EXPECT_EQ(deliver(1000), RxStatus::kDropped);     // chain 0 is too small: kept
      EXPECT_EQ(deliver(60), RxStatus::kDelivered);     // chain 0
      EXPECT_EQ(deliver(1000), RxStatus::kDelivered);   // chain 1
      EXPECT_EQ(deliver(1000), RxStatus::kDelivered);   // chain 2
    }
    writer.release(g.q.device);
    g.q.device.publish_used(g.mem.map());
    std::vector<uint16_t> used;
    while (auto element = g.q.driver.reap()) used.push_back(static_cast<uint16_t>(element->id));
    const size_t expected = mrg ? 8 : 3;
    ASSERT_EQ(used.size(), expected);
    EXPECT_EQ(used, std::vector<uint16_t>(heads.begin(), heads.begin() + static_cast<std::ptrdiff_t>(expected)));
  }
}

}  // namespace
}  // namespace uvhost::virtio
