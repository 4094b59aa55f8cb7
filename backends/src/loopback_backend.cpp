// loopback_backend.cpp - MAC-swapped reflection into the same queue pair (see
// loopback_backend.h).
#include "uvhost/backends/loopback_backend.h"

#include <algorithm>
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

bool LoopbackBackend::transmit(uint32_t pair, const virtio::NetHeader& header, std::span<const std::byte> frame) {
  if (pair >= counters_.pairs()) {
    bad_pair_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
    return false;
  }
  if (frame.size() < kMinFrameBytes) {
    counters_.add(pair, kTooShort);
    return false;
  }
  if (frame.size() > kMaxFrameBytes) {
    counters_.add(pair, kTooLong);
    return false;
  }
  RxInjector* const target = injector();
  if (target == nullptr) {
    counters_.add(pair, kNoInjector);
    return false;
  }
  virtio::NetHeader reflected_header = header;
  reflected_header.num_buffers = 0;
  PacketPtr packet = make_packet(reflected_header, frame);
  std::swap_ranges(packet->frame.begin(), packet->frame.begin() + 6, packet->frame.begin() + 6);
  if (!target->inject(pair, std::move(packet))) {
    // Taken from the guest and lost on the way back in: the datapath counts it as a
    // receive-side drop (inject_dropped), so it is not a transmit drop too.
    counters_.add(pair, kInjectFailed);
    return true;
  }
  counters_.add(pair, kReflected);
  counters_.add(pair, kReflectedBytes, frame.size());
  return true;
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
