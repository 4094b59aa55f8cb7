// loopback_backend.h - the `loopback` backend: every frame the guest transmits on
// queue pair k comes back to it on receive queue pair k, with the source and
// destination MAC swapped (what testpmd's macswap does).
//
// Contract
// --------
//  - LoopbackBackend(queue_pairs): queue_pairs >= 1 (std::invalid_argument otherwise).
//  - transmit_burst(pair, frames): each frame goes back to the guest with bytes 0..5
//    and 6..11 swapped and its header's offload fields (flags, gso_type, hdr_len,
//    gso_size, csum_start, csum_offset) unchanged, num_buffers 0, through
//    injector()->inject_frame(pair, ...): the swapped addresses are read from guest
//    memory once, the rest is copied once, by the datapath, guest to guest when it
//    can. A frame counts as taken when the injector took it.
//    Dropped (false) and counted: no injector attached (no_injector), a frame shorter
//    than an Ethernet header (too_short, < 14 bytes), longer than kMaxFrameBytes
//    (too_long), the injector refused it (inject_failed: its queue stopped or full),
//    pair >= queue_pairs (bad_pair).
//  - No pull side: rx_fd() -1 (everything is pushed through the injector).
//  - Threads: transmit(k) for different k concurrently (per-pair counters, one writer
//    each; pair_counters.h); the injector's inject() takes packets from any thread.
//    injector() is read without synchronization: attach()/detach() happen while no
//    transmit() runs (port_backend.h).
//  - stats(): {"reflected", "reflected_bytes", "inject_failed", "no_injector",
//    "too_short", "too_long", "bad_pair"}.
#pragma once

#include <atomic>
#include <cstdint>

#include "uvhost/backends/pair_counters.h"
#include "uvhost/backends/port_backend.h"

namespace uvhost::backends {

class LoopbackBackend final : public PortBackend {
 public:
  // A 64 KiB GSO frame plus the Ethernet header and a VLAN tag.
  static constexpr size_t kMaxFrameBytes = 65536 + 14 + 4;
  static constexpr size_t kMinFrameBytes = 14;

  explicit LoopbackBackend(uint32_t queue_pairs);

  std::string_view kind() const noexcept override { return "loopback"; }
  std::string describe() const override;

  TxBurstResult transmit_burst(uint32_t pair, std::span<const TxFrame> frames) override;

  nlohmann::json stats() const override;

  uint32_t queue_pairs() const noexcept { return counters_.pairs(); }
  uint64_t reflected() const noexcept { return counters_.total(kReflected); }
  uint64_t inject_failed() const noexcept { return counters_.total(kInjectFailed); }

 private:
  enum Counter : size_t {
    kReflected,
    kReflectedBytes,
    kInjectFailed,
    kNoInjector,
    kTooShort,
    kTooLong,
    kCounterCount
  };

  PairCounters<kCounterCount> counters_;
  std::atomic<uint64_t> bad_pair_{0};  // relaxed fetch_add: rare, any thread
};

}  // namespace uvhost::backends
