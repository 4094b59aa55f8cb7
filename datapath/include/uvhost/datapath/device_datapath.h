// device_datapath.h - the datapath of one port: the DatapathHooks the vhost-user device
// drives, running each virtqueue's handler on a worker thread, with the poll mode, the
// burst size and the fairness weights the port was given, moving frames between the
// guest's rings and the port's backend (backends/port_backend.h).
//
// Design
// ------
//  Each vring has a handler (a sync::WorkItem) on the worker its queue pair was mapped
//  to (worker_pool.h). What queues the handler: its kick eventfd becoming readable
//  (the worker sleeps in epoll_wait on them), a frame injected for a receive queue
//  (RxInjector), the backend's pull fd (a tap), a control change. The handler runs
//  bursts of up to `burst` packets: a transmit burst pops its chains at once
//  (DeviceQueue::pop_burst) and hands them to the backend in place, in one
//  transmit_burst() call (no copy here: the backend copies what it keeps; with
//  TxDelivery::kAtMostOnce copied out and their used entries published first, so a
//  killed daemon never has a frame sent twice: tx_delivery.h); a receive
//  burst reserves guest buffers `burst` at a time. After each burst the used entries
//  are published at once and the guest is signalled at most once
//  (EVENT_IDX / flags honoured, suppressed calls counted);
//  after `weight_packets` packets or `weight_bytes` bytes in one turn it re-queues
//  itself and returns, so the other queues of the worker get a turn
//  (VHOST_NET_PKT_WEIGHT / VHOST_NET_WEIGHT). When its ring runs dry it waits the way
//  its PollSettings say (poll_mode.h): re-enable kicks with the re-check and sleep,
//  or busy-poll first, or keep polling.
//
//  Control plane: every hook runs its change on the owning worker (Worker::run) -
//  between two handler runs of that worker, so the handlers read their vring's state
//  without a lock, and other workers' queues keep moving. Guest memory is read
//  through GuardedGuestMemory per burst (and per poll check): the policy chosen for
//  the device decides what a reader pays (mutex, rwsem, pthread-rwlock or RCU: the
//  read-mostly lock question of "vfio/type1: Convert vfio_iommu.lock from mutex to rwsem").
//
//  Receive: a frame for the guest comes from the vring's inbound FrameRing (pushed by
//  inject(): the switch, a tap uplink), from the backend's pull_frame() (a view of the
//  backend's memory, copied once into the guest), or, when a transmit burst of this
//  port hands a frame back (inject_frame(): loopback) and this worker serves the
//  receive ring with nothing queued ahead, straight from the transmitting guest's
//  buffers into the receiving ones (transmit_scope.h). Without guest
//  buffers the frame is held, kicks are enabled on the receive ring (with the
//  re-check) and the handler sleeps until the guest posts some; meanwhile further
//  injected frames wait in the FrameRing and, when it is full, are dropped and
//  counted (inject_dropped; never a wait: a guest that stops reading cannot stall its
//  senders). A frame injected for a receive queue that is not running (not started,
//  disabled, broken: no guest driver yet) is dropped too, counted in inject_dropped
//  and in inject_stopped, which tells it from an overflow. Pull
//  backends keep their frames (a tap's own queue) until then. A frame that needs many
//  buffers asks the guest for one kick once enough of them are posted, not one per
//  buffer (DeviceQueue::enable_guest_kicks_for_more).
//
// Contract
// --------
//  - Hooks: on one control thread (datapath_hooks.h). They block until the worker ran
//    the change; never call them from a worker.
//  - inject(), set_poll(), snapshot(): any thread.
//  - The backend is attached in the constructor and detached first thing in the
//    destructor (no inject after that), which then stops every running ring.
//  - Guest memory cut short under us (guest_memory_fault.h): after each burst, and in
//    each poll check, a handler compares the process's fault count (one plain load);
//    when it moved and a region of this device's map faulted, the ring breaks, its err
//    fd is written, and the first ring to find it logs ONE error line for the device
//    (the region's guest range, what backs it, the size the file has now) and makes
//    failure_fd() readable: the port then ends the connection.
//  - A ring broken for any reason (a hostile ring, a memory fault) has its SET_VRING_ERR
//    eventfd written once (1), as the spec's "error notification" asks.
//  - A ring started without a kick fd (NOFD) is polled, as `always` does, whatever the
//    port's poll mode (logged at start; QueueSnapshot::no_kick_fd).
//  - Packets that the guest made available and that a handler popped are always
//    completed (used entry added and published) before the handler returns: a ring
//    stopped between handler runs is consistent, and a poll-mode switch loses nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "uvhost/backends/port_backend.h"
#include "uvhost/base/unique_fd.h"
#include "uvhost/datapath/poll_mode.h"
#include "uvhost/datapath/queue_stats.h"
#include "uvhost/datapath/tx_delivery.h"
#include "uvhost/datapath/worker.h"
#include "uvhost/sync/thread_annotations.h"
#include "uvhost/vhost_user/datapath_hooks.h"
#include "uvhost/virtio/net_rx.h"

