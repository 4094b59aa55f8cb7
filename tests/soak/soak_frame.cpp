// soak_frame.cpp - frame layout and echo check (soak_frame.h).
#include "soak_frame.h"

#include <cstring>

#include <fmt/format.h>

namespace uvhost::soak {
namespace {

// Byte offsets in the frame.
constexpr size_t kDstMac = 0, kSrcMac = 6, kEtherType = 12, kPort = 14, kConnection = 16, kSeq = 20,
                 kPayload = 28;
constexpr uint8_t kGuestMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
constexpr uint8_t kPeerMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};

std::byte payload_byte(const FrameId& id, size_t offset) noexcept {
  const uint64_t mix = id.seq * 0x9E3779B97F4A7C15ull + uint64_t{id.connection} * 0xBF58476D1CE4E5B9ull +
                       uint64_t{id.port} * 0x94D049BB133111EBull + offset * 0x2545F4914F6CDD1Dull;
  return static_cast<std::byte>(mix >> 56);
}

template <typename T>
T load(std::span<const std::byte> frame, size_t offset) noexcept {
  T value;
  std::memcpy(&value, frame.data() + offset, sizeof value);
  return value;
}

}  // namespace

size_t frame_bytes(uint64_t seq) noexcept { return kMinBytes + (seq * 37 % (kMaxBytes - kMinBytes + 1)); }

size_t fill_frame(const FrameId& id, std::span<std::byte> out) noexcept {
  const size_t bytes = frame_bytes(id.seq);
  std::memcpy(out.data() + kDstMac, kPeerMac, 6);
  std::memcpy(out.data() + kSrcMac, kGuestMac, 6);
  out[kEtherType] = std::byte{0x88};
  out[kEtherType + 1] = std::byte{0xB5};
  std::memcpy(out.data() + kPort, &id.port, sizeof id.port);
  out[kPort + 2] = out[kPort + 3] = std::byte{0};
  std::memcpy(out.data() + kConnection, &id.connection, sizeof id.connection);
  std::memcpy(out.data() + kSeq, &id.seq, sizeof id.seq);
  for (size_t i = kPayload; i < bytes; ++i) out[i] = payload_byte(id, i);
  return bytes;
}

std::string check_echo(std::span<const std::byte> frame, const FrameId& expected) {
  if (frame.size() < kPayload) return fmt::format("a {}-byte frame", frame.size());
  const auto port = load<uint16_t>(frame, kPort);
  const auto connection = load<uint32_t>(frame, kConnection);
  const auto seq = load<uint64_t>(frame, kSeq);
  if (port != expected.port) return fmt::format("a frame of port {} (seq {})", port, seq);
  if (connection != expected.connection) {
    return fmt::format("a frame of connection {} (expected connection {}, seq {})", connection,
                       expected.connection, seq);
  }
  if (seq != expected.seq) return fmt::format("seq {} where {} was next", seq, expected.seq);
  if (frame.size() != frame_bytes(seq)) {
    return fmt::format("seq {}: {} bytes, sent {}", seq, frame.size(), frame_bytes(seq));
  }
  // Loopback swaps the MACs: what we sent from comes back as the destination.
  if (std::memcmp(frame.data() + kDstMac, kGuestMac, 6) != 0 ||
      std::memcmp(frame.data() + kSrcMac, kPeerMac, 6) != 0) {
    return fmt::format("seq {}: MACs not swapped back", seq);
  }
  for (size_t i = kPayload; i < frame.size(); ++i) {
    if (frame[i] != payload_byte(expected, i)) return fmt::format("seq {}: payload differs at byte {}", seq, i);
  }
  return {};
}

}  // namespace uvhost::soak
