// flow_hash_test.cpp - flow_hash(): both directions of a conversation hash alike
// (IPv4, IPv6, TCP, UDP, other protocols, non-IP), different flows apart and evenly,
// fragments by their addresses, VLAN tags and IPv6 extension headers skipped, and a
// frame cut at every length (each a buffer of exactly that size, so ASan sees any read
// past it) falls back to the key its bytes still hold. frame_flow(): which frames are
// TCP segments without payload (by the IP length, padding or not).
#include "uvhost/backends/flow_hash.h"

#include <netinet/in.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "offload_frames.h"

namespace uvhost::backends {
namespace {

using testing::Bytes;
using testing::FrameOffsets;
using testing::OffloadFrameSpec;

// The frame of the other direction: MACs, IP addresses and ports swapped (checksums
// are left as they are: the hash does not read them).
Bytes mirrored(const OffloadFrameSpec& spec) {
  Bytes frame = testing::offload_frame(spec);
  const FrameOffsets at = testing::offsets_of(spec);
  const auto swap = [&](size_t a, size_t b, size_t bytes) {
    std::swap_ranges(frame.begin() + static_cast<std::ptrdiff_t>(a), frame.begin() + static_cast<std::ptrdiff_t>(a + bytes),
                     frame.begin() + static_cast<std::ptrdiff_t>(b));
  };
  swap(0, 6, 6);
  if (spec.ipv6) {
    swap(at.l3 + 8, at.l3 + 24, 16);
  } else {
    swap(at.l3 + 12, at.l3 + 16, 4);
  }
  swap(at.l4, at.l4 + 2, 2);
  return frame;
}

uint32_t hash_of(const Bytes& frame) { return flow_hash(frame); }
uint32_t hash_of(const OffloadFrameSpec& spec) { return flow_hash(testing::offload_frame(spec)); }

OffloadFrameSpec tcp4() {
  OffloadFrameSpec spec;
  spec.payload = testing::payload_pattern(100);
  return spec;
}

OffloadFrameSpec udp6() {
  OffloadFrameSpec spec;
  spec.ipv6 = true;
  spec.protocol = IPPROTO_UDP;
  spec.payload = testing::payload_pattern(100);
  return spec;
}

// A frame with the same MACs as `spec`'s but not IP.
Bytes not_ip(const OffloadFrameSpec& spec) {
  Bytes frame = testing::ethernet(spec.destination, spec.source, testing::kTestEtherType);
  frame.resize(64, std::byte{0x5a});
  return frame;
}

TEST(FlowHash, BothDirectionsOfAConversationHashAlike) {
  OffloadFrameSpec tagged = tcp4();
  tagged.vlans = {{0x8100, 7}};
  OffloadFrameSpec ipv6_options = udp6();
  ipv6_options.extensions = {{0, 8}, {60, 16}};
  OffloadFrameSpec icmp = tcp4();
  icmp.protocol = IPPROTO_ICMP;
  icmp.raw_l4 = testing::payload_pattern(40, 9);
  for (const OffloadFrameSpec& spec : {tcp4(), udp6(), tagged, ipv6_options, icmp}) {
    SCOPED_TRACE(testing::offload_frame(spec).size());
    EXPECT_EQ(hash_of(spec), hash_of(mirrored(spec)));
  }
  // Equal addresses: the ports decide the order, and still both ways alike.
  Bytes same_hosts = testing::tcp_frame({.ip_source = 0x0a000001, .ip_destination = 0x0a000001});
  Bytes answer = testing::tcp_frame({.destination = {0x02, 0, 0, 0, 0, 0x0a},
                                     .source = {0x02, 0, 0, 0, 0, 0x0b},
                                     .ip_source = 0x0a000001,
                                     .ip_destination = 0x0a000001,
                                     .port_source = 5001,
                                     .port_destination = 40000});
  EXPECT_EQ(hash_of(same_hosts), hash_of(answer));
  // Not IP: the two MACs, in either order.
  const OffloadFrameSpec spec = tcp4();
  OffloadFrameSpec swapped_macs = spec;
  std::swap(swapped_macs.source, swapped_macs.destination);
  EXPECT_EQ(hash_of(not_ip(spec)), hash_of(not_ip(swapped_macs)));
}

TEST(FlowHash, DifferentFlowsHashApart) {
  const OffloadFrameSpec base = tcp4();
  OffloadFrameSpec other_port = base;
  other_port.port_source = 40001;
  OffloadFrameSpec udp = base;
  udp.protocol = IPPROTO_UDP;
  OffloadFrameSpec ipv6 = base;
  ipv6.ipv6 = true;
  OffloadFrameSpec other_host = base;
  other_host.destination[5] = 0x0c;  // MACs are not part of an IP key ...
  const std::set<uint32_t> hashes = {hash_of(base), hash_of(other_port), hash_of(udp), hash_of(ipv6),
                                     hash_of(not_ip(base))};
  EXPECT_EQ(hashes.size(), 5u);
  EXPECT_EQ(hash_of(other_host), hash_of(base));
  EXPECT_NE(hash_of(not_ip(other_host)), hash_of(not_ip(base)));  // ... but they are the non-IP key
  // (A:1 -> B:2) and (A:2 -> B:1) are different conversations.
  OffloadFrameSpec crossed = base;
  std::swap(crossed.port_source, crossed.port_destination);
  EXPECT_NE(hash_of(crossed), hash_of(base));
  // Payload, TCP flags and sequence numbers are not part of the key.
  OffloadFrameSpec later = base;
  later.seq += 12345;
  later.tcp_flags = 0x10;
  later.payload = testing::payload_pattern(700, 3);
  EXPECT_EQ(hash_of(later), hash_of(base));
}

// What the switch takes from the hash: its low bits (% pairs, the steering index).
TEST(FlowHash, FlowsSpreadEvenlyOverAnyBits) {
  constexpr int kFlows = 1024;
  int odd = 0;
  std::set<uint32_t> indexes;
  std::set<uint32_t> tags;
  for (int i = 0; i < kFlows; ++i) {
    OffloadFrameSpec spec = tcp4();
    spec.port_source = static_cast<uint16_t>(40000 + i);
    const uint32_t hash = hash_of(spec);
    odd += static_cast<int>(hash % 2);
    indexes.insert(hash % 4096);
    tags.insert(hash >> 16);
  }
  // Expected 512 (sd 16) odd; 4096 * (1 - e^-0.25) = 906 distinct indexes.
  EXPECT_GT(odd, 412);
  EXPECT_LT(odd, 612);
  EXPECT_GT(indexes.size(), 800u);
  EXPECT_GT(tags.size(), 1000u);
}

TEST(FlowHash, FragmentsHashByTheirAddressesAndProtocol) {
  OffloadFrameSpec whole = udp6();
  whole.ipv6 = false;
  OffloadFrameSpec first = whole;
  first.ip_fragment = 0x2000;  // MF, offset 0: the ports are there, but later fragments have none
  OffloadFrameSpec later = whole;
  later.ip_fragment = 185;  // offset 1480
  later.raw_l4 = testing::payload_pattern(200, 4);
  EXPECT_EQ(hash_of(first), hash_of(later));
  EXPECT_EQ(hash_of(first), hash_of(mirrored(first)));
  EXPECT_NE(hash_of(first), hash_of(whole));
  OffloadFrameSpec later_tcp = later;
  later_tcp.protocol = IPPROTO_TCP;
  EXPECT_NE(hash_of(later_tcp), hash_of(later));

  // IPv6: a fragment header with M or an offset; one with neither (an atomic fragment)
  // holds the whole datagram, whose ports count.
  const OffloadFrameSpec whole6 = udp6();
  OffloadFrameSpec first6 = whole6;
  first6.fragment = testing::Ipv6Fragment{0, true, 7};
  OffloadFrameSpec later6 = whole6;
  later6.fragment = testing::Ipv6Fragment{1448, false, 7};
  later6.raw_l4 = testing::payload_pattern(200, 4);
  OffloadFrameSpec atomic6 = whole6;
  atomic6.fragment = testing::Ipv6Fragment{0, false, 7};
  EXPECT_EQ(hash_of(first6), hash_of(later6));
  EXPECT_NE(hash_of(first6), hash_of(whole6));
  EXPECT_EQ(hash_of(atomic6), hash_of(whole6));
}

TEST(FlowHash, VlanTagsAndIpv6ExtensionHeadersAreSkipped) {
  const OffloadFrameSpec plain = tcp4();
  OffloadFrameSpec one_tag = plain;
  one_tag.vlans = {{0x8100, 5}};
  OffloadFrameSpec two_tags = plain;
  two_tags.vlans = {{0x88a8, 100}, {0x8100, 5}};
  EXPECT_EQ(hash_of(one_tag), hash_of(plain));
  EXPECT_EQ(hash_of(two_tags), hash_of(plain));
  // A third tag is not looked behind: the frame is not IP to the hash, its MACs count.
  OffloadFrameSpec three_tags = plain;
  three_tags.vlans = {{0x88a8, 1}, {0x8100, 2}, {0x8100, 3}};
  EXPECT_EQ(hash_of(three_tags), hash_of(not_ip(plain)));

  const OffloadFrameSpec plain6 = udp6();
  OffloadFrameSpec walked = plain6;
  walked.extensions.assign(kFlowHashIpv6Headers, testing::Ipv6Extension{60, 8});
  EXPECT_EQ(hash_of(walked), hash_of(plain6));
  // One more than are walked: the walk stops at a destination-options header, which
  // is the protocol then, and there are no ports.
  OffloadFrameSpec too_many = walked;
  too_many.extensions.push_back({60, 8});
  EXPECT_NE(hash_of(too_many), hash_of(plain6));
  EXPECT_EQ(hash_of(too_many), hash_of(mirrored(too_many)));
}

// Every prefix of a frame, in a buffer of exactly its length: the key is what the
// prefix still holds (the ports, else the addresses and protocol, else the MACs).
void check_prefixes(const OffloadFrameSpec& spec) {
  const Bytes frame = testing::offload_frame(spec);
  const FrameOffsets at = testing::offsets_of(spec);
  const uint32_t whole = hash_of(frame);
  // The same addresses and protocol without ports: a later fragment of the datagram.
  OffloadFrameSpec fragment = spec;
  if (spec.ipv6) {
    fragment.fragment = testing::Ipv6Fragment{8, false, 1};
  } else {
    fragment.ip_fragment = 1;
  }
  const uint32_t addresses = hash_of(fragment);
  const uint32_t macs = hash_of(not_ip(spec));
  const uint32_t nothing = flow_hash({});
  EXPECT_EQ(std::set<uint32_t>({whole, addresses, macs, nothing}).size(), 4u);
  const size_t ip_end = at.l3 + (spec.ipv6 ? 40 : 20 + spec.ipv4_options.size());
  for (size_t length = 0; length <= frame.size(); ++length) {
    SCOPED_TRACE(length);
    const Bytes prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(length));
    const uint32_t hash = flow_hash(prefix);
    if (length < 12) {
      EXPECT_EQ(hash, nothing);
    } else if (length < ip_end) {
      EXPECT_EQ(hash, macs);  // the IP header is not all there
    } else if (length < at.l4) {
      // Inside the IPv6 extension headers: an IP key, without ports.
      EXPECT_NE(hash, whole);
      EXPECT_NE(hash, macs);
    } else if (length < at.l4 + 4) {
      EXPECT_EQ(hash, addresses);
    } else {
      EXPECT_EQ(hash, whole);
    }
  }
}

TEST(FlowHash, FramesCutAtEveryLengthFallBackToWhatTheyHold) {
  check_prefixes(tcp4());
  check_prefixes(udp6());
  OffloadFrameSpec tagged = tcp4();
  tagged.vlans = {{0x8100, 3}, {0x8100, 4}};
  tagged.ipv4_options = Bytes(8, std::byte{1});
  check_prefixes(tagged);
  OffloadFrameSpec extended = udp6();
  extended.vlans = {{0x8100, 3}};
  extended.extensions = {{0, 16}};
  check_prefixes(extended);
}

TEST(FlowHash, MalformedIpHeadersFallBackToTheMacs) {
  const OffloadFrameSpec spec = tcp4();
  const Bytes good = testing::offload_frame(spec);
  const size_t l3 = testing::kEthHeader;
  const uint32_t macs = hash_of(not_ip(spec));
  // IHL 4 (16 bytes); version 6; version 0.
  for (const uint8_t version_ihl : {uint8_t{0x44}, uint8_t{0x65}, uint8_t{0x00}}) {
    Bytes bad = good;
    bad[l3] = std::byte{version_ihl};
    EXPECT_EQ(hash_of(bad), macs) << std::hex << int{version_ihl};
  }
  Bytes options_cut = good;
  options_cut[l3] = std::byte{0x4f};  // a 60-byte header ...
  options_cut.resize(l3 + 59);        // ... one byte short
  EXPECT_EQ(hash_of(options_cut), macs);
  Bytes ipv6_too_short = testing::offload_frame(udp6());
  ipv6_too_short.resize(l3 + 39);
  EXPECT_EQ(hash_of(ipv6_too_short), macs);

  // An IPv6 extension header whose length runs past the frame: no ports, the
  // addresses and the protocol that follows it.
  OffloadFrameSpec runaway = udp6();
  runaway.extensions = {{0, 8}};
  Bytes frame = testing::offload_frame(runaway);
  frame[l3 + 40 + 1] = std::byte{0xff};  // (255 + 1) * 8 bytes
  OffloadFrameSpec fragment = udp6();
  fragment.fragment = testing::Ipv6Fragment{8, false, 1};
  EXPECT_EQ(hash_of(frame), hash_of(fragment));
}

bool without_payload(const Bytes& frame) { return frame_flow(frame).tcp_without_payload; }

TEST(FrameFlow, TcpSegmentsWithoutPayloadAreTold) {
  OffloadFrameSpec ack = tcp4();
  ack.payload.clear();
  ack.tcp_flags = 0x10;
  OffloadFrameSpec syn = ack;
  syn.tcp_flags = 0x02;
  syn.tcp_options = Bytes(20, std::byte{1});  // MSS, SACK, timestamps, window scale: 20 bytes
  OffloadFrameSpec ack6 = ack;
  ack6.ipv6 = true;
  ack6.extensions = {{0, 8}};
  OffloadFrameSpec tagged = ack;
  tagged.vlans = {{0x8100, 9}};
  for (const OffloadFrameSpec& spec : {ack, syn, ack6, tagged}) {
    const Bytes frame = testing::offload_frame(spec);
    EXPECT_TRUE(without_payload(frame)) << frame.size();
    EXPECT_EQ(frame_flow(frame).hash, flow_hash(frame));
    Bytes padded = frame;
    padded.resize(std::max<size_t>(frame.size() + 6, 60));  // Ethernet padding is not payload
    EXPECT_TRUE(without_payload(padded)) << frame.size();
  }
  EXPECT_EQ(frame_flow(testing::offload_frame(ack)).hash, hash_of(tcp4()));  // the same flow

  OffloadFrameSpec one_byte = ack;
  one_byte.payload = Bytes(1, std::byte{7});
  EXPECT_FALSE(without_payload(testing::offload_frame(one_byte)));
  EXPECT_FALSE(without_payload(testing::offload_frame(tcp4())));
  // A GSO frame whose IPv4 total length is 0, and one whose length points past the
  // headers: they carry data (whatever the field says, it does not end at the header).
  OffloadFrameSpec zero_length = tcp4();
  zero_length.ip_length = 0;
  EXPECT_FALSE(without_payload(testing::offload_frame(zero_length)));
  // Not TCP, or not a whole TCP header's worth of information: not told.
  OffloadFrameSpec empty_udp = udp6();
  empty_udp.payload.clear();
  EXPECT_FALSE(without_payload(testing::offload_frame(empty_udp)));
  OffloadFrameSpec fragment = ack;
  fragment.ip_fragment = 0x2000;
  EXPECT_FALSE(without_payload(testing::offload_frame(fragment)));
  Bytes cut = testing::offload_frame(ack);
  cut.resize(testing::offsets_of(ack).l4 + 12);  // the data offset byte is missing
  EXPECT_FALSE(without_payload(cut));
  Bytes bad_offset = testing::offload_frame(ack);
  bad_offset[testing::offsets_of(ack).l4 + 12] = std::byte{0x40};  // 4 words: less than a TCP header
  testing::set16(bad_offset, testing::kEthHeader + 2, 20 + 16);
  EXPECT_FALSE(without_payload(bad_offset));
  EXPECT_FALSE(without_payload(not_ip(ack)));
}

}  // namespace
}  // namespace uvhost::backends
