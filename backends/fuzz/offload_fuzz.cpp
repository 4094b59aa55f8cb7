// offload_fuzz.cpp - libFuzzer target: an arbitrary virtio-net header, frame and
// sender features through validate_offload(), gso_segment(), the checksum code and
// flow_hash() (the switch's receive steering key). Besides the sanitizers it checks,
// with its own plain reference sum (16 bits at a time, nothing shared with the code
// under test):
//  - ones_complement_sum() equals the reference on the frame and on a suffix of it;
//  - validation names a real reason; a refused header leaves an empty layout;
//  - validation of the frame's first bytes only (validate_offload_head) agrees with
//    validation of the whole frame (see check_head);
//  - a partial checksum that passed validation completes (complete_checksum and
//    adapt_checksum agree) and then verifies;
//  - a GSO frame that passed validation: exactly layout.segments segments, none longer
//    than layout.max_segment_bytes nor than its headers plus one piece (gso_size); the
//    Ethernet/VLAN bytes unchanged; IP length fields and the IPv4 header checksum
//    right; the payload (TCP, USO) or the UDP datagram (UFO, from the fragments at
//    their offsets) re-assembles to the original; TCP sequence numbers and flags as
//    gso_segment.h says; TCP/UDP checksums verify (complete ones directly, partial
//    ones once completed); a sink that stops early is obeyed;
//  - flow_hash() on prefixes of the frame, each a buffer of exactly its length (so
//    ASan sees a read past it), and on the frame's mirror image, made by its own small
//    parser (MACs, IP addresses and TCP/UDP ports swapped): the same hash, and the same
//    "TCP without payload", both ways.
//
// Input layout, kept in sync with make_corpus.py:
//   [0]      options: bit 0 partial checksums; bits 1-2 max_segments (256, 1, 8, 65535);
//            bits 3-5 a sink that stops after that many segments (0: none)
//   [1]      sender features: bit 0 CSUM, 1 HOST_TSO4, 2 HOST_TSO6, 3 HOST_ECN,
//            4 HOST_UFO, 5 HOST_USO
//   [2..11]  struct virtio_net_hdr, 10 bytes little-endian
//   [12..]   the frame
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "uvhost/backends/flow_hash.h"
#include "uvhost/backends/gso_segment.h"
#include "uvhost/backends/inet_checksum.h"
#include "uvhost/backends/net_features.h"
#include "uvhost/backends/offload_adapt.h"
#include "uvhost/backends/offload_validate.h"

namespace {

using namespace uvhost::backends;
using uvhost::virtio::NetHeader;
using Bytes = std::vector<std::byte>;

constexpr size_t kPrefix = 12;

#define FUZZ_CHECK(cond)                                                           \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "offload_fuzz: check failed: %s (line %d)\n", #cond, __LINE__); \
      std::abort();                                                                \
    }                                                                              \
  } while (0)

// ---- the reference: bytes as big-endian words, one at a time --------------------------

uint16_t get16(std::span<const std::byte> b, size_t at) {
  return static_cast<uint16_t>((std::to_integer<unsigned>(b[at]) << 8) | std::to_integer<unsigned>(b[at + 1]));
}
uint32_t get32(std::span<const std::byte> b, size_t at) { return (uint32_t{get16(b, at)} << 16) | get16(b, at + 2); }
uint8_t get8(std::span<const std::byte> b, size_t at) { return std::to_integer<uint8_t>(b[at]); }

uint64_t raw_sum(std::span<const std::byte> b, size_t begin, size_t end, uint64_t sum = 0) {
  size_t i = begin;
  for (; i + 1 < end; i += 2) sum += get16(b, i);
  if (i < end) sum += uint64_t{get8(b, i)} << 8;
  return sum;
}
uint16_t fold(uint64_t sum) {
  while ((sum >> 16) != 0) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}
// The pseudo-header of `l4_length` transport bytes, from the addresses in `packet`.
uint64_t pseudo(std::span<const std::byte> packet, const OffloadLayout& layout, uint8_t protocol, size_t l4_length) {
  const size_t at = layout.l3_offset + (layout.ipv6 ? 8 : 12);
  return raw_sum(packet, at, at + (layout.ipv6 ? 32 : 8)) + protocol + (l4_length >> 16) + (l4_length & 0xffff);
}

