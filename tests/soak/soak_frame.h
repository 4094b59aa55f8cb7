// soak_frame.h - the frames the soak driver sends on each port and the check of what
// comes back through a loopback port.
//
// Contract
// --------
//  - A frame is an Ethernet frame (EtherType 0x88B5, local experimental) carrying
//    port index, connection number and a per-connection sequence number, then a
//    payload whose every byte is a function of (port, connection, sequence, offset).
//    Its length is a function of the sequence number too (kMinBytes..kMaxBytes), so a
//    frame truncated, padded or swapped with another one is seen.
//  - fill_frame() writes frame `seq` of (port, connection) into `out` (kMaxBytes at
//    least) and returns its length.
//  - check_echo() checks a frame that came back through uvhost's loopback backend
//    (source and destination MACs swapped) against the frame that was sent: it
//    returns an empty string when it matches exactly, else what differs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace uvhost::soak {

inline constexpr size_t kMinBytes = 64;
inline constexpr size_t kMaxBytes = 256;

struct FrameId {
  uint16_t port = 0;
  uint32_t connection = 0;
  uint64_t seq = 0;
};

size_t frame_bytes(uint64_t seq) noexcept;
size_t fill_frame(const FrameId& id, std::span<std::byte> out) noexcept;
// `expected` is the frame the receiver waits for next (order is part of the check).
std::string check_echo(std::span<const std::byte> frame, const FrameId& expected);

}  // namespace uvhost::soak
