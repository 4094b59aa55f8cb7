// rarp_frame_test.cpp - the RARP announcement is byte for byte the frame QEMU's
// announce_self_create() builds for the same MAC.
#include "uvhost/backends/rarp_frame.h"

#include <gtest/gtest.h>

#include <vector>

namespace uvhost::backends {
namespace {

const MacAddress kMac{0x52, 0x54, 0x00, 0x12, 0x34, 0x56};

std::vector<std::byte> bytes_of(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

TEST(RarpFrame, IsQemusAnnouncementForTheMac) {
  std::vector<std::byte> expected = bytes_of({
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  // broadcast
      0x52, 0x54, 0x00, 0x12, 0x34, 0x56,  // source: the guest
      0x80, 0x35,                          // RARP
      0x00, 0x01, 0x08, 0x00, 0x06, 0x04,  // Ethernet, IPv4, lengths 6 and 4
      0x00, 0x03,                          // request reverse
      0x52, 0x54, 0x00, 0x12, 0x34, 0x56,  // sender hardware address
      0x00, 0x00, 0x00, 0x00,              // sender protocol address
      0x52, 0x54, 0x00, 0x12, 0x34, 0x56,  // target hardware address
      0x00, 0x00, 0x00, 0x00,              // target protocol address
  });
  expected.resize(60, std::byte{0});  // padding to the Ethernet minimum
  const auto frame = rarp_announcement(kMac);
  ASSERT_EQ(frame.size(), expected.size());
  EXPECT_TRUE(std::equal(frame.begin(), frame.end(), expected.begin()));
  EXPECT_TRUE(is_rarp_announcement(frame, kMac));
}

TEST(RarpFrame, RecognizesOnlyTheSameMacAndLength) {
  const auto frame = rarp_announcement(kMac);
  MacAddress other = kMac;
  other[5] = 0x57;
  EXPECT_FALSE(is_rarp_announcement(frame, other));
  EXPECT_FALSE(is_rarp_announcement(std::span(frame).first(59), kMac));
  auto changed = frame;
  changed[21] = std::byte{0x04};  // a reply, not a request
  EXPECT_FALSE(is_rarp_announcement(changed, kMac));
}

}  // namespace
}  // namespace uvhost::backends
