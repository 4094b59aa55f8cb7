// rarp_frame.h - the announcement a migrated guest's backend sends for it
// (VHOST_USER_SEND_RARP): the frame QEMU's own qemu_announce_self() builds, so switches
// and bridges on the host side move the guest's MAC to the port it now lives behind.
//
// Contract
// --------
//  - rarp_announcement(mac): 60 bytes (the Ethernet minimum without FCS): destination
//    broadcast, source `mac`, ethertype 0x8035 (RARP), then a RARP "request reverse"
//    (opcode 3) for Ethernet/IPv4 with `mac` as sender and target hardware address and
//    0.0.0.0 as both protocol addresses, zero padding.
//  - is_rarp_announcement(frame, mac): whether `frame` is exactly that frame (tests and
//    diagnostics).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace uvhost::backends {

inline constexpr size_t kRarpFrameSize = 60;
inline constexpr uint16_t kEtherTypeRarp = 0x8035;

using MacAddress = std::array<uint8_t, 6>;

std::array<std::byte, kRarpFrameSize> rarp_announcement(const MacAddress& mac) noexcept;
bool is_rarp_announcement(std::span<const std::byte> frame, const MacAddress& mac) noexcept;

}  // namespace uvhost::backends
