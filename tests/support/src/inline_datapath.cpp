// inline_datapath.cpp - see inline_datapath.h.
#include "uvhost/testing/inline_datapath.h"

#include <sys/eventfd.h>

#include <algorithm>
#include <utility>

#include "uvhost/vhost_user/features.h"
#include "uvhost/virtio/descriptor_chain.h"
#include "uvhost/virtio/io_vector.h"
#include "uvhost/virtio/net_header.h"

namespace uvhost::vhost_user {

namespace {
// A larger frame than this is still consumed; only the copy kept for tests is capped.
constexpr size_t kMaxKeptFrame = 65536;
// Bounded work per poll per queue, so one busy queue cannot starve the caller (and the
// control socket it also watches).
constexpr size_t kBudgetPerPoll = 256;
constexpr size_t kMacBytes = 6;

bool is_transmit(uint32_t index) { return index % 2 == 1; }  // virtio-net: 2k RX, 2k+1 TX
}  // namespace

std::string_view to_string(InlineBackend backend) noexcept {
  switch (backend) {
    case InlineBackend::kSink: return "sink";
    case InlineBackend::kLoopback: return "loopback";
  }
  return "?";
}

InlineDatapath::InlineDatapath(uint32_t queue_count, InlineBackend backend)
    : backend_(backend), queues_(queue_count) {}

InlineDatapath::QueueView InlineDatapath::queue(uint32_t index) const {
  const Queue& q = queues_.at(index);
  return QueueView{q.started, q.enabled, q.ring && q.ring->is_broken(), q.packets, q.bytes, q.dropped, q.calls};
}

bool InlineDatapath::queue_started(const QueueStart& start, virtio::GuardedGuestMemory& memory) {
  if (start.index >= queues_.size()) return false;
  Queue& q = queues_[start.index];
  q.ring = std::make_unique<virtio::DeviceQueue>("vhost-user vring " + std::to_string(start.index));
  q.ring->set_last_avail_index(start.last_avail_index);
  const bool ok = memory.read([&](const virtio::GuestMemoryMap& map) {
    if (!q.ring->start(start.config, map)) return false;
    // Nothing here waits for receive buffers (a reflected frame without one is
    // dropped), so the guest need not kick receive queues.
    if (!is_transmit(start.index)) q.ring->disable_guest_kicks(map);
    return true;
  });
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

uint16_t InlineDatapath::queue_stopped(uint32_t index) {
  Queue& q = queues_.at(index);
  const uint16_t last_avail = q.ring ? q.ring->last_avail_index() : 0;
  q.ring.reset();
  q.started = false;
  q.kick_fd = -1;
  q.call_fd = -1;
  q.memory = nullptr;
  return last_avail;
}

void InlineDatapath::queue_enabled(uint32_t index, bool enabled) { queues_.at(index).enabled = enabled; }

void InlineDatapath::call_fd_changed(uint32_t index, int call_fd) { queues_.at(index).call_fd = call_fd; }

void InlineDatapath::used_log_changed(uint32_t index, bool log_used, uint64_t log_guest_addr) {
  Queue& q = queues_.at(index);
  q.log_used = log_used;
  q.log_guest_addr = log_guest_addr;
}

void InlineDatapath::features_changed(uint64_t features) {
  features_ = features;
  const bool mrg = (features & feature::kNetMrgRxbuf) != 0;
  rx_writer_ = virtio::NetReceiveWriter(virtio::RxOptions{mrg, header_size()});
}

bool InlineDatapath::logging() const noexcept { return log_ != nullptr && (features_ & feature::kLogAll) != 0; }

size_t InlineDatapath::header_size() const noexcept {
  return virtio::net_header_size((features_ & (feature::kVersion1 | feature::kNetMrgRxbuf)) != 0);
}

void InlineDatapath::kick_fds(std::vector<int>& out) const {
  for (uint32_t index = 1; index < queues_.size(); index += 2) {
    const Queue& q = queues_[index];
    if (q.running() && q.kick_fd >= 0) out.push_back(q.kick_fd);
  }
}

void InlineDatapath::disable_kicks() {
  for (uint32_t index = 1; index < queues_.size(); index += 2) {
    Queue& q = queues_[index];
    if (!q.running()) continue;
    q.memory->read([&](const virtio::GuestMemoryMap& map) { q.ring->disable_guest_kicks(map); });
  }
}

bool InlineDatapath::enable_kicks() {
  bool work = false;
  for (uint32_t index = 1; index < queues_.size(); index += 2) {
    Queue& q = queues_[index];
    if (!q.running()) continue;
    work |= q.memory->read([&](const virtio::GuestMemoryMap& map) { return q.ring->enable_guest_kicks(map); });
  }
  return work;
}

size_t InlineDatapath::poll() {
  size_t total = 0;
  for (uint32_t index = 1; index < queues_.size(); index += 2) {
    Queue& q = queues_[index];
    if (q.running()) total += drain(index, q);
  }
  return total;
}

void InlineDatapath::add_used_logged(Queue& queue, const virtio::GuestMemoryMap& map, uint16_t head, uint32_t len) {
  const uint16_t slot = static_cast<uint16_t>(queue.ring->used_index() & (queue.ring->config().size - 1));
  queue.ring->add_used(map, head, len);
  if (logging() && queue.log_used) log_used_element(*log_, queue.log_guest_addr, slot);
}

void InlineDatapath::publish_and_signal(Queue& queue, const virtio::GuestMemoryMap& map) {
  queue.ring->publish_used(map);
  if (queue.ring->must_signal_guest(map) && queue.call_fd >= 0) {
    (void)::eventfd_write(queue.call_fd, 1);
    ++queue.calls;
  }
}

size_t InlineDatapath::drain(uint32_t tx_index, Queue& tx) {
  const size_t header = header_size();
  // The receive queue of the same pair, for loopback; it may not run (yet), then
  // reflected frames are dropped.
  Queue& rx = queues_[tx_index - 1];
  return tx.memory->read([&](const virtio::GuestMemoryMap& map) {
    virtio::DescriptorChain& chain = tx_chain_;  // reused: no allocation once warm
    size_t done = 0;
    size_t reflected = 0;
    while (done < kBudgetPerPoll && tx.ring->pop(map, chain, virtio::ChainDirection::kReadableOnly)) {
      const size_t total = chain.readable.total_bytes();
      const size_t frame = total > header ? total - header : 0;
      // A disabled ring: "process and discard" transmit, uncounted.
      if (tx.enabled) {
        ++tx.packets;
        tx.bytes += frame;
        if (backend_ == InlineBackend::kSink) {
          last_frame_.resize(std::min(frame, kMaxKeptFrame));
          (void)virtio::copy_from_pieces(chain.readable.pieces(), header, last_frame_);
        } else if (frame > kMaxFrame || !rx.running() || !rx.enabled) {
          ++rx.dropped;
        } else {
          scratch_.resize(frame);
          (void)virtio::copy_from_pieces(chain.readable.pieces(), header, scratch_);
          if (reflect(rx, map, scratch_)) ++reflected;
        }
      }
      add_used_logged(tx, map, chain.head, 0);
      ++done;
    }
    if (done > 0) publish_and_signal(tx, map);
    if (reflected > 0) publish_and_signal(rx, map);
    return done;
  });
}

bool InlineDatapath::reflect(Queue& rx, const virtio::GuestMemoryMap& map, std::span<std::byte> frame) {
  if (frame.size() >= 2 * kMacBytes) {
    std::swap_ranges(frame.begin(), frame.begin() + kMacBytes, frame.begin() + kMacBytes);
  }
  rx_writer_.record_writes(logging());
  const virtio::RxResult result = rx_writer_.deliver(*rx.ring, map, virtio::NetHeader{}, frame);
  if (result.status != virtio::RxStatus::kDelivered) {
    // kNoBuffers: the guest posted too few; kDropped: cannot fit; kQueueBroken: logged
    // by the queue. In each case this frame is gone.
    ++rx.dropped;
    return false;
  }
  ++rx.packets;
  rx.bytes += frame.size();
  if (logging()) {
    log_host_writes(*log_, map, rx_writer_.written());
    // The used elements deliver() added: `buffers` slots ending at used_index().
    if (rx.log_used) {
      log_used_elements(*log_, rx.log_guest_addr, rx.ring->used_index(), result.buffers, rx.ring->config().size);
    }
  }
  return true;
}

}  // namespace uvhost::vhost_user
