// vring.h (private) - the datapath's state for one vring: what its worker owns, what
// the control thread may read, and the handler the worker runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "uvhost/backends/packet.h"
#include "uvhost/backends/port_backend.h"
#include "uvhost/datapath/adaptive_poll.h"
#include "uvhost/datapath/frame_ring.h"
#include "uvhost/datapath/poll_mode.h"
#include "uvhost/datapath/queue_stats.h"
#include "uvhost/datapath/tx_delivery.h"
#include "uvhost/datapath/worker.h"
#include "uvhost/sync/work_queue.h"
#include "uvhost/vhost_user/dirty_log.h"
#include "uvhost/virtio/descriptor_chain.h"
#include "uvhost/virtio/guarded_guest_memory.h"
#include "uvhost/virtio/net_rx.h"
#include "uvhost/virtio/split_queue.h"

namespace uvhost::datapath {

using Clock = std::chrono::steady_clock;

struct Vring {
  // `handle` is called with this vring each time the handler runs.
  Vring(uint32_t index_, Worker* worker_, std::function<void(Vring&)> handle, size_t inbound_frames)
      : index(index_),
        pair(index_ / 2),
        is_tx(index_ % 2 == 1),
        worker(worker_),
        handler([this, handle = std::move(handle)] { handle(*this); }),
        inbound(is_tx ? nullptr : std::make_unique<FrameRing>(inbound_frames)) {}

  // Fixed at construction.
  const uint32_t index;
  const uint32_t pair;
  const bool is_tx;  // virtio-net: 2k receive, 2k+1 transmit
  Worker* const worker;
  sync::WorkItem handler;  // handle_tx / handle_rx, queued by kicks, fds, injects

  // Any thread.
  std::atomic<uint64_t> poll_word{0};     // pack(PollSettings); relaxed (a hint per idle phase)
  QueueCounters counters;
  // Mirrors of worker-owned state for snapshots (relaxed: reporting only), and the
  // inject gate: acquire/release so an injector that sees `accepting` also sees a
  // started queue (the packet would otherwise sit in `inbound` until the next start).
  std::atomic<bool> view_started{false};
  std::atomic<bool> view_enabled{false};
  std::atomic<bool> view_broken{false};
  std::atomic<bool> view_no_kick_fd{false};  // NOFD: polled whatever the poll mode
  std::atomic<bool> accepting{false};
  const std::unique_ptr<FrameRing> inbound;  // receive vrings only

  // ---- Worker thread only (set up and torn down through Worker::run) ----
  std::unique_ptr<virtio::DeviceQueue> ring;
  virtio::GuardedGuestMemory* memory = nullptr;
  int kick_fd = -1;
  int call_fd = -1;
  int err_fd = -1;  // SET_VRING_ERR: written once when the ring breaks
  bool err_signalled = false;
  // guest_memory_fault::fault_count() when this ring last looked for a faulted region.
  uint64_t seen_faults = 0;
  int rx_fd = -1;  // the backend's pull readiness fd being watched (receive only)
  bool started = false;
  bool enabled = false;
  bool log_used = false;
  uint64_t log_guest_addr = 0;
  bool kicks_disabled = false;  // guest kicks suppressed by us right now

  // Negotiated features, copied in on the worker.
  size_t header_size = virtio::kNetHeaderSizeMrg;
  vhost_user::DirtyLog* log = nullptr;
  bool log_all = false;

  AdaptivePollTimeout adaptive;
  std::optional<Clock::time_point> idle_since;  // when the ring was last found dry
  // Adaptive transmit: when the current dry spell began. A poll that steps aside for
  // another queue's work (requeued, kicks still off) resumes the same spell, so its
  // budget counts from here, not from each restart.
  std::optional<Clock::time_point> dry_since;

  // Transmit: one burst's chains and the frames handed to the backend (sized to the
  // burst on first start, reused).
  std::vector<virtio::DescriptorChain> chains;
  std::vector<backends::TxFrame> frames;
  std::unique_ptr<TxBounce> bounce;  // TxDelivery::kAtMostOnce: the burst's copies

  // Receive.
  virtio::NetReceiveWriter writer{virtio::RxOptions{}};
  backends::PacketPtr held;       // taken from `inbound`, waiting for guest buffers
  backends::RxFrameView pulled;   // the backend's pull_frame() view
  bool pulled_held = false;       // `pulled` shows a frame waiting for guest buffers

  bool running() const noexcept { return started && ring != nullptr && !ring->is_broken(); }
  bool logging() const noexcept { return log_all && log != nullptr; }
  // After enabling or disabling guest kicks (used->flags, avail_event written): the
  // used ring's page marked dirty while migration logs.
  void log_kick_fields() noexcept {
    if (!logging() || !log_used || !ring) return;
    if (ring->config().packed) {
      vhost_user::log_packed_device_area(*log, log_guest_addr);
    } else {
      vhost_user::log_kick_fields(*log, log_guest_addr, ring->config().size);
    }
  }
  // The settings the handler follows: the port's, except that a ring without a kick fd
  // (SET_VRING_KICK with VHOST_USER_VRING_NOFD_MASK) is polled, as `always` does: it
  // would otherwise sleep forever waiting for a kick that cannot come.
  PollSettings effective_poll() const noexcept {
    PollSettings settings = unpack(poll_word.load(std::memory_order_relaxed));
    if (started && kick_fd < 0) settings.mode = PollMode::kAlways;
    return settings;
  }
};

}  // namespace uvhost::datapath
