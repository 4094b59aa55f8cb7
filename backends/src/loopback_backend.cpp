// loopback_backend.cpp - MAC-swapped reflection into the same queue pair (see
// loopback_backend.h).
#include "uvhost/backends/loopback_backend.h"

#include <algorithm>
#include <array>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace uvhost::backends {
namespace {

uint32_t checked_pairs(uint32_t queue_pairs) {
  if (queue_pairs == 0) throw std::invalid_argument("loopback backend: queue_pairs must be at least 1");
  return queue_pairs;
}

}  // namespace

LoopbackBackend::LoopbackBackend(uint32_t queue_pairs) : counters_(checked_pairs(queue_pairs)) {}

std::string LoopbackBackend::describe() const {
  return fmt::format("loopback (MAC swap, {} queue pairs)", counters_.pairs());
}

TxBurstResult LoopbackBackend::transmit_burst(uint32_t pair, std::span<const TxFrame> frames) {
  if (pair >= counters_.pairs()) {
    bad_pair_.fetch_add(frames.size(), std::memory_order_relaxed);  // relaxed: a statistic
    return {};
  }
  RxInjector* const target = injector();
  TxBurstResult taken;
  for (const TxFrame& frame : frames) {
    if (frame.frame_len < kMinFrameBytes) {
      counters_.add(pair, kTooShort);
      continue;
    }
    if (frame.frame_len > kMaxFrameBytes) {
      counters_.add(pair, kTooLong);
      continue;
    }
    if (target == nullptr) {
      counters_.add(pair, kNoInjector);
      continue;
    }
    virtio::NetHeader reflected_header = frame.read_header();
    reflected_header.num_buffers = 0;
    // The addresses, read once and swapped; the datapath copies the rest.
    std::array<std::byte, 12> macs;
    (void)frame.copy_frame(0, macs);
    std::swap_ranges(macs.begin(), macs.begin() + 6, macs.begin() + 6);
    ++taken.frames;
    taken.bytes += frame.frame_len;
    if (!target->inject_frame(pair, reflected_header, macs, frame)) {
      // Taken from the guest and lost on the way back in: the datapath counts it as a
      // receive-side drop (inject_dropped), so it is not a transmit drop too.
      counters_.add(pair, kInjectFailed);
      continue;
    }
    counters_.add(pair, kReflected);
    counters_.add(pair, kReflectedBytes, frame.frame_len);
  }
  return taken;
}

nlohmann::json LoopbackBackend::stats() const {
  return nlohmann::json{{"reflected", reflected()},
                        {"reflected_bytes", counters_.total(kReflectedBytes)},
                        {"inject_failed", inject_failed()},
                        {"no_injector", counters_.total(kNoInjector)},
                        {"too_short", counters_.total(kTooShort)},
                        {"too_long", counters_.total(kTooLong)},
                        {"bad_pair", bad_pair_.load(std::memory_order_relaxed)}};  // relaxed: a statistic
}

}  // namespace uvhost::backends
