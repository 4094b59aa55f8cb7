// flow_hash.cpp - a frame's symmetric flow hash (see flow_hash.h). Every load is
// preceded by a check against the frame's size; offsets are size_t and stay within
// the frame's size plus a small constant (they never wrap).
#include "uvhost/backends/flow_hash.h"

#include <algorithm>
#include <array>
#include <compare>

#include "inet_headers.h"
#include "wire_bytes.h"

namespace uvhost::backends {
namespace {

using namespace inet;

constexpr size_t kMaxVlanTags = 2;
constexpr size_t kMacBytes = 6;
constexpr uint8_t kIpv6Routing = 43;
constexpr size_t kIpv6FragmentFieldAt = 2;      // offset (13 bits), 2 reserved bits, M
constexpr uint16_t kIpv6FragmentMask = 0xfff9;  // the offset and M
constexpr size_t kIpv6ExtensionMinimum = 8;     // next header, length, 6 bytes

// Which kind of key: hashed too, so an IPv4 key never equals an IPv6 or a MAC one.
enum class KeyKind : uint8_t { kMac = 1, kIpv4 = 2, kIpv6 = 3 };

// One end of a conversation: an address as big-endian words (IPv4: word 0; a MAC:
// words 0 and 1; IPv6: all four), so comparing the arrays compares the bytes, and a
// port (0: none).
struct Endpoint {
  std::array<uint32_t, 4> address{};
  uint16_t port = 0;
  auto operator<=>(const Endpoint&) const = default;
};

struct FlowKey {
  KeyKind kind = KeyKind::kMac;
  uint8_t protocol = 0;
  Endpoint source;
  Endpoint destination;
  bool tcp_without_payload = false;  // not hashed
};

// Accumulates 64-bit words (multiply, xor-shift: each step a bijection of the state
// for a given word), then MurmurHash3's 64-bit finalizer, so every bit of the result
// depends on every bit of every word.
class Mixer {
 public:
  void add(uint64_t word) noexcept {
    state_ = (state_ ^ word) * 0x9e3779b97f4a7c15ULL;
    state_ ^= state_ >> 32;
  }
  uint32_t finish() const noexcept {
    uint64_t h = state_;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return static_cast<uint32_t>(h);
  }

