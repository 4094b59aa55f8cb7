// port_backend.cpp - PortBackend's and RxInjector's defaults and convenience calls (see
// port_backend.h).
#include "uvhost/backends/port_backend.h"

#include <nlohmann/json.hpp>

namespace uvhost::backends {

bool RxInjector::inject_frame(uint32_t pair, const virtio::NetHeader& header, std::span<const std::byte> prefix,
                              const TxFrame& source) noexcept {
  if (prefix.size() > source.frame_len) return false;
  PacketPtr packet;
  try {
    packet = std::make_unique<Packet>();
    packet->header = header;
    packet->frame.resize(source.frame_len);
  } catch (const std::bad_alloc&) {
    return false;
  }
  std::copy(prefix.begin(), prefix.end(), packet->frame.begin());
  (void)source.copy_frame(prefix.size(), std::span(packet->frame).subspan(prefix.size()));
  return inject(pair, std::move(packet));
}

bool PortBackend::transmit(uint32_t pair, const virtio::NetHeader& header, std::span<const std::byte> frame) {
  virtio::IoPiece piece;
  const TxFrame one = TxFrame::contiguous(header, frame, piece);
  return transmit_burst(pair, std::span<const TxFrame>(&one, 1)).frames == 1;
}

bool PortBackend::pull(uint32_t pair, Packet& packet) {
  RxFrameView view;
  if (!pull_frame(pair, view)) return false;
  packet.header = view.header;
  packet.frame.assign(view.frame.begin(), view.frame.end());
  return true;
}

nlohmann::json PortBackend::stats() const { return nlohmann::json::object(); }

}  // namespace uvhost::backends
