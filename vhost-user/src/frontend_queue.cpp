// frontend_queue.cpp - the embedded frontend's datapath: TX buffers, RX buffers (with
// and without MRG_RXBUF), waiting on call eventfds (see frontend.h).
#include <poll.h>
#include <sys/eventfd.h>

#include <cstring>

#include <fmt/format.h>

#include "uvhost/vhost_user/frontend.h"
#include "uvhost/vhost_user/frontend_queue.h"

namespace uvhost::vhost_user {

namespace {

// Waits for an eventfd to become readable and drains it. true if it was signalled.
bool wait_eventfd(int fd, std::chrono::milliseconds timeout) {
  pollfd pfd{fd, POLLIN, 0};
  const int ready = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
  if (ready <= 0) return false;
  eventfd_t value = 0;
  (void)::eventfd_read(fd, &value);  // nonblocking: drains, or EAGAIN if raced
  return true;
}

}  // namespace

// ---------------------------------------------------------------- TX

size_t Frontend::reap_tx(uint32_t pair_index) {
  if (pair_index >= pairs_.size() || broken()) return 0;
  FrontendQueuePair& pair = *pairs_[pair_index];
  size_t reaped = 0;
  while (std::optional<virtio::UsedElement> used = pair.tx.queue->reap()) {
    // reap() only returns ids that were in flight, so the slot is ours.
    const uint16_t slot = pair.tx.slot_of_head[used->id];
    pair.tx.slot_of_head[used->id] = FrontendVring::kNoSlot;
    pair.tx_free_slots.push_back(slot);
    ++reaped;
  }
  return reaped;
}

bool Frontend::enqueue_tx(std::span<const std::byte> frame, uint32_t pair_index, const virtio::NetHeader& header) {
  if (pair_index >= pairs_.size() || broken()) return false;
  if (frame.size() > options_.buffer_size - header_size_) return false;
  FrontendQueuePair& pair = *pairs_[pair_index];
  if (pair.tx_free_slots.empty() && reap_tx(pair_index) == 0) {
    ++stats_.tx_full;
    return false;
  }
  const uint16_t slot = pair.tx_free_slots.back();
  std::byte* buffer = pair.tx.slot_host(slot, options_.buffer_size);
  virtio::NetHeader tx_header = header;
  tx_header.num_buffers = 0;  // a driver sets it to 0 on transmit
  virtio::encode_net_header(tx_header, header_size_, {buffer, header_size_});
  std::memcpy(buffer + header_size_, frame.data(), frame.size());
  const virtio::DriverQueue::Buffer descriptor{pair.tx.slot_guest(slot, options_.buffer_size),
                                               static_cast<uint32_t>(header_size_ + frame.size()), false};
  const std::optional<uint16_t> head = pair.tx.queue->add_chain({&descriptor, 1});
  if (!head) return fail("frontend: internal: TX ring full with a free slot");
  pair.tx_free_slots.pop_back();
  pair.tx.slot_of_head[*head] = slot;
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

bool Frontend::wait_tx_space(std::chrono::milliseconds timeout, uint32_t pair_index) {
  if (pair_index >= pairs_.size() || broken()) return false;
  FrontendQueuePair& pair = *pairs_[pair_index];
  if (!pair.tx_free_slots.empty() || reap_tx(pair_index) > 0) return true;
  // Re-enable, re-check (a completion may have come before), then sleep.
  if (!pair.tx.queue->enable_interrupts()) wait_eventfd(pair.tx.call.get(), timeout);
  pair.tx.queue->disable_interrupts();
  return reap_tx(pair_index) > 0 || !pair.tx_free_slots.empty();
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
    const virtio::DriverQueue::Buffer buffer{rx.slot_guest(slot, buffer_size), buffer_size, true};
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
  return delivered;
}

bool Frontend::wait_rx(std::chrono::milliseconds timeout, uint32_t pair_index) {
  if (pair_index >= pairs_.size() || broken()) return false;
  FrontendVring& rx = pairs_[pair_index]->rx;
  bool pending = rx.queue->enable_interrupts();
  if (!pending) {
    ++stats_.rx_calls_waited;
    pending = wait_eventfd(rx.call.get(), timeout);
  }
  rx.queue->disable_interrupts();
  return pending;
}

}  // namespace uvhost::vhost_user
