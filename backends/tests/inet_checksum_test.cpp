// inet_checksum_test.cpp - the 8-bytes-at-a-time Internet checksum against a plain
// 16-bit reference sum at every length and alignment, the RFC 1071 example,
// pseudo-header sums of IPv4 and IPv6, and completing a partial checksum (range
// checks, 0 stored as 0xffff).
#include "uvhost/backends/inet_checksum.h"

#include <gtest/gtest.h>

#include "offload_frames.h"

namespace uvhost::backends {
namespace {

using testing::Bytes;

uint16_t reference_sum(const Bytes& data, size_t begin, size_t end, uint32_t initial = 0) {
  return testing::fold(testing::sum16(data, begin, end, initial));
}

TEST(InetChecksum, Rfc1071Example) {
  const Bytes data{std::byte{0x00}, std::byte{0x01}, std::byte{0xf2}, std::byte{0x03},
                   std::byte{0xf4}, std::byte{0xf5}, std::byte{0xf6}, std::byte{0xf7}};
  EXPECT_EQ(ones_complement_sum(data), 0xddf2);
  EXPECT_EQ(ones_complement_sum({}), 0);
  EXPECT_EQ(ones_complement_sum({}, 0x1234), 0x1234);
}

TEST(InetChecksum, MatchesTheReferenceAtEveryLengthAndAlignment) {
  const Bytes data = testing::payload_pattern(600, 7);
  for (size_t begin = 0; begin < 9; ++begin) {
    for (size_t end = begin; end <= 300 + begin; ++end) {
      const std::span<const std::byte> range(data.data() + begin, end - begin);
      ASSERT_EQ(ones_complement_sum(range), reference_sum(data, begin, end)) << begin << ".." << end;
      ASSERT_EQ(ones_complement_sum(range, 0xfffe), reference_sum(data, begin, end, 0xfffe)) << begin << ".." << end;
    }
  }
}

TEST(InetChecksum, CarriesOutOfSixtyFourBitsOn64KiBOfOnes) {
  // All-ones words make every 64-bit addition carry: the end-around carry must not be lost.
  const Bytes ones(65536 + 5, std::byte{0xff});
  EXPECT_EQ(ones_complement_sum(ones), reference_sum(ones, 0, ones.size()));
  const Bytes data = testing::payload_pattern(65535, 3);
  EXPECT_EQ(ones_complement_sum(data), reference_sum(data, 0, data.size()));
}

TEST(InetChecksum, PseudoHeaderSumsOfIpv4AndIpv6) {
  testing::OffloadFrameSpec spec;
  spec.payload = testing::payload_pattern(100);
  for (bool ipv6 : {false, true}) {
    spec.ipv6 = ipv6;
    const Bytes frame = testing::offload_frame(spec);
    const testing::FrameOffsets at = testing::offsets_of(spec);
    const size_t addresses = at.l3 + (ipv6 ? 8 : 12);
    const std::span<const std::byte> span(frame.data() + addresses, ipv6 ? 32 : 8);
    for (uint32_t length : {0U, 20U, 1480U, 65535U, 70000U}) {
      EXPECT_EQ(pseudo_header_sum(span, IPPROTO_TCP, length),
                testing::fold(testing::pseudo_sum(frame, at.l3, ipv6, IPPROTO_TCP, length)))
          << (ipv6 ? "IPv6 " : "IPv4 ") << length;
    }
  }
}

TEST(InetChecksum, CompleteChecksumFillsTheFieldAndVerifies) {
  testing::OffloadFrameSpec spec;
  spec.protocol = IPPROTO_UDP;
  spec.payload = testing::payload_pattern(333);  // odd: the last byte is padded
  spec.checksum = testing::L4Checksum::kPartial;
  Bytes frame = testing::offload_frame(spec);
  const testing::FrameOffsets at = testing::offsets_of(spec);
  ASSERT_TRUE(complete_checksum(frame, at.l4, 6));
  spec.checksum = testing::L4Checksum::kFull;
  EXPECT_EQ(frame, testing::offload_frame(spec));
  EXPECT_TRUE(testing::transport_checksum_valid(frame, at.l3, at.l4, false, IPPROTO_UDP));
}

TEST(InetChecksum, CompleteChecksumStoresZeroAsAllOnes) {
  // The sum of these bytes is 0xffff, so the checksum would be 0.
  Bytes data{std::byte{0xff}, std::byte{0xff}, std::byte{0x00}, std::byte{0x00}};
  ASSERT_TRUE(complete_checksum(data, 0, 2));
  EXPECT_EQ(testing::get16(data, 2), 0xffff);
}

TEST(InetChecksum, CompleteChecksumRefusesAFieldOutsideTheFrame) {
  Bytes data(60, std::byte{1});
  const Bytes before = data;
  EXPECT_FALSE(complete_checksum(data, 50, 9));  // field at 59..60: one byte past the end
  EXPECT_FALSE(complete_checksum(data, 60, 0));  // start at the end
  EXPECT_FALSE(complete_checksum(data, 0, 65535));
  EXPECT_FALSE(complete_checksum(data, 65535, 65535));
  EXPECT_EQ(data, before);
  EXPECT_TRUE(complete_checksum(data, 50, 8));  // 58..59: fits
  EXPECT_TRUE(complete_checksum(data, 58, 0));
}

}  // namespace
}  // namespace uvhost::backends
