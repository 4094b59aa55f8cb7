// split_queue.cpp - device side of a split virtqueue: avail ring, used ring,
// notification suppression.
#include "uvhost/virtio/split_queue.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "chain_walker.h"
#include "uvhost/sync/misuse.h"
#include "uvhost/virtio/detail/ring_access.h"
#include "uvhost/virtio/guest_memory_fault.h"

namespace uvhost::virtio {

using detail::ring_load;
using detail::ring_store;

DeviceQueue::DeviceQueue(std::string name) : name_(std::move(name)), indirect_table_(64) {}

void DeviceQueue::fail(QueueError error, const std::string& detail) {
  if (is_broken()) return;
  if (error == QueueError::kGuestMemoryFault) {  // the caller reports it (see split_queue.h)
    error_ = error;
    return;
  }
  // Rings in memory that was cut short read zeros, which look like ring violations: the
  // cause is the memory, which the device's owner reports in one line of its own
  // (guest_memory_fault.h). A lookup only on this slow path.
  if (guest_memory_fault::fault_count() != 0 &&
      (guest_memory_fault::address_faulted(desc_) || guest_memory_fault::address_faulted(avail_) ||
       guest_memory_fault::address_faulted(used_))) {
    error_ = QueueError::kGuestMemoryFault;
    return;
  }
  error_ = error;
  spdlog::error("virtio queue '{}': {} ({}); queue is broken until reset", name_, to_string(error), detail);
}

void DeviceQueue::reset() {
  config_ = QueueConfig{};
  started_ = false;
  error_ = QueueError::kNone;
  desc_ = avail_ = used_ = nullptr;
  rings_generation_ = 0;
  miss_generation_ = 0;
  index_mask_ = 0;
  last_avail_ = avail_shadow_ = used_idx_ = published_used_ = signalled_used_ = 0;
  signalled_valid_ = false;
  shadow_.reset();
  packed_avail_ = packed_used_ = PackedPosition{};
  popped_ = 0;
  slots_held_ = slots_since_signal_ = 0;
  popped_slots_.reset();
  published_pieces_ = 0;
}

bool DeviceQueue::start(const QueueConfig& config, const GuestMemoryMap& memory) {
  if (is_broken()) return false;
  config_ = config;
  if (config.packed) return start_packed(memory);
  if (!is_valid_queue_size(config.size)) {
    fail(QueueError::kBadQueueSize, fmt::format("size {}", config.size));
    return false;
  }
  if (!is_aligned(config.desc_addr, kDescTableAlign) || !is_aligned(config.avail_addr, kAvailRingAlign) ||
      !is_aligned(config.used_addr, kUsedRingAlign)) {
    fail(QueueError::kRingMisaligned,
         fmt::format("desc {:#x} avail {:#x} used {:#x}", config.desc_addr, config.avail_addr, config.used_addr));
    return false;
  }
  index_mask_ = static_cast<uint16_t>(config.size - 1);
  rings_generation_ = 0;
  miss_generation_ = 0;
  rings_read_ = false;
  shadow_ = std::make_unique<UsedElement[]>(config.size);
  signalled_valid_ = false;
  avail_shadow_ = last_avail_;
  // With an IOTLB the rings may not translate yet (a miss was reported): the queue
  // starts and resolves them, reading used->idx then, on its first usable operation.
  if (!resolve_rings(memory) && is_broken()) return false;
  started_ = true;
  return true;
}

bool DeviceQueue::resolve_rings(const GuestMemoryMap& memory) {
  if (config_.packed) return resolve_packed_rings(memory);
  const uint32_t size = config_.size;
  const bool by_guest = config_.address_space == AddressSpace::kGuestPhysical;
  auto translate = [&](const TranslationNeed& area) {
    return by_guest ? memory.translate_contiguous(area.addr, area.len, area.access)
                    : memory.translate_frontend_contiguous(area.addr, area.len);
  };
  const TranslationNeed desc_area{config_.desc_addr, desc_table_bytes(size), Access::kRead};
  const TranslationNeed avail_area{config_.avail_addr, avail_ring_bytes(size, config_.event_idx), Access::kRead};
  const TranslationNeed used_area{config_.used_addr, used_ring_bytes(size, config_.event_idx), Access::kWrite};
  std::byte* desc = translate(desc_area);
  std::byte* avail = translate(avail_area);
  std::byte* used = translate(used_area);
  if (desc == nullptr || avail == nullptr || used == nullptr) {
    if (ring_translation_missed(memory, {desc_area, avail_area, used_area})) return false;
    fail(QueueError::kRingNotMapped, fmt::format("desc {:#x} avail {:#x} used {:#x} size {}{}", config_.desc_addr,
                                                 config_.avail_addr, config_.used_addr, size,
                                                 by_guest ? "" : " (frontend addresses)"));
    return false;
  }
  // The guest addresses were checked in start(); the host pointers must be aligned too,
  // or the atomic accesses below would be undefined (a region mapped at an odd offset).
  if (!is_aligned(desc, kDescTableAlign) || !is_aligned(avail, kAvailRingAlign) || !is_aligned(used, kUsedRingAlign)) {
    fail(QueueError::kRingMisaligned, "rings are misaligned in host memory (region mmap offset)");
    return false;
  }
  desc_ = desc;
  avail_ = avail;
  used_ = used;
  used_elements_aligned8_ = is_aligned(used + kRingEntriesOffset, 8);
  rings_generation_ = memory.generation();
  if (!rings_read_) {
    // relaxed: only we write used->idx; this picks up where a previous backend stopped.
    used_idx_ = ring_load<uint16_t>(used_ + kRingIdxOffset, std::memory_order_relaxed);
    published_used_ = used_idx_;
    rings_read_ = true;
  }
  return true;
}

bool DeviceQueue::ring_translation_missed(const GuestMemoryMap& memory, std::initializer_list<TranslationNeed> areas) {
  if (config_.translation_misses == nullptr) return false;
  bool missed = false;
  for (const TranslationNeed& area : areas) {
    if (const std::optional<uint64_t> iova = memory.first_unmapped(area.addr, area.len)) {
      config_.translation_misses->translation_missed(*iova, area.access);
      missed = true;
    }
  }
  if (missed) miss_generation_ = memory.generation();
  return missed;
}

bool DeviceQueue::chain_translation_missed(const GuestMemoryMap& memory) {
  if (config_.translation_misses == nullptr) return false;
  const std::optional<uint64_t> iova = memory.first_unmapped(failed_translation_.addr, failed_translation_.len);
  if (!iova) return false;
  config_.translation_misses->translation_missed(*iova, failed_translation_.access);
  miss_generation_ = memory.generation();
  return true;
}

void DeviceQueue::set_last_avail_index(uint16_t index) noexcept {
  last_avail_ = index;
  avail_shadow_ = index;
}

void DeviceQueue::set_used_index(uint16_t index) noexcept {
  used_idx_ = index;
  published_used_ = index;
  signalled_valid_ = false;
}

uint16_t DeviceQueue::available(const GuestMemoryMap& memory, uint16_t enough) {
  if (!usable(memory)) return 0;
  if (config_.packed) return available_packed(enough);
  // acquire: pairs with the driver's barrier before its avail->idx store, so the ring
  // entries and descriptors of every chain up to this index are visible to the relaxed
  // loads that follow. Once per batch: pop() reuses avail_shadow_ until it is used up.
  const uint16_t avail_idx = ring_load<uint16_t>(avail_ + kRingIdxOffset, std::memory_order_acquire);
  const auto pending = static_cast<uint16_t>(avail_idx - last_avail_);
  if (pending > config_.size) {
    fail(QueueError::kAvailIndexJump,
         fmt::format("avail idx {} but last seen {} (queue size {})", avail_idx, last_avail_, config_.size));
    return 0;
  }
  avail_shadow_ = avail_idx;
  return pending;
}

bool DeviceQueue::pop(const GuestMemoryMap& memory, DescriptorChain& chain, ChainDirection direction) {
  return pop_burst(memory, std::span<DescriptorChain>(&chain, 1), direction) == 1;
}

size_t DeviceQueue::pop_burst(const GuestMemoryMap& memory, std::span<DescriptorChain> chains,
                              ChainDirection direction) {
  if (!usable(memory)) [[unlikely]] return 0;
  if (config_.packed) return pop_burst_packed(memory, chains, direction);
  uint16_t pending = static_cast<uint16_t>(avail_shadow_ - last_avail_);
  if (pending < chains.size()) {
    pending = available(memory);  // the one acquire load of avail->idx for this burst
    if (pending == 0) return 0;
  }
  const size_t count = std::min<size_t>(pending, chains.size());
  // Heads first, each one's descriptor prefetched, so the walks below do not wait for
  // the driver's cache lines one chain at a time.
  // (Locals: the stores into chains[i] could otherwise alias the members.)
  const std::byte* const avail = avail_;
  const std::byte* const desc = desc_;
  const uint16_t first = last_avail_;
  const uint16_t mask = index_mask_;
  for (size_t i = 0; i < count; ++i) {
    // relaxed: ordered after the acquire load of avail->idx in available().
    const uint16_t head = ring_load<uint16_t>(avail + avail_entry_offset(static_cast<uint16_t>(first + i) & mask),
                                              std::memory_order_relaxed);
    chains[i].head = head;
    // Unchecked on purpose: a prefetch never faults, and the walk checks the head.
    __builtin_prefetch(desc + size_t{head} * kDescriptorSize);
  }
  if (walk_cursor_generation_ != rings_generation_) {
    walk_cursor_ = GuestMemoryMap::RegionCursor{};
    walk_cursor_generation_ = rings_generation_;
  }
  // The common shapes first, with the region cursor in a local; anything else (or any
  // doubt) goes to the full walk from that chain on.
  GuestMemoryMap::RegionCursor cursor = walk_cursor_;
  const detail::FastWalk walk{memory, desc, config_.size, config_.indirect_desc};
  const size_t i = detail::walk_direct_run(direction, walk, chains.first(count), cursor);
  walk_cursor_ = cursor;
  if (i < count) [[unlikely]] return pop_burst_walking(memory, chains, direction, i, count);
  last_avail_ = static_cast<uint16_t>(last_avail_ + count);
  return count;
}

size_t DeviceQueue::pop_burst_walking(const GuestMemoryMap& memory, std::span<DescriptorChain> chains,
                                      ChainDirection direction, size_t from, size_t count) {
  const detail::WalkContext context{memory,         desc_, config_.size, config_.indirect_desc, direction,
                                    indirect_table_, failed_translation_};
  const detail::FastWalk walk{memory, desc_, config_.size, config_.indirect_desc};
  GuestMemoryMap::RegionCursor& cursor = walk_cursor_;
  for (size_t i = from; i < count; ++i) {
    DescriptorChain& chain = chains[i];
    // Chain `from` failed the fast walk already.
    if (i > from && detail::walk_direct_run(direction, walk, chains.subspan(i, 1), cursor) == 1) continue;
    detail::WalkFailure failure;
    const QueueError error = detail::walk_chain(context, chain.head, chain, failure);
    if (error != QueueError::kNone) [[unlikely]] {
      last_avail_ = static_cast<uint16_t>(last_avail_ + i);
      // An IOTLB miss: this chain waits (unconsumed) for the translation.
      if (is_translation_failure(error) && chain_translation_missed(memory)) return i;
      fail(error, fmt::format("avail entry {}: {}", last_avail_, detail::describe(error, failure, context)));
      return i;
    }
  }
  last_avail_ = static_cast<uint16_t>(last_avail_ + count);
  return count;
}

void DeviceQueue::prefetch_next_chain(const GuestMemoryMap& memory) {
  if (config_.packed) {
    // The next descriptor, available or not: its used descriptor goes in the same slot.
    if (usable(memory)) __builtin_prefetch(desc_ + size_t{packed_avail_.index} * kDescriptorSize, 1);
    return;
  }
  if (last_avail_ == avail_shadow_ || !usable(memory)) return;
  // relaxed: an entry before avail_shadow_, ordered by the acquire load that saw it.
  const uint16_t head =
      ring_load<uint16_t>(avail_ + avail_entry_offset(last_avail_ & index_mask_), std::memory_order_relaxed);
  // A prefetch never faults; a bad head only makes it useless.
  __builtin_prefetch(desc_ + size_t{static_cast<uint16_t>(head & index_mask_)} * kDescriptorSize);
  __builtin_prefetch(used_ + used_entry_offset(used_idx_ & index_mask_), 1);
}

void DeviceQueue::unpop(uint16_t count) noexcept {
  UVHOST_MISUSE_CHECK(count <= config_.size, "virtio: unpop() of more chains than the queue holds");
  if (config_.packed) return unpop_packed(count);
  last_avail_ = static_cast<uint16_t>(last_avail_ - count);
}

void DeviceQueue::store_used_element(uint16_t slot, UsedElement element) {
  // relaxed: invisible to the driver until the release store of used->idx that follows.
  if (used_elements_aligned8_) [[likely]] {
    ring_store<uint64_t>(used_ + used_entry_offset(slot), uint64_t{element.id} | (uint64_t{element.len} << 32),
                         std::memory_order_relaxed);
  } else {
    ring_store<uint32_t>(used_ + used_entry_offset(slot), element.id, std::memory_order_relaxed);
    ring_store<uint32_t>(used_ + used_entry_offset(slot) + 4, element.len, std::memory_order_relaxed);
  }
}

void DeviceQueue::store_in_order_batches() {
  // VIRTIO_F_IN_ORDER: a run of chains the device only read (written length 0) is
  // returned as one used entry, in the run's first slot, holding the run's last head;
  // the driver knows the run's other heads from the order it made them available.
  // A chain the device wrote into keeps its own entry: its length matters.
  uint16_t i = published_used_;
  while (i != used_idx_) {
    const uint16_t first = i;
    UsedElement element = shadow_[i++ & index_mask_];
    while (element.len == 0 && i != used_idx_ && shadow_[i & index_mask_].len == 0) element = shadow_[i++ & index_mask_];
    store_used_element(first & index_mask_, element);
  }
}

void DeviceQueue::publish_used(const GuestMemoryMap& memory) {
  if (!usable(memory) || used_idx_ == published_used_) return;
  if (config_.packed) return publish_used_packed();
  if (config_.in_order && static_cast<uint16_t>(used_idx_ - published_used_) > 1) {
    store_in_order_batches();
  } else {
    for (uint16_t i = published_used_; i != used_idx_; ++i) store_used_element(i & index_mask_, shadow_[i & index_mask_]);
  }
  // release: the used elements and the bytes written into the driver's buffers happen
  // before the new index; pairs with the driver's read barrier after it loads used->idx.
  ring_store<uint16_t>(used_ + kRingIdxOffset, used_idx_, std::memory_order_release);
  published_used_ = used_idx_;
}

bool DeviceQueue::must_signal_guest(const GuestMemoryMap& memory) {
  if (!usable(memory)) return false;
  if (config_.packed) return must_signal_guest_packed();
  if (signalled_valid_ && published_used_ == signalled_used_) return false;
  // Full fence: we stored used->idx and now load the driver's suppression field; the
  // driver stores that field (re-enabling interrupts) and then loads used->idx. Without
  // store-load ordering on both sides each could read the other's old value: the driver
  // sleeps believing nothing was used, we skip the signal believing it is suppressed.
  detail::full_barrier();
  const uint16_t old_idx = signalled_used_;
  const bool first = !signalled_valid_;
  signalled_used_ = published_used_;
  signalled_valid_ = true;
  if (config_.event_idx) {
    // relaxed: ordered by the fence above; a stale value only costs a spurious or a
    // later signal, which the protocol tolerates (the driver re-checks after enabling).
    const uint16_t used_event = ring_load<uint16_t>(avail_ + used_event_offset(config_.size), std::memory_order_relaxed);
    return first || need_event(used_event, published_used_, old_idx);
  }
  // relaxed: as above.
  const uint16_t flags = ring_load<uint16_t>(avail_ + kRingFlagsOffset, std::memory_order_relaxed);
  return (flags & kAvailFlagNoInterrupt) == 0;
}

void DeviceQueue::disable_guest_kicks(const GuestMemoryMap& memory) {
  if (!usable(memory)) return;
  if (config_.packed) return disable_guest_kicks_packed();
  // With EVENT_IDX we simply stop advancing avail_event: the driver kicks only when it
  // passes the value we wrote last, at most once. Without it, set NO_NOTIFY.
  if (config_.event_idx) return;
  // relaxed: an advisory flag; a kick the driver sends anyway is harmless.
  ring_store<uint16_t>(used_ + kRingFlagsOffset, kUsedFlagNoNotify, std::memory_order_relaxed);
}

bool DeviceQueue::enable_guest_kicks(const GuestMemoryMap& memory) {
  if (!usable(memory)) return false;
  // Waiting for an IOTLB translation, what is available cannot be taken under this map:
  // no reason to look again before it changes (the datapath runs again then).
  if (config_.packed) return enable_guest_kicks_packed() && !waiting_for_translation(memory);
  if (config_.event_idx) {
    // "Kick me when you publish the entry after the last one I consumed."
    ring_store<uint16_t>(used_ + avail_event_offset(config_.size), last_avail_, std::memory_order_relaxed);
  } else {
    ring_store<uint16_t>(used_ + kRingFlagsOffset, uint16_t{0}, std::memory_order_relaxed);
  }
  // Full fence: store (kicks enabled) then load (avail->idx), while the driver stores
  // avail->idx and then loads our flag/avail_event. Without store-load ordering the
  // driver could see kicks still disabled and we could see no new buffers: both wait.
  detail::full_barrier();
  // relaxed: only compared here; pop() reloads avail->idx with acquire before use.
  const uint16_t avail_idx = ring_load<uint16_t>(avail_ + kRingIdxOffset, std::memory_order_relaxed);
  return avail_idx != last_avail_ && !waiting_for_translation(memory);
}

bool DeviceQueue::enable_guest_kicks_for_more(const GuestMemoryMap& memory, uint16_t more) {
  if (!usable(memory)) return false;
  if (more == 0) more = 1;
  if (config_.packed) return enable_guest_kicks_for_more_packed(more) && !waiting_for_translation(memory);
  // relaxed: a snapshot to compare against; the fence below orders the re-read.
  const uint16_t seen = ring_load<uint16_t>(avail_ + kRingIdxOffset, std::memory_order_relaxed);
  if (config_.event_idx) {
    // "Kick me when you publish the `more`-th entry after the ones I have seen."
    ring_store<uint16_t>(used_ + avail_event_offset(config_.size), static_cast<uint16_t>(seen + more - 1),
                         std::memory_order_relaxed);
  } else {
    ring_store<uint16_t>(used_ + kRingFlagsOffset, uint16_t{0}, std::memory_order_relaxed);
  }
  // Full fence: the same store-load pairing as enable_guest_kicks().
  detail::full_barrier();
  // relaxed: only compared here; pop() reloads avail->idx with acquire before use.
  const uint16_t now = ring_load<uint16_t>(avail_ + kRingIdxOffset, std::memory_order_relaxed);
  return static_cast<uint16_t>(now - seen) >= more && !waiting_for_translation(memory);
}

}  // namespace uvhost::virtio