namespace uvhost::datapath {

struct DatapathOptions {
  std::string name = "port";
  uint32_t queue_pairs = 1;
  uint32_t burst = 64;              // packets between used-ring publications
  uint32_t weight_packets = 256;    // per handler turn (VHOST_NET_PKT_WEIGHT)
  uint64_t weight_bytes = 0x80000;  // per handler turn (VHOST_NET_WEIGHT)
  PollSettings poll;                // initial settings of every queue
  size_t inbound_frames = 1024;     // frames a receive queue holds for the guest
  TxDelivery tx_delivery = TxDelivery::kInPlace;  // send, then publish; or copy, publish, send
};

struct Vring;

class DeviceDatapath final : public vhost_user::DatapathHooks, public backends::RxInjector {
 public:
  // The largest frame moved either way (a 64 KiB GSO frame plus Ethernet and VLAN
  // headers); a larger one is dropped and counted.
  static constexpr size_t kMaxFrame = 65535 + 14 + 4;

  // `pair_workers`: one worker per queue pair (WorkerPool::assign). They outlive this.
  DeviceDatapath(DatapathOptions options, backends::PortBackend& backend, std::vector<Worker*> pair_workers);
  ~DeviceDatapath() override;
  DeviceDatapath(const DeviceDatapath&) = delete;
  DeviceDatapath& operator=(const DeviceDatapath&) = delete;

  const DatapathOptions& options() const noexcept { return options_; }
  uint32_t queue_count() const noexcept { return options_.queue_pairs * 2; }

  // Changes the poll settings of vring `index` (nullopt: every vring) while traffic
  // runs; the handler is queued so a sleeping queue starts polling at once. false:
  // no such vring.
  bool set_poll(std::optional<uint32_t> index, const PollSettings& settings);
  PollSettings poll(uint32_t index) const;

  std::vector<QueueSnapshot> snapshot() const;

  // Readable (an eventfd, level) once the device failed as a whole (its guest memory was
  // cut short) and its connection must end. take_failure(): the reason, and the failure
  // cleared (control thread, between connections).
  int failure_fd() const noexcept { return failure_fd_.get(); }
  std::optional<std::string> take_failure() UVHOST_EXCLUDES(failure_mutex_);
  uint64_t rarp_requests() const noexcept { return rarp_requests_.load(std::memory_order_relaxed); }
  // RARP announcements the backend took (one per request it did not refuse).
  uint64_t rarp_sent() const noexcept { return rarp_sent_.load(std::memory_order_relaxed); }

  // RxInjector
  bool inject(uint32_t pair, backends::PacketPtr packet) noexcept override;
  bool inject_frame(uint32_t pair, const virtio::NetHeader& header, std::span<const std::byte> prefix,
                    const backends::TxFrame& source) noexcept override;
  uint32_t queue_pairs() const noexcept override { return options_.queue_pairs; }

