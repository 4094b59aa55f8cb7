// frontend_queue.cpp - the embedded frontend's datapath: TX buffers, RX buffers (with
// and without MRG_RXBUF), waiting on call eventfds (see frontend.h).
#include <poll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "uvhost/vhost_user/frontend.h"
#include "uvhost/vhost_user/frontend_queue.h"

namespace uvhost::vhost_user {

namespace {

using Clock = std::chrono::steady_clock;

// Waits for an eventfd to become readable and drains it. true if it was signalled.
bool wait_eventfd(int fd, std::chrono::milliseconds timeout) {
  pollfd pfd{fd, POLLIN, 0};
  const int ready = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
  if (ready <= 0) return false;
  eventfd_t value = 0;
  (void)::eventfd_read(fd, &value);  // nonblocking: drains, or EAGAIN if raced
  return true;
}

// Time left until `deadline`, rounded up to whole milliseconds (0 once it passed).
std::chrono::milliseconds left_until(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return std::chrono::milliseconds{0};
  return std::chrono::ceil<std::chrono::milliseconds>(left);
}

}  // namespace

// ---------------------------------------------------------------- TX

size_t Frontend::reap_tx(uint32_t pair_index) {
  if (pair_index >= pairs_.size() || broken()) return 0;
  FrontendQueuePair& pair = *pairs_[pair_index];
  size_t reaped = 0;
  while (std::optional<virtio::UsedElement> used = pair.tx.queue->reap()) {
    // reap() only returns ids that were in flight, so the chain and its slots are ours.
    uint16_t slot = pair.tx.slot_of_head[used->id];
    pair.tx.slot_of_head[used->id] = FrontendVring::kNoSlot;
    while (slot != FrontendVring::kNoSlot) {
      const uint16_t next = pair.tx_next_slot[slot];
      pair.tx_next_slot[slot] = FrontendVring::kNoSlot;
      pair.tx_free_slots.push_back(slot);
      slot = next;
    }
    ++reaped;
  }
  if (pair.tx.queue->device_misbehaved()) {
    fail(fmt::format("frontend: device returned a used id on TX vring {} that was not in flight", pair.tx.index));
  }
  return reaped;
}

bool Frontend::enqueue_tx(std::span<const std::byte> frame, uint32_t pair_index, const virtio::NetHeader& header) {
  if (pair_index >= pairs_.size() || broken()) return false;
  FrontendQueuePair& pair = *pairs_[pair_index];
  const uint32_t buffer_size = options_.buffer_size;
  // Header and frame go into as many buffers as they need, one descriptor each (the
  // header always fits the first: buffer_size is at least 76 bytes).
  const size_t needed = tx_buffers_for(frame.size());
  if (needed > options_.queue_size) return false;  // larger than the whole ring: never fits
  if (pair.tx_free_slots.size() < needed) {
    (void)reap_tx(pair_index);
    if (broken()) return false;
    if (pair.tx_free_slots.size() < needed) {
      ++stats_.tx_full;
      return false;
    }
  }
  virtio::NetHeader tx_header = header;
  tx_header.num_buffers = 0;  // a driver sets it to 0 on transmit
  pair.tx_chain.clear();
  size_t copied = 0;  // frame bytes placed so far
  for (size_t i = 0; i < needed; ++i) {
    const uint16_t slot = pair.tx_free_slots[pair.tx_free_slots.size() - 1 - i];
    std::byte* buffer = pair.tx.slot_host(slot, buffer_size);
    size_t used = 0;
    if (i == 0) {
      virtio::encode_net_header(tx_header, header_size_, {buffer, header_size_});
      used = header_size_;
    }
    const size_t take = std::min<size_t>(buffer_size - used, frame.size() - copied);
    if (take > 0) std::memcpy(buffer + used, frame.data() + copied, take);
    copied += take;
    pair.tx_chain.push_back(virtio::DriverRing::Buffer{pair.tx.slot_guest(slot, buffer_size),
                                                        static_cast<uint32_t>(used + take), false});
  }
  const std::optional<uint16_t> head = pair.tx.queue->add_chain(pair.tx_chain);
  if (!head) return fail("frontend: internal: TX ring full with enough free slots");
  // Link the chain's slots in descriptor order, then take them off the free list.
  uint16_t next = FrontendVring::kNoSlot;
  for (size_t i = 0; i < needed; ++i) {
    // Chain element k is tx_free_slots[size - 1 - k]: this walks from the last to the first.
    const uint16_t slot = pair.tx_free_slots[pair.tx_free_slots.size() - needed + i];
    pair.tx_next_slot[slot] = next;
    next = slot;
  }
  pair.tx_free_slots.resize(pair.tx_free_slots.size() - needed);
  pair.tx.slot_of_head[*head] = next;  // the first slot
  pair.tx_unpublished = true;
  ++stats_.tx_packets;
  return true;
}

void Frontend::flush_tx(uint32_t pair_index) {
  if (pair_index >= pairs_.size() || broken()) return;
  FrontendQueuePair& pair = *pairs_[pair_index];
  if (!pair.tx_unpublished) return;
  pair.tx_unpublished = false;
  if (pair.tx.queue->publish()) ++stats_.tx_kicks;
}

size_t Frontend::tx_buffers_for(size_t frame_bytes) const noexcept {
  return (header_size_ + frame_bytes + options_.buffer_size - 1) / options_.buffer_size;
}

bool Frontend::wait_tx_space(std::chrono::milliseconds timeout, uint32_t pair_index, size_t frame_bytes) {
  if (pair_index >= pairs_.size() || broken()) return false;
  FrontendQueuePair& pair = *pairs_[pair_index];
  const size_t needed = tx_buffers_for(frame_bytes);
  if (needed > options_.queue_size) return false;  // never fits
  flush_tx(pair_index);
  auto room = [&] {
    (void)reap_tx(pair_index);
    return !broken() && pair.tx_free_slots.size() >= needed;
  };
  if (room()) return true;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    // Re-enable, re-check (a completion may have come before), then sleep. The call fd
    // may hold a signal from before (nobody drains it while we poll): a wakeup is only
    // a hint, the used ring says whether room came.
    if (!pair.tx.queue->enable_interrupts()) {
      const std::chrono::milliseconds left = left_until(deadline);
      if (left.count() > 0) (void)wait_eventfd(pair.tx.call.get(), left);
    }
    pair.tx.queue->disable_interrupts();
    if (room()) return true;
    if (broken() || left_until(deadline).count() == 0) return false;
  }
}

