// source_backend.h - the `source` backend: generates UDP/IPv4 frames for the guest to
// receive (at a given rate, or as fast as it takes them) and counts and drops what the
// guest transmits (like the sink).
//
// Contract
// --------
//  - SourceBackend::open(options, error): options as SourceOptions below. nullptr with
//    `error` filled in when they are invalid (validate()'s text) or a timerfd cannot
//    be created (docs/ARCHITECTURE.md, "Errors").
//  - pull_frame(pair, view): when pair `pair`'s token bucket has a token, shows the
//    next frame of stream `pair` (header all zero) and returns true. The frame lives
//    in the pair's own buffer, stamped in place (SourceFrameTemplate::stamp: only the
//    sequence and checksum change), so a 64 KiB frame costs no copy here. Frames of one pair
//    carry sequence numbers 0, 1, 2, ... without gaps (source_frame.h); pairs use UDP
//    source port udp_src_port + pair, so they are distinct flows.
//  - Rate: rate_pps is the whole port's rate, split evenly over the pairs (each pair
//    gets exactly rate_pps / queue_pairs per second on average, fractions included:
//    integer token arithmetic, no rounding drift). Each pair's bucket holds `burst`
//    tokens and starts full, so after an idle period up to `burst` frames come back
//    to back. rate_pps 0: no limit, pull_frame() always has a frame.
//  - rx_fd(pair): a per-pair timerfd (CLOCK_MONOTONIC, non-blocking, close-on-exec).
//    When pull_frame() returns false for lack of tokens it arms the timer (absolute) for
//    the instant the next token is due; the fd becomes readable then. pull_frame() clears
//    it (one read) when it runs after that instant; while the timer is armed and not
//    due, a throttled pull_frame() makes no system call. With rate_pps 0 the timer fires
//    once at construction and is never read: the fd stays readable (pull_frame() always has
//    something, so a datapath only waits on it when pull_frame() returned false: never).
//  - transmit_burst(): counts frames and bytes per pair and takes them all, as
//    SinkBackend.
//  - pair >= queue_pairs: pull_frame() false, transmit_burst() takes nothing, rx_fd()
//    -1; counted (bad_pair).
//  - Threads: pull_frame(k) runs on the thread owning receive queue pair k and touches
//    only pair k's state and counters; transmit_burst(k) only pair k's transmit
//    counters (one writer each, pair_counters.h). stats() and getters from any thread.
//  - stats(): {"generated", "generated_bytes", "throttled", "tx_frames", "tx_bytes",
//    "bad_pair", "rate_pps", "frame_size"}.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "uvhost/backends/pair_counters.h"
#include "uvhost/backends/port_backend.h"
#include "uvhost/backends/source_frame.h"
#include "uvhost/backends/switch_mac_table.h"
#include "uvhost/base/unique_fd.h"

namespace uvhost::backends {

struct SourceOptions {
  uint64_t rate_pps = 0;      // whole port, frames per second; 0: as fast as the guest takes
  uint32_t frame_size = 64;   // Ethernet frame without FCS, 60..65535
  MacAddress dst_mac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  MacAddress src_mac{0x02, 0x75, 0x76, 0x00, 0x00, 0x01};
  uint32_t ip_src = 0x0a000001;     // 10.0.0.1 (host byte order)
  uint32_t ip_dst = 0x0a000002;     // 10.0.0.2
  uint16_t udp_src_port = 49152;    // + pair index (must not pass 65535)
  uint16_t udp_dst_port = 9;
  uint32_t queue_pairs = 1;         // 1..kMaxQueuePairs
  uint32_t burst = 32;              // tokens per pair's bucket, 1..kMaxBurst
};

class SourceBackend final : public PortBackend {
 public:
  static constexpr uint32_t kMaxQueuePairs = 32768;  // virtio-net's limit
  static constexpr uint32_t kMaxBurst = 4096;
  static constexpr uint64_t kMaxRatePps = 1'000'000'000'000ULL;

  // Empty when `options` are valid, else what is wrong.
  static std::string validate(const SourceOptions& options);

  // nullptr with `error` filled in on failure (see the contract above).
  static std::unique_ptr<SourceBackend> open(const SourceOptions& options, std::string& error);

  ~SourceBackend() override;
  SourceBackend(const SourceBackend&) = delete;
  SourceBackend& operator=(const SourceBackend&) = delete;

  std::string_view kind() const noexcept override { return "source"; }
  std::string describe() const override;

  TxBurstResult transmit_burst(uint32_t pair, std::span<const TxFrame> frames) override;
  bool pull_frame(uint32_t pair, RxFrameView& view) override;
  int rx_fd(uint32_t pair) const noexcept override;

  nlohmann::json stats() const override;

  const SourceOptions& options() const noexcept { return options_; }
  uint64_t generated() const noexcept { return rx_counters_.total(kGenerated); }
  uint64_t throttled() const noexcept { return rx_counters_.total(kThrottled); }
  uint64_t tx_frames() const noexcept { return tx_counters_.total(kTxFrames); }

 private:
  enum RxCounter : size_t { kGenerated, kGeneratedBytes, kThrottled, kRxCounterCount };
  enum TxCounter : size_t { kTxFrames, kTxBytes, kTxCounterCount };

  // Everything pull_frame(k) touches, on its own cache lines.
  struct alignas(64) PairState {
    explicit PairState(const SourceFrameSpec& spec)
        : frame(spec), bytes(frame.bytes().begin(), frame.bytes().end()) {}
    SourceFrameTemplate frame;
    std::vector<std::byte> bytes;  // the frame pull_frame() shows, stamped in place
    uint64_t sequence = 0;
    uint64_t credits = 0;    // in units of 1 / (queue_pairs * 1e9) token
    int64_t last_ns = 0;     // CLOCK_MONOTONIC of the last refill
    int64_t due_ns = 0;      // when the armed timer fires
    bool armed = false;      // timer armed by a throttled pull_frame(), not yet cleared
    base::UniqueFd timer_fd;
  };

  explicit SourceBackend(const SourceOptions& options);  // options valid
  bool open_timers(std::string& error);

  bool take_token(PairState& state, int64_t now_ns) noexcept;

  const SourceOptions options_;
  const uint64_t token_cost_;  // queue_pairs * 1e9: a token, in credit units
  const uint64_t credit_cap_;  // burst * token_cost_
  std::vector<PairState> pairs_;
  PairCounters<kRxCounterCount> rx_counters_;
  PairCounters<kTxCounterCount> tx_counters_;
  std::atomic<uint64_t> bad_pair_{0};  // relaxed fetch_add: rare, any thread
};

}  // namespace uvhost::backends
