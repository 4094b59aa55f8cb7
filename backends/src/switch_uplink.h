// switch_uplink.h (private to the backends library) - a tap as a member of a
// SwitchHub, served by a thread of its own (see switch_backend.h, "Uplink").
//
// Contract
// --------
//  - open(options, error): a TapBackend with one queue, its receive offloads
//    (TUNSETOFFLOAD) set to every one the kernel takes; nullptr and `error` on failure.
//  - start(on_frame): starts the thread. It waits (epoll) on the tap fd (edge-
//    triggered), a wake eventfd and a stop eventfd. Every frame read from the tap is
//    handed to on_frame(packet) on that thread (the packet is reused afterwards).
//    Reads are taken in rounds of at most kReadBudget frames, between which queued
//    outgoing frames are written, so neither direction starves the other.
//  - inject(pair, packet) (RxInjector; any thread, never blocks for long): queues the
//    packet for the tap (pair ignored) and wakes the thread when the queue was empty.
//    false when kCapacity packets are queued already (counted: queue_full) or the
//    uplink is stopped. The queue is a vector under a mutex, swapped out whole by the
//    thread (so a push never allocates: both vectors keep their reserved capacity).
//    Wake-up protocol: a producer that makes the queue non-empty writes the wake
//    eventfd after its push (outside the mutex); the thread reads (clears) the eventfd
//    before it swaps the queue out. So a push either lands before a swap that follows
//    the eventfd read, or its eventfd write comes after that read and wakes the next
//    epoll_wait: no packet is left behind while the thread sleeps (a wake-up can be
//    spurious, never lost).
//  - stop(): stops and joins the thread (idempotent); queued packets are dropped.
//    ~SwitchUplink stops it. inject() after stop() returns false (but the object must
//    outlive every inject() call: the hub removes the uplink from its member set,
//    which waits out the readers, before destroying it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "uvhost/backends/port_backend.h"
#include "uvhost/backends/tap_backend.h"
#include "uvhost/base/unique_fd.h"
#include "uvhost/sync/thread_annotations.h"

namespace uvhost::backends {

class SwitchUplink final : public RxInjector {
 public:
  static constexpr size_t kCapacity = 1024;
  static constexpr int kReadBudget = 256;

  using FrameHandler = std::function<void(Packet&)>;

  static std::unique_ptr<SwitchUplink> open(const TapBackendOptions& options, std::string& error);
  ~SwitchUplink() override;
  SwitchUplink(const SwitchUplink&) = delete;
  SwitchUplink& operator=(const SwitchUplink&) = delete;

  void start(FrameHandler on_frame);
  void stop() UVHOST_EXCLUDES(mutex_);

  bool inject(uint32_t pair, PacketPtr packet) noexcept UVHOST_EXCLUDES(mutex_) override;
  uint32_t queue_pairs() const noexcept override { return 1; }

  const TapBackend& tap() const noexcept { return *tap_; }
  uint64_t queue_full() const noexcept { return queue_full_.load(std::memory_order_relaxed); }  // relaxed: a statistic

 private:
  SwitchUplink(std::unique_ptr<TapBackend> tap, base::UniqueFd epoll_fd, base::UniqueFd wake_fd,
               base::UniqueFd stop_fd);
  void run();
  void write_queued(std::vector<PacketPtr>& batch) UVHOST_EXCLUDES(mutex_);

  std::unique_ptr<TapBackend> tap_;
  const base::UniqueFd epoll_fd_;
  const base::UniqueFd wake_fd_;
  const base::UniqueFd stop_fd_;
  FrameHandler on_frame_;
  std::thread thread_;

  sync::Mutex mutex_;
  std::vector<PacketPtr> outgoing_ UVHOST_GUARDED_BY(mutex_);  // capacity kCapacity, reserved once
  bool stopped_ UVHOST_GUARDED_BY(mutex_) = false;
  std::atomic<uint64_t> queue_full_{0};  // relaxed fetch_add: a statistic
};

}  // namespace uvhost::backends
