// packed_ring_layout.h - the packed virtqueue's wire format (virtio 1.2, 2.8 "Packed
// Virtqueues", VIRTIO_F_RING_PACKED) and the arithmetic both sides share.
//
// Contract
// --------
//  - Pure constants and constexpr functions; no memory is touched here.
//  - Layout (all fields little-endian, as ring_layout.h assumes of the host):
//      descriptor ring: `size` 16-byte descriptors {le64 addr, le32 len, le16 id,
//                       le16 flags}, aligned to 16. The driver writes available
//                       descriptors into it and the device writes used ones back into
//                       the same slots;
//      driver event suppression (the driver area): {le16 off_wrap, le16 flags}, aligned
//                       to 4, written by the driver: when it wants used-buffer
//                       notifications (the device's calls);
//      device event suppression (the device area): the same structure, written by the
//                       device: when it wants available-buffer notifications (kicks).
//  - Each side walks the ring with a position and a wrap counter that starts at 1 and
//    flips each time the position passes the end. A descriptor is available when its
//    AVAIL flag equals the driver's wrap counter and its USED flag does not; it is used
//    when both equal the device's wrap counter.
//  - A chain is consecutive descriptors linked by NEXT (it may run past the end of the
//    ring); its buffer id is in its last descriptor. An INDIRECT descriptor is a chain of
//    its own (never with NEXT) whose table's entries follow each other (no `next`).
//  - Queue size: 1..32768, not necessarily a power of two.
//  - A ring's base for vhost-user SET/GET_VRING_BASE: position | wrap counter << 15.
#pragma once

#include <cstddef>
#include <cstdint>

#include "uvhost/virtio/ring_layout.h"

namespace uvhost::virtio {

inline constexpr uint16_t kPackedDescFlagAvail = 1u << 7;
inline constexpr uint16_t kPackedDescFlagUsed = 1u << 15;

// Byte offsets inside a packed descriptor.
inline constexpr size_t kPackedDescLenOffset = 8;
inline constexpr size_t kPackedDescIdOffset = 12;
inline constexpr size_t kPackedDescFlagsOffset = 14;

// Event suppression structure (both areas).
inline constexpr size_t kPackedEventOffWrapOffset = 0;
inline constexpr size_t kPackedEventFlagsOffset = 2;
inline constexpr size_t kPackedEventAreaBytes = 4;
inline constexpr size_t kPackedEventAreaAlign = 4;
inline constexpr uint16_t kPackedEventEnable = 0;   // notify every time
inline constexpr uint16_t kPackedEventDisable = 1;  // never notify
inline constexpr uint16_t kPackedEventDesc = 2;     // notify once off_wrap is passed (VIRTIO_F_EVENT_IDX)
inline constexpr unsigned kPackedWrapShift = 15;    // wrap counter bit of off_wrap and of a ring base

struct PackedDescriptor {
  uint64_t addr = 0;
  uint32_t len = 0;
  uint16_t id = 0;
  uint16_t flags = 0;
};
static_assert(sizeof(PackedDescriptor) == kDescriptorSize);

// The same 16 bytes as a split Descriptor loads them (flags/next hold id/flags).
constexpr PackedDescriptor as_packed(const Descriptor& d) noexcept { return {d.addr, d.len, d.flags, d.next}; }

constexpr bool is_valid_packed_queue_size(uint32_t size) noexcept { return size >= 1 && size <= kMaxQueueSize; }

constexpr bool packed_desc_available(uint16_t flags, bool driver_wrap) noexcept {
  return ((flags & kPackedDescFlagAvail) != 0) == driver_wrap && ((flags & kPackedDescFlagUsed) != 0) != driver_wrap;
}
constexpr bool packed_desc_used(uint16_t flags, bool device_wrap) noexcept {
  return ((flags & kPackedDescFlagAvail) != 0) == device_wrap && ((flags & kPackedDescFlagUsed) != 0) == device_wrap;
}
// The flags the driver writes to make a descriptor available, the device to mark it used.
constexpr uint16_t packed_avail_flags(bool driver_wrap) noexcept {
  return driver_wrap ? kPackedDescFlagAvail : kPackedDescFlagUsed;
}
constexpr uint16_t packed_used_flags(bool device_wrap) noexcept {
  return device_wrap ? static_cast<uint16_t>(kPackedDescFlagAvail | kPackedDescFlagUsed) : uint16_t{0};
}

// A position in the descriptor ring with its wrap counter.
struct PackedPosition {
  uint16_t index = 0;
  bool wrap = true;

  constexpr void advance(uint32_t slots, uint32_t size) noexcept {
    uint32_t next = index + slots;
    if (next >= size) {
      next -= size;
      wrap = !wrap;
    }
    index = static_cast<uint16_t>(next);
  }
  constexpr void retreat(uint32_t slots, uint32_t size) noexcept {
    if (index >= slots) {
      index = static_cast<uint16_t>(index - slots);
    } else {
      index = static_cast<uint16_t>(index + size - slots);
      wrap = !wrap;
    }
  }
  // off_wrap, or a vhost-user ring base.
  constexpr uint16_t encode() const noexcept {
    return static_cast<uint16_t>(index | (wrap ? 1u << kPackedWrapShift : 0u));
  }
  static constexpr PackedPosition decode(uint16_t value) noexcept {
    return {static_cast<uint16_t>(value & ((1u << kPackedWrapShift) - 1)), (value >> kPackedWrapShift) != 0};
  }
  constexpr bool operator==(const PackedPosition&) const noexcept = default;
};

// VIRTIO_F_EVENT_IDX in DESC mode: the other side asked to be notified once our position
// passes `off_wrap`. We moved `moved` slots and are now at `now`. As need_event() on a
// split ring, with the event's position put on the same lap as `now` first (a wrap
// counter that differs means the previous lap).
constexpr bool packed_need_event(uint16_t off_wrap, PackedPosition now, uint32_t moved, uint32_t size) noexcept {
  if (moved >= size) return true;
  const PackedPosition event = PackedPosition::decode(off_wrap);
  uint16_t event_index = event.index;
  if (event.wrap != now.wrap) event_index = static_cast<uint16_t>(event_index - size);
  return need_event(event_index, now.index, static_cast<uint16_t>(now.index - moved));
}

}  // namespace uvhost::virtio
