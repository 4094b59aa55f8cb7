// gso_segment.h - software segmentation of a GSO frame for a receiver that cannot
// take it (virtio 1.2, 5.1.6.2 / 5.1.6.4): the frames a NIC's TSO / UFO / USO would
// have put on the wire, as Linux's skb_gso_segment cuts them.
//
// Contract
// --------
//  gso_segment(layout, frame, options, sink) cuts `frame`, whose header passed
//  validate_offload() with `layout` (offload_validate.h; layout.kind is not kNone and
//  layout.frame_bytes == frame.size(), checked in debug builds), into layout.segments
//  complete Ethernet frames, handed to `sink` one by one in order. Each segment repeats
//  the frame's headers up to the cut, followed by its piece:
//  - TCP (TCPV4/TCPV6): piece i is payload bytes [i*gso_size, ...). Sequence number
//    advanced by the bytes before the piece; FIN and PSH only on the last segment, CWR
//    only on the first (virtio's ECN bit says the frame has CWR set); other flags,
//    options, ports, ack and window repeated.
//  - USO (UDP_L4): one UDP datagram per piece, with its own UDP length.
//  - UFO (UDP): IP fragments of the one UDP datagram (UDP header + payload, whose
//    length and checksum are computed over the whole datagram and travel in the first
//    fragment); pieces of layout.piece_bytes (a multiple of 8). IPv4: every fragment
//    has the frame's IP id, its offset, MF on all but the last (DF cleared, as Linux
//    does). IPv6: a fragment header (Identification: options.ipv6_fragment_id, which
//    the caller picks, unique per source/destination for a while (RFC 8200, 4.5))
//    right before the UDP datagram, after any hop-by-hop / destination options
//    headers. A UFO frame of one segment is not fragmented: it goes out as USO's.
//  - IPv4: total length and header checksum recomputed in every segment; the id
//    increments by one per segment (TCP, USO), from the frame's. IPv6: payload length
//    recomputed. Ethernet and VLAN tags are copied unchanged.
//  - TCP and UDP checksums are computed from the addresses, protocol and the segment's
//    length (the pseudo-header) and the segment's bytes: the sender's checksum field is
//    not used. With options.partial_checksum (the receiver negotiated GUEST_CSUM) the
//    field holds the pseudo-header sum and the header says NEEDS_CSUM (csum_start at
//    the transport header, csum_offset 16 or 6), as a sender's partial checksum would;
//    IP fragments always get the full checksum (it spans every fragment). A UDP
//    checksum of 0 is sent as 0xffff.
//  - Each segment's virtio-net header: gso_type NONE, gso_size 0, hdr_len 0,
//    num_buffers 0, flags NEEDS_CSUM (partial, as above) or 0.
//  Returns the number of segments the sink took; it stops early when the sink gives no
//  buffer or refuses a segment. Work and output are bounded by layout.segments (which
//  validation bounded by OffloadLimits) times layout.max_segment_bytes; nothing is
//  allocated here (the sink decides where segments live).
//
//  SegmentSink: buffer(bytes) returns writable memory of exactly `bytes` bytes for the
//  next segment (its contents are overwritten) or an empty span to stop; commit(header)
//  says the last buffer holds a finished segment; false means the sink did not take it
//  (and segmentation stops). PacketSink puts each segment in a new Packet and hands it
//  to take(); PacketCollector is the PacketSink that appends them to a vector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "uvhost/backends/offload_validate.h"
#include "uvhost/backends/packet.h"
#include "uvhost/virtio/net_header.h"

namespace uvhost::backends {

struct SegmentOptions {
  bool partial_checksum = false;  // leave TCP/UDP checksums partial (receiver has GUEST_CSUM)
  uint32_t ipv6_fragment_id = 0;  // the fragment header's Identification (UFO over IPv6)
};

class SegmentSink {
 public:
  virtual ~SegmentSink() = default;
  virtual std::span<std::byte> buffer(size_t bytes) = 0;
  virtual bool commit(const virtio::NetHeader& header) = 0;
};

class PacketSink : public SegmentSink {
 public:
  std::span<std::byte> buffer(size_t bytes) final;
  bool commit(const virtio::NetHeader& header) final;

 protected:
  // The finished segment; false: not taken (segmentation stops).
  virtual bool take(PacketPtr packet) = 0;

 private:
  PacketPtr pending_;
};

class PacketCollector final : public PacketSink {
 public:
  explicit PacketCollector(std::vector<PacketPtr>& out) : out_(out) {}

 private:
  bool take(PacketPtr packet) override {
    out_.push_back(std::move(packet));
    return true;
  }
  std::vector<PacketPtr>& out_;
};

size_t gso_segment(const OffloadLayout& layout, std::span<const std::byte> frame, const SegmentOptions& options,
                   SegmentSink& sink);

}  // namespace uvhost::backends
