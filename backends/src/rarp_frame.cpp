// rarp_frame.cpp - see rarp_frame.h (field layout as in RFC 903 and QEMU's
// announce_self_create()).
#include "uvhost/backends/rarp_frame.h"

#include <algorithm>

namespace uvhost::backends {
namespace {

constexpr uint16_t kHardwareEthernet = 1;
constexpr uint16_t kProtocolIpv4 = 0x0800;
constexpr uint8_t kHardwareLength = 6;
constexpr uint8_t kProtocolLength = 4;
constexpr uint16_t kOpRequestReverse = 3;

void put_u16(std::byte* at, uint16_t value) noexcept {  // network byte order
  at[0] = static_cast<std::byte>(value >> 8);
  at[1] = static_cast<std::byte>(value & 0xff);
}

void put_mac(std::byte* at, const MacAddress& mac) noexcept {
  std::transform(mac.begin(), mac.end(), at, [](uint8_t b) { return static_cast<std::byte>(b); });
}

}  // namespace

std::array<std::byte, kRarpFrameSize> rarp_announcement(const MacAddress& mac) noexcept {
  std::array<std::byte, kRarpFrameSize> frame{};  // protocol addresses and padding stay 0
  std::fill_n(frame.begin(), 6, std::byte{0xff});  // broadcast
  put_mac(&frame[6], mac);
  put_u16(&frame[12], kEtherTypeRarp);
  put_u16(&frame[14], kHardwareEthernet);
  put_u16(&frame[16], kProtocolIpv4);
  frame[18] = std::byte{kHardwareLength};
  frame[19] = std::byte{kProtocolLength};
  put_u16(&frame[20], kOpRequestReverse);
  put_mac(&frame[22], mac);  // sender hardware address; sender protocol address 0.0.0.0
  put_mac(&frame[32], mac);  // target hardware address; target protocol address 0.0.0.0
  return frame;
}

bool is_rarp_announcement(std::span<const std::byte> frame, const MacAddress& mac) noexcept {
  const auto expected = rarp_announcement(mac);
  return frame.size() == expected.size() && std::equal(frame.begin(), frame.end(), expected.begin());
}

}  // namespace uvhost::backends
