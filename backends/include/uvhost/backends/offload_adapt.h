// offload_adapt.h - fitting a frame's virtio-net offload header to what the receiving
// guest negotiated, for frames that go from one guest to another (the switch) or back
// to the guest that sent them (loopback).
//
// Contract
// --------
//  A guest may transmit frames with offloads (a partial checksum: NEEDS_CSUM; a GSO
//  super-frame: gso_type) when it negotiated the host-side features, but a guest may
//  be handed such a frame only if it negotiated the matching receive features
//  (VIRTIO_NET_F_GUEST_*; virtio 1.2, 5.1.6.4). A frame with offloads is checked once
//  against its sender's features (validate_offload, offload_validate.h: a frame that
//  fails is dropped, never handed on), then fitted to each receiver:
//  - offload_fit(header, layout, features): what the receiver needs done to the
//    validated frame: kSegment (GSO it cannot take: !gso_acceptable), else
//    kCompleteChecksum (a partial checksum and no GUEST_CSUM), else kAsIs (the frame
//    goes as it is, with delivered_header(header)).
//  - delivered_header(header): the header a receiver gets with a frame passed as it
//    is: num_buffers 0, no flag but NEEDS_CSUM (DATA_VALID / RSC_INFO from a sender
//    mean nothing: a driver must not set them, and nobody validated a checksum).
//  - gso_acceptable(header, features): false when the header asks for segmentation the
//    receiver cannot take: TCPv4 without GUEST_TSO4, TCPv6 without GUEST_TSO6, UDP
//    (UFO) without GUEST_UFO, UDP_L4 (USO) without both GUEST_USO4 and GUEST_USO6 (the
//    IP version is not looked at), the ECN bit without GUEST_ECN, any of them without
//    GUEST_CSUM, or an unknown gso_type. Cheap: decide before copying the frame.
//  - inject_segments(injector, pair, layout, frame, features, ipv6_fragment_id): for
//    such a receiver, the frame (validated, with this layout) is segmented in software
//    (gso_segment.h): each segment a Packet of its own, TCP/UDP checksums left partial
//    (NEEDS_CSUM) when the receiver has GUEST_CSUM and complete otherwise, injected in
//    order into `pair`. Stops at the first segment the injector refuses; returns how
//    many it took (layout.segments when all). ipv6_fragment_id is used by UFO over
//    IPv6: Ipv6FragmentIds::for_layout(layout) gives such a frame the next id of a
//    counter with a random start (0, unused, for any other frame); any thread.
//  - adapt_checksum(packet, features): for a receiver without GUEST_CSUM, completes a
//    partial checksum in software (complete_checksum, inet_checksum.h: the
//    one's-complement sum from csum_start to the end, stored at csum_start +
//    csum_offset, 0 stored as 0xffff) and clears every flag (the spec lets a device set
//    flags only with GUEST_CSUM). kBadRange (drop the frame) when the checksum field
//    does not lie inside the frame. Receivers with GUEST_CSUM get the header as it is.
//  - Plain functions, no state (Ipv6FragmentIds: one atomic counter).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "uvhost/backends/offload_validate.h"
#include "uvhost/backends/packet.h"
#include "uvhost/backends/port_backend.h"
#include "uvhost/virtio/net_header.h"

namespace uvhost::backends {

enum class OffloadFit : uint8_t { kAsIs, kSegment, kCompleteChecksum };
enum class ChecksumAdapt : uint8_t { kAsIs, kCompleted, kBadRange };

class Ipv6FragmentIds {
 public:
  Ipv6FragmentIds();
  uint32_t for_layout(const OffloadLayout& layout) noexcept;

 private:
  std::atomic<uint32_t> next_;  // relaxed fetch_add: ids need only differ
};

OffloadFit offload_fit(const virtio::NetHeader& header, const OffloadLayout& layout, uint64_t guest_features) noexcept;
virtio::NetHeader delivered_header(const virtio::NetHeader& header) noexcept;
bool gso_acceptable(const virtio::NetHeader& header, uint64_t guest_features) noexcept;
size_t inject_segments(RxInjector& injector, uint32_t pair, const OffloadLayout& layout,
                       std::span<const std::byte> frame, uint64_t guest_features, uint32_t ipv6_fragment_id);
ChecksumAdapt adapt_checksum(Packet& packet, uint64_t guest_features) noexcept;

}  // namespace uvhost::backends
