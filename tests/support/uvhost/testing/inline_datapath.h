// inline_datapath.h - a small, real datapath behind DatapathHooks that runs on the
// device's control thread: it starts a virtio DeviceQueue per started ring on the
// device's guest memory and, when polled, drains the transmit queues (odd vring
// indexes). What happens to each transmitted frame is the port's backend:
//   kSink      count it and drop it (the chain goes back used with length 0);
//   kLoopback  reflect it into the receive queue of the same pair (vring 2k for TX
//              vring 2k+1) with source and destination MAC swapped, as one packet
//              (MRG_RXBUF when negotiated); no receive buffer posted: dropped, counted.
// The guest is signalled through the call fd when a ring asks for it (EVENT_IDX or the
// flags). With VHOST_F_LOG_ALL and a log, every used-ring write and every byte written
// into receive buffers is marked dirty (live migration).
//
// Test support, in no production layer: the vhost-user tests and the message fuzzer
// put it behind a BackendDevice as a reference datapath. `uvhost serve` runs the
// datapath layer (workers, polling modes, the backends) instead.
//
// Contract
// --------
//  - One thread: poll(), the kick helpers and the hooks run on the thread that drives
//    the device. Counters are read on that thread (or after it stopped).
//  - Kicks: poll() does not read kick eventfds. The caller waits on kick_fds() (the
//    transmit rings' kicks; receive kicks are suppressed, nothing here waits for
//    receive buffers) and reads what became readable. While it keeps polling it calls
//    disable_kicks(); before sleeping, enable_kicks(), which returns true when a ring
//    got work meanwhile (the re-check that closes the lost-wakeup race).
//  - Whatever the guest puts in the rings is handled by DeviceQueue (hostile input: a
//    violation breaks that queue only, logged; the device and other queues go on).
//  - A chain popped is always completed in the same poll(): when the loop stops, the
//    rings hold no half-processed work (GET_VRING_BASE answers a consistent index).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "uvhost/vhost_user/datapath_hooks.h"
#include "uvhost/vhost_user/dirty_log.h"
#include "uvhost/virtio/descriptor_chain.h"
#include "uvhost/virtio/net_rx.h"
#include "uvhost/virtio/split_queue.h"

namespace uvhost::vhost_user {

enum class InlineBackend { kSink, kLoopback };
std::string_view to_string(InlineBackend backend) noexcept;

class InlineDatapath final : public DatapathHooks {
 public:
  struct QueueView {
    bool started = false;
    bool enabled = false;
    bool broken = false;
    uint64_t packets = 0;  // TX vring: frames taken from the guest; RX vring: delivered
    uint64_t bytes = 0;    // frame bytes, virtio-net header excluded
    uint64_t dropped = 0;  // RX vring: reflected frames with no room (or too large)
    uint64_t calls = 0;    // call eventfd writes
  };

  // The largest frame reflected (a 64 KiB GSO-sized frame); larger ones are dropped.
  static constexpr size_t kMaxFrame = 65536;

  explicit InlineDatapath(uint32_t queue_count, InlineBackend backend = InlineBackend::kSink);

  // Drains every started transmit queue once (a bounded budget per queue); returns the
  // packets taken from the guest.
  size_t poll();

  // The transmit rings' kick fds (started rings with an fd), for the caller to wait on.
  void kick_fds(std::vector<int>& out) const;
  void disable_kicks();
  // Re-enables kicks on every running transmit ring; true if one has work already.
  [[nodiscard]] bool enable_kicks();

  InlineBackend backend() const noexcept { return backend_; }
  // Keep a copy of the last transmitted frame (header excluded).
  const std::vector<std::byte>& last_frame() const noexcept { return last_frame_; }
  QueueView queue(uint32_t index) const;
  uint32_t queue_count() const noexcept { return static_cast<uint32_t>(queues_.size()); }
  uint64_t rarp_requests() const noexcept { return rarp_requests_; }
  uint64_t memory_changes() const noexcept { return memory_changes_; }
  uint64_t features() const noexcept { return features_; }

  // DatapathHooks
  bool queue_started(const QueueStart& start, virtio::GuardedGuestMemory& memory) override;
  uint16_t queue_stopped(uint32_t index) override;
  void queue_enabled(uint32_t index, bool enabled) override;
  void call_fd_changed(uint32_t index, int call_fd) override;
  void used_log_changed(uint32_t index, bool log_used, uint64_t log_guest_addr) override;
  void memory_changed() override { ++memory_changes_; }
  void features_changed(uint64_t features) override;
  void log_changed(DirtyLog* log) override { log_ = log; }
  void rarp_requested(const std::array<uint8_t, 6>&) override { ++rarp_requests_; }

 private:
  struct Queue {
    std::unique_ptr<virtio::DeviceQueue> ring;
    virtio::GuardedGuestMemory* memory = nullptr;
    int kick_fd = -1;
    int call_fd = -1;
    bool started = false;
    bool enabled = false;
    bool log_used = false;
    uint64_t log_guest_addr = 0;
    uint64_t packets = 0;
    uint64_t bytes = 0;
    uint64_t dropped = 0;
    uint64_t calls = 0;

    bool running() const noexcept { return started && ring && !ring->is_broken(); }
  };

  size_t drain(uint32_t tx_index, Queue& tx);
  // Loopback: writes `frame` (MACs swapped) into receive queue `rx`; false if dropped.
  bool reflect(Queue& rx, const virtio::GuestMemoryMap& map, std::span<std::byte> frame);
  void add_used_logged(Queue& queue, const virtio::GuestMemoryMap& map, uint16_t head, uint32_t len);
  void publish_and_signal(Queue& queue, const virtio::GuestMemoryMap& map);
  bool logging() const noexcept;
  size_t header_size() const noexcept;

  InlineBackend backend_;
  std::vector<Queue> queues_;
  std::vector<std::byte> last_frame_;
  std::vector<std::byte> scratch_;  // loopback: the frame being reflected
  virtio::DescriptorChain tx_chain_;
  virtio::NetReceiveWriter rx_writer_{virtio::RxOptions{}};
  uint64_t features_ = 0;
  DirtyLog* log_ = nullptr;
  uint64_t rarp_requests_ = 0;
  uint64_t memory_changes_ = 0;
};

}  // namespace uvhost::vhost_user
