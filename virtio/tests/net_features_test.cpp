// net_features_test.cpp - the virtio-net feature vocabulary: bit numbers as the spec
// and Linux have them, names, and the offload dependency rules (virtio 1.2, 5.1.3.1).
#include "uvhost/virtio/net_features.h"

#include <gtest/gtest.h>

namespace uvhost::virtio::net_feature {
namespace {

TEST(NetFeatures, BitNumbersAreTheSpecs) {
  // include/uapi/linux/virtio_net.h and virtio_config.h
  EXPECT_EQ(kCsum, 0u);
  EXPECT_EQ(kGuestCsum, 1u);
  EXPECT_EQ(kMtu, 3u);
  EXPECT_EQ(kGuestTso4, 7u);
  EXPECT_EQ(kGuestTso6, 8u);
  EXPECT_EQ(kGuestEcn, 9u);
  EXPECT_EQ(kGuestUfo, 10u);
  EXPECT_EQ(kHostTso4, 11u);
  EXPECT_EQ(kHostTso6, 12u);
  EXPECT_EQ(kHostEcn, 13u);
  EXPECT_EQ(kHostUfo, 14u);
  EXPECT_EQ(kMrgRxbuf, 15u);
  EXPECT_EQ(kMq, 22u);
  EXPECT_EQ(kGuestUso4, 54u);
  EXPECT_EQ(kGuestUso6, 55u);
  EXPECT_EQ(kHostUso, 56u);
  EXPECT_EQ(kRingEventIdx, 29u);
  EXPECT_EQ(kVersion1, 32u);
  EXPECT_EQ(mask(kVersion1), uint64_t{1} << 32);
  EXPECT_TRUE(has(mask(kHostUso) | 1, kHostUso));
  EXPECT_FALSE(has(mask(kHostUso), kGuestUso6));
}

TEST(NetFeatures, OffloadGroupsHoldTheHostAndGuestBits) {
  EXPECT_EQ(kHostOffloads, mask(0) | mask(11) | mask(12) | mask(13) | mask(14) | mask(56));
  EXPECT_EQ(kGuestOffloads, mask(1) | mask(7) | mask(8) | mask(9) | mask(10) | mask(54) | mask(55));
}

TEST(NetFeatures, NamesAsTheSpecSpellsThem) {
  EXPECT_EQ(name(kCsum), "CSUM");
  EXPECT_EQ(name(kHostTso6), "HOST_TSO6");
  EXPECT_EQ(name(kGuestUso4), "GUEST_USO4");
  EXPECT_EQ(name(kRingEventIdx), "RING_EVENT_IDX");
  EXPECT_EQ(name(4), "");  // reserved
  EXPECT_EQ(names(mask(kCsum) | mask(kGuestCsum) | mask(kHostTso4) | mask(kVersion1) | mask(4)),
            (std::vector<std::string>{"CSUM", "GUEST_CSUM", "bit4", "HOST_TSO4", "VERSION_1"}));
  EXPECT_TRUE(names(0).empty());
  // Every bit has a printable name, known or not.
  EXPECT_EQ(names(~uint64_t{0}).size(), 64u);
}

TEST(NetFeatures, ConsistentOffloadSetsFollowTheRules) {
  EXPECT_EQ(offload_dependency_violation(0), "");
  EXPECT_EQ(offload_dependency_violation(kHostOffloads | kGuestOffloads), "");
  EXPECT_EQ(offload_dependency_violation(mask(kCsum) | mask(kHostTso4) | mask(kHostEcn)), "");
  EXPECT_EQ(offload_dependency_violation(mask(kGuestCsum) | mask(kGuestTso6) | mask(kGuestEcn)), "");
  // CSUM alone and GUEST_CSUM alone need nothing.
  EXPECT_EQ(offload_dependency_violation(mask(kCsum)), "");
  EXPECT_EQ(offload_dependency_violation(mask(kGuestCsum)), "");
  // MQ and GUEST_ANNOUNCE without CTRL_VQ: the vhost-user frontend's business, allowed.
  EXPECT_EQ(offload_dependency_violation(mask(kMq) | mask(kGuestAnnounce)), "");
}

TEST(NetFeatures, EachBrokenRuleIsNamed) {
  EXPECT_EQ(offload_dependency_violation(mask(kHostTso4)), "HOST_TSO4 requires CSUM");
  EXPECT_EQ(offload_dependency_violation(mask(kHostTso6)), "HOST_TSO6 requires CSUM");
  EXPECT_EQ(offload_dependency_violation(mask(kHostUfo)), "HOST_UFO requires CSUM");
  EXPECT_EQ(offload_dependency_violation(mask(kHostUso)), "HOST_USO requires CSUM");
  EXPECT_EQ(offload_dependency_violation(mask(kCsum) | mask(kHostEcn)), "HOST_ECN requires HOST_TSO4 or HOST_TSO6");
  EXPECT_EQ(offload_dependency_violation(mask(kGuestTso4)), "GUEST_TSO4 requires GUEST_CSUM");
  EXPECT_EQ(offload_dependency_violation(mask(kGuestTso6)), "GUEST_TSO6 requires GUEST_CSUM");
  EXPECT_EQ(offload_dependency_violation(mask(kGuestUfo)), "GUEST_UFO requires GUEST_CSUM");
  EXPECT_EQ(offload_dependency_violation(mask(kGuestUso4)), "GUEST_USO4 requires GUEST_CSUM");
  EXPECT_EQ(offload_dependency_violation(mask(kGuestUso6)), "GUEST_USO6 requires GUEST_CSUM");
  EXPECT_EQ(offload_dependency_violation(mask(kGuestCsum) | mask(kGuestEcn)),
            "GUEST_ECN requires GUEST_TSO4 or GUEST_TSO6");
  // The guest's side and the host's side are separate: GUEST_CSUM does not satisfy HOST_TSO4.
  EXPECT_EQ(offload_dependency_violation(mask(kGuestCsum) | mask(kHostTso4)), "HOST_TSO4 requires CSUM");
}

}  // namespace
}  // namespace uvhost::virtio::net_feature
