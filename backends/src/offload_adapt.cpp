// offload_adapt.cpp - offload headers fitted to the receiving guest (see offload_adapt.h).
#include "uvhost/backends/offload_adapt.h"

#include "uvhost/backends/tap_device.h"  // net_feature

namespace uvhost::backends {
namespace {

constexpr bool has(uint64_t features, unsigned bit) noexcept { return ((features >> bit) & 1U) != 0; }

}  // namespace

bool gso_acceptable(const virtio::NetHeader& header, uint64_t guest_features) noexcept {
  const uint8_t gso = header.gso_type & static_cast<uint8_t>(~virtio::kNetGsoEcn);
  if (gso == virtio::kNetGsoNone) return true;  // (an ECN bit alone carries no segmentation)
  if (!has(guest_features, net_feature::kGuestCsum)) return false;
  if ((header.gso_type & virtio::kNetGsoEcn) != 0 && !has(guest_features, net_feature::kGuestEcn)) return false;
  switch (gso) {
    case virtio::kNetGsoTcpV4: return has(guest_features, net_feature::kGuestTso4);
    case virtio::kNetGsoTcpV6: return has(guest_features, net_feature::kGuestTso6);
    case virtio::kNetGsoUdp: return has(guest_features, net_feature::kGuestUfo);
    case virtio::kNetGsoUdpL4:
      return has(guest_features, net_feature::kGuestUso4) && has(guest_features, net_feature::kGuestUso6);
    default: return false;
  }
}

ChecksumAdapt adapt_checksum(Packet& packet, uint64_t guest_features) noexcept {
  if (has(guest_features, net_feature::kGuestCsum)) return ChecksumAdapt::kAsIs;
  virtio::NetHeader& header = packet.header;
  if ((header.flags & virtio::kNetHdrFlagNeedsCsum) == 0) {
    header.flags = 0;
    return ChecksumAdapt::kAsIs;
  }
  std::vector<std::byte>& frame = packet.frame;
  const size_t start = header.csum_start;
  const size_t field = start + header.csum_offset;
  if (start >= frame.size() || field + 2 > frame.size()) return ChecksumAdapt::kBadRange;
  uint64_t sum = 0;
  size_t i = start;
  for (; i + 1 < frame.size(); i += 2) {
    sum += (std::to_integer<uint64_t>(frame[i]) << 8) | std::to_integer<uint64_t>(frame[i + 1]);
  }
  if (i < frame.size()) sum += std::to_integer<uint64_t>(frame[i]) << 8;
  while ((sum >> 16) != 0) sum = (sum & 0xffffU) + (sum >> 16);
  uint16_t checksum = static_cast<uint16_t>(~sum);
  if (checksum == 0) checksum = 0xffff;
  frame[field] = std::byte{static_cast<uint8_t>(checksum >> 8)};
  frame[field + 1] = std::byte{static_cast<uint8_t>(checksum)};
  header.flags = 0;
  return ChecksumAdapt::kCompleted;
}

}  // namespace uvhost::backends
