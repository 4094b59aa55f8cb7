// bench_frame.cpp - see bench_frame.h.
#include "uvhost/bench/bench_frame.h"

#include <array>
#include <cstring>

namespace uvhost::bench {

namespace {

constexpr std::array<std::byte, 6> kDst{std::byte{2}, std::byte{0}, std::byte{0},
                                        std::byte{0}, std::byte{0}, std::byte{2}};
constexpr std::array<std::byte, 6> kSrc{std::byte{2}, std::byte{0}, std::byte{0},
                                        std::byte{0}, std::byte{0}, std::byte{1}};
constexpr std::array<std::byte, 4> kMagic{std::byte{'U'}, std::byte{'V'}, std::byte{'B'}, std::byte{'N'}};
constexpr size_t kSessionAt = 18, kSequenceAt = 22, kSendAt = 30;

}  // namespace

void build_bench_frame(std::span<std::byte> frame) noexcept {
  for (size_t i = 0; i < frame.size(); ++i) frame[i] = static_cast<std::byte>(i & 0xff);
  if (frame.size() < kBenchHeaderBytes) return;
  std::memcpy(frame.data(), kDst.data(), 6);
  std::memcpy(frame.data() + 6, kSrc.data(), 6);
  frame[12] = std::byte{kBenchEtherType >> 8};
  frame[13] = std::byte{kBenchEtherType & 0xff};
  std::memcpy(frame.data() + 14, kMagic.data(), 4);
  stamp_bench_frame(frame, BenchStamp{});
}

void stamp_bench_frame(std::span<std::byte> frame, const BenchStamp& stamp) noexcept {
  if (frame.size() < kBenchHeaderBytes) return;
  std::memcpy(frame.data() + kSessionAt, &stamp.session, sizeof stamp.session);
  std::memcpy(frame.data() + kSequenceAt, &stamp.sequence, sizeof stamp.sequence);
  std::memcpy(frame.data() + kSendAt, &stamp.send_ns, sizeof stamp.send_ns);
}

std::optional<BenchStamp> parse_bench_frame(std::span<const std::byte> frame, bool swapped) noexcept {
  if (frame.size() < kBenchHeaderBytes) return std::nullopt;
  const auto& dst = swapped ? kSrc : kDst;
  const auto& src = swapped ? kDst : kSrc;
  if (std::memcmp(frame.data(), dst.data(), 6) != 0 || std::memcmp(frame.data() + 6, src.data(), 6) != 0 ||
      frame[12] != std::byte{kBenchEtherType >> 8} || frame[13] != std::byte{kBenchEtherType & 0xff} ||
      std::memcmp(frame.data() + 14, kMagic.data(), 4) != 0) {
    return std::nullopt;
  }
  BenchStamp stamp;
  std::memcpy(&stamp.session, frame.data() + kSessionAt, sizeof stamp.session);
  std::memcpy(&stamp.sequence, frame.data() + kSequenceAt, sizeof stamp.sequence);
  std::memcpy(&stamp.send_ns, frame.data() + kSendAt, sizeof stamp.send_ns);
  return stamp;
}

}  // namespace uvhost::bench