// ---- decoding the input -------------------------------------------------------------

uint64_t sender_features(uint8_t bits) {
  constexpr unsigned kBits[] = {net_feature::kCsum,    net_feature::kHostTso4, net_feature::kHostTso6,
                                net_feature::kHostEcn, net_feature::kHostUfo,  net_feature::kHostUso};
  uint64_t features = 0;
  for (unsigned i = 0; i < 6; ++i) {
    if ((bits >> i) & 1U) features |= uint64_t{1} << kBits[i];
  }
  return features;
}

size_t max_segments(uint8_t options) {
  constexpr size_t kChoices[] = {256, 1, 8, 65535};
  return kChoices[(options >> 1) & 3U];
}

// ---- sinks ----------------------------------------------------------------------------

// Takes at most `take` segments (refusing the next buffer), or all when take is 0.
class StoppingSink final : public SegmentSink {
 public:
  explicit StoppingSink(size_t take) : take_(take) {}
  std::span<std::byte> buffer(size_t bytes) override {
    if (taken_ == take_) return {};
    storage_.resize(bytes);
    return storage_;
  }
  bool commit(const NetHeader&) override {
    ++taken_;
    return true;
  }
  size_t taken() const { return taken_; }

 private:
  size_t take_;
  size_t taken_ = 0;
  Bytes storage_;
};

// ---- the checks -----------------------------------------------------------------------

void check_sum(std::span<const std::byte> frame) {
  FUZZ_CHECK(ones_complement_sum(frame) == fold(raw_sum(frame, 0, frame.size())));
  if (!frame.empty()) {
    const size_t skip = std::to_integer<size_t>(frame[0]) % frame.size();
    FUZZ_CHECK(ones_complement_sum(frame.subspan(skip), 0x1234) == fold(raw_sum(frame, skip, frame.size(), 0x1234)));
  }
}

// A validated partial checksum (no GSO) completes, the same way both entry points.
void check_partial_checksum(const NetHeader& header, std::span<const std::byte> frame) {
  Bytes completed(frame.begin(), frame.end());
  FUZZ_CHECK(complete_checksum(completed, header.csum_start, header.csum_offset));
  const size_t field = size_t{header.csum_start} + header.csum_offset;
  // The definition: the inverted sum from csum_start to the end, the sender's field in it.
  const auto expected = static_cast<uint16_t>(~fold(raw_sum(frame, header.csum_start, frame.size())));
  FUZZ_CHECK(get16(completed, field) == (expected == 0 ? 0xffff : expected));
  FUZZ_CHECK(std::memcmp(completed.data(), frame.data(), field) == 0);
  FUZZ_CHECK(std::memcmp(completed.data() + field + 2, frame.data() + field + 2, frame.size() - field - 2) == 0);
  // A field at an even distance from csum_start (as TCP's and UDP's are) then verifies:
  // with the sender's value (a pseudo-header sum) added, the range sums to 0xffff.
  if (header.csum_offset % 2 == 0) {
    FUZZ_CHECK(fold(raw_sum(completed, header.csum_start, completed.size(), get16(frame, field))) == 0xffff);
  }
  Packet packet(header, frame);
  FUZZ_CHECK(adapt_checksum(packet, 0) == ChecksumAdapt::kCompleted);
  FUZZ_CHECK(packet.frame == completed && packet.header.flags == 0);
}

void check_ip(std::span<const std::byte> segment, const OffloadLayout& layout) {
  const size_t l3 = layout.l3_offset;
  if (layout.ipv6) {
    FUZZ_CHECK(get16(segment, l3 + 4) == segment.size() - l3 - 40);
    return;
  }
  FUZZ_CHECK(get16(segment, l3 + 2) == segment.size() - l3);
  FUZZ_CHECK(fold(raw_sum(segment, l3, layout.l4_offset)) == 0xffff);
}

