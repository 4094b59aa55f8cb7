// driver_ring.h - the driver side of one virtqueue, split or packed, for code that
// drives either (our embedded frontend).
//
// Contract
// --------
//  - DriverRing owns a DriverQueue (split_queue_driver.h) or, with `packed`, a
//    PackedDriverQueue (packed_queue_driver.h) and forwards each call to it: the
//    contracts are theirs. The choice is made once (VIRTIO_F_RING_PACKED is negotiated
//    before the rings exist); each call is one predictable branch.
//  - initial_base(): SET_VRING_BASE's num for the ring as it started (chains added since
//    do not move it): the split ring's index, or the packed ring's position | wrap << 15
//    with the used side in the upper 16 bits, as QEMU sends it.
//  - stopped_base_plausible(num): whether GET_VRING_BASE's answer names a place the
//    device can have reached: between the first chain not yet reaped and the last made
//    available (the avail side of a packed ring's answer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "uvhost/virtio/packed_queue_driver.h"
#include "uvhost/virtio/split_queue_driver.h"

namespace uvhost::virtio {

class DriverRing {
 public:
  using Buffer = DriverQueue::Buffer;
  using Kick = DriverQueue::Kick;

  static size_t required_bytes(const DriverOptions& options, bool packed) {
    return packed ? PackedDriverQueue::required_bytes(options) : DriverQueue::required_bytes(options);
  }

  DriverRing(const DriverOptions& options, DriverRingArea area, Kick kick, bool packed) {
    if (packed) {
      packed_ = std::make_unique<PackedDriverQueue>(options, area, std::move(kick));
    } else {
      split_ = std::make_unique<DriverQueue>(options, area, std::move(kick));
    }
  }

  bool packed() const noexcept { return packed_ != nullptr; }
  QueueConfig device_config() const { return packed_ ? packed_->device_config() : split_->device_config(); }
  uint32_t initial_base() const noexcept {
    if (!packed_) return split_->initial_index();
    const uint16_t base = packed_->base();
    return (uint32_t{base} << 16) | base;
  }
  bool stopped_base_plausible(uint32_t num) const noexcept {
    return packed_ ? packed_->stopped_base_plausible(num & 0xffff)
                   : num <= 0xffff && split_->stopped_base_plausible(static_cast<uint16_t>(num));
  }

  std::optional<uint16_t> add_chain(std::span<const Buffer> buffers, bool indirect = false) {
    return packed_ ? packed_->add_chain(buffers, indirect) : split_->add_chain(buffers, indirect);
  }
  bool publish() { return packed_ ? packed_->publish() : split_->publish(); }
  std::optional<UsedElement> reap() { return packed_ ? packed_->reap() : split_->reap(); }
  bool device_misbehaved() const noexcept {
    return packed_ ? packed_->device_misbehaved() : split_->device_misbehaved();
  }
  void disable_interrupts() {
    if (packed_) {
      packed_->disable_interrupts();
    } else {
      split_->disable_interrupts();
    }
  }
  [[nodiscard]] bool enable_interrupts() { return packed_ ? packed_->enable_interrupts() : split_->enable_interrupts(); }
  uint16_t free_descriptors() const noexcept {
    return packed_ ? packed_->free_descriptors() : split_->free_descriptors();
  }
  uint16_t in_flight() const noexcept { return packed_ ? packed_->in_flight() : split_->in_flight(); }

 private:
  std::unique_ptr<DriverQueue> split_;
  std::unique_ptr<PackedDriverQueue> packed_;
};

}  // namespace uvhost::virtio
