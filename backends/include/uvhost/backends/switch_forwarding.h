// switch_forwarding.h - the `switch` backend's forwarding decision: where one
// Ethernet frame that entered on one port goes (an L2 learning switch).
//
// Contract
// --------
//  LearningSwitch::forward(frame, ingress, now, counters) decides for one frame:
//   1. frame.size() < 14 (no complete Ethernet header): drop, kShortFrame. Nothing
//      is learned.
//   2. The source MAC (bytes 6..11) is learned on `ingress` (MacTable::learn), unless
//      it is multicast, broadcast or all-zero: those are never learned, only counted
//      (LearnResult::kNotUnicast); the frame is still forwarded.
//   3. The destination MAC (bytes 0..5):
//        broadcast                      -> flood, kBroadcast
//        multicast (I/G bit set)        -> flood, kMulticast
//        unicast, unknown or aged       -> flood, kUnknownUnicast
//        unicast, bound to `ingress`    -> drop, kHairpin (it is already there)
//        unicast, bound to another port -> unicast to that port, kKnownUnicast
//  ForwardDecision::port is the destination for kUnicast and kNoPort otherwise.
//  `frame` is the frame or a copy of at least its first min(length, 14) bytes (only
//  bytes 0..11 are read, and its size is the frame length for step 1): a datapath
//  whose frame is scattered in guest memory copies that prefix out once
//  (virtio::copy_from_pieces), so a guest rewriting the frame concurrently cannot make
//  the decision read two different headers.
//
//  The port set is the caller's: LearningSwitch keeps no list of ports. A flood means
//  "every port the caller currently has, except ingress" (for_each_flood_port() walks
//  a caller's span of PortIds that way). Why: the datapath already owns the live port
//  set (it needs each port's queues, and publishes the set to its workers); a second
//  copy in the switch would be a second read-mostly structure that could disagree with
//  it. Consequence: a unicast decision may name a port the caller has just removed
//  (forward() raced with remove_port()); the caller, which looks the port up anyway to
//  find its queue, drops such a frame. When a port goes away the caller removes it
//  from its set and calls remove_port(), which flushes its MACs.
//
//  Counters: forward() counts the decision's reason and the learn result in the
//  caller's ForwardingCounters, which must be used by one thread at a time (one per
//  worker): its increments are a relaxed load + store (no locked read-modify-write,
//  no cache line shared between workers), and snapshot() may be called from any
//  thread. Sum the workers' snapshots with ForwardingStats::operator+=. The table's
//  own counters (learned, moved, refused, evicted, flushed) are in table().stats().
//
//  Threads: forward() may run on any number of threads at once; remove_port() and
//  table() writes may run concurrently with it (see switch_mac_table.h). Cost per
//  frame in the steady state: two seqlock bucket reads (source and destination), no
//  stores to shared memory, no allocation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "uvhost/backends/switch_mac_table.h"
#include "uvhost/base/name_table.h"
#include "uvhost/base/single_writer_counter.h"

namespace uvhost::backends {

using base::to_string;

inline constexpr size_t kEthernetHeaderSize = 14;

enum class ForwardKind : uint8_t { kUnicast, kFlood, kDrop };

enum class ForwardReason : uint8_t {
  kKnownUnicast,    // unicast: destination learned on another port
  kUnknownUnicast,  // flood: destination not learned (or aged)
  kBroadcast,       // flood: ff:ff:ff:ff:ff:ff
  kMulticast,       // flood: other group addresses
  kHairpin,         // drop: destination learned on the ingress port
  kShortFrame,      // drop: shorter than an Ethernet header
};
inline constexpr auto kForwardKindNames = base::name_table<ForwardKind>(
    {{ForwardKind::kUnicast, "unicast"}, {ForwardKind::kFlood, "flood"}, {ForwardKind::kDrop, "drop"}});
inline constexpr auto kForwardReasonNames = base::name_table<ForwardReason>({
    {ForwardReason::kKnownUnicast, "known-unicast"},
    {ForwardReason::kUnknownUnicast, "unknown-unicast"},
    {ForwardReason::kBroadcast, "broadcast"},
    {ForwardReason::kMulticast, "multicast"},
    {ForwardReason::kHairpin, "hairpin"},
    {ForwardReason::kShortFrame, "short-frame"},
});
inline constexpr size_t kForwardReasonCount = kForwardReasonNames.size();

constexpr const auto& enum_names(ForwardKind) noexcept { return kForwardKindNames; }
constexpr const auto& enum_names(ForwardReason) noexcept { return kForwardReasonNames; }

struct ForwardDecision {
  ForwardKind kind = ForwardKind::kDrop;
  PortId port = kNoPort;  // kUnicast: the destination; otherwise kNoPort
  ForwardReason reason = ForwardReason::kShortFrame;
};

// A snapshot of counters (plain numbers, summable).
struct ForwardingStats {
  std::array<uint64_t, kForwardReasonCount> by_reason{};  // indexed by ForwardReason
  std::array<uint64_t, kLearnResultCount> by_learn{};     // indexed by LearnResult

  uint64_t count(ForwardReason reason) const noexcept { return by_reason[static_cast<size_t>(reason)]; }
  uint64_t count(LearnResult result) const noexcept { return by_learn[static_cast<size_t>(result)]; }
  uint64_t frames() const noexcept;
  ForwardingStats& operator+=(const ForwardingStats& other) noexcept;
};

// Per-thread counters of forward(): single writer (see the contract), any reader.
class ForwardingCounters {
 public:
  void count(ForwardReason reason) noexcept { by_reason_[static_cast<size_t>(reason)].add(); }
  void count(LearnResult result) noexcept { by_learn_[static_cast<size_t>(result)].add(); }
  ForwardingStats snapshot() const noexcept;

 private:
  // One writer thread (see SingleWriterCounter); readers on other threads.
  std::array<base::SingleWriterCounter, kForwardReasonCount> by_reason_{};
  std::array<base::SingleWriterCounter, kLearnResultCount> by_learn_{};
};

class LearningSwitch {
 public:
  // Throws std::invalid_argument for an invalid table config (see MacTableConfig).
  explicit LearningSwitch(const MacTableConfig& config = {}) : table_(config) {}

  ForwardDecision forward(std::span<const std::byte> frame, PortId ingress, SwitchTime now,
                          ForwardingCounters& counters);

  // The port is gone: forget its MACs. Returns how many were bound to it.
  size_t remove_port(PortId port) { return table_.remove_port(port); }

  MacTable& table() noexcept { return table_; }
  const MacTable& table() const noexcept { return table_; }

 private:
  MacTable table_;
};

// Calls fn(port) for every port of `ports` except `ingress`, in order: the targets of
// a kFlood decision.
template <class Fn>
void for_each_flood_port(std::span<const PortId> ports, PortId ingress, Fn&& fn) {
  for (PortId port : ports) {
    if (port != ingress) fn(port);
  }
}

}  // namespace uvhost::backends
