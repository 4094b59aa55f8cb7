// receive_path.cpp - backend -> guest: one burst of a receive vring, and frames
// delivered straight into it by the same worker's transmit burst (see
// device_datapath.h, transmit_scope.h). Worker thread.
#include "transmit_scope.h"
#include "uvhost/datapath/device_datapath.h"
#include "uvhost/vhost_user/dirty_log.h"
#include "vring.h"

namespace uvhost::datapath {

thread_local TransmitScope* TransmitScope::current_ = nullptr;

// The next frame for the guest: the one already waiting for buffers, else the
// inbound ring's next, else whatever the backend has now.
bool DeviceDatapath::take_receive_frame(Vring& q, const virtio::NetHeader*& header,
                                        std::span<const std::byte>& frame) {
  if (!q.held && !q.pulled_held) {
    if (!(q.held = q.inbound->pop())) {
      if (q.rx_fd < 0 || !backend_.pull_frame(q.pair, q.pulled)) return false;
      q.pulled_held = true;
    }
  }
  if (q.held) {
    header = &q.held->header;
    frame = q.held->frame;
  } else {
    header = &q.pulled.header;
    frame = q.pulled.frame;
  }
  return true;
}

void DeviceDatapath::release_receive_frame(Vring& q) {
  if (q.held) {
    q.held.reset();
  } else {
    q.pulled_held = false;
  }
}

DeviceDatapath::Burst DeviceDatapath::receive_burst(Vring& q) {
  Burst burst;
  if (!q.enabled) {
    // A disabled receive ring takes nothing: what is waiting for it is dropped, and
    // (accepting is false) nothing more is injected.
    drop_pending_receive(q);
    return burst;
  }
  q.memory->read([&](const virtio::GuestMemoryMap& map) {
    size_t delivered = 0;
    uint64_t bytes = 0;
    const virtio::NetHeader* header = nullptr;
    std::span<const std::byte> frame;
    while (burst.entries < options_.burst && take_receive_frame(q, header, frame)) {
      if (frame.size() > kMaxFrame) {
        q.counters.dropped.add();
        release_receive_frame(q);
        ++burst.entries;
        continue;
      }
      const virtio::RxResult result = write_frame(q, map, *header, virtio::RxSource::of(frame));
      if (result.status == virtio::RxStatus::kNoBuffers) {
        burst.blocked = true;  // keep the frame; wait_for_buffers() decides what next
        break;
      }
      ++burst.entries;
      if (result.status == virtio::RxStatus::kDelivered) {
        ++delivered;
        bytes += frame.size();
      } else {
        q.counters.dropped.add();  // kDropped: can never fit; kQueueBroken: logged by the queue
      }
      release_receive_frame(q);
      if (result.status == virtio::RxStatus::kQueueBroken) break;
    }
    finish_direct(q, map);
    q.counters.packets.add(delivered);
    q.counters.bytes.add(bytes);
    burst.bytes = bytes;
  });
  return burst;
}

virtio::RxResult DeviceDatapath::write_frame(Vring& q, const virtio::GuestMemoryMap& map,
                                             const virtio::NetHeader& header, const virtio::RxSource& frame) {
  q.writer.record_writes(q.logging());
  const virtio::RxResult result = q.writer.deliver(*q.ring, map, header, frame);
  if (result.status == virtio::RxStatus::kDelivered && q.logging()) {
    vhost_user::log_host_writes(*q.log, map, q.writer.written());
  }
  return result;
}

void DeviceDatapath::finish_direct(Vring& q, const virtio::GuestMemoryMap& map) {
  if (!q.ring) return;
  q.writer.release(*q.ring);
  publish_and_signal(q, map);
}

bool DeviceDatapath::inject_frame(uint32_t pair, const virtio::NetHeader& header, std::span<const std::byte> prefix,
                                  const backends::TxFrame& source) noexcept {
  // (No division on the common path: a pair in range is its own index.)
  const uint32_t index = pair < options_.queue_pairs ? pair : pair % options_.queue_pairs;
  Vring& q = *vrings_[2 * index];
  TransmitScope* const scope = TransmitScope::current();
  // Straight into the ring: only from the thread that serves it, under the map it
  // holds, and only with nothing queued ahead (frames keep their order).
  if (scope != nullptr && scope->serves(this, q.worker, q.memory) && q.running() && q.enabled && !q.held &&
      !q.pulled_held && q.inbound->empty() && prefix.size() <= source.frame_len) {
    const virtio::RxSource frame{prefix, source.pieces, source.header_size + prefix.size(), source.frame_len};
    const virtio::RxResult result = write_frame(q, scope->map(), header, frame);
    switch (result.status) {
      case virtio::RxStatus::kDelivered:
        q.counters.packets.add();
        q.counters.bytes.add(source.frame_len);
        scope->delivered_into(q);
        return true;
      case virtio::RxStatus::kNoBuffers:
        break;  // queued below: the receive handler waits for buffers
      case virtio::RxStatus::kDropped:
        q.counters.dropped.add();
        scope->delivered_into(q);  // its reservation goes back at finish()
        return false;
      case virtio::RxStatus::kQueueBroken:
        q.counters.dropped.add();
        refresh_view(q);
        return false;
    }
  }
  return RxInjector::inject_frame(pair, header, prefix, source);
}

// The guest has no room for the held frame. Ask for a kick once it has posted as many
// more buffers as the frame needs, and look again (it may have posted them before it
// could see that): true if it did, then try again. Otherwise its kick queues the
// handler. (Counted from the buffers seen now, not from last_avail: the buffers
// already there were too few, and with EVENT_IDX the guest would not kick for them.)
bool DeviceDatapath::wait_for_buffers(Vring& q) {
  q.counters.rx_waits.add();
  const uint16_t more = q.writer.more_buffers_wanted();
  const bool room = q.memory->read(
      [&](const virtio::GuestMemoryMap& map) { return q.ring->enable_guest_kicks_for_more(map, more); });
  q.log_kick_fields();
  q.kicks_disabled = false;
  return room;
}

}  // namespace uvhost::datapath
