// source_backend.cpp - generated UDP frames behind per-pair token buckets and timerfds
// (see source_backend.h).
#include "uvhost/backends/source_backend.h"

#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "uvhost/base/errno_text.h"

namespace uvhost::backends {
namespace {

constexpr uint64_t kNsPerSecond = 1'000'000'000;

int64_t monotonic_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

timespec to_timespec(int64_t ns) noexcept {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  return ts;
}

void arm_at(int fd, int64_t due_ns) noexcept {
  itimerspec spec{};
  spec.it_value = to_timespec(due_ns > 0 ? due_ns : 1);
  // Re-arming also resets the expiration count (the fd is not readable until due).
  (void)::timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, nullptr);
}

void clear(int fd) noexcept {
  uint64_t expirations = 0;
  (void)!::read(fd, &expirations, sizeof(expirations));  // EAGAIN when not yet fired: fine
}

}  // namespace

std::string SourceBackend::validate(const SourceOptions& options) {
  if (options.frame_size < SourceFrameTemplate::kMinFrameSize ||
      options.frame_size > SourceFrameTemplate::kMaxFrameSize) {
    return fmt::format("source: frame_size {} is outside {}..{}", options.frame_size,
                       SourceFrameTemplate::kMinFrameSize, SourceFrameTemplate::kMaxFrameSize);
  }
  if (options.queue_pairs == 0 || options.queue_pairs > kMaxQueuePairs) {
    return fmt::format("source: queue_pairs {} is outside 1..{}", options.queue_pairs, kMaxQueuePairs);
  }
  if (options.burst == 0 || options.burst > kMaxBurst) {
    return fmt::format("source: burst {} is outside 1..{}", options.burst, kMaxBurst);
  }
  if (options.rate_pps > kMaxRatePps) {
    return fmt::format("source: rate {} pps is above {}", options.rate_pps, kMaxRatePps);
  }
  if (uint32_t{options.udp_src_port} + options.queue_pairs - 1 > 65535) {
    return fmt::format("source: udp_src_port {} + {} queue pairs passes 65535", options.udp_src_port,
                       options.queue_pairs);
  }
  return {};
}

std::unique_ptr<SourceBackend> SourceBackend::open(const SourceOptions& options, std::string& error) {
  if (std::string why = validate(options); !why.empty()) {
    error = std::move(why);
    return nullptr;
  }
  std::unique_ptr<SourceBackend> source(new SourceBackend(options));
  if (!source->open_timers(error)) return nullptr;
  return source;
}

SourceBackend::SourceBackend(const SourceOptions& options)
    : options_(options),
      token_cost_(uint64_t{options.queue_pairs} * kNsPerSecond),
      credit_cap_(uint64_t{options.burst} * token_cost_),
      rx_counters_(options.queue_pairs),
      tx_counters_(options.queue_pairs) {
  pairs_.reserve(options_.queue_pairs);
  const int64_t now = monotonic_ns();
  for (uint32_t pair = 0; pair < options_.queue_pairs; ++pair) {
    SourceFrameSpec spec;
    spec.frame_size = options_.frame_size;
    spec.dst_mac = options_.dst_mac;
    spec.src_mac = options_.src_mac;
    spec.ip_src = options_.ip_src;
    spec.ip_dst = options_.ip_dst;
    spec.udp_src_port = static_cast<uint16_t>(options_.udp_src_port + pair);
    spec.udp_dst_port = options_.udp_dst_port;
    spec.stream = pair;
    PairState& state = pairs_.emplace_back(spec);
    state.credits = credit_cap_;
    state.last_ns = now;
  }
}

bool SourceBackend::open_timers(std::string& error) {
  for (PairState& state : pairs_) {
    state.timer_fd.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (!state.timer_fd) {
      error = base::errno_text("source: timerfd_create");
      return false;
    }
    // Unlimited: readable at once, and for good.
    if (options_.rate_pps == 0) arm_at(state.timer_fd.get(), state.last_ns);
  }
  return true;
}

SourceBackend::~SourceBackend() = default;

