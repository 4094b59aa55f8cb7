// frontend_queue.h - the per-queue-pair state of the embedded frontend (frontend.h):
// an RX and a TX virtio::DriverRing (split or packed) with their eventfds and packet
// buffers.
//
// Contract
// --------
//  - Internal to the frontend; public only so that frontend.cpp and frontend_queue.cpp
//    share it. Every buffer lives in the frontend's shared memfd: `slot` i of a vring
//    is the buffer at buffers_host + i * buffer_size (guest address buffers_guest + ...).
//  - A head (buffer id) handed out by the DriverRing maps to the slot its first descriptor points at
//    (slot_of_head); kNoSlot marks heads the device does not own. RX chains are one
//    descriptor (one slot) each. A TX frame larger than one buffer is a chain of
//    several descriptors, one slot each: tx_next_slot links the slots of one chain in
//    descriptor order (kNoSlot ends it). Every TX descriptor owns exactly one slot, so
//    tx_free_slots.size() == the TX DriverRing's free_descriptors() at all times.
//  - An RX packet that spans several buffers (MRG_RXBUF) is assembled in `assembly`
//    across poll_rx calls if the device has published only part of it so far.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "uvhost/base/unique_fd.h"
#include "uvhost/virtio/net_header.h"
#include "uvhost/virtio/driver_ring.h"

namespace uvhost::vhost_user {

struct FrontendVring {
  static constexpr uint16_t kNoSlot = 0xffff;

  uint32_t index = 0;  // vring number on the wire
  std::unique_ptr<virtio::DriverRing> queue;
  base::UniqueFd kick;
  base::UniqueFd call;
  base::UniqueFd err;  // FrontendOptions::err_fds
  std::byte* ring_host = nullptr;
  size_t ring_bytes = 0;
  std::byte* buffers_host = nullptr;
  uint64_t buffers_guest = 0;
  std::vector<uint16_t> slot_of_head;

  std::byte* slot_host(uint16_t slot, uint32_t buffer_size) const noexcept {
    return buffers_host + size_t{slot} * buffer_size;
  }
  uint64_t slot_guest(uint16_t slot, uint32_t buffer_size) const noexcept {
    return buffers_guest + uint64_t{slot} * buffer_size;
  }
};

struct FrontendQueuePair {
  FrontendVring rx;
  FrontendVring tx;
  std::vector<uint16_t> tx_free_slots;
  std::vector<uint16_t> tx_next_slot;                 // per TX slot: the next slot of its chain
  std::vector<virtio::DriverRing::Buffer> tx_chain;   // scratch: the chain being added
  bool tx_unpublished = false;

  // MRG_RXBUF assembly of a packet spread over several buffers.
  std::vector<std::byte> assembly;
  virtio::NetHeader assembly_header;
  uint16_t assembly_remaining = 0;
};

}  // namespace uvhost::vhost_user
