// features.h - the feature bits a vhost-user virtio-net backend talks about: virtio
// device/transport features (GET/SET_FEATURES) and vhost-user protocol features
// (GET/SET_PROTOCOL_FEATURES). Bit numbers as in the virtio 1.2 spec and QEMU's
// docs/interop/vhost-user.rst.
#pragma once

#include <cstdint>

namespace uvhost::vhost_user {

constexpr uint64_t bit(unsigned n) { return uint64_t{1} << n; }

namespace feature {
inline constexpr uint64_t kNetMtu = bit(3);             // VIRTIO_NET_F_MTU
inline constexpr uint64_t kNetMrgRxbuf = bit(15);       // VIRTIO_NET_F_MRG_RXBUF
inline constexpr uint64_t kNetStatus = bit(16);         // VIRTIO_NET_F_STATUS
inline constexpr uint64_t kNetGuestAnnounce = bit(21);  // VIRTIO_NET_F_GUEST_ANNOUNCE
inline constexpr uint64_t kNetMq = bit(22);             // VIRTIO_NET_F_MQ
inline constexpr uint64_t kLogAll = bit(26);            // VHOST_F_LOG_ALL
inline constexpr uint64_t kRingIndirectDesc = bit(28);  // VIRTIO_RING_F_INDIRECT_DESC
inline constexpr uint64_t kRingEventIdx = bit(29);      // VIRTIO_RING_F_EVENT_IDX
inline constexpr uint64_t kProtocolFeatures = bit(30);  // VHOST_USER_F_PROTOCOL_FEATURES
inline constexpr uint64_t kVersion1 = bit(32);          // VIRTIO_F_VERSION_1
}  // namespace feature

namespace protocol {
inline constexpr uint64_t kMq = bit(0);
inline constexpr uint64_t kLogShmfd = bit(1);
inline constexpr uint64_t kRarp = bit(2);
inline constexpr uint64_t kReplyAck = bit(3);
inline constexpr uint64_t kNetMtu = bit(4);
inline constexpr uint64_t kConfigureMemSlots = bit(15);
inline constexpr uint64_t kStatus = bit(16);
// Everything this backend implements; nothing else is offered or accepted.
inline constexpr uint64_t kImplemented = kMq | kLogShmfd | kRarp | kReplyAck | kNetMtu | kConfigureMemSlots | kStatus;
}  // namespace protocol

// The virtio-net features offered for a device with `queue_pairs` queue pairs.
constexpr uint64_t offered_net_features(uint32_t queue_pairs) {
  return feature::kVersion1 | feature::kNetMrgRxbuf | feature::kRingEventIdx | feature::kRingIndirectDesc |
         feature::kNetMtu | feature::kNetStatus | feature::kNetGuestAnnounce | feature::kProtocolFeatures |
         feature::kLogAll | (queue_pairs > 1 ? feature::kNetMq : 0);
}

}  // namespace uvhost::vhost_user
