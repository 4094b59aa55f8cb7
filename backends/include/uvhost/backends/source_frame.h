// source_frame.h - the frames the `source` backend generates: Ethernet + IPv4 + UDP
// with a sequence number in the payload, built from a per-stream template, and the
// parser a receiver (a test, a lab, a guest-side tool) uses to check them.
//
// Contract
// --------
//  Layout (network byte order; offsets from the start of the Ethernet frame):
//    0  Ethernet: dst MAC, src MAC, EtherType 0x0800
//   14  IPv4: version 4, IHL 5, DSCP 0, total length = frame_size - 14, id 0,
//       DF, TTL 64, protocol 17 (UDP), header checksum (valid), src, dst
//   34  UDP: src port, dst port, length = frame_size - 34, checksum (valid, never 0)
//   42  payload: magic "UVSQ" (0x55565351), stream (u32: the queue pair), sequence
//       (u64: 0, 1, 2, ... per stream), then byte i of the payload (i >= 16) = i & 0xff.
//  - frame_size is the Ethernet frame without FCS, kMinFrameSize..kMaxFrameSize
//    (60..65535); build/fill with another size is a precondition violation.
//  - SourceFrameTemplate::fill(sequence, out) writes one frame into `out` (resized to
//    frame_size, reusing its capacity): a copy of the template plus the sequence and
//    the UDP checksum, updated incrementally (RFC 1624) from a sum precomputed once:
//    a fixed cost per frame besides the copy, whatever the size.
//  - parse_source_frame(frame) accepts exactly the frames fill() produces (any MACs,
//    addresses, ports, sizes): lengths consistent with frame.size(), IPv4 header
//    checksum and UDP checksum verify, magic present. Anything else: nullopt.
//  - Plain data: no threads, no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "uvhost/backends/switch_mac_table.h"  // MacAddress

namespace uvhost::backends {

struct SourceFrameSpec {
  uint32_t frame_size = 64;
  MacAddress dst_mac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  MacAddress src_mac{0x02, 0x75, 0x76, 0x00, 0x00, 0x01};
  uint32_t ip_src = 0x0a000001;  // 10.0.0.1 (host byte order)
  uint32_t ip_dst = 0x0a000002;  // 10.0.0.2
  uint16_t udp_src_port = 49152;
  uint16_t udp_dst_port = 9;     // discard
  uint32_t stream = 0;           // written into every frame's payload
};

struct SourceFrameInfo {
  uint32_t stream = 0;
  uint64_t sequence = 0;
};

class SourceFrameTemplate {
 public:
  static constexpr uint32_t kMinFrameSize = 60;
  static constexpr uint32_t kMaxFrameSize = 65535;
  static constexpr size_t kHeadersSize = 14 + 20 + 8;
  static constexpr size_t kPayloadHeaderSize = 16;  // magic, stream, sequence
  static constexpr uint32_t kMagic = 0x55565351;    // "UVSQ"

  explicit SourceFrameTemplate(const SourceFrameSpec& spec);

  uint32_t frame_size() const noexcept { return static_cast<uint32_t>(bytes_.size()); }
  void fill(uint64_t sequence, std::vector<std::byte>& out) const;
  // The template's bytes (sequence 0); stamp() turns a copy of them into the frame with
  // `sequence` by rewriting only the fields that change (sequence, UDP checksum), so a
  // large frame costs a few stores per frame, not a copy.
  std::span<const std::byte> bytes() const noexcept { return bytes_; }
  void stamp(uint64_t sequence, std::span<std::byte> frame) const;

 private:
  std::vector<std::byte> bytes_;  // the frame with sequence 0 and UDP checksum 0
  uint64_t udp_sum_base_ = 0;     // one's-complement sum (unfolded) of it, pseudo header included
};

std::optional<SourceFrameInfo> parse_source_frame(std::span<const std::byte> frame) noexcept;

}  // namespace uvhost::backends
