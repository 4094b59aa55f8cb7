// sink_datapath.cpp - see sink_datapath.h.
#include "uvhost/vhost_user/sink_datapath.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "uvhost/vhost_user/features.h"
#include "uvhost/virtio/descriptor_chain.h"
#include "uvhost/virtio/io_vector.h"
#include "uvhost/virtio/net_header.h"

namespace uvhost::vhost_user {

namespace {
// A larger frame than this is still consumed; only the copy kept for tests is capped.
constexpr size_t kMaxKeptFrame = 65536;
// Bounded work per poll per queue, so one busy queue cannot starve the caller.
constexpr size_t kBudgetPerPoll = 256;
}  // namespace

SinkDatapath::SinkDatapath(uint32_t queue_count) : queues_(queue_count) {}

SinkDatapath::QueueView SinkDatapath::queue(uint32_t index) const {
  const Queue& q = queues_.at(index);
  return QueueView{q.started, q.enabled, q.ring && q.ring->is_broken(), q.packets, q.bytes};
}

bool SinkDatapath::queue_started(const QueueStart& start, virtio::GuardedGuestMemory& memory) {
  if (start.index >= queues_.size()) return false;
  Queue& q = queues_[start.index];
  q.ring = std::make_unique<virtio::DeviceQueue>("vhost-user vring " + std::to_string(start.index));
  q.ring->set_last_avail_index(start.last_avail_index);
  const bool ok = memory.read([&](const virtio::GuestMemoryMap& map) { return q.ring->start(start.config, map); });
  if (!ok) {
    q.ring.reset();
    return false;
  }
  q.memory = &memory;
  q.kick_fd = start.kick_fd;
  q.call_fd = start.call_fd;
  q.enabled = start.enabled;
  q.log_used = start.log_used;
  q.log_guest_addr = start.log_guest_addr;
  q.started = true;
  return true;
}

uint16_t SinkDatapath::queue_stopped(uint32_t index) {
  Queue& q = queues_.at(index);
  const uint16_t last_avail = q.ring ? q.ring->last_avail_index() : 0;
  q.ring.reset();
  q.started = false;
  q.kick_fd = -1;
  q.call_fd = -1;
  q.memory = nullptr;
  return last_avail;
}

void SinkDatapath::queue_enabled(uint32_t index, bool enabled) { queues_.at(index).enabled = enabled; }

void SinkDatapath::call_fd_changed(uint32_t index, int call_fd) { queues_.at(index).call_fd = call_fd; }

void SinkDatapath::used_log_changed(uint32_t index, bool log_used, uint64_t log_guest_addr) {
  Queue& q = queues_.at(index);
  q.log_used = log_used;
  q.log_guest_addr = log_guest_addr;
}

bool SinkDatapath::logging() const noexcept { return log_ != nullptr && (features_ & feature::kLogAll) != 0; }

size_t SinkDatapath::poll() {
  size_t total = 0;
  // virtio-net: vring 2k is receive queue k, 2k + 1 transmit queue k.
  for (uint32_t index = 1; index < queues_.size(); index += 2) {
    Queue& q = queues_[index];
    if (q.started && q.ring && !q.ring->is_broken()) total += drain(index, q);
  }
  return total;
}

size_t SinkDatapath::drain(uint32_t, Queue& q) {
  if (q.kick_fd >= 0) {
    // Consume a pending kick; we look at the ring anyway. The frontend's eventfd may be
    // in blocking mode (and O_NONBLOCK would change its side too), so read only if
    // poll says there is something: never block on a guest's fd.
    pollfd entry{q.kick_fd, POLLIN, 0};
    if (::poll(&entry, 1, 0) == 1 && (entry.revents & POLLIN) != 0) {
      eventfd_t ignored;
      (void)::read(q.kick_fd, &ignored, sizeof(ignored));
    }
  }
  const size_t header = virtio::net_header_size((features_ & (feature::kVersion1 | feature::kNetMrgRxbuf)) != 0);
  const bool log = logging() && q.log_used;
  return q.memory->read([&](const virtio::GuestMemoryMap& map) {
    virtio::DescriptorChain chain;
    size_t done = 0;
    while (done < kBudgetPerPoll && q.ring->pop(map, chain, virtio::ChainDirection::kReadableOnly)) {
      const size_t total = chain.readable.total_bytes();
      const size_t frame = total > header ? total - header : 0;
      // Disabled ring: "process and discard" transmit, the same for a sink, uncounted.
      if (q.enabled) {
        ++q.packets;
        q.bytes += frame;
        last_frame_.resize(frame < kMaxKeptFrame ? frame : kMaxKeptFrame);
        (void)virtio::copy_from_pieces(chain.readable.pieces(), header, last_frame_);
      }
      const uint16_t slot = static_cast<uint16_t>(q.ring->used_index() & (q.ring->config().size - 1));
      q.ring->add_used(map, chain.head, 0);
      if (log) log_used_element(*log_, q.log_guest_addr, slot);
      ++done;
    }
    if (done > 0) {
      q.ring->publish_used(map);
      if (q.ring->must_signal_guest(map) && q.call_fd >= 0) (void)::eventfd_write(q.call_fd, 1);
    }
    return done;
  });
}

}  // namespace uvhost::vhost_user
