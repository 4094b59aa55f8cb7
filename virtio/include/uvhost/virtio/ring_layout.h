// ring_layout.h - the split virtqueue's wire format (virtio 1.x, "Split Virtqueues")
// and the notification-suppression arithmetic shared by both sides.
//
// Contract
// --------
//  - Pure constants and constexpr functions; no memory is touched here.
//  - Layout (all fields little-endian; this code assumes a little-endian host):
//      descriptor table: 16-byte descriptors {le64 addr, le32 len, le16 flags, le16 next},
//                        aligned to 16;
//      avail ring (driver area):  le16 flags, le16 idx, le16 ring[size], le16 used_event
//                        (used_event only with VIRTIO_F_EVENT_IDX), aligned to 2;
//      used ring (device area):   le16 flags, le16 idx, {le32 id, le32 len} ring[size],
//                        le16 avail_event (only with VIRTIO_F_EVENT_IDX), aligned to 4.
//  - Queue size is a power of two, 1..32768.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace uvhost::virtio {

static_assert(std::endian::native == std::endian::little,
              "virtio rings are little-endian; uvhost reads them without byte swaps");

inline constexpr uint16_t kDescFlagNext = 1;      // chain continues at `next`
inline constexpr uint16_t kDescFlagWrite = 2;     // device-writable (else device-readable)
inline constexpr uint16_t kDescFlagIndirect = 4;  // addr/len point to a descriptor table

inline constexpr uint16_t kAvailFlagNoInterrupt = 1;  // driver: "don't signal me"
inline constexpr uint16_t kUsedFlagNoNotify = 1;      // device: "don't kick me"

inline constexpr unsigned kFeatureIndirectDesc = 28;
inline constexpr unsigned kFeatureEventIdx = 29;
inline constexpr unsigned kFeatureVersion1 = 32;

inline constexpr uint32_t kMaxQueueSize = 32768;

inline constexpr size_t kDescriptorSize = 16;
inline constexpr size_t kDescTableAlign = 16;
inline constexpr size_t kAvailRingAlign = 2;
inline constexpr size_t kUsedRingAlign = 4;

struct Descriptor {
  uint64_t addr = 0;
  uint32_t len = 0;
  uint16_t flags = 0;
  uint16_t next = 0;
};
static_assert(sizeof(Descriptor) == kDescriptorSize);

struct UsedElement {
  uint32_t id = 0;
  uint32_t len = 0;
};
static_assert(sizeof(UsedElement) == 8);

// Byte offsets inside the rings.
inline constexpr size_t kRingFlagsOffset = 0;
inline constexpr size_t kRingIdxOffset = 2;
inline constexpr size_t kRingEntriesOffset = 4;
constexpr size_t avail_entry_offset(uint32_t i) noexcept { return kRingEntriesOffset + 2u * i; }
constexpr size_t used_entry_offset(uint32_t i) noexcept { return kRingEntriesOffset + 8u * i; }
constexpr size_t used_event_offset(uint32_t size) noexcept { return avail_entry_offset(size); }
constexpr size_t avail_event_offset(uint32_t size) noexcept { return used_entry_offset(size); }

constexpr size_t desc_table_bytes(uint32_t size) noexcept { return kDescriptorSize * size; }
constexpr size_t avail_ring_bytes(uint32_t size, bool event_idx) noexcept {
  return avail_entry_offset(size) + (event_idx ? 2u : 0u);
}
constexpr size_t used_ring_bytes(uint32_t size, bool event_idx) noexcept {
  return used_entry_offset(size) + (event_idx ? 2u : 0u);
}

// Alignment arithmetic for ring addresses and layouts (`alignment` a power of two).
constexpr bool is_aligned(uint64_t value, size_t alignment) noexcept { return (value & (alignment - 1)) == 0; }
inline bool is_aligned(const std::byte* p, size_t alignment) noexcept {
  return is_aligned(reinterpret_cast<uintptr_t>(p), alignment);
}
constexpr size_t align_up(size_t value, size_t alignment) noexcept { return (value + alignment - 1) & ~(alignment - 1); }

constexpr bool is_valid_queue_size(uint32_t size) noexcept {
  return size >= 1 && size <= kMaxQueueSize && std::has_single_bit(size);
}

// VIRTIO_F_EVENT_IDX: the other side asked to be notified once the index it watches
// moves past `event` (it wrote `event` = the last index it has seen). We moved the index
// from old_idx to new_idx; notify iff `event` lies in [old_idx, new_idx), computed
// modulo 2^16 so that it keeps working when the indices wrap around 65535 -> 0.
constexpr bool need_event(uint16_t event, uint16_t new_idx, uint16_t old_idx) noexcept {
  return static_cast<uint16_t>(new_idx - event - 1) < static_cast<uint16_t>(new_idx - old_idx);
}

}  // namespace uvhost::virtio
