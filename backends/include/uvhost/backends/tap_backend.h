// tap_backend.h - the `tap` backend: a port's frames go to and come from a Linux tap
// interface, one tap queue (fd) per queue pair, with the 12-byte virtio-net header
// (tap_device.h), so offloads pass between the guest and the host kernel untouched.
//
// Contract
// --------
//  Opening (TapBackend::open)
//  - queue_pairs 1..kMaxQueuePairs (a tap has at most 256 queues). One TapDevice per
//    pair: IFF_VNET_HDR with a 12-byte little-endian header, IFF_MULTI_QUEUE when
//    queue_pairs > 1 (so an existing tap is attached only when its multi_queue setting
//    matches: single-queue for 1 pair, multi-queue for more), not persistent, set up,
//    `mtu` applied when given. The first queue creates or attaches the interface (name
//    empty: the kernel picks "tapN"); the others attach to it by name.
//  - create_if_missing false: only an existing tap is attached (a name is required);
//    a tap that did not exist is not left behind (created and at once deleted).
//  - Failure: nullptr, `error` says why; a tap created by a failed open is deleted.
//  - The tap lives in the network namespace of the calling thread (tap_device.h). It
//    disappears when the backend is destroyed if the backend created it.
//
//  Traffic (pair k uses queue k's fd; pair >= queue_pairs: refused, bad_pair)
//  - transmit_burst(k, frames): per frame, one writev of [its header read once and
//    encoded in 12 bytes, num_buffers 0][the frame, straight from guest memory]: no
//    copy in user space. Taken only when the kernel took it. Every other
//    outcome is a drop, counted by cause: full (the tap's queue, EAGAIN/ENOBUFS),
//    bad_frame (the kernel refused the header or size), down (link down), error (other
//    errno; logged at most once a second), gone (see below).
//  - pull_frame(k, view): reads one frame into pair k's scratch buffer
//    (max_read_bytes(), allocated at open, never cleared) and shows it: header from the
//    tap's (num_buffers 0), frame exactly the frame, in the scratch buffer until the
//    next pull_frame(k). A truncated frame (cannot happen with max_read_bytes();
//    counted if it does) is skipped and the next one read, so pull_frame() returns
//    false only when the queue is empty (or on an error), and the edge of rx_fd(k) is
//    never lost.
//  - rx_fd(k): queue k's tap fd (non-blocking): readable when frames are queued.
//  - The interface deleted under us (ip link del; namespace gone): the first call that
//    sees kGone logs one error "tap NAME disappeared" and marks the backend gone; from
//    then on transmit_burst() takes nothing and pull_frame() returns false without a
//    system call, counted
//    (tx gone / rx gone). It stays gone: reopen a new backend to recover.
//  - offered_features(): CSUM, HOST_TSO4, HOST_TSO6, HOST_ECN, HOST_UFO (a tap with
//    the vnet header takes such frames from any kernel we run on, and the kernel
//    segments or checksums them where the host needs it), HOST_USO when the kernel
//    knows USO (Linux >= 6.2: the probe below takes TUN_F_USO4|USO6), and the GUEST_*
//    features of the TUN_F_* flags this kernel's TUNSETOFFLOAD accepts (probed once at
//    open on queue 0: TapDevice::probe_offloads, guest_features_for).
//  - features_changed(features): applies the guest's receive offloads to every queue
//    (TapDevice::set_offloads); a refusal is logged as a warning (the kernel then
//    segments and checksums in software before we read). Without GUEST_CSUM
//    pull_frame() clears the header's flags (the tap may mark a frame DATA_VALID, which a device
//    may only tell a guest that negotiated GUEST_CSUM; virtio 1.2, 5.1.6.4.1).
//  - mtu_changed(mtu): SIOCSIFMTU on the tap (the daemon's namespace must be the
//    tap's); a refusal is logged and counted (mtu_errors), the tap keeps its MTU.
//
//  Threads: transmit_burst(k) and pull_frame(k) may run at once (TapDevice allows one reader and
//  one writer per queue), different k in parallel. Counters are per pair and per
//  direction (pair_counters.h: single writer, relaxed). gone is an atomic flag
//  (relaxed: it only makes later calls skip the system call; it publishes nothing).
//  stats(), describe() and the getters from any thread.
//  stats(): {"name", "ifindex", "created", "queues", "gone", "offload_flags", "mtu" (last
//  set by us, 0 if never), "mtu_errors",
//  "tx": {"sent", "bytes", "full", "bad_frame", "down", "error", "gone"},
//  "rx": {"frames", "bytes", "truncated", "error", "gone"}, "bad_pair"}.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "uvhost/backends/log_limiter.h"
#include "uvhost/backends/pair_counters.h"
#include "uvhost/backends/port_backend.h"
#include "uvhost/backends/tap_device.h"

