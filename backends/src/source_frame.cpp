// source_frame.cpp - UDP/IPv4 test frames with sequence numbers (see source_frame.h).
#include "uvhost/backends/source_frame.h"

#include <cstring>

#include "uvhost/sync/misuse.h"

namespace uvhost::backends {
namespace {

constexpr size_t kEth = 14;
constexpr size_t kIp = kEth;
constexpr size_t kUdp = kEth + 20;
constexpr size_t kPayload = kUdp + 8;
constexpr size_t kSequenceAt = kPayload + 8;
constexpr size_t kUdpChecksumAt = kUdp + 6;
constexpr uint8_t kProtocolUdp = 17;

void put16(std::span<std::byte> b, size_t at, uint32_t v) {
  b[at] = std::byte{static_cast<uint8_t>(v >> 8)};
  b[at + 1] = std::byte{static_cast<uint8_t>(v)};
}
void put32(std::span<std::byte> b, size_t at, uint32_t v) {
  put16(b, at, v >> 16);
  put16(b, at + 2, v & 0xffffU);
}
void put64(std::span<std::byte> b, size_t at, uint64_t v) {
  put32(b, at, static_cast<uint32_t>(v >> 32));
  put32(b, at + 4, static_cast<uint32_t>(v));
}
uint32_t get16(std::span<const std::byte> b, size_t at) {
  return (std::to_integer<uint32_t>(b[at]) << 8) | std::to_integer<uint32_t>(b[at + 1]);
}
uint32_t get32(std::span<const std::byte> b, size_t at) { return (get16(b, at) << 16) | get16(b, at + 2); }
uint64_t get64(std::span<const std::byte> b, size_t at) { return (uint64_t{get32(b, at)} << 32) | get32(b, at + 4); }

// One's-complement sum of big-endian 16-bit words of b[begin, end), not folded.
uint64_t sum16(std::span<const std::byte> b, size_t begin, size_t end) {
  uint64_t sum = 0;
  size_t i = begin;
  for (; i + 1 < end; i += 2) sum += get16(b, i);
  if (i < end) sum += std::to_integer<uint32_t>(b[i]) << 8;
  return sum;
}
uint16_t fold(uint64_t sum) {
  while ((sum >> 16) != 0) sum = (sum & 0xffffU) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}
uint64_t pseudo_header_sum(uint32_t src, uint32_t dst, size_t udp_length) {
  return (src >> 16) + (src & 0xffffU) + (dst >> 16) + (dst & 0xffffU) + kProtocolUdp + udp_length;
}
uint64_t sequence_sum(uint64_t sequence) {
  return (sequence >> 48) + ((sequence >> 32) & 0xffffU) + ((sequence >> 16) & 0xffffU) + (sequence & 0xffffU);
}
uint16_t udp_checksum_field(uint64_t sum) {
  const uint16_t checksum = static_cast<uint16_t>(~fold(sum));
  return checksum == 0 ? 0xffff : checksum;  // 0 means "no checksum" in UDP over IPv4
}

}  // namespace

SourceFrameTemplate::SourceFrameTemplate(const SourceFrameSpec& spec) {
  UVHOST_MISUSE_CHECK(spec.frame_size >= kMinFrameSize && spec.frame_size <= kMaxFrameSize,
                      "source frame: frame_size out of range");
  std::vector<std::byte>& b = bytes_;
  b.assign(spec.frame_size, std::byte{0});
  for (size_t i = 0; i < 6; ++i) {
    b[i] = std::byte{spec.dst_mac[i]};
    b[6 + i] = std::byte{spec.src_mac[i]};
  }
  put16(b, 12, 0x0800);
  const size_t ip_length = spec.frame_size - kEth;
  const size_t udp_length = spec.frame_size - kUdp;
  b[kIp] = std::byte{0x45};
  put16(b, kIp + 2, static_cast<uint32_t>(ip_length));
  put16(b, kIp + 6, 0x4000);  // DF, id 0 (RFC 6864: fine for atomic datagrams)
  b[kIp + 8] = std::byte{64};
  b[kIp + 9] = std::byte{kProtocolUdp};
  put32(b, kIp + 12, spec.ip_src);
  put32(b, kIp + 16, spec.ip_dst);
  put16(b, kIp + 10, static_cast<uint16_t>(~fold(sum16(b, kIp, kUdp))));
  put16(b, kUdp, spec.udp_src_port);
  put16(b, kUdp + 2, spec.udp_dst_port);
  put16(b, kUdp + 4, static_cast<uint32_t>(udp_length));
  put32(b, kPayload, kMagic);
  put32(b, kPayload + 4, spec.stream);
  for (size_t i = kPayloadHeaderSize; kPayload + i < b.size(); ++i) {
    b[kPayload + i] = std::byte{static_cast<uint8_t>(i)};
  }
  udp_sum_base_ = pseudo_header_sum(spec.ip_src, spec.ip_dst, udp_length) + sum16(b, kUdp, b.size());
}

void SourceFrameTemplate::fill(uint64_t sequence, std::vector<std::byte>& out) const {
  out.resize(bytes_.size());
  std::memcpy(out.data(), bytes_.data(), bytes_.size());
  stamp(sequence, out);
}

void SourceFrameTemplate::stamp(uint64_t sequence, std::span<std::byte> frame) const {
  put64(frame, kSequenceAt, sequence);
  put16(frame, kUdpChecksumAt, udp_checksum_field(udp_sum_base_ + sequence_sum(sequence)));
}

std::optional<SourceFrameInfo> parse_source_frame(std::span<const std::byte> frame) noexcept {
  if (frame.size() < SourceFrameTemplate::kMinFrameSize || frame.size() > SourceFrameTemplate::kMaxFrameSize) {
    return std::nullopt;
  }
  if (get16(frame, 12) != 0x0800 || frame[kIp] != std::byte{0x45} ||
      std::to_integer<uint8_t>(frame[kIp + 9]) != kProtocolUdp) {
    return std::nullopt;
  }
  if (get16(frame, kIp + 2) != frame.size() - kEth || get16(frame, kUdp + 4) != frame.size() - kUdp) {
    return std::nullopt;
  }
  if (fold(sum16(frame, kIp, kUdp)) != 0xffff) return std::nullopt;
  const uint64_t pseudo = pseudo_header_sum(get32(frame, kIp + 12), get32(frame, kIp + 16), frame.size() - kUdp);
  if (get16(frame, kUdpChecksumAt) == 0 || fold(pseudo + sum16(frame, kUdp, frame.size())) != 0xffff) {
    return std::nullopt;
  }
  if (get32(frame, kPayload) != SourceFrameTemplate::kMagic) return std::nullopt;
  return SourceFrameInfo{get32(frame, kPayload + 4), get64(frame, kSequenceAt)};
}

}  // namespace uvhost::backends