void check_transport_checksum(std::span<const std::byte> segment, const OffloadLayout& layout, const NetHeader& out,
                              bool partial) {
  const bool tcp = layout.kind == GsoKind::kTcp;
  const uint8_t protocol = tcp ? 6 : 17;
  const size_t field = layout.l4_offset + (tcp ? 16 : 6);
  const uint64_t pseudo_sum = pseudo(segment, layout, protocol, segment.size() - layout.l4_offset);
  if (partial) {
    FUZZ_CHECK(out.flags == uvhost::virtio::kNetHdrFlagNeedsCsum && out.csum_start == layout.l4_offset &&
               out.csum_offset == (tcp ? 16 : 6));
    FUZZ_CHECK(get16(segment, field) == fold(pseudo_sum));
    // Completed as the receiver would: the field's pseudo sum is part of what is summed.
    const uint16_t completed = static_cast<uint16_t>(~fold(raw_sum(segment, layout.l4_offset, segment.size())));
    const uint64_t without_field = raw_sum(segment, layout.l4_offset, segment.size()) - get16(segment, field);
    FUZZ_CHECK(fold(without_field + completed + pseudo_sum) == 0xffff);
  } else {
    FUZZ_CHECK(out.flags == 0);
    FUZZ_CHECK(fold(raw_sum(segment, layout.l4_offset, segment.size(), pseudo_sum)) == 0xffff);
    if (!tcp) FUZZ_CHECK(get16(segment, field) != 0);
  }
}

// TCP and USO segments, and a UFO frame of one segment.
void check_payload_segments(std::span<const std::byte> frame, const OffloadLayout& layout,
                            const std::vector<PacketPtr>& segments, bool partial) {
  const bool tcp = layout.kind == GsoKind::kTcp;
  const size_t head = layout.payload_offset;
  size_t offset = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::span<const std::byte> segment = segments[i]->frame;
    FUZZ_CHECK(segment.size() >= head);
    const size_t piece = segment.size() - head;
    FUZZ_CHECK(segments.size() == 1 || piece <= layout.piece_bytes);
    FUZZ_CHECK(std::memcmp(segment.data() + head, frame.data() + head + offset, piece) == 0);
    check_ip(segment, layout);
    if (tcp) {
      const size_t l4 = layout.l4_offset;
      FUZZ_CHECK(get32(segment, l4 + 4) == static_cast<uint32_t>(get32(frame, l4 + 4) + offset));
      const uint8_t flags = get8(frame, l4 + 13);
      uint8_t expected = flags;
      if (i + 1 != segments.size()) expected &= static_cast<uint8_t>(~0x09);
      if (i != 0) expected &= static_cast<uint8_t>(~0x80);
      FUZZ_CHECK(get8(segment, l4 + 13) == expected);
    } else {
      FUZZ_CHECK(get16(segment, layout.l4_offset + 4) == segment.size() - layout.l4_offset);
    }
    check_transport_checksum(segment, layout, segments[i]->header, partial);
    offset += piece;
  }
  FUZZ_CHECK(offset == frame.size() - head);  // every payload byte, once, in order
}

// UFO fragments: the datagram re-assembled from their offsets, its checksum verified.
void check_fragments(std::span<const std::byte> frame, const OffloadLayout& layout,
                     const std::vector<PacketPtr>& fragments) {
  const size_t head = layout.l4_offset;
  const size_t data_at = head + (layout.ipv6 ? 8 : 0);
  Bytes datagram;
  for (size_t i = 0; i < fragments.size(); ++i) {
    const std::span<const std::byte> fragment = fragments[i]->frame;
    const bool last = i + 1 == fragments.size();
    FUZZ_CHECK(fragment.size() > data_at && fragments[i]->header == NetHeader{});
    FUZZ_CHECK(last || fragment.size() - data_at == layout.piece_bytes);
    const size_t offset = datagram.size();
    if (layout.ipv6) {
      FUZZ_CHECK(get8(fragment, layout.protocol_field) == 44 && get8(fragment, head) == 17);
      FUZZ_CHECK(get16(fragment, head + 2) == (offset | (last ? 0U : 1U)));
    } else {
      FUZZ_CHECK(get16(fragment, layout.l3_offset + 6) == ((offset / 8) | (last ? 0U : 0x2000U)));
      FUZZ_CHECK(get16(fragment, layout.l3_offset + 4) == get16(frame, layout.l3_offset + 4));
    }
    check_ip(fragment, layout);
    datagram.insert(datagram.end(), fragment.begin() + static_cast<std::ptrdiff_t>(data_at), fragment.end());
  }
  FUZZ_CHECK(datagram.size() == frame.size() - head);
  FUZZ_CHECK(std::memcmp(datagram.data(), frame.data() + head, 4) == 0);  // ports
  FUZZ_CHECK(get16(datagram, 4) == datagram.size());
  FUZZ_CHECK(std::memcmp(datagram.data() + 8, frame.data() + head + 8, datagram.size() - 8) == 0);
  FUZZ_CHECK(fold(raw_sum(datagram, 0, datagram.size(), pseudo(frame, layout, 17, datagram.size()))) == 0xffff);
}

