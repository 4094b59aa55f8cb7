// net_features.h - the virtio-net feature bits the backends look at (virtio 1.2,
// 5.1.3): what a guest may transmit (CSUM, HOST_*: which offloads its headers may ask
// the device for) and what it can receive (GUEST_*: which offloads the device may hand
// it). Bit numbers, not masks: `has(features, bit)` tests one.
#pragma once

#include <cstdint>

namespace uvhost::backends::net_feature {

// Transmit side: the guest sends frames with these offloads.
inline constexpr unsigned kCsum = 0;       // VIRTIO_NET_F_CSUM: partial checksums (NEEDS_CSUM)
inline constexpr unsigned kHostTso4 = 11;  // VIRTIO_NET_F_HOST_TSO4: gso_type TCPV4 (needs CSUM)
inline constexpr unsigned kHostTso6 = 12;  // VIRTIO_NET_F_HOST_TSO6: gso_type TCPV6 (needs CSUM)
inline constexpr unsigned kHostEcn = 13;   // VIRTIO_NET_F_HOST_ECN: the ECN bit of gso_type
inline constexpr unsigned kHostUfo = 14;   // VIRTIO_NET_F_HOST_UFO: gso_type UDP (needs CSUM)
inline constexpr unsigned kHostUso = 56;   // VIRTIO_NET_F_HOST_USO: gso_type UDP_L4 (needs CSUM)

// Receive side: the guest takes frames with these offloads.
inline constexpr unsigned kGuestCsum = 1;   // VIRTIO_NET_F_GUEST_CSUM: partial checksums
inline constexpr unsigned kGuestTso4 = 7;   // VIRTIO_NET_F_GUEST_TSO4 (needs GUEST_CSUM)
inline constexpr unsigned kGuestTso6 = 8;   // VIRTIO_NET_F_GUEST_TSO6 (needs GUEST_CSUM)
inline constexpr unsigned kGuestEcn = 9;    // VIRTIO_NET_F_GUEST_ECN (needs TSO4 or TSO6)
inline constexpr unsigned kGuestUfo = 10;   // VIRTIO_NET_F_GUEST_UFO (needs GUEST_CSUM)
inline constexpr unsigned kGuestUso4 = 54;  // VIRTIO_NET_F_GUEST_USO4 (needs GUEST_CSUM)
inline constexpr unsigned kGuestUso6 = 55;  // VIRTIO_NET_F_GUEST_USO6 (needs GUEST_CSUM)

// Every transmit offload above, as a feature mask (a sender that may send them all).
inline constexpr uint64_t kAllTransmitOffloads = (uint64_t{1} << kCsum) | (uint64_t{1} << kHostTso4) |
                                                 (uint64_t{1} << kHostTso6) | (uint64_t{1} << kHostEcn) |
                                                 (uint64_t{1} << kHostUfo) | (uint64_t{1} << kHostUso);

constexpr bool has(uint64_t features, unsigned bit) noexcept { return ((features >> bit) & 1U) != 0; }

}  // namespace uvhost::backends::net_feature
