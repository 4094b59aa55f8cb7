// net_features.cpp - names and dependency rules of the virtio-net features (see
// net_features.h).
#include "uvhost/virtio/net_features.h"

#include <fmt/format.h>

namespace uvhost::virtio::net_feature {

namespace {

struct Named {
  unsigned bit;
  std::string_view name;
};

// Spelled as in the virtio spec without the VIRTIO_NET_F_ / VIRTIO_F_ prefix (the
// ring features keep RING_, as Linux and QEMU print them).
constexpr Named kNames[] = {
    {kCsum, "CSUM"},
    {kGuestCsum, "GUEST_CSUM"},
    {kCtrlGuestOffloads, "CTRL_GUEST_OFFLOADS"},
    {kMtu, "MTU"},
    {kMac, "MAC"},
    {kGuestTso4, "GUEST_TSO4"},
    {kGuestTso6, "GUEST_TSO6"},
    {kGuestEcn, "GUEST_ECN"},
    {kGuestUfo, "GUEST_UFO"},
    {kHostTso4, "HOST_TSO4"},
    {kHostTso6, "HOST_TSO6"},
    {kHostEcn, "HOST_ECN"},
    {kHostUfo, "HOST_UFO"},
    {kMrgRxbuf, "MRG_RXBUF"},
    {kStatus, "STATUS"},
    {kCtrlVq, "CTRL_VQ"},
    {kCtrlRx, "CTRL_RX"},
    {kCtrlVlan, "CTRL_VLAN"},
    {kGuestAnnounce, "GUEST_ANNOUNCE"},
    {kMq, "MQ"},
    {kCtrlMacAddr, "CTRL_MAC_ADDR"},
    {kNotifyOnEmpty, "NOTIFY_ON_EMPTY"},
    {kAnyLayout, "ANY_LAYOUT"},
    {kRingIndirectDesc, "RING_INDIRECT_DESC"},
    {kRingEventIdx, "RING_EVENT_IDX"},
    {kVersion1, "VERSION_1"},
    {kAccessPlatform, "ACCESS_PLATFORM"},
    {kRingPacked, "RING_PACKED"},
    {kInOrder, "IN_ORDER"},
    {kOrderPlatform, "ORDER_PLATFORM"},
    {kSrIov, "SR_IOV"},
    {kNotificationData, "NOTIFICATION_DATA"},
    {kRingReset, "RING_RESET"},
    {kGuestUso4, "GUEST_USO4"},
    {kGuestUso6, "GUEST_USO6"},
    {kHostUso, "HOST_USO"},
    {kHashReport, "HASH_REPORT"},
    {kGuestHdrlen, "GUEST_HDRLEN"},
    {kRss, "RSS"},
    {kRscExt, "RSC_EXT"},
    {kStandby, "STANDBY"},
    {kSpeedDuplex, "SPEED_DUPLEX"},
};

// One rule of 5.1.3.1: `feature` requires at least one of `needs` (a mask).
struct Rule {
  unsigned feature;
  uint64_t needs;
};

constexpr Rule kOffloadRules[] = {
    {kGuestTso4, mask(kGuestCsum)}, {kGuestTso6, mask(kGuestCsum)},
    {kGuestUfo, mask(kGuestCsum)},  {kGuestUso4, mask(kGuestCsum)},
    {kGuestUso6, mask(kGuestCsum)}, {kGuestEcn, mask(kGuestTso4) | mask(kGuestTso6)},
    {kHostTso4, mask(kCsum)},       {kHostTso6, mask(kCsum)},
    {kHostUfo, mask(kCsum)},        {kHostUso, mask(kCsum)},
    {kHostEcn, mask(kHostTso4) | mask(kHostTso6)},
};

}  // namespace

std::string_view name(unsigned bit) noexcept {
  for (const Named& named : kNames) {
    if (named.bit == bit) return named.name;
  }
  return {};
}

std::vector<std::string> names(uint64_t features) {
  std::vector<std::string> out;
  for (unsigned bit = 0; bit < 64; ++bit) {
    if (!has(features, bit)) continue;
    const std::string_view known = name(bit);
    out.push_back(known.empty() ? fmt::format("bit{}", bit) : std::string(known));
  }
  return out;
}

std::string offload_dependency_violation(uint64_t features) {
  for (const Rule& rule : kOffloadRules) {
    if (!has(features, rule.feature) || (features & rule.needs) != 0) continue;
    std::vector<std::string> needed = names(rule.needs);
    return fmt::format("{} requires {}", name(rule.feature), fmt::join(needed, " or "));
  }
  return {};
}

}  // namespace uvhost::virtio::net_feature
