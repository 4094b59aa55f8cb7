// bench_frame.h - the frames the bench's frontend sends (stream-tx, rr requests) and
// expects back (rr responses).
//
// Layout (offsets from the Ethernet header; multi-byte payload fields in host byte
// order: only this host writes and reads them)
//    0  dst 02:00:00:00:00:02, src 02:00:00:00:00:01 (locally administered), EtherType
//       0x88B5 (IEEE local experimental)
//   14  magic "UVBN", session (u32), sequence (u64), send time (u64, CLOCK_MONOTONIC ns)
//   38  filler: byte i = i & 0xff, up to the frame size (kMinFrameSize..kMaxFrameSize)
//  - An answer (uvhost's loopback, testpmd's macswap) comes back with the MACs swapped:
//    parse_bench_frame(frame, true) then requires dst == our src and src == our dst.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace uvhost::bench {

inline constexpr uint32_t kMinFrameSize = 60;     // Ethernet minimum without FCS
inline constexpr uint32_t kMaxFrameSize = 65535;
inline constexpr size_t kBenchHeaderBytes = 38;
inline constexpr uint16_t kBenchEtherType = 0x88B5;

struct BenchStamp {
  uint32_t session = 0;
  uint64_t sequence = 0;
  uint64_t send_ns = 0;
};

// Writes the fixed part (MACs, EtherType, magic, filler) into `frame` (its whole size).
void build_bench_frame(std::span<std::byte> frame) noexcept;
// Writes session, sequence and send time into a built frame.
void stamp_bench_frame(std::span<std::byte> frame, const BenchStamp& stamp) noexcept;
// The stamp of a bench frame; nullopt if it is not one (too short, EtherType, magic,
// or MACs not as expected: as sent, or swapped when `swapped`).
std::optional<BenchStamp> parse_bench_frame(std::span<const std::byte> frame, bool swapped) noexcept;

}  // namespace uvhost::bench