  // DatapathHooks (control thread)
  bool queue_started(const vhost_user::QueueStart& start, virtio::GuardedGuestMemory& memory) override;
  uint16_t queue_stopped(uint32_t index) override;
  void queue_enabled(uint32_t index, bool enabled) override;
  void call_fd_changed(uint32_t index, int call_fd) override;
  void err_fd_changed(uint32_t index, int err_fd) override;
  void used_log_changed(uint32_t index, bool log_used, uint64_t log_guest_addr) override;
  // Runs every started vring's handler once: a queue waiting for an IOTLB translation
  // (virtio/translation_miss.h) tries again with the new map.
  void memory_changed() override;
  void features_changed(uint64_t features) override;
  void log_changed(vhost_user::DirtyLog* log) override;
  void rarp_requested(const std::array<uint8_t, 6>& mac) override;
  void mtu_changed(uint16_t mtu) override;  // handed to the backend (a tap applies it)

 private:
  friend class TransmitScope;

  // What a burst came to.
  struct Burst {
    size_t entries = 0;  // ring entries consumed (transmit) or frames handled (receive)
    uint64_t bytes = 0;
    bool blocked = false;  // receive: a frame waits for guest buffers
  };
  enum class AfterIdle { kContinue, kRequeue, kQueued, kSleep };

  // Worker thread.
  void handle(Vring& q);
  Burst transmit_burst(Vring& q);
  Burst receive_burst(Vring& q);
  bool take_receive_frame(Vring& q, const virtio::NetHeader*& header, std::span<const std::byte>& frame);
  void release_receive_frame(Vring& q);
  virtio::RxResult write_frame(Vring& q, const virtio::GuestMemoryMap& map, const virtio::NetHeader& header,
                               const virtio::RxSource& frame);
  // Ends a receive ring's writing for now: reserved buffers back, used entries
  // published, the guest signalled if it asks for it.
  void finish_direct(Vring& q, const virtio::GuestMemoryMap& map);
  bool wait_for_buffers(Vring& q);
  AfterIdle idle(Vring& q);
  AfterIdle sleep(Vring& q, std::chrono::steady_clock::time_point now);
  // Spins until (this->*ready)(q), or until another item of the worker is pending.
  AfterIdle spin_always(Vring& q, bool (DeviceDatapath::*ready)(Vring&));
  bool buffers_arrived(Vring& q);
  bool has_work(Vring& q);
  void set_kicks(Vring& q, bool enabled);
  void publish_and_signal(Vring& q, const virtio::GuestMemoryMap& map);
  bool start_on_worker(Vring& q, const vhost_user::QueueStart& start, virtio::GuardedGuestMemory& memory);
  uint16_t stop_on_worker(Vring& q);
  void drop_pending_receive(Vring& q);
  void on_kick(Vring& q);
  void refresh_view(Vring& q);
  // Has guest memory faulted since this ring last looked? One relaxed load.
  static bool faults_moved(const Vring& q) noexcept;
  // A region of this device's memory faulted: break the ring (true), report the device
  // failure once. false: the fault was elsewhere.
  bool check_memory_fault(Vring& q) UVHOST_EXCLUDES(failure_mutex_);

  // Runs fn(vring) on each vring's worker, one vring at a time.
  template <class Fn>
  void for_each_on_worker(Fn fn);

  DatapathOptions options_;
  backends::PortBackend& backend_;
  std::vector<std::unique_ptr<Vring>> vrings_;
  std::atomic<uint64_t> rarp_requests_{0};
  std::atomic<uint64_t> rarp_sent_{0};

  base::UniqueFd failure_fd_;  // eventfd
  sync::Mutex failure_mutex_;
  std::optional<std::string> failure_ UVHOST_GUARDED_BY(failure_mutex_);
};

}  // namespace uvhost::datapath
