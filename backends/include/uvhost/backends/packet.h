// packet.h - one Ethernet frame with its virtio-net header, owned by whoever holds the
// pointer: what backends hand to the datapath for a guest's receive queue (and what
// moves between ports through the switch).
//
// Contract
// --------
//  - `header` is the virtio-net header the guest will see (offload fields only:
//    num_buffers is the datapath's business); `frame` is the Ethernet frame, starting
//    at the destination MAC.
//  - A Packet is plain data: no thread affinity; the pointer moves between threads
//    through the datapath's frame rings, which order it (release/acquire).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "uvhost/virtio/net_header.h"

namespace uvhost::backends {

struct Packet {
  virtio::NetHeader header;
  std::vector<std::byte> frame;

  Packet() = default;
  Packet(const virtio::NetHeader& h, std::span<const std::byte> bytes) : header(h), frame(bytes.begin(), bytes.end()) {}
};

using PacketPtr = std::unique_ptr<Packet>;

inline PacketPtr make_packet(const virtio::NetHeader& header, std::span<const std::byte> frame) {
  return std::make_unique<Packet>(header, frame);
}

}  // namespace uvhost::backends
