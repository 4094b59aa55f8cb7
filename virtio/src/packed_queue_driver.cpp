// packed_queue_driver.cpp - the guest side of a packed virtqueue (tests, embedded frontend).
#include "uvhost/virtio/packed_queue_driver.h"

#include <atomic>
#include <utility>

#include "uvhost/sync/misuse.h"
#include "uvhost/virtio/detail/ring_access.h"

namespace uvhost::virtio {

using detail::ring_load;
using detail::ring_store;

namespace {

struct Layout {
  size_t driver_area = 0, device_area = 0, indirect = 0, total = 0;
};

Layout layout_for(const DriverOptions& o) {
  Layout l;
  l.driver_area = desc_table_bytes(o.size);
  l.device_area = l.driver_area + kPackedEventAreaBytes;
  l.indirect = align_up(l.device_area + kPackedEventAreaBytes, kDescTableAlign);
  l.total = l.indirect + (o.indirect_desc ? size_t{o.size} * o.max_indirect_entries * kDescriptorSize : 0);
  return l;
}

void store_packed_descriptor(std::byte* p, const PackedDescriptor& d, bool with_flags) noexcept {
  // relaxed: the first descriptor's flags, stored with release in publish(), publish them.
  ring_store<uint64_t>(p, d.addr, std::memory_order_relaxed);
  ring_store<uint32_t>(p + kPackedDescLenOffset, d.len, std::memory_order_relaxed);
  ring_store<uint16_t>(p + kPackedDescIdOffset, d.id, std::memory_order_relaxed);
  if (with_flags) ring_store<uint16_t>(p + kPackedDescFlagsOffset, d.flags, std::memory_order_relaxed);
}

}  // namespace

size_t PackedDriverQueue::required_bytes(const DriverOptions& options) { return layout_for(options).total; }

PackedDriverQueue::PackedDriverQueue(const DriverOptions& options, DriverRingArea area, Kick kick)
    : options_(options), kick_(std::move(kick)) {
  UVHOST_MISUSE_CHECK(is_valid_packed_queue_size(options.size), "virtio driver: packed queue size out of range");
  const Layout layout = layout_for(options);
  UVHOST_MISUSE_CHECK(area.bytes >= layout.total, "virtio driver: ring area too small");
  UVHOST_MISUSE_CHECK((reinterpret_cast<uintptr_t>(area.host) & 15u) == 0 && (area.guest_addr & 15u) == 0,
                      "virtio driver: ring area must be 16-byte aligned");
  desc_ = area.host;
  driver_area_ = area.host + layout.driver_area;
  device_area_ = area.host + layout.device_area;
  indirect_ = area.host + layout.indirect;
  desc_guest_ = area.guest_addr;
  driver_area_guest_ = area.guest_addr + layout.driver_area;
  device_area_guest_ = area.guest_addr + layout.device_area;
  indirect_guest_ = area.guest_addr + layout.indirect;
  // Before the device starts: plain initialization (all flags 0: nothing available on
  // the first lap, whose wrap counter is 1; both event areas ENABLE).
  for (size_t i = 0; i < layout.total; ++i) area.host[i] = std::byte{0};

  free_ids_.reserve(options.size);
  for (uint32_t id = options.size; id-- > 0;) free_ids_.push_back(static_cast<uint16_t>(id));  // 0 on top
  slots_of_id_.assign(options.size, 0);
  id_state_.assign(options.size, IdState::kFree);
  if (options.in_order) avail_order_.assign(options.size, 0);
  free_slots_ = options.size;
  start_ = PackedPosition{static_cast<uint16_t>(options.initial_index % options.size), true};
  next_avail_ = next_used_ = start_;
  // Starting mid-ring: the slots before the start look as if made available and used
  // on this first lap, as they would be in a ring that got here by itself (so on the
  // next lap neither side mistakes their zeros for a descriptor of its own lap).
  for (uint16_t slot = 0; slot < next_avail_.index; ++slot) {
    ring_store<uint16_t>(desc_ + size_t{slot} * kDescriptorSize + kPackedDescFlagsOffset, packed_used_flags(true),
                         std::memory_order_relaxed);
  }
  if (options.event_idx) request_interrupt_at_next_used();
}

QueueConfig PackedDriverQueue::device_config() const {
  QueueConfig config;
  config.size = options_.size;
  config.desc_addr = desc_guest_;
  config.avail_addr = driver_area_guest_;
  config.used_addr = device_area_guest_;
  config.event_idx = options_.event_idx;
  config.indirect_desc = options_.indirect_desc;
  config.in_order = options_.in_order;
  config.packed = true;
  return config;
}

std::optional<uint16_t> PackedDriverQueue::add_chain(std::span<const Buffer> buffers, bool indirect) {
  UVHOST_MISUSE_CHECK(!buffers.empty(), "virtio driver: empty chain");
  const size_t slots = indirect ? 1 : buffers.size();
  if (free_ids_.empty() || slots > free_slots_) return std::nullopt;
  if (indirect) {
    UVHOST_MISUSE_CHECK(options_.indirect_desc, "virtio driver: indirect chain without VIRTIO_F_INDIRECT_DESC");
    if (buffers.size() > options_.max_indirect_entries) return std::nullopt;
  }
  const uint16_t id = free_ids_.back();
  free_ids_.pop_back();
  auto write_flag = [](const Buffer& b) { return b.device_writable ? kDescFlagWrite : uint16_t{0}; };
  const PackedPosition first = next_avail_;
  uint16_t first_flags = 0;
  if (indirect) {
    const size_t table_offset = size_t{id} * options_.max_indirect_entries * kDescriptorSize;
    for (size_t i = 0; i < buffers.size(); ++i) {
      const PackedDescriptor entry{buffers[i].guest_addr, buffers[i].len, 0, write_flag(buffers[i])};
      store_packed_descriptor(indirect_ + table_offset + i * kDescriptorSize, entry, true);
    }
    first_flags = static_cast<uint16_t>(kDescFlagIndirect | packed_avail_flags(next_avail_.wrap));
    store_packed_descriptor(desc_ + size_t{next_avail_.index} * kDescriptorSize,
                            PackedDescriptor{indirect_guest_ + table_offset,
                                             static_cast<uint32_t>(buffers.size() * kDescriptorSize), id, first_flags},
                            false);
    next_avail_.advance(1, options_.size);
  } else {
    for (size_t i = 0; i < buffers.size(); ++i) {
      const bool last = i + 1 == buffers.size();
      const auto flags = static_cast<uint16_t>(write_flag(buffers[i]) | (last ? 0 : kDescFlagNext) |
                                               packed_avail_flags(next_avail_.wrap));
      if (i == 0) first_flags = flags;
      store_packed_descriptor(desc_ + size_t{next_avail_.index} * kDescriptorSize,
                              PackedDescriptor{buffers[i].guest_addr, buffers[i].len, id, flags}, i != 0);
      next_avail_.advance(1, options_.size);
    }
  }
  pending_heads_.push_back(Pending{first.index, first_flags, id});
  slots_of_id_[id] = static_cast<uint16_t>(slots);
  id_state_[id] = IdState::kAdded;
  free_slots_ = static_cast<uint16_t>(free_slots_ - slots);
  ++in_flight_;
  if (options_.in_order) avail_order_[(avail_order_head_ + avail_order_count_++) % options_.size] = id;
  return id;
}

bool PackedDriverQueue::publish() {
  if (pending_heads_.empty()) return false;
  uint32_t moved = 0;  // the slots these chains took, for the kick decision
  for (const Pending& pending : pending_heads_) {
    // release: the chain's other descriptors, its indirect table and its buffers happen
    // before its first flags; pairs with the device's acquire load of them.
    ring_store<uint16_t>(desc_ + size_t{pending.slot} * kDescriptorSize + kPackedDescFlagsOffset, pending.flags,
                         std::memory_order_release);
    id_state_[pending.id] = IdState::kPublished;
    moved += slots_of_id_[pending.id];
  }
  if (options_.in_order) avail_order_published_ = avail_order_count_;
  pending_heads_.clear();
  // Full fence: the flags stores, then the load of the device's area, which the device
  // stores before re-checking our descriptors (DeviceQueue::enable_guest_kicks).
  detail::full_barrier();
  const uint16_t flags = ring_load<uint16_t>(device_area_ + kPackedEventFlagsOffset, std::memory_order_relaxed);
  bool kick = true;
  if (flags == kPackedEventDisable) {
    kick = false;
  } else if (flags == kPackedEventDesc && options_.event_idx) {
    const uint16_t off_wrap = ring_load<uint16_t>(device_area_ + kPackedEventOffWrapOffset, std::memory_order_relaxed);
    kick = packed_need_event(off_wrap, next_avail_, moved, options_.size);
  }
  if (kick) {
    ++kicks_;
    if (kick_) kick_();
  }
  return kick;
}

void PackedDriverQueue::request_interrupt_at_next_used() {
  ring_store<uint16_t>(driver_area_ + kPackedEventOffWrapOffset, next_used_.encode(), std::memory_order_relaxed);
  ring_store<uint16_t>(driver_area_ + kPackedEventFlagsOffset, kPackedEventDesc, std::memory_order_relaxed);
}

UsedElement PackedDriverQueue::complete(uint16_t id, uint32_t len) {
  id_state_[id] = IdState::kFree;
  free_ids_.push_back(id);
  free_slots_ = static_cast<uint16_t>(free_slots_ + slots_of_id_[id]);
  --in_flight_;
  if (interrupts_enabled_ && options_.event_idx) request_interrupt_at_next_used();
  return UsedElement{id, len};
}

std::optional<UsedElement> PackedDriverQueue::reap_in_order(uint16_t id, uint32_t len) {
  // The used descriptor names the last chain of a batch that starts with our oldest
  // chain in flight; it must be among the published ones.
  size_t count = 0;
  while (count < avail_order_published_ && avail_order_[(avail_order_head_ + count) % options_.size] != id) ++count;
  if (count == avail_order_published_) {
    device_misbehaved_ = true;
    return std::nullopt;
  }
  batch_.clear();
  batch_next_ = 0;
  uint32_t slots = 0;
  for (size_t k = 0; k <= count; ++k) {
    const uint16_t chain = avail_order_[(avail_order_head_ + k) % options_.size];
    batch_.push_back(UsedElement{chain, k == count ? len : 0});
    slots += slots_of_id_[chain];
  }
  next_used_.advance(slots, options_.size);
  avail_order_head_ = (avail_order_head_ + count + 1) % options_.size;
  avail_order_count_ -= count + 1;
  avail_order_published_ -= count + 1;
  return reap();
}

std::optional<UsedElement> PackedDriverQueue::reap() {
  if (device_misbehaved_) return std::nullopt;
  if (batch_next_ < batch_.size()) {
    const UsedElement element = batch_[batch_next_++];
    return complete(static_cast<uint16_t>(element.id), element.len);
  }
  const std::byte* desc = desc_ + size_t{next_used_.index} * kDescriptorSize;
  // acquire: pairs with the device's release store of the flags; its id, length and
  // the bytes it wrote into our buffers are visible after it.
  const uint16_t flags = ring_load<uint16_t>(desc + kPackedDescFlagsOffset, std::memory_order_acquire);
  if (!packed_desc_used(flags, next_used_.wrap)) return std::nullopt;
  const uint16_t id = ring_load<uint16_t>(desc + kPackedDescIdOffset, std::memory_order_relaxed);
  const uint32_t len = ring_load<uint32_t>(desc + kPackedDescLenOffset, std::memory_order_relaxed);
  if (id >= options_.size || id_state_[id] != IdState::kPublished) {
    // A device bug or a hostile backend: never free a chain we did not hand out.
    device_misbehaved_ = true;
    return std::nullopt;
  }
  if (options_.in_order) return reap_in_order(id, len);
  next_used_.advance(slots_of_id_[id], options_.size);
  return complete(id, len);
}

bool PackedDriverQueue::stopped_base_plausible(uint16_t base) const noexcept {
  const PackedPosition device = PackedPosition::decode(base);
  if (device.index >= options_.size) return false;
  // Slots from a to b going forward, over the two laps the wrap counter tells apart.
  const uint32_t laps = 2u * options_.size;
  auto linear = [&](PackedPosition p) { return p.index + (p.wrap ? 0u : uint32_t{options_.size}); };
  auto distance = [&](PackedPosition a, PackedPosition b) { return (linear(b) + laps - linear(a)) % laps; };
  return distance(next_used_, device) <= distance(next_used_, next_avail_);
}

void PackedDriverQueue::disable_interrupts() {
  interrupts_enabled_ = false;
  ring_store<uint16_t>(driver_area_ + kPackedEventFlagsOffset, kPackedEventDisable, std::memory_order_relaxed);
}

bool PackedDriverQueue::enable_interrupts() {
  interrupts_enabled_ = true;
  if (options_.event_idx) {
    request_interrupt_at_next_used();
  } else {
    ring_store<uint16_t>(driver_area_ + kPackedEventFlagsOffset, kPackedEventEnable, std::memory_order_relaxed);
  }
  // Full fence: store (interrupts on) then load the next used flags; pairs with the
  // device's fence between its flags store and its load of our area.
  detail::full_barrier();
  const uint16_t flags = ring_load<uint16_t>(desc_ + size_t{next_used_.index} * kDescriptorSize + kPackedDescFlagsOffset,
                                             std::memory_order_relaxed);
  return batch_next_ < batch_.size() || packed_desc_used(flags, next_used_.wrap);
}

}  // namespace uvhost::virtio