int Frontend::kick_fd(uint32_t index) const noexcept {
  if (index / 2 >= pairs_.size()) return -1;
  const FrontendQueuePair& pair = *pairs_[index / 2];
  return (index % 2 == 0 ? pair.rx : pair.tx).kick.get();
}

std::optional<virtio::QueueConfig> Frontend::vring_config(uint32_t index) const {
  if (index / 2 >= pairs_.size()) return std::nullopt;
  const FrontendQueuePair& pair = *pairs_[index / 2];
  return (index % 2 == 0 ? pair.rx : pair.tx).queue->device_config();
}

int Frontend::err_fd(uint32_t index) const noexcept {
  if (index / 2 >= pairs_.size()) return -1;
  const FrontendQueuePair& pair = *pairs_[index / 2];
  return (index % 2 == 0 ? pair.rx : pair.tx).err.get();
}

uint16_t Frontend::tx_in_flight(uint32_t pair_index) const {
  if (pair_index >= pairs_.size()) return 0;
  return pairs_[pair_index]->tx.queue->in_flight();
}

// ---------------------------------------------------------------- RX

size_t Frontend::poll_rx(const std::function<void(const RxPacket&)>& on_packet, size_t max, uint32_t pair_index) {
  if (pair_index >= pairs_.size() || broken()) return 0;
  FrontendQueuePair& pair = *pairs_[pair_index];
  FrontendVring& rx = pair.rx;
  const uint32_t buffer_size = options_.buffer_size;
  size_t delivered = 0;
  bool reposted = false;

  auto repost = [&](uint16_t slot) {
    const virtio::DriverRing::Buffer buffer{rx.slot_guest(slot, buffer_size), buffer_size, true};
    const std::optional<uint16_t> head = rx.queue->add_chain({&buffer, 1});
    // Cannot fail: the buffer's own descriptor was just released by reap().
    if (head) rx.slot_of_head[*head] = slot;
    reposted = true;
  };

  while (delivered < max) {
    const std::optional<virtio::UsedElement> used = rx.queue->reap();
    if (!used) break;
    const uint16_t slot = rx.slot_of_head[used->id];
    rx.slot_of_head[used->id] = FrontendVring::kNoSlot;
    ++stats_.rx_buffers;
    // The device says how much it wrote: it must fit the buffer we gave.
    if (used->len > buffer_size) {
      fail(fmt::format("frontend: device wrote {} bytes into a {}-byte RX buffer", used->len, buffer_size));
      break;
    }
    const std::byte* data = rx.slot_host(slot, buffer_size);
    const size_t len = used->len;

    if (pair.assembly_remaining > 0) {
      // A continuation buffer of a MRG_RXBUF packet: all payload, no header.
      pair.assembly.insert(pair.assembly.end(), data, data + len);
      repost(slot);
      if (--pair.assembly_remaining > 0) continue;
      on_packet(RxPacket{pair.assembly_header, pair.assembly, pair_index});
      ++delivered;
      ++stats_.rx_packets;
      continue;
    }

    if (len < header_size_) {
      fail(fmt::format("frontend: device returned a {}-byte RX buffer, shorter than the {}-byte header", len,
                       header_size_));
      break;
    }
    const virtio::NetHeader header = virtio::decode_net_header({data, header_size_}, header_size_);
    uint16_t buffers = 1;
    if (mrg_rxbuf_) {
      // num_buffers counts this buffer too; more than the ring holds is a lie.
      if (header.num_buffers == 0 || header.num_buffers > options_.queue_size) {
        fail(fmt::format("frontend: device set num_buffers {} (ring of {})", header.num_buffers,
                         options_.queue_size));
        break;
      }
      buffers = header.num_buffers;
    }
    if (buffers == 1) {
      // Deliver straight from the buffer, then hand it back to the device.
      on_packet(RxPacket{header, {data + header_size_, len - header_size_}, pair_index});
      repost(slot);
      ++delivered;
      ++stats_.rx_packets;
    } else {
      pair.assembly.assign(data + header_size_, data + len);
      pair.assembly_header = header;
      pair.assembly_remaining = static_cast<uint16_t>(buffers - 1);
      repost(slot);
    }
  }
  if (reposted) (void)rx.queue->publish();
  if (rx.queue->device_misbehaved()) {
    fail(fmt::format("frontend: device returned a used id on RX vring {} that was not in flight", rx.index));
  }
  return delivered;
}

bool Frontend::wait_rx(std::chrono::milliseconds timeout, uint32_t pair_index) {
  if (pair_index >= pairs_.size() || broken()) return false;
  FrontendVring& rx = pairs_[pair_index]->rx;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    // enable_interrupts() re-checks the used ring: true means something is there. A
    // wakeup alone proves nothing (the call fd may hold an old signal), so after one
    // the ring is checked again.
    if (rx.queue->enable_interrupts()) {
      rx.queue->disable_interrupts();
      return true;
    }
    const std::chrono::milliseconds left = left_until(deadline);
    if (left.count() == 0) {
      rx.queue->disable_interrupts();
      return false;
    }
    ++stats_.rx_calls_waited;
    (void)wait_eventfd(rx.call.get(), left);
  }
}

}  // namespace uvhost::vhost_user
