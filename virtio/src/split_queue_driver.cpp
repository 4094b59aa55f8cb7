// split_queue_driver.cpp - the guest side of a split virtqueue (tests, embedded frontend).
#include "uvhost/virtio/split_queue_driver.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "uvhost/sync/misuse.h"
#include "uvhost/virtio/detail/ring_access.h"

namespace uvhost::virtio {

using detail::ring_load;
using detail::ring_store;

namespace {

struct Layout {
  size_t avail = 0, used = 0, indirect = 0, total = 0;
};

Layout layout_for(const DriverOptions& o) {
  Layout l;
  l.avail = desc_table_bytes(o.size);
  l.used = align_up(l.avail + avail_ring_bytes(o.size, o.event_idx), kUsedRingAlign);
  l.indirect = align_up(l.used + used_ring_bytes(o.size, o.event_idx), kDescTableAlign);
  l.total = l.indirect + (o.indirect_desc ? size_t{o.size} * o.max_indirect_entries * kDescriptorSize : 0);
  return l;
}

}  // namespace

size_t DriverQueue::required_bytes(const DriverOptions& options) { return layout_for(options).total; }

DriverQueue::DriverQueue(const DriverOptions& options, DriverRingArea area, Kick kick)
    : options_(options), area_(area), kick_(std::move(kick)) {
  UVHOST_MISUSE_CHECK(is_valid_queue_size(options.size), "virtio driver: queue size must be a power of two");
  const Layout layout = layout_for(options);
  UVHOST_MISUSE_CHECK(area.bytes >= layout.total, "virtio driver: ring area too small");
  UVHOST_MISUSE_CHECK((reinterpret_cast<uintptr_t>(area.host) & 15u) == 0 && (area.guest_addr & 15u) == 0,
                      "virtio driver: ring area must be 16-byte aligned");
  desc_ = area.host;
  avail_ = area.host + layout.avail;
  used_ = area.host + layout.used;
  indirect_ = area.host + layout.indirect;
  desc_guest_ = area.guest_addr;
  avail_guest_ = area.guest_addr + layout.avail;
  used_guest_ = area.guest_addr + layout.used;
  indirect_guest_ = area.guest_addr + layout.indirect;
  // Setup happens before the device is started: plain initialization is enough, the
  // device learns the rings (and their contents) through a later synchronizing step.
  for (size_t i = 0; i < layout.total; ++i) area.host[i] = std::byte{0};

  shadow_.assign(options.size, Descriptor{});
  head_in_flight_.assign(options.size, 0);
  for (uint16_t i = 0; i < options.size; ++i) shadow_[i].next = static_cast<uint16_t>(i + 1);
  free_head_ = 0;
  free_count_ = options.size;
  avail_idx_ = published_avail_ = last_used_ = batch_end_ = options.initial_index;
  if (options.in_order) avail_heads_.assign(options.size, 0);
  ring_store<uint16_t>(avail_ + kRingIdxOffset, options.initial_index, std::memory_order_relaxed);
  ring_store<uint16_t>(used_ + kRingIdxOffset, options.initial_index, std::memory_order_relaxed);
  if (options.event_idx) {
    // Ask for an interrupt on the first used entry (and the first kick is always sent
    // because avail_event starts equal to the initial index).
    ring_store<uint16_t>(avail_ + used_event_offset(options.size), options.initial_index, std::memory_order_relaxed);
    ring_store<uint16_t>(used_ + avail_event_offset(options.size), options.initial_index, std::memory_order_relaxed);
  }
}

QueueConfig DriverQueue::device_config() const {
  QueueConfig config;
  config.size = options_.size;
  config.desc_addr = desc_guest_;
  config.avail_addr = avail_guest_;
  config.used_addr = used_guest_;
  config.event_idx = options_.event_idx;
  config.indirect_desc = options_.indirect_desc;
  config.in_order = options_.in_order;
  return config;
}

uint16_t DriverQueue::take_free_descriptor() {
  const uint16_t index = free_head_;
  free_head_ = shadow_[index].next;
  --free_count_;
  return index;
}

std::optional<uint16_t> DriverQueue::add_chain(std::span<const Buffer> buffers, bool indirect) {
  UVHOST_MISUSE_CHECK(!buffers.empty(), "virtio driver: empty chain");
  auto flags_of = [](const Buffer& b) { return b.device_writable ? kDescFlagWrite : uint16_t{0}; };
  uint16_t head = 0;
  if (indirect) {
    UVHOST_MISUSE_CHECK(options_.indirect_desc, "virtio driver: indirect chain without VIRTIO_F_INDIRECT_DESC");
    if (free_count_ == 0 || buffers.size() > options_.max_indirect_entries) return std::nullopt;
    head = take_free_descriptor();
    const size_t table_offset = size_t{head} * options_.max_indirect_entries * kDescriptorSize;
    for (size_t i = 0; i < buffers.size(); ++i) {
      Descriptor d{buffers[i].guest_addr, buffers[i].len, flags_of(buffers[i]), static_cast<uint16_t>(i + 1)};
      if (i + 1 < buffers.size()) d.flags |= kDescFlagNext;
      detail::store_descriptor(indirect_ + table_offset + i * kDescriptorSize, d);
    }
    shadow_[head] = Descriptor{indirect_guest_ + table_offset, static_cast<uint32_t>(buffers.size() * kDescriptorSize),
                               kDescFlagIndirect, shadow_[head].next};
    detail::store_descriptor(desc_ + size_t{head} * kDescriptorSize, shadow_[head]);
  } else {
    if (buffers.size() > free_count_) return std::nullopt;
    head = free_head_;
    uint16_t index = head;
    for (size_t i = 0; i < buffers.size(); ++i) {
      index = take_free_descriptor();
      const bool last = i + 1 == buffers.size();
      // `next` already links to the following free descriptor, which is exactly the one
      // take_free_descriptor() hands out next.
      shadow_[index].addr = buffers[i].guest_addr;
      shadow_[index].len = buffers[i].len;
      shadow_[index].flags = static_cast<uint16_t>(flags_of(buffers[i]) | (last ? 0 : kDescFlagNext));
      detail::store_descriptor(desc_ + size_t{index} * kDescriptorSize, shadow_[index]);
    }
  }
  head_in_flight_[head] = 1;
  ++in_flight_;
  if (options_.in_order) avail_heads_[avail_idx_ & (options_.size - 1u)] = head;
  // relaxed: published by the release store of avail->idx in publish().
  ring_store<uint16_t>(avail_ + avail_entry_offset(avail_idx_ & (options_.size - 1u)), head, std::memory_order_relaxed);
  ++avail_idx_;
  return head;
}

bool DriverQueue::publish() {
  if (avail_idx_ == published_avail_) return false;
  const uint16_t old_idx = published_avail_;
  // release: descriptors, indirect tables, avail entries and buffer contents happen
  // before the index; pairs with the device's acquire load of avail->idx.
  ring_store<uint16_t>(avail_ + kRingIdxOffset, avail_idx_, std::memory_order_release);
  published_avail_ = avail_idx_;
  // Full fence: store avail->idx, then load the device's suppression field, which the
  // device stores before re-checking avail->idx (see DeviceQueue::enable_guest_kicks).
  detail::full_barrier();
  bool kick = false;
  if (options_.event_idx) {
    const uint16_t avail_event = ring_load<uint16_t>(used_ + avail_event_offset(options_.size), std::memory_order_relaxed);
    kick = need_event(avail_event, avail_idx_, old_idx);
  } else {
    kick = (ring_load<uint16_t>(used_ + kRingFlagsOffset, std::memory_order_relaxed) & kUsedFlagNoNotify) == 0;
  }
  if (kick) {
    ++kicks_;
    if (kick_) kick_();
  }
  return kick;
}

void DriverQueue::release_chain(uint16_t head) {
  // Walk our shadow (never the shared table, which the device could have scribbled on).
  uint16_t index = head;
  uint16_t count = 1;
  while ((shadow_[index].flags & kDescFlagNext) != 0) {
    index = shadow_[index].next;
    ++count;
  }
  shadow_[index].next = free_head_;
  free_head_ = head;
  free_count_ = static_cast<uint16_t>(free_count_ + count);
}

std::optional<uint16_t> DriverQueue::in_order_batch_end(uint32_t id, uint16_t published) const {
  const auto mask = static_cast<uint16_t>(options_.size - 1u);
  // In order, the chains the device may return are the positions last_used_ up to
  // avail->idx as we published it: a chain added but not yet made available is ours.
  const auto made_available = static_cast<uint16_t>(published_avail_ - last_used_);
  const uint16_t pending = std::min(published, made_available);
  for (uint16_t k = 0; k < pending; ++k) {
    const uint16_t position = static_cast<uint16_t>(last_used_ + k);
    if (avail_heads_[position & mask] == id) return static_cast<uint16_t>(position + 1);
  }
  return std::nullopt;
}

UsedElement DriverQueue::complete(UsedElement used) {
  ++last_used_;
  head_in_flight_[used.id] = 0;
  --in_flight_;
  release_chain(static_cast<uint16_t>(used.id));
  if (interrupts_enabled_ && options_.event_idx) {
    // Interrupt me again after the next entry.
    ring_store<uint16_t>(avail_ + used_event_offset(options_.size), last_used_, std::memory_order_relaxed);
  }
  return used;
}

std::optional<UsedElement> DriverQueue::reap() {
  if (device_misbehaved_) return std::nullopt;
  if (options_.in_order && last_used_ != batch_end_) {
    // Inside a batch whose entry was read already: its chains come in avail order.
    const uint16_t head = avail_heads_[last_used_ & (options_.size - 1u)];
    const bool last = static_cast<uint16_t>(last_used_ + 1) == batch_end_;
    return complete(last ? batch_last_ : UsedElement{head, 0});
  }
  // acquire: pairs with the device's release store of used->idx; the element and the
  // bytes the device wrote into our buffers are visible after it.
  const uint16_t used_idx = ring_load<uint16_t>(used_ + kRingIdxOffset, std::memory_order_acquire);
  if (used_idx == last_used_) return std::nullopt;
  const std::byte* element = used_ + used_entry_offset(last_used_ & (options_.size - 1u));
  UsedElement used{ring_load<uint32_t>(element, std::memory_order_relaxed),
                   ring_load<uint32_t>(element + 4, std::memory_order_relaxed)};
  if (used.id >= options_.size || head_in_flight_[used.id] == 0) {
    // A device bug or a hostile backend: never free a chain we did not hand out.
    device_misbehaved_ = true;
    return std::nullopt;
  }
  if (options_.in_order) {
    // The entry names the last chain of a batch that starts here; it must lie within
    // what the device published (used->idx moved past the whole batch).
    const std::optional<uint16_t> end = in_order_batch_end(used.id, static_cast<uint16_t>(used_idx - last_used_));
    if (!end) {
      device_misbehaved_ = true;
      return std::nullopt;
    }
    batch_end_ = *end;
    batch_last_ = used;
    return reap();
  }
  return complete(used);
}

void DriverQueue::disable_interrupts() {
  interrupts_enabled_ = false;
  if (!options_.event_idx) {
    ring_store<uint16_t>(avail_ + kRingFlagsOffset, kAvailFlagNoInterrupt, std::memory_order_relaxed);
  }
  // With EVENT_IDX, used_event is simply no longer advanced.
}

bool DriverQueue::enable_interrupts() {
  interrupts_enabled_ = true;
  if (options_.event_idx) {
    ring_store<uint16_t>(avail_ + used_event_offset(options_.size), last_used_, std::memory_order_relaxed);
  } else {
    ring_store<uint16_t>(avail_ + kRingFlagsOffset, uint16_t{0}, std::memory_order_relaxed);
  }
  // Full fence: store (interrupts on) then load used->idx; pairs with the device's fence
  // between its used->idx store and its load of our field (must_signal_guest).
  detail::full_barrier();
  return ring_load<uint16_t>(used_ + kRingIdxOffset, std::memory_order_relaxed) != last_used_;
}

void DriverQueue::write_descriptor(uint16_t index, const Descriptor& desc) {
  detail::store_descriptor(desc_ + (size_t{index} % options_.size) * kDescriptorSize, desc);
}

void DriverQueue::write_avail_entry(uint16_t position, uint16_t head) {
  ring_store<uint16_t>(avail_ + avail_entry_offset(position & (options_.size - 1u)), head, std::memory_order_relaxed);
}

void DriverQueue::store_avail_index(uint16_t index) {
  ring_store<uint16_t>(avail_ + kRingIdxOffset, index, std::memory_order_release);
}

DriverQueue::Kick eventfd_kick(int fd) {
  return [fd] {
    const eventfd_t one = 1;
    // A full counter (EAGAIN) still leaves the fd readable: the kick is not lost.
    (void)::eventfd_write(fd, one);
  };
}

}  // namespace uvhost::virtio
