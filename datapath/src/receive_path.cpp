// receive_path.cpp - backend -> guest: one burst of a receive vring (see
// device_datapath.h). Worker thread.
#include "uvhost/datapath/device_datapath.h"
#include "uvhost/vhost_user/dirty_log.h"
#include "vring.h"

namespace uvhost::datapath {

// The next frame for the guest: the one already waiting for buffers, else the
// inbound ring's next, else whatever the backend has now.
bool DeviceDatapath::take_receive_frame(Vring& q, backends::Packet*& packet) {
  if (q.held) {
    packet = q.held.get();
    return true;
  }
  if (q.pulled_held) {
    packet = &q.pulled;
    return true;
  }
  if ((q.held = q.inbound->pop())) {
    packet = q.held.get();
    return true;
  }
  if (q.rx_fd >= 0 && backend_.pull(q.pair, q.pulled)) {
    q.pulled_held = true;
    packet = &q.pulled;
    return true;
  }
  return false;
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
    backends::Packet* packet = nullptr;
    while (burst.entries < options_.burst && take_receive_frame(q, packet)) {
      if (packet->frame.size() > kMaxFrame) {
        q.counters.dropped.add();
        release_receive_frame(q);
        ++burst.entries;
        continue;
      }
      q.writer.record_writes(q.logging());
      const virtio::RxResult result = q.writer.deliver(*q.ring, map, packet->header, packet->frame);
      if (result.status == virtio::RxStatus::kNoBuffers) {
        burst.blocked = true;  // keep the frame; wait_for_buffers() decides what next
        break;
      }
      ++burst.entries;
      if (result.status == virtio::RxStatus::kDelivered) {
        ++delivered;
        bytes += packet->frame.size();
        if (q.logging()) {
          vhost_user::log_host_writes(*q.log, map, q.writer.written());
          if (q.log_used) {
            vhost_user::log_used_elements(*q.log, q.log_guest_addr, q.ring->used_index(), result.buffers,
                                          q.ring->config().size);
          }
        }
      } else {
        q.counters.dropped.add();  // kDropped: can never fit; kQueueBroken: logged by the queue
      }
      release_receive_frame(q);
      if (result.status == virtio::RxStatus::kQueueBroken) break;
    }
    if (delivered > 0) publish_and_signal(q, map);
    q.counters.packets.add(delivered);
    q.counters.bytes.add(bytes);
    burst.bytes = bytes;
  });
  return burst;
}

// The guest has no room for the held frame. Ask for a kick on the next buffer it
// posts and look again (it may have posted some before it could see that): true if
// it did, then try again. Otherwise its next kick queues the handler. (Asking for
// "the next buffer", not "any buffer after last_avail": the buffers already there
// were too few, and with EVENT_IDX the guest would not kick again for them.)
bool DeviceDatapath::wait_for_buffers(Vring& q) {
  q.counters.rx_waits.add();
  const bool room =
      q.memory->read([&](const virtio::GuestMemoryMap& map) { return q.ring->enable_guest_kicks_for_more(map); });
  q.kicks_disabled = false;
  return room;
}

}  // namespace uvhost::datapath