namespace uvhost::backends {

struct TapBackendOptions {
  std::string name;                // empty: the kernel picks "tapN"
  bool create_if_missing = true;   // false: attach to an existing tap only
  uint32_t queue_pairs = 1;        // 1..TapBackend::kMaxQueuePairs, one tap queue each
  std::optional<uint32_t> mtu;     // SIOCSIFMTU when given
};

class TapBackend final : public PortBackend {
 public:
  static constexpr uint32_t kMaxQueuePairs = 256;  // the kernel's MAX_TAP_QUEUES
  static constexpr size_t kHeaderSize = virtio::kNetHeaderSizeMrg;

  static std::unique_ptr<TapBackend> open(const TapBackendOptions& options, std::string& error);

  ~TapBackend() override;
  TapBackend(const TapBackend&) = delete;
  TapBackend& operator=(const TapBackend&) = delete;

  std::string_view kind() const noexcept override { return "tap"; }
  std::string describe() const override;

  // The header flags a frame from the tap may carry to a guest (see the contract).
  static constexpr uint8_t flags_for_guest(uint8_t tap_flags, bool guest_csum) noexcept {
    return guest_csum ? tap_flags : uint8_t{0};
  }

  uint64_t offered_features() const noexcept override { return offered_features_; }
  void features_changed(uint64_t features) override;
  void mtu_changed(uint32_t mtu) override;
  TxBurstResult transmit_burst(uint32_t pair, std::span<const TxFrame> frames) override;
  bool pull_frame(uint32_t pair, RxFrameView& view) override;
  int rx_fd(uint32_t pair) const noexcept override;

  nlohmann::json stats() const override;

  const std::string& name() const noexcept { return queues_.front()->name(); }
  unsigned ifindex() const noexcept { return queues_.front()->ifindex(); }
  bool created() const noexcept { return queues_.front()->created(); }
  uint32_t queue_pairs() const noexcept { return static_cast<uint32_t>(queues_.size()); }
  bool gone() const noexcept { return gone_.load(std::memory_order_relaxed); }  // relaxed: see the contract

  uint64_t tx_sent() const noexcept { return tx_.total(kSent); }
  uint64_t tx_gone() const noexcept { return tx_.total(kTxGone); }
  uint64_t rx_frames() const noexcept { return rx_.total(kFrames); }
  uint64_t rx_gone() const noexcept { return rx_.total(kRxGone); }

 private:
  enum TxCounter : size_t { kSent, kSentBytes, kFull, kBadFrame, kDown, kTxError, kTxGone, kTxCounterCount };
  enum RxCounter : size_t { kFrames, kBytes, kTruncated, kRxError, kRxGone, kRxCounterCount };

  // Pair k's scratch: the encoded header and the iovecs for transmit_burst(k), the
  // read buffer for pull_frame(k).
  struct alignas(64) PairScratch {
    std::array<std::byte, kHeaderSize> tx_header{};
    std::array<iovec, TapDevice::kMaxPieces> tx_pieces{};
    std::vector<std::byte> rx_buffer;
  };

  // One frame's writev and its counting; true when the kernel took it.
  bool write_one(uint32_t pair, PairScratch& scratch, const TxFrame& frame);

  TapBackend(std::vector<std::unique_ptr<TapDevice>> queues, std::optional<uint32_t> mtu);

  void mark_gone(std::string_view operation, int error_number) noexcept;

  std::vector<std::unique_ptr<TapDevice>> queues_;  // [pair]
  std::unique_ptr<PairScratch[]> scratch_;          // [pair]
  PairCounters<kTxCounterCount> tx_;
  PairCounters<kRxCounterCount> rx_;
  uint64_t offered_features_ = 0;
  std::atomic<bool> gone_{false};
  // relaxed: written on the control thread while the rings are stopped (features_changed's
  // contract); the worker's start synchronizes with it.
  std::atomic<bool> guest_csum_{false};
  std::atomic<uint32_t> mtu_{0};            // relaxed: reporting
  std::atomic<uint64_t> mtu_errors_{0};     // relaxed: a statistic
  std::atomic<uint64_t> bad_pair_{0};  // relaxed fetch_add: rare, any thread
  LogLimiter tx_error_log_;
  LogLimiter rx_error_log_;
};

}  // namespace uvhost::backends
