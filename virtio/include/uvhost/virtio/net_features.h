// net_features.h - the virtio-net feature bits, named once for every layer: the
// device's features (virtio 1.2, 5.1.3), the reserved transport bits (6), their names
// for printing, and the spec's dependency rules between the offload features
// (5.1.3.1).
//
// Contract
// --------
//  - net_feature::kX is a bit *number* (as in the spec and Linux's
//    VIRTIO_NET_F_X); mask(bit) is its bit in a 64-bit feature word, has(word, bit)
//    tests it. vhost-user's own bits (VHOST_F_LOG_ALL 26, VHOST_USER_F_PROTOCOL_FEATURES
//    30) belong to that layer (vhost_user/features.h) and are not here.
//  - Offload groups: kHostOffloads is what a guest may *transmit* with an offload
//    header (CSUM and HOST_*: partial checksums, TSO/UFO/USO super-frames, the ECN
//    bit); kGuestOffloads is what a device may hand a guest (GUEST_*).
//  - name(bit): "CSUM", "HOST_TSO4", ... as the spec spells them without the
//    VIRTIO_NET_F_ / VIRTIO_F_ / VIRTIO_RING_F_ prefix; an unknown bit is empty.
//    names(word): the names of the set bits, lowest first, unknown ones as "bitN"
//    (callers that know more bits, like vhost-user's, rename those).
//  - offload_dependency_violation(word): empty when the word follows 5.1.3.1's rules
//    for the offloads, else one sentence naming the first broken rule:
//      GUEST_TSO4, GUEST_TSO6, GUEST_UFO, GUEST_USO4, GUEST_USO6 need GUEST_CSUM;
//      GUEST_ECN needs GUEST_TSO4 or GUEST_TSO6;
//      HOST_TSO4, HOST_TSO6, HOST_UFO, HOST_USO need CSUM;
//      HOST_ECN needs HOST_TSO4 or HOST_TSO6.
//    The rules that tie CTRL_RX, CTRL_VLAN, GUEST_ANNOUNCE, MQ, ... to CTRL_VQ are not
//    checked: with vhost-user the frontend implements the control queue and never
//    passes CTRL_VQ to the backend (QEMU acks MQ and GUEST_ANNOUNCE without it).
//  - Everything is constexpr or a pure function; no state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace uvhost::virtio::net_feature {

// Device features (virtio 1.2, 5.1.3).
inline constexpr unsigned kCsum = 0;               // partial checksums from the guest (NEEDS_CSUM)
inline constexpr unsigned kGuestCsum = 1;          // the guest takes partial checksums
inline constexpr unsigned kCtrlGuestOffloads = 2;  // guest offloads switchable on the control queue
inline constexpr unsigned kMtu = 3;                // the config space's mtu field is valid
inline constexpr unsigned kMac = 5;
inline constexpr unsigned kGuestTso4 = 7;   // the guest takes TCPv4 super-frames (needs GUEST_CSUM)
inline constexpr unsigned kGuestTso6 = 8;   // ... TCPv6 (needs GUEST_CSUM)
inline constexpr unsigned kGuestEcn = 9;    // ... with the ECN bit (needs GUEST_TSO4 or GUEST_TSO6)
inline constexpr unsigned kGuestUfo = 10;   // ... UDP fragmentation offload (needs GUEST_CSUM)
inline constexpr unsigned kHostTso4 = 11;   // the guest sends TCPv4 super-frames (needs CSUM)
inline constexpr unsigned kHostTso6 = 12;   // ... TCPv6 (needs CSUM)
inline constexpr unsigned kHostEcn = 13;    // ... with the ECN bit (needs HOST_TSO4 or HOST_TSO6)
inline constexpr unsigned kHostUfo = 14;    // ... UDP fragmentation offload (needs CSUM)
inline constexpr unsigned kMrgRxbuf = 15;
inline constexpr unsigned kStatus = 16;
inline constexpr unsigned kCtrlVq = 17;
inline constexpr unsigned kCtrlRx = 18;
inline constexpr unsigned kCtrlVlan = 19;
inline constexpr unsigned kGuestAnnounce = 21;
inline constexpr unsigned kMq = 22;
inline constexpr unsigned kCtrlMacAddr = 23;
inline constexpr unsigned kGuestUso4 = 54;  // the guest takes UDPv4 segmentation (needs GUEST_CSUM)
inline constexpr unsigned kGuestUso6 = 55;  // ... UDPv6 (needs GUEST_CSUM)
inline constexpr unsigned kHostUso = 56;    // the guest sends UDP segmentation (needs CSUM)
inline constexpr unsigned kHashReport = 57;
inline constexpr unsigned kGuestHdrlen = 59;
inline constexpr unsigned kRss = 60;
inline constexpr unsigned kRscExt = 61;
inline constexpr unsigned kStandby = 62;
inline constexpr unsigned kSpeedDuplex = 63;

// Reserved (transport) features (virtio 1.2, 6).
inline constexpr unsigned kNotifyOnEmpty = 24;
inline constexpr unsigned kAnyLayout = 27;
inline constexpr unsigned kRingIndirectDesc = 28;
inline constexpr unsigned kRingEventIdx = 29;
inline constexpr unsigned kVersion1 = 32;
inline constexpr unsigned kAccessPlatform = 33;
inline constexpr unsigned kRingPacked = 34;
inline constexpr unsigned kInOrder = 35;
inline constexpr unsigned kOrderPlatform = 36;
inline constexpr unsigned kSrIov = 37;
inline constexpr unsigned kNotificationData = 38;
inline constexpr unsigned kRingReset = 40;

constexpr uint64_t mask(unsigned bit) noexcept { return uint64_t{1} << bit; }
constexpr bool has(uint64_t features, unsigned bit) noexcept { return ((features >> bit) & 1U) != 0; }

// What a guest may transmit with offloads / what it may be handed (see the contract).
inline constexpr uint64_t kHostOffloads =
    mask(kCsum) | mask(kHostTso4) | mask(kHostTso6) | mask(kHostEcn) | mask(kHostUfo) | mask(kHostUso);
inline constexpr uint64_t kGuestOffloads = mask(kGuestCsum) | mask(kGuestTso4) | mask(kGuestTso6) |
                                           mask(kGuestEcn) | mask(kGuestUfo) | mask(kGuestUso4) | mask(kGuestUso6);

std::string_view name(unsigned bit) noexcept;
std::vector<std::string> names(uint64_t features);
std::string offload_dependency_violation(uint64_t features);

}  // namespace uvhost::virtio::net_feature
