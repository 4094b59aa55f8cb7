// flow_hash.h - which conversation an Ethernet frame belongs to, as a 32-bit hash that
// is the same for both of its directions, and whether it is a TCP segment without
// payload: what the switch picks a receiving port's queue pair by
// (receive_steering.h), as a NIC's RSS or Linux's tun does.
//
// Contract
// --------
//  frame_flow(frame) (and flow_hash(frame), its hash alone) reads the frame's bytes
//  only, each read checked against its size (any length and content: a frame a hostile
//  guest made, or one cut short), allocates nothing, and depends on nothing but those
//  bytes. What it hashes (the key):
//   - IP: after the Ethernet header and at most two VLAN tags (802.1Q or 802.1ad), an
//     IPv4 header (version 4, IHL >= 5, the whole header in the frame) or an IPv6
//     header (version 6, its 40 bytes in the frame; hop-by-hop, routing and
//     destination-options headers and a fragment header are walked, at most
//     kFlowHashIpv6Headers of them, each only as far as the frame holds it; the
//     protocol is the Next Header where the walk stopped):
//       * TCP or UDP, not a fragment, both ports in the frame: the addresses, the
//         ports and the protocol;
//       * otherwise (another protocol; any fragment: IPv4 with MF or an offset, IPv6
//         with a fragment header that has M or an offset; ports cut off): the
//         addresses and the protocol. So every fragment of a datagram hashes alike.
//   - Anything else (not IP, or its IP header cut off or malformed): the two MAC
//     addresses (a frame without both of them: a constant).
//  Symmetric: the two (address, port) endpoints are hashed in a fixed order, the lesser
//  first (addresses compared as bytes, then ports), and so are the two MACs; a frame
//  and its answer (addresses and ports swapped) get the same hash. The VLAN tags and
//  the IPv6 flow label are not part of the key. IPv4, IPv6 and MAC keys hash apart.
//  Every bit of the result depends on every bit of the key (a final 64-bit mix), so
//  any subset of its bits (an index, a tag, hash % n) spreads flows evenly.
//
//  FrameFlow::tcp_without_payload: the frame is a TCP segment (not a fragment, its
//  ports in the frame) whose IP packet, as long as the IP header's length field says,
//  ends exactly where its TCP header (data offset >= 5 words, that byte in the frame)
//  does: a pure ACK, SYN, FIN or RST. Ethernet padding after the IP packet does not
//  count; an IP length that does not end there (0 in a GSO frame, a lie) is not
//  "without payload".
//
//  No secret seed: the hash only chooses which of a receiving guest's queues a frame
//  takes. A sender that crafts flows to collide gains nothing it could not get by
//  sending one flow, and a collision never loses or misdirects a frame.
//
//  Cost: a few bounds-checked loads and about a dozen multiplications; no loop over
//  the frame's bytes (the IPv6 walk is bounded).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uvhost::backends {

inline constexpr size_t kFlowHashIpv6Headers = 8;  // extension headers walked, at most

struct FrameFlow {
  uint32_t hash = 0;
  bool tcp_without_payload = false;
};

FrameFlow frame_flow(std::span<const std::byte> frame) noexcept;

inline uint32_t flow_hash(std::span<const std::byte> frame) noexcept { return frame_flow(frame).hash; }

}  // namespace uvhost::backends
