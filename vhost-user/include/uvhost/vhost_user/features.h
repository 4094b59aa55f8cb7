// features.h - the feature bits a vhost-user virtio-net backend talks about: virtio
// device/transport features (GET/SET_FEATURES; their numbers and names live once in
// virtio/net_features.h, the masks here are made from them), vhost-user's own two
// (VHOST_F_LOG_ALL, VHOST_USER_F_PROTOCOL_FEATURES) and the protocol features
// (GET/SET_PROTOCOL_FEATURES). As in the virtio 1.2 spec and QEMU's
// docs/interop/vhost-user.rst.
//
// Contract
// --------
//  - offered_net_features(pairs, backend): what GET_FEATURES answers: the base set
//    every port has (VERSION_1, MRG_RXBUF, EVENT_IDX, INDIRECT_DESC, IN_ORDER, RING_PACKED, ACCESS_PLATFORM, MTU,
//    STATUS, GUEST_ANNOUNCE, PROTOCOL_FEATURES, LOG_ALL, and MQ with more than one pair) plus
//    what the port's backend can honour (`backend`, only offload bits count: see
//    kBackendSettable; others are ignored).
//  - IN_ORDER (virtio 1.2, 2.7.9) is a promise about the device, which holds for every
//    port: a ring is served by one worker, which pops chains in the order the driver
//    made them available, gives back the ones it cannot use yet by un-popping them (they
//    are popped again, in the same order), and writes their used entries in pop order.
//    When the driver acked the bit the device also takes the spec's batched used
//    update, for chains it only read (transmit): a run of them is one used entry, in
//    the run's first slot, with the run's last head (DeviceQueue::publish_used). A
//    chain the device wrote into keeps its own entry, since its length matters. Drivers
//    with an in-order path (DPDK's virtio PMD, Linux's, our embedded frontend) free
//    descriptors in order.
//  - RING_PACKED: every ring of a device that acked it is a packed ring (DeviceQueue's
//    packed side); its SET/GET_VRING_BASE carry position | wrap counter << 15, and QEMU
//    adds the used side's in the upper 16 bits (backend_device.cpp).
//  - feature_names(word): net_feature::names() with vhost-user's two bits named too
//    (LOG_ALL, PROTOCOL_FEATURES, after the others).
//  - ACCESS_PLATFORM (virtio 1.2, 6; the spec's "IOMMU support"): offered by every port.
//    A driver that acks it gives IOVAs everywhere, which the device translates through
//    the IOTLB the frontend fills (iotlb.h) and asks for on a miss on the back-end
//    channel (backend_channel.h, protocol feature BACKEND_REQ). QEMU acks it only for
//    a device with iommu_platform=on, and then requires BACKEND_REQ and REPLY_ACK.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "uvhost/virtio/net_features.h"

namespace uvhost::vhost_user {

constexpr uint64_t bit(unsigned n) { return uint64_t{1} << n; }

namespace feature {
using virtio::net_feature::mask;
namespace nf = virtio::net_feature;
inline constexpr uint64_t kNetMtu = mask(nf::kMtu);
inline constexpr uint64_t kNetMrgRxbuf = mask(nf::kMrgRxbuf);
inline constexpr uint64_t kNetStatus = mask(nf::kStatus);
inline constexpr uint64_t kNetGuestAnnounce = mask(nf::kGuestAnnounce);
inline constexpr uint64_t kNetMq = mask(nf::kMq);
inline constexpr uint64_t kLogAll = bit(26);            // VHOST_F_LOG_ALL
inline constexpr uint64_t kRingIndirectDesc = mask(nf::kRingIndirectDesc);
inline constexpr uint64_t kRingEventIdx = mask(nf::kRingEventIdx);
inline constexpr uint64_t kInOrder = mask(nf::kInOrder);
inline constexpr uint64_t kRingPacked = mask(nf::kRingPacked);
inline constexpr uint64_t kAccessPlatform = mask(nf::kAccessPlatform);
inline constexpr uint64_t kProtocolFeatures = bit(30);  // VHOST_USER_F_PROTOCOL_FEATURES
inline constexpr uint64_t kVersion1 = mask(nf::kVersion1);
// The bits a backend may add to the offer: the offloads it honours.
inline constexpr uint64_t kBackendSettable = nf::kHostOffloads | nf::kGuestOffloads;
}  // namespace feature

namespace protocol {
inline constexpr uint64_t kMq = bit(0);
inline constexpr uint64_t kLogShmfd = bit(1);
inline constexpr uint64_t kRarp = bit(2);
inline constexpr uint64_t kReplyAck = bit(3);
inline constexpr uint64_t kNetMtu = bit(4);
inline constexpr uint64_t kBackendReq = bit(5);  // the spec's BACKEND_REQ (formerly SLAVE_REQ)
inline constexpr uint64_t kConfigureMemSlots = bit(15);
inline constexpr uint64_t kStatus = bit(16);
// Everything this backend implements; nothing else is offered or accepted.
inline constexpr uint64_t kImplemented =
    kMq | kLogShmfd | kRarp | kReplyAck | kNetMtu | kBackendReq | kConfigureMemSlots | kStatus;
}  // namespace protocol

// GET_FEATURES' answer for a device with `queue_pairs` queue pairs whose backend
// honours `backend_features` (see the contract).
constexpr uint64_t offered_net_features(uint32_t queue_pairs, uint64_t backend_features = 0) {
  return feature::kVersion1 | feature::kNetMrgRxbuf | feature::kRingEventIdx | feature::kRingIndirectDesc |
         feature::kInOrder | feature::kRingPacked | feature::kAccessPlatform | feature::kNetMtu | feature::kNetStatus | feature::kNetGuestAnnounce | feature::kProtocolFeatures |
         feature::kLogAll | (queue_pairs > 1 ? feature::kNetMq : 0) | (backend_features & feature::kBackendSettable);
}

std::vector<std::string> feature_names(uint64_t features);

}  // namespace uvhost::vhost_user
