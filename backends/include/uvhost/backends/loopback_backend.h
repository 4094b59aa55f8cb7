// loopback_backend.h - the `loopback` backend: every frame the guest transmits on
// queue pair k comes back to it on receive queue pair k, with the source and
// destination MAC swapped (what testpmd's macswap does), its offloads fitted to what
// the guest takes.
//
// Contract
// --------
//  - LoopbackBackend(queue_pairs): queue_pairs >= 1 (std::invalid_argument otherwise).
//  - offered_features(): CSUM and every HOST_* offload, and every GUEST_* offload (a
//    frame comes back as it was sent when the guest negotiated the matching receive
//    feature, and is segmented or completed in software when it did not).
//    features_changed() keeps the guest's negotiated features for transmit_burst().
//  - transmit_burst(pair, frames): each frame goes back to the guest with bytes 0..5
//    and 6..11 swapped, num_buffers 0, through the pair's injector:
//    * a plain frame (no NEEDS_CSUM, gso_type NONE): header all 0 (a flag the guest
//      set is not reflected: a driver must not set DATA_VALID), through
//      injector()->inject_frame(pair, ...): the swapped addresses are read from guest
//      memory once, the rest copied once, by the datapath, guest to guest when it can.
//    * a frame with offloads: validated against the guest's own features
//      (validate_offload_head, offload_validate.h, on a copy of its first kHeadBytes,
//      or of all of it when its headers are longer): refused -> dropped (offload_invalid,
//      per reason in the stats). Then fitted (offload_fit, offload_adapt.h): one the
//      guest takes as it is (the matching GUEST_* feature negotiated) goes back with
//      delivered_header() through inject_frame with the validated headers, copied once,
//      as the prefix: what comes back is what was checked. One that needs software
//      work is first copied whole into a Packet (the checked headers and the rest of
//      the frame: guest memory may change while it is read) and then segmented
//      (inject_segments: segmented, segments; a refused segment makes the frame
//      inject_failed) or its checksum completed (checksum_completed) before it is
//      injected.
//    A frame counts as taken when it was handed to the injector (reflected, or
//    inject_failed when the injector refused it). Dropped (not taken) and counted: no
//    injector attached (no_injector), a frame shorter than an Ethernet header
//    (too_short, < 14 bytes), longer than kMaxFrameBytes (too_long), offload_invalid,
//    pair >= queue_pairs (bad_pair).
//  - No pull side: rx_fd() -1 (everything is pushed through the injector).
//  - Threads: transmit(k) for different k concurrently (per-pair counters and head
//    copies, one writer each; pair_counters.h); the injector's inject() takes packets
//    from any thread. injector() and the features are read without synchronization
//    (relaxed): attach()/detach()/features_changed() happen while no transmit() runs
//    (port_backend.h).
//  - stats(): {"reflected", "reflected_bytes", "inject_failed", "no_injector",
//    "too_short", "too_long", "segmented", "segments", "checksum_completed",
//    "offload_invalid": {reason: n}, "bad_pair"}.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "uvhost/backends/net_features.h"
#include "uvhost/backends/offload_adapt.h"
#include "uvhost/backends/offload_counters.h"
#include "uvhost/backends/offload_validate.h"
#include "uvhost/backends/pair_counters.h"
#include "uvhost/backends/port_backend.h"

namespace uvhost::backends {

class LoopbackBackend final : public PortBackend {
 public:
  // A 64 KiB GSO frame plus the Ethernet header and a VLAN tag.
  static constexpr size_t kMaxFrameBytes = 65536 + 14 + 4;
  static constexpr size_t kMinFrameBytes = 14;
  // A frame with offloads: how much of it is copied for validation (Ethernet, two VLAN
  // tags, IPv6 with small extension headers or IPv4 with options, TCP with options).
  static constexpr size_t kHeadBytes = 256;

  explicit LoopbackBackend(uint32_t queue_pairs);

  std::string_view kind() const noexcept override { return "loopback"; }
  std::string describe() const override;

  uint64_t offered_features() const noexcept override { return kOfferedFeatures; }
  void features_changed(uint64_t features) override;
  TxBurstResult transmit_burst(uint32_t pair, std::span<const TxFrame> frames) override;

  nlohmann::json stats() const override;

  uint32_t queue_pairs() const noexcept { return counters_.pairs(); }
  uint64_t reflected() const noexcept { return counters_.total(kReflected); }
  uint64_t inject_failed() const noexcept { return counters_.total(kInjectFailed); }
  uint64_t segmented() const noexcept { return counters_.total(kSegmented); }
  uint64_t segments() const noexcept { return counters_.total(kSegments); }
  uint64_t checksum_completed() const noexcept { return counters_.total(kChecksumCompleted); }
  uint64_t offload_invalid(OffloadReason reason) const noexcept {
    return offload_invalid_.total(static_cast<size_t>(reason));
  }

 private:
  static constexpr uint64_t kOfferedFeatures = net_feature::kHostOffloads | net_feature::kGuestOffloads;

  enum Counter : size_t {
    kReflected,
    kReflectedBytes,
    kInjectFailed,
    kNoInjector,
    kTooShort,
    kTooLong,
    kSegmented,
    kSegments,
    kChecksumCompleted,
    kCounterCount
  };
  enum class Outcome : uint8_t { kReflected, kRefused, kInvalid };

  struct alignas(64) HeadCopy {
    std::array<std::byte, kHeadBytes> bytes;
  };

  Outcome reflect_plain(uint32_t pair, RxInjector& target, const TxFrame& frame);
  Outcome reflect_offloaded(uint32_t pair, RxInjector& target, const virtio::NetHeader& header,
                            const TxFrame& frame, uint64_t features);
  // A frame that needs software work, in `packet` (MACs swapped), fitted and injected.
  Outcome reflect_adapted(uint32_t pair, RxInjector& target, const virtio::NetHeader& header, PacketPtr packet,
                          const OffloadLayout& layout, OffloadFit fit, uint64_t features);

  PairCounters<kCounterCount> counters_;
  OffloadInvalidCounters offload_invalid_;
  std::unique_ptr<HeadCopy[]> heads_;                  // [pair]
  Ipv6FragmentIds ipv6_fragment_ids_;
  std::atomic<uint64_t> guest_features_{0};  // relaxed: see the contract
  std::atomic<uint64_t> bad_pair_{0};        // relaxed fetch_add: rare, any thread
};

}  // namespace uvhost::backends