void check_segments(std::span<const std::byte> frame, const OffloadLayout& layout, uint8_t options) {
  SegmentOptions segment_options;
  segment_options.partial_checksum = (options & 1U) != 0;
  segment_options.ipv6_fragment_id = 0x01020304;
  std::vector<PacketPtr> segments;
  PacketCollector sink(segments);
  FUZZ_CHECK(gso_segment(layout, frame, segment_options, sink) == layout.segments);
  FUZZ_CHECK(segments.size() == layout.segments && layout.segments >= 1);
  FUZZ_CHECK(layout.segments <= max_segments(options));
  for (const PacketPtr& segment : segments) {
    FUZZ_CHECK(segment->frame.size() <= layout.max_segment_bytes);
    FUZZ_CHECK(std::memcmp(segment->frame.data(), frame.data(), layout.l3_offset) == 0);
    FUZZ_CHECK(segment->header.gso_type == 0 && segment->header.gso_size == 0 && segment->header.hdr_len == 0);
  }
  if (layout.kind == GsoKind::kUfo && layout.segments > 1) {
    check_fragments(frame, layout, segments);
  } else {
    check_payload_segments(frame, layout, segments, segment_options.partial_checksum);
  }
  if (const size_t take = (options >> 3) & 7U; take != 0) {
    StoppingSink stopping(take);
    const size_t taken = gso_segment(layout, frame, segment_options, stopping);
    FUZZ_CHECK(taken == std::min(take, layout.segments) && stopping.taken() == taken);
  }
}

// ---- the flow hash ---------------------------------------------------------------------

void swap_bytes(Bytes& b, size_t x, size_t y, size_t count) {
  for (size_t i = 0; i < count; ++i) std::swap(b[x + i], b[y + i]);
}

// The frame of the other direction, as far as this reference knows the layout: MACs
// swapped; behind at most two VLAN tags, a complete IPv4 header's addresses (and the
// TCP/UDP ports when not a fragment) or an IPv6 header's addresses (and the ports when
// no extension header follows). false: an IPv6 extension header, which this reference
// does not walk (the frame's mirror is unknown).
bool mirror(Bytes& f) {
  if (f.size() < 12) return true;
  swap_bytes(f, 0, 6, 6);
  if (f.size() < 14) return true;
  size_t l3 = 14;
  uint16_t type = get16(f, 12);
  for (int tags = 0; tags < 2 && (type == 0x8100 || type == 0x88a8); ++tags) {
    if (f.size() < l3 + 4) return true;
    type = get16(f, l3 + 2);
    l3 += 4;
  }
  size_t l4 = 0;
  uint8_t protocol = 0;
  if (type == 0x0800) {
    if (f.size() < l3 + 20) return true;
    const size_t header = size_t{get8(f, l3) & 0x0fU} * 4;
    if ((get8(f, l3) >> 4) != 4 || header < 20 || f.size() < l3 + header) return true;
    swap_bytes(f, l3 + 12, l3 + 16, 4);
    if ((get16(f, l3 + 6) & 0x3fff) != 0) return true;  // a fragment: no ports
    protocol = get8(f, l3 + 9);
    l4 = l3 + header;
  } else if (type == 0x86dd) {
    if (f.size() < l3 + 40 || (get8(f, l3) >> 4) != 6) return true;
    swap_bytes(f, l3 + 8, l3 + 24, 16);
    protocol = get8(f, l3 + 6);
    if (protocol == 0 || protocol == 43 || protocol == 44 || protocol == 60) return false;
    l4 = l3 + 40;
  } else {
    return true;
  }
  if ((protocol == 6 || protocol == 17) && f.size() >= l4 + 4) swap_bytes(f, l4, l4 + 2, 2);
  return true;
}

