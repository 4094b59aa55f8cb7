// sink_datapath.h - a small, real datapath behind DatapathHooks: it starts a virtio
// DeviceQueue per started ring on the device's guest memory and, when polled, drains
// the transmit queues (odd vring indexes) like a packet sink: every chain is popped,
// counted, optionally kept, and returned used with length 0; the guest is signalled
// through the call fd when the ring asks for it. Receive queues are started but left
// alone (a sink sends nothing). With VHOST_F_LOG_ALL and a log, used ring writes are
// logged (transmit writes no guest buffers).
//
// Contract
// --------
//  - For tests, the fuzzer and as a reference for the real datapath (a later layer):
//    poll() runs on the same thread as the device's hooks (it is not thread-safe).
//  - Whatever the guest puts in the rings is handled by DeviceQueue (hostile input: a
//    violation breaks that queue only, logged).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "uvhost/vhost_user/datapath_hooks.h"
#include "uvhost/vhost_user/dirty_log.h"
#include "uvhost/virtio/split_queue.h"

namespace uvhost::vhost_user {

class SinkDatapath final : public DatapathHooks {
 public:
  struct QueueView {
    bool started = false;
    bool enabled = false;
    bool broken = false;
    uint64_t packets = 0;
    uint64_t bytes = 0;  // frame bytes, virtio-net header excluded
  };

  explicit SinkDatapath(uint32_t queue_count);

  // Drains every started transmit queue once; returns the packets consumed.
  size_t poll();

  // Keep a copy of the last transmitted frame (header excluded).
  const std::vector<std::byte>& last_frame() const noexcept { return last_frame_; }
  QueueView queue(uint32_t index) const;
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
  void features_changed(uint64_t features) override { features_ = features; }
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
  };

  size_t drain(uint32_t index, Queue& queue);
  bool logging() const noexcept;

  std::vector<Queue> queues_;
  std::vector<std::byte> last_frame_;
  uint64_t features_ = 0;
  DirtyLog* log_ = nullptr;
  uint64_t rarp_requests_ = 0;
  uint64_t memory_changes_ = 0;
};

}  // namespace uvhost::vhost_user
