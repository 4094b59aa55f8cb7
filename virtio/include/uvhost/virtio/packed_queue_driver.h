// packed_queue_driver.h - the driver (guest) side of one packed virtqueue
// (VIRTIO_F_RING_PACKED; the layout is in packed_ring_layout.h).
//
// Contract
// --------
//  - PackedDriverQueue has DriverQueue's interface and roles (split_queue_driver.h): it
//    lays out the descriptor ring, the two event suppression areas and a pool of
//    indirect tables in one area the device can reach, and plays the guest. It is the
//    trusted side (misuse by its caller aborts); the device is not trusted: a used
//    descriptor naming a buffer id out of range or not in flight stops reaping for good
//    and device_misbehaved() turns true.
//  - Buffer ids are handed out from a free list; each chain takes as many ring slots as
//    it has buffers (one if indirect). add_chain() writes every descriptor but the
//    chain's first one's flags; publish() stores those (release, in order), so the
//    device sees each chain whole, then decides on the kick from the device's area (a
//    full fence between, as on a split ring).
//  - reap(): the used descriptor at our position, its flags loaded with acquire (pairs
//    with the device's release store), then its id and length; the position moves by
//    the slots that chain took. With options.in_order it also takes the device's
//    batched update (one used descriptor for a batch, carrying the batch's last id,
//    the device skipping the rest of the batch's slots): the chains made available
//    before that id are returned first, each with length 0, in order.
//  - options.initial_index places both positions at initial_index % size with wrap
//    counter 1 (wrap-around tests); base() is that start as the vhost-user ring base
//    to give the device (DeviceQueue::set_last_avail_index) before it starts, even
//    after chains were added (receive buffers posted before the ring starts).
//  - One thread at a time; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "uvhost/virtio/packed_ring_layout.h"
#include "uvhost/virtio/split_queue.h"
#include "uvhost/virtio/split_queue_driver.h"

namespace uvhost::virtio {

class PackedDriverQueue {
 public:
  using Kick = DriverQueue::Kick;
  using Buffer = DriverQueue::Buffer;

  static size_t required_bytes(const DriverOptions& options);

  PackedDriverQueue(const DriverOptions& options, DriverRingArea area, Kick kick = {});

  QueueConfig device_config() const;
  // The base the ring started at (before any chain was added).
  uint16_t base() const noexcept { return start_.encode(); }

  std::optional<uint16_t> add_chain(std::span<const Buffer> buffers, bool indirect = false);
  bool publish();
  std::optional<UsedElement> reap();
  bool device_misbehaved() const noexcept { return device_misbehaved_; }

  void disable_interrupts();
  [[nodiscard]] bool enable_interrupts();

  // Whether a device stopped at `base` (GET_VRING_BASE's avail side: position | wrap
  // << 15) can have got there: between our next used slot and our next avail slot.
  bool stopped_base_plausible(uint16_t base) const noexcept;

  uint16_t free_descriptors() const noexcept { return free_slots_; }
  uint16_t in_flight() const noexcept { return in_flight_; }
  uint32_t kicks() const noexcept { return kicks_; }

  // Raw access for tests that play a hostile guest or device.
  std::byte* desc_ring() const noexcept { return desc_; }
  std::byte* driver_area() const noexcept { return driver_area_; }
  std::byte* device_area() const noexcept { return device_area_; }
  PackedPosition next_avail() const noexcept { return next_avail_; }
  PackedPosition next_used() const noexcept { return next_used_; }

 private:
  struct Pending {
    uint16_t slot;   // the chain's first descriptor
    uint16_t flags;  // its flags, stored by publish()
    uint16_t id;
  };
  UsedElement complete(uint16_t id, uint32_t len);
  std::optional<UsedElement> reap_in_order(uint16_t id, uint32_t len);
  void request_interrupt_at_next_used();

  DriverOptions options_;
  Kick kick_;
  std::byte* desc_ = nullptr;
  std::byte* driver_area_ = nullptr;
  std::byte* device_area_ = nullptr;
  std::byte* indirect_ = nullptr;
  uint64_t desc_guest_ = 0, driver_area_guest_ = 0, device_area_guest_ = 0, indirect_guest_ = 0;

  std::vector<uint16_t> free_ids_;        // a stack of buffer ids not in flight
  std::vector<uint16_t> slots_of_id_;     // ring slots each id's chain took
  enum class IdState : uint8_t { kFree, kAdded, kPublished };
  std::vector<IdState> id_state_;         // per buffer id
  std::vector<uint16_t> avail_order_;     // in_order: ids in the order they were added (a ring)
  size_t avail_order_head_ = 0;           // in_order: oldest id still in flight
  size_t avail_order_count_ = 0;          // in_order: ids in the ring from the head
  size_t avail_order_published_ = 0;      // in_order: how many of them were published
  std::vector<Pending> pending_heads_;    // chains added, first flags not yet stored
  std::vector<UsedElement> batch_;        // in_order: chains of a batch still to return
  size_t batch_next_ = 0;

  PackedPosition start_;                  // where both positions started
  PackedPosition next_avail_;             // next slot to fill
  PackedPosition next_used_;              // next slot to reap
  uint16_t free_slots_ = 0;
  uint16_t in_flight_ = 0;
  bool interrupts_enabled_ = true;
  bool device_misbehaved_ = false;
  uint32_t kicks_ = 0;
};

}  // namespace uvhost::virtio
