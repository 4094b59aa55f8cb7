// sink_backend.h - the `sink` backend: every frame the guest transmits is counted and
// dropped; the guest receives nothing.
//
// Contract
// --------
//  - SinkBackend(queue_pairs): queue_pairs >= 1 (std::invalid_argument otherwise), the
//    port's number of queue pairs.
//  - transmit(pair, header, frame): counts one frame and frame.size() bytes (the
//    Ethernet frame, without the virtio-net header) on `pair` and returns true (taken).
//    A pair >= queue_pairs is refused: false, counted in bad_pair.
//  - offered_features(): CSUM and every HOST_* offload (net_feature::kHostOffloads):
//    a frame with a partial checksum or a super-frame is counted as it is (one frame,
//    its bytes), like any other. No GUEST_*: the guest receives nothing.
//  - pull() never has anything; rx_fd() is -1.
//  - Threads (port_backend.h): transmit() for different pairs concurrently; counters
//    are per pair (pair_counters.h: single writer, relaxed), so transmit() writes no
//    shared cache line. frames()/bytes()/stats() from any thread.
//  - stats(): {"frames": N, "bytes": N, "bad_pair": N}.
#pragma once

#include <atomic>
#include <cstdint>

#include "uvhost/backends/pair_counters.h"
#include "uvhost/backends/port_backend.h"

namespace uvhost::backends {

class SinkBackend final : public PortBackend {
 public:
  explicit SinkBackend(uint32_t queue_pairs);

  std::string_view kind() const noexcept override { return "sink"; }
  std::string describe() const override;
  uint64_t offered_features() const noexcept override;

  TxBurstResult transmit_burst(uint32_t pair, std::span<const TxFrame> frames) override;

  nlohmann::json stats() const override;

  uint32_t queue_pairs() const noexcept { return counters_.pairs(); }
  uint64_t frames() const noexcept { return counters_.total(kFrames); }
  uint64_t bytes() const noexcept { return counters_.total(kBytes); }

 private:
  enum Counter : size_t { kFrames, kBytes, kCounterCount };

  PairCounters<kCounterCount> counters_;
  std::atomic<uint64_t> bad_pair_{0};  // relaxed fetch_add: rare, any thread
};

}  // namespace uvhost::backends
