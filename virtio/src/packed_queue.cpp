// packed_queue.cpp - the device side of a packed virtqueue (VIRTIO_F_RING_PACKED):
// DeviceQueue's operations when config().packed (the contract is in split_queue.h).
#include <algorithm>
#include <atomic>
#include <bit>
#include <utility>

#include <fmt/format.h>

#include "packed_chain_walker.h"
#include "uvhost/virtio/detail/ring_access.h"
#include "uvhost/virtio/packed_ring_layout.h"
#include "uvhost/virtio/split_queue.h"

namespace uvhost::virtio {

using detail::ring_load;
using detail::ring_store;

namespace {

uint16_t load_flags(const std::byte* desc_ring, uint32_t slot, std::memory_order order) noexcept {
  return ring_load<uint16_t>(desc_ring + size_t{slot} * kDescriptorSize + kPackedDescFlagsOffset, order);
}

}  // namespace

bool DeviceQueue::start_packed(const GuestMemoryMap& memory) {
  if (!is_valid_packed_queue_size(config_.size)) {
    fail(QueueError::kBadQueueSize, fmt::format("packed ring size {}", config_.size));
    return false;
  }
  if (!is_aligned(config_.desc_addr, kDescTableAlign) || !is_aligned(config_.avail_addr, kPackedEventAreaAlign) ||
      !is_aligned(config_.used_addr, kPackedEventAreaAlign)) {
    fail(QueueError::kRingMisaligned, fmt::format("packed: descriptors {:#x} driver area {:#x} device area {:#x}",
                                                  config_.desc_addr, config_.avail_addr, config_.used_addr));
    return false;
  }
  const PackedPosition base = PackedPosition::decode(last_avail_);
  if (base.index >= config_.size) {
    fail(QueueError::kRingBaseOutOfRange, fmt::format("base {:#x}: position {} in a ring of {}", last_avail_,
                                                      base.index, config_.size));
    return false;
  }
  // A power of two: chain counts are masked into the shadow and the slot counts.
  const uint32_t capacity = std::bit_ceil(config_.size);
  index_mask_ = static_cast<uint16_t>(capacity - 1);
  rings_generation_ = 0;
  miss_generation_ = 0;
  // With an IOTLB the rings may not translate yet: resolved on first use (split_queue.h).
  if (!resolve_packed_rings(memory) && is_broken()) return false;
  shadow_ = std::make_unique<UsedElement[]>(capacity);
  popped_slots_ = std::make_unique<uint16_t[]>(capacity);
  packed_avail_ = base;
  packed_used_ = base;
  popped_ = used_idx_ = published_used_ = 0;
  slots_held_ = slots_since_signal_ = 0;
  signalled_valid_ = false;
  published_pieces_ = 0;
  started_ = true;
  return true;
}

bool DeviceQueue::resolve_packed_rings(const GuestMemoryMap& memory) {
  const bool by_guest = config_.address_space == AddressSpace::kGuestPhysical;
  auto translate = [&](const TranslationNeed& area) {
    return by_guest ? memory.translate_contiguous(area.addr, area.len, area.access)
                    : memory.translate_frontend_contiguous(area.addr, area.len);
  };
  const TranslationNeed desc_ring{config_.desc_addr, desc_table_bytes(config_.size), Access::kReadWrite};
  const TranslationNeed driver{config_.avail_addr, kPackedEventAreaBytes, Access::kRead};
  const TranslationNeed device{config_.used_addr, kPackedEventAreaBytes, Access::kWrite};
  std::byte* desc = translate(desc_ring);
  std::byte* driver_area = translate(driver);
  std::byte* device_area = translate(device);
  if (desc == nullptr || driver_area == nullptr || device_area == nullptr) {
    if (ring_translation_missed(memory, {desc_ring, driver, device})) return false;
    fail(QueueError::kRingNotMapped,
         fmt::format("packed: descriptors {:#x} driver area {:#x} device area {:#x} size {}{}", config_.desc_addr,
                     config_.avail_addr, config_.used_addr, config_.size, by_guest ? "" : " (frontend addresses)"));
    return false;
  }
  if (!is_aligned(desc, kDescTableAlign) || !is_aligned(driver_area, kPackedEventAreaAlign) ||
      !is_aligned(device_area, kPackedEventAreaAlign)) {
    fail(QueueError::kRingMisaligned, "packed rings are misaligned in host memory (region mmap offset)");
    return false;
  }
  desc_ = desc;
  avail_ = driver_area;
  used_ = device_area;
  rings_generation_ = memory.generation();
  return true;
}

uint16_t DeviceQueue::available_packed(uint16_t enough, uint32_t* slots_counted) {
  // Reads the flags of each chain's first descriptor (acquire: what follows it in the
  // chain is then visible) and the NEXT flags of the rest, over at most the slots the
  // driver can have made available. Validates nothing: pop_burst() does.
  const uint32_t size = config_.size;
  const uint32_t free_slots = size - slots_held_;
  PackedPosition at = packed_avail_;
  uint16_t chains = 0;
  uint32_t slots = 0;
  while (chains < enough && slots < free_slots) {
    if (!packed_desc_available(load_flags(desc_, at.index, std::memory_order_acquire), at.wrap)) break;
    uint32_t slot = at.index;
    uint32_t length = 1;
    while ((load_flags(desc_, slot, std::memory_order_relaxed) & kDescFlagNext) != 0 && slots + length < free_slots) {
      if (++slot == size) slot = 0;
      ++length;
    }
    at.advance(length, size);
    slots += length;
    ++chains;
  }
  if (slots_counted != nullptr) *slots_counted = slots;
  return chains;
}

size_t DeviceQueue::pop_burst_packed(const GuestMemoryMap& memory, std::span<DescriptorChain> chains,
                                     ChainDirection direction) {
  const detail::PackedWalkContext context{memory,         desc_, config_.size, config_.indirect_desc, direction,
                                          indirect_table_, failed_translation_};
  std::string detail;
  size_t count = 0;
  for (; count < chains.size(); ++count) {
    // acquire: pairs with the driver's release store of this flags field, written after
    // the chain's other descriptors, so the relaxed loads of the walk see them.
    const uint16_t flags = load_flags(desc_, packed_avail_.index, std::memory_order_acquire);
    if (!packed_desc_available(flags, packed_avail_.wrap)) break;
    uint32_t slots = 0;
    const QueueError error =
        detail::walk_packed_chain(context, packed_avail_.index, config_.size - slots_held_, chains[count], slots, detail);
    if (error != QueueError::kNone) [[unlikely]] {
      // An IOTLB miss: this chain waits (unconsumed) for the translation.
      if (is_translation_failure(error) && chain_translation_missed(memory)) break;
      fail(error, fmt::format("packed ring position {} (wrap {}): {}", packed_avail_.index, packed_avail_.wrap ? 1 : 0,
                              detail));
      break;
    }
    popped_slots_[popped_++ & index_mask_] = static_cast<uint16_t>(slots);
    slots_held_ += slots;
    packed_avail_.advance(slots, config_.size);
  }
  last_avail_ = packed_avail_.encode();
  return count;
}

void DeviceQueue::unpop_packed(uint16_t count) noexcept {
  UVHOST_MISUSE_CHECK(count <= static_cast<uint16_t>(popped_ - used_idx_), "virtio: unpop() of chains not popped");
  for (uint16_t i = 0; i < count; ++i) {
    const uint16_t slots = popped_slots_[--popped_ & index_mask_];
    slots_held_ -= slots;
    packed_avail_.retreat(slots, config_.size);
  }
  last_avail_ = packed_avail_.encode();
}

void DeviceQueue::publish_used_packed() {
  // Ids and lengths first, then the flags that hand the descriptors back: the first
  // one's last, with release, so a driver that sees it sees the whole run.
  // With VIRTIO_F_IN_ORDER a run of chains the device only read (written length 0)
  // goes back as one used descriptor, in the run's first slot, naming the run's last
  // chain; the driver skips the run's other slots (the spec's batched update).
  const uint32_t size = config_.size;
  const bool batch = config_.in_order;
  // Calls visit(slot position, element, slots) for each used descriptor to write, in
  // order, and returns the slots of every chain published.
  const auto for_each_descriptor = [&](auto&& visit) {
    PackedPosition at = packed_used_;
    uint32_t slots_total = 0;
    uint16_t i = published_used_;
    while (i != used_idx_) {
      const PackedPosition where = at;
      UsedElement element = shadow_[i & index_mask_];
      uint32_t slots = popped_slots_[i++ & index_mask_];
      while (batch && element.len == 0 && i != used_idx_ && shadow_[i & index_mask_].len == 0) {
        element = shadow_[i & index_mask_];
        slots += popped_slots_[i++ & index_mask_];
      }
      visit(where, element);
      at.advance(slots, size);
      slots_total += slots;
    }
    return std::pair{at, slots_total};
  };
  const PackedPosition first = packed_used_;
  const auto [end, slots_total] = for_each_descriptor([&](PackedPosition where, const UsedElement& element) {
    std::byte* const desc = desc_ + size_t{where.index} * kDescriptorSize;
    // relaxed: the flags stores below publish them.
    ring_store<uint32_t>(desc + kPackedDescLenOffset, element.len, std::memory_order_relaxed);
    ring_store<uint16_t>(desc + kPackedDescIdOffset, static_cast<uint16_t>(element.id), std::memory_order_relaxed);
  });
  // release: every id, length and buffer byte above happens before any flag below.
  std::atomic_thread_fence(std::memory_order_release);
  for_each_descriptor([&](PackedPosition where, const UsedElement&) {
    // relaxed: the driver reads these only after the first one's (release, below).
    if (where != first) {
      ring_store<uint16_t>(desc_ + size_t{where.index} * kDescriptorSize + kPackedDescFlagsOffset,
                           packed_used_flags(where.wrap), std::memory_order_relaxed);
    }
  });
  ring_store<uint16_t>(desc_ + size_t{first.index} * kDescriptorSize + kPackedDescFlagsOffset,
                       packed_used_flags(first.wrap), std::memory_order_release);
  // What was written, for the dirty log: the slots of the chains returned (only some
  // of them changed, but they are one run).
  const uint32_t last_slot = (first.index + slots_total - 1) % size;
  if (last_slot >= first.index) {
    published_bytes_[0] = IoPiece{desc_ + size_t{first.index} * kDescriptorSize,
                                  size_t{last_slot - first.index + 1} * kDescriptorSize};
    published_pieces_ = 1;
  } else {
    published_bytes_[0] =
        IoPiece{desc_ + size_t{first.index} * kDescriptorSize, size_t{size - first.index} * kDescriptorSize};
    published_bytes_[1] = IoPiece{desc_, size_t{last_slot + 1} * kDescriptorSize};
    published_pieces_ = 2;
  }
  packed_used_ = end;
  slots_held_ -= slots_total;
  slots_since_signal_ += slots_total;
  published_used_ = used_idx_;
}

bool DeviceQueue::must_signal_guest_packed() {
  if (slots_since_signal_ == 0) return false;
  // Full fence: as on a split ring, our used flags store, then a load of the driver's
  // suppression field, against the driver's store of that field, then its load of our
  // flags (a Dekker pattern).
  detail::full_barrier();
  const uint32_t moved = slots_since_signal_;
  const bool first = !signalled_valid_;
  slots_since_signal_ = 0;
  signalled_valid_ = true;
  // relaxed: ordered by the fence; a stale value costs a spurious or a later signal,
  // which the driver tolerates (it re-checks the ring after enabling).
  const uint16_t flags = ring_load<uint16_t>(avail_ + kPackedEventFlagsOffset, std::memory_order_relaxed);
  if (flags == kPackedEventDisable) return false;
  if (flags == kPackedEventDesc && config_.event_idx) {
    const uint16_t off_wrap = ring_load<uint16_t>(avail_ + kPackedEventOffWrapOffset, std::memory_order_relaxed);
    return first || packed_need_event(off_wrap, packed_used_, moved, config_.size);
  }
  return true;  // ENABLE, or a value the spec does not define: signalling is always safe
}

void DeviceQueue::disable_guest_kicks_packed() {
  // relaxed: advisory; a kick the driver sends anyway is harmless.
  ring_store<uint16_t>(used_ + kPackedEventFlagsOffset, kPackedEventDisable, std::memory_order_relaxed);
}

bool DeviceQueue::enable_guest_kicks_packed() {
  if (config_.event_idx) {
    // "Kick me when you make the descriptor at my next position available."
    ring_store<uint16_t>(used_ + kPackedEventOffWrapOffset, packed_avail_.encode(), std::memory_order_relaxed);
    ring_store<uint16_t>(used_ + kPackedEventFlagsOffset, kPackedEventDesc, std::memory_order_release);
  } else {
    ring_store<uint16_t>(used_ + kPackedEventFlagsOffset, kPackedEventEnable, std::memory_order_relaxed);
  }
  // Full fence: store (kicks enabled) then load (the next descriptor's flags), against
  // the driver's store of those flags and then its load of ours.
  detail::full_barrier();
  // relaxed: only tested here; pop_burst() loads the flags again with acquire.
  return packed_desc_available(load_flags(desc_, packed_avail_.index, std::memory_order_relaxed), packed_avail_.wrap);
}

bool DeviceQueue::enable_guest_kicks_for_more_packed(uint16_t more) {
  uint32_t seen_slots = 0;
  const uint16_t seen = available_packed(UINT16_MAX, &seen_slots);
  if (config_.event_idx) {
    // "Kick me when you make available the `more`-th descriptor after those I have
    // seen." A chain of several descriptors reaches it sooner: an early kick, never a
    // late one.
    PackedPosition event = packed_avail_;
    event.advance(std::min<uint32_t>(seen_slots + more - 1, config_.size - 1), config_.size);
    ring_store<uint16_t>(used_ + kPackedEventOffWrapOffset, event.encode(), std::memory_order_relaxed);
    ring_store<uint16_t>(used_ + kPackedEventFlagsOffset, kPackedEventDesc, std::memory_order_release);
  } else {
    ring_store<uint16_t>(used_ + kPackedEventFlagsOffset, kPackedEventEnable, std::memory_order_relaxed);
  }
  // Full fence: the same store-load pairing as enable_guest_kicks().
  detail::full_barrier();
  const uint16_t now = available_packed(static_cast<uint16_t>(std::min<uint32_t>(seen + more, UINT16_MAX)));
  return static_cast<uint16_t>(now - seen) >= more;
}

}  // namespace uvhost::virtio