std::string SourceBackend::describe() const {
  if (options_.rate_pps == 0) {
    return fmt::format("source ({}-byte UDP frames, unlimited, {} queue pairs)", options_.frame_size,
                       options_.queue_pairs);
  }
  return fmt::format("source ({}-byte UDP frames at {} pps, {} queue pairs)", options_.frame_size,
                     options_.rate_pps, options_.queue_pairs);
}

TxBurstResult SourceBackend::transmit_burst(uint32_t pair, std::span<const TxFrame> frames) {
  if (pair >= options_.queue_pairs) {
    bad_pair_.fetch_add(frames.size(), std::memory_order_relaxed);  // relaxed: a statistic
    return {};
  }
  uint64_t bytes = 0;
  for (const TxFrame& frame : frames) bytes += frame.frame_len;
  tx_counters_.add(pair, kTxFrames, frames.size());
  tx_counters_.add(pair, kTxBytes, bytes);
  return TxBurstResult{static_cast<uint32_t>(frames.size()), bytes};
}

// The token bucket of one pair, in integer credit units: every nanosecond earns
// rate_pps units, a token costs queue_pairs * 1e9 units (so each pair gets rate_pps /
// queue_pairs tokens per second exactly), the bucket holds burst tokens. Values stay
// below 2^58 (validate() bounds burst, pairs and rate), so nothing overflows.
bool SourceBackend::take_token(PairState& state, int64_t now_ns) noexcept {
  const uint64_t rate = options_.rate_pps;
  const uint64_t elapsed = now_ns > state.last_ns ? static_cast<uint64_t>(now_ns - state.last_ns) : 0;
  state.last_ns = now_ns > state.last_ns ? now_ns : state.last_ns;
  if (elapsed >= credit_cap_ / rate + 1) {
    state.credits = credit_cap_;
  } else {
    const uint64_t credits = state.credits + elapsed * rate;
    state.credits = credits < credit_cap_ ? credits : credit_cap_;
  }
  if (state.credits >= token_cost_) {
    state.credits -= token_cost_;
    return true;
  }
  const uint64_t wait_ns = (token_cost_ - state.credits + rate - 1) / rate;
  state.due_ns = now_ns + static_cast<int64_t>(wait_ns);
  return false;
}

bool SourceBackend::pull_frame(uint32_t pair, RxFrameView& view) {
  if (pair >= options_.queue_pairs) {
    bad_pair_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
    return false;
  }
  PairState& state = pairs_[pair];
  if (options_.rate_pps != 0) {
    const int64_t now = monotonic_ns();
    if (state.armed) {
      if (now < state.due_ns) {  // the timer is set for the next token already
        rx_counters_.add(pair, kThrottled);
        return false;
      }
      clear(state.timer_fd.get());
      state.armed = false;
    }
    if (!take_token(state, now)) {
      arm_at(state.timer_fd.get(), state.due_ns);
      state.armed = true;
      rx_counters_.add(pair, kThrottled);
      return false;
    }
  }
  state.frame.stamp(state.sequence++, state.bytes);
  view.header = {};
  view.frame = state.bytes;
  rx_counters_.add(pair, kGenerated);
  rx_counters_.add(pair, kGeneratedBytes, options_.frame_size);
  return true;
}

int SourceBackend::rx_fd(uint32_t pair) const noexcept {
  return pair < options_.queue_pairs ? pairs_[pair].timer_fd.get() : -1;
}

nlohmann::json SourceBackend::stats() const {
  return nlohmann::json{{"generated", generated()},
                        {"generated_bytes", rx_counters_.total(kGeneratedBytes)},
                        {"throttled", throttled()},
                        {"tx_frames", tx_frames()},
                        {"tx_bytes", tx_counters_.total(kTxBytes)},
                        {"bad_pair", bad_pair_.load(std::memory_order_relaxed)},  // relaxed: a statistic
                        {"rate_pps", options_.rate_pps},
                        {"frame_size", options_.frame_size}};
}

}  // namespace uvhost::backends