void check_flow_hash(std::span<const std::byte> frame) {
  const uint32_t hash = flow_hash(frame);
  for (const size_t length : {size_t{0}, size_t{12}, size_t{13}, size_t{14}, size_t{33}, size_t{37}, size_t{53},
                              size_t{57}, frame.size() / 2, frame.size() - (frame.empty() ? 0 : 1)}) {
    if (length > frame.size()) continue;
    const Bytes prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(length));
    (void)flow_hash(prefix);
  }
  Bytes mirrored(frame.begin(), frame.end());
  if (mirror(mirrored)) {
    const FrameFlow there = frame_flow(frame);
    const FrameFlow back = frame_flow(mirrored);
    FUZZ_CHECK(back.hash == hash && there.hash == hash);
    FUZZ_CHECK(back.tcp_without_payload == there.tcp_without_payload);  // lengths are not swapped
  }
}

}  // namespace

// validate_offload_head on a copy of the frame's first bytes (so the sanitizers see a
// read past them) agrees with validate_offload on the whole frame: whatever a head
// accepts, the frame does, with the same layout; a head that holds the frame's
// headers accepts what the frame does.
void check_head(const NetHeader& header, std::span<const std::byte> frame, uint64_t features,
                const OffloadLimits& limits, const OffloadCheck& whole) {
  std::vector<size_t> lengths = {0, 14, 40, 64, frame.size() / 2, frame.size()};
  if (whole.ok() && whole.layout.kind != GsoKind::kNone) {
    lengths.push_back(whole.layout.payload_offset);
    lengths.push_back(whole.layout.payload_offset - 1);
  }
  for (const size_t length : lengths) {
    if (length > frame.size()) continue;
    const Bytes head(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(length));
    const OffloadCheck check = validate_offload_head(header, head, frame.size(), features, limits);
    const bool holds_headers = length == frame.size() || (whole.ok() && length >= whole.layout.payload_offset);
    if (holds_headers) FUZZ_CHECK(check.reason == whole.reason);
    if (!check.ok()) continue;
    FUZZ_CHECK(whole.ok());
    const OffloadLayout& a = check.layout;
    const OffloadLayout& b = whole.layout;
    FUZZ_CHECK(a.kind == b.kind && a.ipv6 == b.ipv6 && a.frame_bytes == b.frame_bytes && a.l3_offset == b.l3_offset &&
               a.protocol_field == b.protocol_field && a.l4_offset == b.l4_offset &&
               a.payload_offset == b.payload_offset && a.piece_bytes == b.piece_bytes && a.segments == b.segments &&
               a.max_segment_bytes == b.max_segment_bytes);
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kPrefix) return 0;
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  const uint8_t options = data[0];
  const uint64_t features = sender_features(data[1]);
  const NetHeader header = uvhost::virtio::decode_net_header(std::span(bytes + 2, 10), 10);
  const std::span<const std::byte> frame(bytes + kPrefix, size - kPrefix);

  check_sum(frame);
  check_flow_hash(frame);
  OffloadLimits limits;
  limits.max_segments = max_segments(options);
  const OffloadCheck check = validate_offload(header, frame, features, limits);
  FUZZ_CHECK(static_cast<size_t>(check.reason) < kOffloadReasonCount &&
             to_string(check.reason) != uvhost::base::kUnknownEnumName);
  check_head(header, frame, features, limits, check);
  if (!check.ok()) {
    FUZZ_CHECK(check.layout.segments == 0 && check.layout.kind == GsoKind::kNone);
    return 0;
  }
  FUZZ_CHECK(check.layout.frame_bytes == frame.size());
  if (check.layout.kind == GsoKind::kNone) {
    if ((header.flags & uvhost::virtio::kNetHdrFlagNeedsCsum) != 0) check_partial_checksum(header, frame);
    return 0;
  }
  check_segments(frame, check.layout, options);
  return 0;
}
