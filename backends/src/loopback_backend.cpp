// loopback_backend.cpp - MAC-swapped reflection into the same queue pair, offloads
// fitted to the guest (see loopback_backend.h).
#include "uvhost/backends/loopback_backend.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <new>
#include <span>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace uvhost::backends {
namespace {

constexpr size_t kMacBytes = 6;

uint32_t checked_pairs(uint32_t queue_pairs) {
  if (queue_pairs == 0) throw std::invalid_argument("loopback backend: queue_pairs must be at least 1");
  return queue_pairs;
}

// `frame` holds at least the two addresses (kMinFrameBytes).
void swap_macs(std::span<std::byte> frame) noexcept {
  std::array<std::byte, kMacBytes> destination;
  std::memcpy(destination.data(), frame.data(), kMacBytes);
  std::memcpy(frame.data(), frame.data() + kMacBytes, kMacBytes);
  std::memcpy(frame.data() + kMacBytes, destination.data(), kMacBytes);
}

// The whole frame in a Packet: `head` (its first bytes, already copied and checked)
// followed by the rest, copied from guest memory now. nullptr when out of memory.
PacketPtr copy_whole(std::span<const std::byte> head, const TxFrame& frame) noexcept {
  PacketPtr packet;
  try {
    packet = std::make_unique<Packet>();
    packet->frame.resize(frame.frame_len);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  std::copy(head.begin(), head.end(), packet->frame.begin());
  (void)frame.copy_frame(head.size(), std::span(packet->frame).subspan(head.size()));
  return packet;
}

}  // namespace

LoopbackBackend::LoopbackBackend(uint32_t queue_pairs)
    : counters_(checked_pairs(queue_pairs)),
      offload_invalid_(queue_pairs),
      heads_(std::make_unique<HeadCopy[]>(queue_pairs)) {}

std::string LoopbackBackend::describe() const {
  return fmt::format("loopback (MAC swap, {} queue pairs)", counters_.pairs());
}

void LoopbackBackend::features_changed(uint64_t features) {
  guest_features_.store(features, std::memory_order_relaxed);  // relaxed: see the contract
}

TxBurstResult LoopbackBackend::transmit_burst(uint32_t pair, std::span<const TxFrame> frames) {
  if (pair >= counters_.pairs()) {
    bad_pair_.fetch_add(frames.size(), std::memory_order_relaxed);  // relaxed: a statistic
    return {};
  }
  RxInjector* const target = injector();
  const uint64_t features = guest_features_.load(std::memory_order_relaxed);  // relaxed: see the contract
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
    const virtio::NetHeader header = frame.read_header();
    const Outcome outcome = has_offloads(header) ? reflect_offloaded(pair, *target, header, frame, features)
                                                 : reflect_plain(pair, *target, frame);
    if (outcome == Outcome::kInvalid) continue;  // counted by reason
    ++taken.frames;
    taken.bytes += frame.frame_len;
    if (outcome == Outcome::kRefused) {
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

LoopbackBackend::Outcome LoopbackBackend::reflect_plain(uint32_t pair, RxInjector& target, const TxFrame& frame) {
  // The addresses, read once and swapped; the datapath copies the rest.
  std::array<std::byte, 2 * kMacBytes> macs;
  (void)frame.copy_frame(0, macs);
  swap_macs(macs);
  return target.inject_frame(pair, virtio::NetHeader{}, macs, frame) ? Outcome::kReflected : Outcome::kRefused;
}

LoopbackBackend::Outcome LoopbackBackend::reflect_offloaded(uint32_t pair, RxInjector& target,
                                                            const virtio::NetHeader& header, const TxFrame& frame,
                                                            uint64_t features) {
  // The headers, copied once: what is checked is what goes back.
  const std::span<std::byte> head = std::span(heads_[pair].bytes).first(std::min<size_t>(frame.frame_len, kHeadBytes));
  (void)frame.copy_frame(0, head);
  OffloadCheck check = validate_offload_head(header, head, frame.frame_len, features);
  PacketPtr whole;
  if (!check.ok() && head.size() < frame.frame_len) {
    // Perhaps only headers longer than the head copy: look at all of it.
    whole = copy_whole(head, frame);
    if (whole == nullptr) return Outcome::kRefused;
    check = validate_offload(header, whole->frame, features);
  }
  if (!check.ok()) {
    offload_invalid_.add(pair, static_cast<size_t>(check.reason));
    return Outcome::kInvalid;
  }
  const OffloadFit fit = offload_fit(header, check.layout, features);
  if (fit == OffloadFit::kAsIs && whole == nullptr) {
    swap_macs(head);
    return target.inject_frame(pair, delivered_header(header), head, frame) ? Outcome::kReflected
                                                                             : Outcome::kRefused;
  }
  if (whole == nullptr) whole = copy_whole(head, frame);
  if (whole == nullptr) return Outcome::kRefused;
  swap_macs(whole->frame);
  return reflect_adapted(pair, target, header, std::move(whole), check.layout, fit, features);
}

LoopbackBackend::Outcome LoopbackBackend::reflect_adapted(uint32_t pair, RxInjector& target,
                                                          const virtio::NetHeader& header, PacketPtr packet,
                                                          const OffloadLayout& layout, OffloadFit fit,
                                                          uint64_t features) {
  if (fit == OffloadFit::kSegment) {
    const size_t injected =
        inject_segments(target, pair, layout, packet->frame, features, ipv6_fragment_ids_.for_layout(layout));
    counters_.add(pair, kSegmented);
    counters_.add(pair, kSegments, injected);
    return injected == layout.segments ? Outcome::kReflected : Outcome::kRefused;
  }
  packet->header = delivered_header(header);
  // The range was validated: the checksum is as it is, or completed.
  if (fit == OffloadFit::kCompleteChecksum && adapt_checksum(*packet, features) == ChecksumAdapt::kCompleted) {
    counters_.add(pair, kChecksumCompleted);
  }
  return target.inject(pair, std::move(packet)) ? Outcome::kReflected : Outcome::kRefused;
}

nlohmann::json LoopbackBackend::stats() const {
  return nlohmann::json{{"reflected", reflected()},
                        {"reflected_bytes", counters_.total(kReflectedBytes)},
                        {"inject_failed", inject_failed()},
                        {"no_injector", counters_.total(kNoInjector)},
                        {"too_short", counters_.total(kTooShort)},
                        {"too_long", counters_.total(kTooLong)},
                        {"segmented", segmented()},
                        {"segments", segments()},
                        {"checksum_completed", checksum_completed()},
                        {"offload_invalid", offload_invalid_json(offload_invalid_)},
                        {"bad_pair", bad_pair_.load(std::memory_order_relaxed)}};  // relaxed: a statistic
}

}  // namespace uvhost::backends