 private:
  uint64_t state_ = 0;
};

uint32_t hash_of(const FlowKey& key) noexcept {
  // The lesser endpoint first: both directions of a conversation give the same words.
  const auto [lesser, greater] = std::minmax(key.source, key.destination);
  Mixer mixer;
  mixer.add((uint64_t{static_cast<uint8_t>(key.kind)} << 8) | key.protocol);
  for (const Endpoint* end : {&lesser, &greater}) {
    mixer.add((uint64_t{end->address[0]} << 32) | end->address[1]);
    mixer.add((uint64_t{end->address[2]} << 32) | end->address[3]);
    mixer.add(end->port);
  }
  return mixer.finish();
}

// The two MAC addresses (none: a frame shorter than both hashes as a constant).
FlowKey mac_key(std::span<const std::byte> frame) noexcept {
  FlowKey key;
  if (frame.size() < 2 * kMacBytes) return key;
  key.destination.address = {load_be32(frame, 0), load_be16(frame, 4), 0, 0};
  key.source.address = {load_be32(frame, kMacBytes), load_be16(frame, kMacBytes + 4), 0, 0};
  return key;
}

// TCP's or UDP's ports at l4, when the key's protocol has them and the frame holds them;
// and whether a TCP segment carries no payload: its IP packet, as long as the IP
// header's length field says (`ip_end`; the frame may be padded), ends exactly where
// its TCP header does.
void read_transport(std::span<const std::byte> frame, size_t l4, size_t ip_end, FlowKey& key) noexcept {
  if (key.protocol != kProtocolTcp && key.protocol != kProtocolUdp) return;
  if (frame.size() < l4 + 4) return;
  key.source.port = load_be16(frame, l4);
  key.destination.port = load_be16(frame, l4 + 2);
  if (key.protocol != kProtocolTcp || frame.size() <= l4 + kTcpDataOffsetAt) return;
  const size_t tcp_header = size_t{load8(frame, l4 + kTcpDataOffsetAt)} / 16 * 4;
  key.tcp_without_payload = tcp_header >= kTcpMinHeader && ip_end == l4 + tcp_header;
}

bool ipv4_key(std::span<const std::byte> frame, size_t l3, FlowKey& key) noexcept {
  if (frame.size() < l3 + kIpv4MinHeader) return false;
  const uint8_t version_ihl = load8(frame, l3);
  const size_t header_bytes = size_t{version_ihl & 0x0fU} * 4;
  if ((version_ihl >> 4) != 4 || header_bytes < kIpv4MinHeader || frame.size() < l3 + header_bytes) return false;
  key.kind = KeyKind::kIpv4;
  key.protocol = load8(frame, l3 + kIpv4ProtocolAt);
  key.source.address[0] = load_be32(frame, l3 + kIpv4AddressesAt);
  key.destination.address[0] = load_be32(frame, l3 + kIpv4AddressesAt + 4);
  const bool fragment = (load_be16(frame, l3 + kIpv4FragmentAt) & kIpv4FragmentMask) != 0;
  const size_t ip_end = l3 + load_be16(frame, l3 + kIpv4TotalLengthAt);
  if (!fragment) read_transport(frame, l3 + header_bytes, ip_end, key);
  return true;
}

bool ipv6_key(std::span<const std::byte> frame, size_t l3, FlowKey& key) noexcept {
  if (frame.size() < l3 + kIpv6Header || (load8(frame, l3) >> 4) != 6) return false;
  key.kind = KeyKind::kIpv6;
  for (size_t word = 0; word < 4; ++word) {
    key.source.address[word] = load_be32(frame, l3 + kIpv6AddressesAt + 4 * word);
    key.destination.address[word] = load_be32(frame, l3 + kIpv6AddressesAt + 16 + 4 * word);
  }
  uint8_t next = load8(frame, l3 + kIpv6NextHeaderAt);
  size_t offset = l3 + kIpv6Header;
  bool fragment = false;
  for (size_t headers = 0; headers < kFlowHashIpv6Headers && !fragment; ++headers) {
    if (next == kIpv6Fragment) {
      if (frame.size() < offset + kIpv6FragmentHeader) break;
      // A fragment header with neither offset nor M (an atomic fragment) holds the
      // whole datagram: its ports count.
      fragment = (load_be16(frame, offset + kIpv6FragmentFieldAt) & kIpv6FragmentMask) != 0;
      next = load8(frame, offset);
      offset += kIpv6FragmentHeader;
    } else if (next == kIpv6HopByHop || next == kIpv6Routing || next == kIpv6DestinationOptions) {
      if (frame.size() < offset + kIpv6ExtensionMinimum) break;
      const uint8_t following = load8(frame, offset);
      offset += (size_t{load8(frame, offset + 1)} + 1) * 8;  // in 8-byte units, less the first
      next = following;
    } else {
      break;  // the transport, or a header not walked
    }
  }
  key.protocol = next;
  const size_t ip_end = l3 + kIpv6Header + load_be16(frame, l3 + kIpv6PayloadLengthAt);
  if (!fragment) read_transport(frame, offset, ip_end, key);
  return true;
}

// The IP key after the Ethernet header and its VLAN tags; false: not IP (or the IP
// header is cut off or malformed).
bool ip_key(std::span<const std::byte> frame, FlowKey& key) noexcept {
  if (frame.size() < kEthernetHeader) return false;
  size_t offset = kEthernetHeader;
  uint16_t type = load_be16(frame, kEtherTypeAt);
  for (size_t tags = 0; tags < kMaxVlanTags && (type == kEther8021Q || type == kEther8021AD); ++tags) {
    if (frame.size() < offset + kVlanTag) return false;
    type = load_be16(frame, offset + 2);  // after the tag's 2-byte TCI
    offset += kVlanTag;
  }
  if (type == kEtherIpv4) return ipv4_key(frame, offset, key);
  if (type == kEtherIpv6) return ipv6_key(frame, offset, key);
  return false;
}

}  // namespace

FrameFlow frame_flow(std::span<const std::byte> frame) noexcept {
  FlowKey key;
  if (!ip_key(frame, key)) key = mac_key(frame);
  return FrameFlow{hash_of(key), key.tcp_without_payload};
}

}  // namespace uvhost::backends
