// tx_bounce_test.cpp - TxBounce, the copies an at-most-once transmit burst sends: a
// frame spread over several guest buffers comes out whole in its slot, header apart,
// and a later change of the guest's buffers does not reach the copy.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <vector>

#include "uvhost/datapath/tx_delivery.h"

namespace uvhost::datapath {
namespace {

std::vector<std::byte> pattern(size_t n, uint8_t seed) {
  std::vector<std::byte> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::byte>(seed + i * 7);
  return bytes;
}

TEST(TxBounceTest, StagesAFrameSpreadOverPiecesAsOneCopy) {
  constexpr uint32_t kHeader = 12;
  // Header and frame across three "guest buffers" of odd sizes.
  std::vector<std::byte> a = pattern(5, 1), b = pattern(300, 2), c = pattern(1000, 3);
  const std::array<virtio::IoPiece, 3> pieces{virtio::IoPiece{a.data(), a.size()}, virtio::IoPiece{b.data(), b.size()},
                                              virtio::IoPiece{c.data(), c.size()}};
  const auto total = static_cast<uint32_t>(a.size() + b.size() + c.size());
  TxBounce bounce(4, 2048);
  const backends::TxFrame frame = bounce.stage(2, pieces, kHeader, total);

  ASSERT_EQ(frame.pieces.size(), 1u);
  EXPECT_EQ(frame.header_size, kHeader);
  EXPECT_EQ(frame.frame_len, total - kHeader);
  std::vector<std::byte> whole;
  for (const auto* part : {&a, &b, &c}) whole.insert(whole.end(), part->begin(), part->end());
  std::vector<std::byte> got(frame.frame_len);
  ASSERT_EQ(frame.copy_frame(0, got), got.size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), whole.begin() + kHeader));

  // The guest reuses its buffers once the used entry is published: the copy stays.
  std::fill(a.begin(), a.end(), std::byte{0});
  std::fill(c.begin(), c.end(), std::byte{0});
  ASSERT_EQ(frame.copy_frame(0, got), got.size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), whole.begin() + kHeader));
}

TEST(TxBounceTest, SlotsOfOneBurstDoNotOverlap) {
  std::vector<std::byte> one = pattern(100, 10), two = pattern(100, 20);
  const virtio::IoPiece p1{one.data(), one.size()}, p2{two.data(), two.size()};
  TxBounce bounce(2, 128);
  const backends::TxFrame f1 = bounce.stage(0, std::span(&p1, 1), 10, 100);
  const backends::TxFrame f2 = bounce.stage(1, std::span(&p2, 1), 10, 100);
  std::vector<std::byte> got1(90), got2(90);
  ASSERT_EQ(f1.copy_frame(0, got1), 90u);
  ASSERT_EQ(f2.copy_frame(0, got2), 90u);
  EXPECT_TRUE(std::equal(got1.begin(), got1.end(), one.begin() + 10));
  EXPECT_TRUE(std::equal(got2.begin(), got2.end(), two.begin() + 10));
}

TEST(TxBounceTest, DeliveryNamesRoundTrip) {
  for (TxDelivery d : {TxDelivery::kInPlace, TxDelivery::kAtMostOnce}) {
    EXPECT_EQ(base::parse_enum<TxDelivery>(to_string(d)), d);
  }
  EXPECT_FALSE(base::parse_enum<TxDelivery>("exactly_once"));
}

}  // namespace
}  // namespace uvhost::datapath
