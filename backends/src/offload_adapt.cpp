// offload_adapt.cpp - offload headers fitted to the receiving guest (see offload_adapt.h).
#include "uvhost/backends/offload_adapt.h"

#include <random>

#include "uvhost/backends/gso_segment.h"
#include "uvhost/backends/inet_checksum.h"
#include "uvhost/backends/net_features.h"

namespace uvhost::backends {

using net_feature::has;

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

OffloadFit offload_fit(const virtio::NetHeader& header, const OffloadLayout& layout, uint64_t guest_features) noexcept {
  if (layout.kind != GsoKind::kNone && !gso_acceptable(header, guest_features)) return OffloadFit::kSegment;
  if ((header.flags & virtio::kNetHdrFlagNeedsCsum) != 0 && !has(guest_features, net_feature::kGuestCsum)) {
    return OffloadFit::kCompleteChecksum;
  }
  return OffloadFit::kAsIs;
}

virtio::NetHeader delivered_header(const virtio::NetHeader& header) noexcept {
  virtio::NetHeader out = header;
  out.num_buffers = 0;
  out.flags &= virtio::kNetHdrFlagNeedsCsum;
  return out;
}

Ipv6FragmentIds::Ipv6FragmentIds() : next_(std::random_device{}()) {}

uint32_t Ipv6FragmentIds::for_layout(const OffloadLayout& layout) noexcept {
  if (layout.kind != GsoKind::kUfo || !layout.ipv6) return 0;
  return next_.fetch_add(1, std::memory_order_relaxed);  // relaxed: ids need only differ
}

namespace {

// Each segment straight into the receiver's queue.
class InjectingSink final : public PacketSink {
 public:
  InjectingSink(RxInjector& injector, uint32_t pair) : injector_(injector), pair_(pair) {}

 private:
  bool take(PacketPtr packet) override { return injector_.inject(pair_, std::move(packet)); }
  RxInjector& injector_;
  uint32_t pair_;
};

}  // namespace

size_t inject_segments(RxInjector& injector, uint32_t pair, const OffloadLayout& layout,
                       std::span<const std::byte> frame, uint64_t guest_features, uint32_t ipv6_fragment_id) {
  SegmentOptions options;
  options.partial_checksum = has(guest_features, net_feature::kGuestCsum);
  options.ipv6_fragment_id = ipv6_fragment_id;
  InjectingSink sink(injector, pair);
  return gso_segment(layout, frame, options, sink);
}

ChecksumAdapt adapt_checksum(Packet& packet, uint64_t guest_features) noexcept {
  if (has(guest_features, net_feature::kGuestCsum)) return ChecksumAdapt::kAsIs;
  virtio::NetHeader& header = packet.header;
  if ((header.flags & virtio::kNetHdrFlagNeedsCsum) == 0) {
    header.flags = 0;
    return ChecksumAdapt::kAsIs;
  }
  if (!complete_checksum(packet.frame, header.csum_start, header.csum_offset)) return ChecksumAdapt::kBadRange;
  header.flags = 0;
  return ChecksumAdapt::kCompleted;
}

}  // namespace uvhost::backends
