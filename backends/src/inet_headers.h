// inet_headers.h (private to the backends library) - sizes, field offsets and numbers
// of the Ethernet, IPv4, IPv6, TCP and UDP headers that offload validation and
// software segmentation read and write (offsets from the start of each header).
#pragma once

#include <cstddef>
#include <cstdint>

namespace uvhost::backends::inet {

inline constexpr size_t kEthernetHeader = 14;
inline constexpr size_t kEtherTypeAt = 12;
inline constexpr size_t kVlanTag = 4;
inline constexpr uint16_t kEtherIpv4 = 0x0800;
inline constexpr uint16_t kEtherIpv6 = 0x86dd;
inline constexpr uint16_t kEther8021Q = 0x8100;
inline constexpr uint16_t kEther8021AD = 0x88a8;

inline constexpr size_t kIpv4MinHeader = 20;
inline constexpr size_t kIpv4TotalLengthAt = 2;
inline constexpr size_t kIpv4IdAt = 4;
inline constexpr size_t kIpv4FragmentAt = 6;  // flags and fragment offset (8-byte units)
inline constexpr size_t kIpv4ProtocolAt = 9;
inline constexpr size_t kIpv4ChecksumAt = 10;
inline constexpr size_t kIpv4AddressesAt = 12;  // source, destination: 8 bytes
inline constexpr uint16_t kIpv4MoreFragments = 0x2000;
inline constexpr uint16_t kIpv4FragmentMask = 0x3fff;  // MF and the offset

inline constexpr size_t kIpv6Header = 40;
inline constexpr size_t kIpv6PayloadLengthAt = 4;
inline constexpr size_t kIpv6NextHeaderAt = 6;
inline constexpr size_t kIpv6AddressesAt = 8;  // source, destination: 32 bytes
inline constexpr size_t kIpv6FragmentHeader = 8;
inline constexpr uint8_t kIpv6HopByHop = 0;
inline constexpr uint8_t kIpv6Fragment = 44;
inline constexpr uint8_t kIpv6DestinationOptions = 60;

inline constexpr uint8_t kProtocolTcp = 6;
inline constexpr uint8_t kProtocolUdp = 17;

inline constexpr size_t kTcpMinHeader = 20;
inline constexpr size_t kTcpSeqAt = 4;
inline constexpr size_t kTcpDataOffsetAt = 12;  // high nibble, in 4-byte words
inline constexpr size_t kTcpFlagsAt = 13;
inline constexpr size_t kTcpChecksumAt = 16;
inline constexpr uint8_t kTcpFin = 0x01;
inline constexpr uint8_t kTcpPsh = 0x08;
inline constexpr uint8_t kTcpCwr = 0x80;

inline constexpr size_t kUdpHeader = 8;
inline constexpr size_t kUdpLengthAt = 4;
inline constexpr size_t kUdpChecksumAt = 6;

inline constexpr size_t kMaxIpLength = 65535;  // IPv4 total length, IPv6 payload length, UDP length

}  // namespace uvhost::backends::inet
