// sink_backend.cpp - count and drop (see sink_backend.h).
#include "uvhost/backends/sink_backend.h"

#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "uvhost/backends/net_features.h"

namespace uvhost::backends {
namespace {

uint32_t checked_pairs(uint32_t queue_pairs) {
  if (queue_pairs == 0) throw std::invalid_argument("sink backend: queue_pairs must be at least 1");
  return queue_pairs;
}

}  // namespace

SinkBackend::SinkBackend(uint32_t queue_pairs) : counters_(checked_pairs(queue_pairs)) {}

std::string SinkBackend::describe() const { return fmt::format("sink ({} queue pairs)", counters_.pairs()); }

uint64_t SinkBackend::offered_features() const noexcept { return net_feature::kHostOffloads; }

// Counts without reading: the frames' bytes are never touched.
TxBurstResult SinkBackend::transmit_burst(uint32_t pair, std::span<const TxFrame> frames) {
  if (pair >= counters_.pairs()) {
    bad_pair_.fetch_add(frames.size(), std::memory_order_relaxed);  // relaxed: a statistic
    return {};
  }
  uint64_t bytes = 0;
  for (const TxFrame& frame : frames) bytes += frame.frame_len;
  counters_.add(pair, kFrames, frames.size());
  counters_.add(pair, kBytes, bytes);
  return TxBurstResult{static_cast<uint32_t>(frames.size()), bytes};
}

nlohmann::json SinkBackend::stats() const {
  return nlohmann::json{{"frames", frames()},
                        {"bytes", bytes()},
                        {"bad_pair", bad_pair_.load(std::memory_order_relaxed)}};  // relaxed: a statistic
}

}  // namespace uvhost::backends
