// switch_forwarding.cpp - LearningSwitch::forward() and its counters.
#include "uvhost/backends/switch_forwarding.h"

#include <optional>

namespace uvhost::backends {

uint64_t ForwardingStats::frames() const noexcept {
  uint64_t total = 0;
  for (uint64_t n : by_reason) total += n;
  return total;
}

ForwardingStats& ForwardingStats::operator+=(const ForwardingStats& other) noexcept {
  for (size_t i = 0; i < by_reason.size(); ++i) by_reason[i] += other.by_reason[i];
  for (size_t i = 0; i < by_learn.size(); ++i) by_learn[i] += other.by_learn[i];
  return *this;
}

ForwardingStats ForwardingCounters::snapshot() const noexcept {
  ForwardingStats s;
  // relaxed: statistics, no ordering with anything else.
  for (size_t i = 0; i < s.by_reason.size(); ++i) s.by_reason[i] = by_reason_[i].get();
  for (size_t i = 0; i < s.by_learn.size(); ++i) s.by_learn[i] = by_learn_[i].get();
  return s;
}

namespace {

MacAddress mac_at(std::span<const std::byte> frame, size_t offset) noexcept {
  MacAddress mac;
  for (size_t i = 0; i < mac.size(); ++i) mac[i] = std::to_integer<uint8_t>(frame[offset + i]);
  return mac;
}

ForwardDecision decided(ForwardingCounters& counters, ForwardKind kind, ForwardReason reason,
                        PortId port = kNoPort) noexcept {
  counters.count(reason);
  return ForwardDecision{kind, port, reason};
}

}  // namespace

ForwardDecision LearningSwitch::forward(std::span<const std::byte> frame, PortId ingress, SwitchTime now,
                                        ForwardingCounters& counters) {
  if (frame.size() < kEthernetHeaderSize)
    return decided(counters, ForwardKind::kDrop, ForwardReason::kShortFrame);
  const MacAddress dst = mac_at(frame, 0);
  const MacAddress src = mac_at(frame, 6);

  counters.count(table_.learn(src, ingress, now));

  if (is_broadcast(dst)) return decided(counters, ForwardKind::kFlood, ForwardReason::kBroadcast);
  if (is_multicast(dst)) return decided(counters, ForwardKind::kFlood, ForwardReason::kMulticast);
  const std::optional<PortId> port = table_.lookup(dst, now);
  if (!port) return decided(counters, ForwardKind::kFlood, ForwardReason::kUnknownUnicast);
  if (*port == ingress) return decided(counters, ForwardKind::kDrop, ForwardReason::kHairpin);
  return decided(counters, ForwardKind::kUnicast, ForwardReason::kKnownUnicast, *port);
}

}  // namespace uvhost::backends
