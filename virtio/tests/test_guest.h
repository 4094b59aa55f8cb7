// test_guest.h - a guest in a test: memory (one or more regions, optionally with holes),
// a bump allocator for buffers, and a driver queue wired to a device queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "uvhost/virtio/guest_memory.h"
#include "uvhost/virtio/split_queue.h"
#include "uvhost/virtio/packed_queue_driver.h"
#include "uvhost/virtio/split_queue_driver.h"

namespace uvhost::virtio::testing {

// Guest memory: `region_count` regions of `region_bytes` each, adjacent in guest
// physical space starting at kGuestBase (so buffers can span them) but placed apart
// in host memory (separate allocations), frontend addresses offset by kFrontendDelta.
class TestMemory {
 public:
  static constexpr uint64_t kGuestBase = 0x10000;
  static constexpr uint64_t kFrontendDelta = 0x7f0000000000;

  explicit TestMemory(size_t region_bytes = 1 << 20, size_t region_count = 1) : region_bytes_(region_bytes) {
    std::vector<std::unique_ptr<MemoryRegion>> regions;
    for (size_t i = 0; i < region_count; ++i) {
      storage_.push_back(std::make_unique<Chunk[]>(region_bytes / sizeof(Chunk) + 1));
      std::span<std::byte> host(reinterpret_cast<std::byte*>(storage_.back().get()), region_bytes);
      const uint64_t gpa = kGuestBase + i * region_bytes;
      regions.push_back(MemoryRegion::borrow(gpa, gpa + kFrontendDelta, host));
    }
    map_ = GuestMemoryMap::create(std::move(regions));
    next_free_ = kGuestBase;
  }

  const GuestMemoryMap& map() const { return *map_; }
  uint64_t end() const { return kGuestBase + region_bytes_ * storage_.size(); }

  // Host pointer of a guest address (test side only; must be mapped).
  std::byte* host(uint64_t gpa) const {
    std::byte* p = map_->translate_contiguous(gpa, 1);
    if (p == nullptr) throw std::out_of_range("test: unmapped guest address");
    return p;
  }

  // Bump-allocates guest memory (aligned); may straddle regions.
  uint64_t alloc(size_t bytes, size_t alignment = 16) {
    next_free_ = (next_free_ + alignment - 1) & ~uint64_t{alignment - 1};
    const uint64_t gpa = next_free_;
    next_free_ += bytes;
    if (next_free_ > end()) throw std::length_error("test: guest memory exhausted");
    return gpa;
  }
  // Whether alloc_spanning() can still place a buffer across a region boundary.
  bool can_span(size_t bytes) const {
    const uint64_t boundary = ((next_free_ - kGuestBase) / region_bytes_ + 1) * region_bytes_ + kGuestBase;
    return boundary + bytes < end();
  }
  // Allocates so that the buffer starts `before_boundary` bytes before a region boundary.
  uint64_t alloc_spanning(size_t bytes, size_t before_boundary) {
    const uint64_t boundary = ((next_free_ - kGuestBase) / region_bytes_ + 1) * region_bytes_ + kGuestBase;
    next_free_ = boundary - before_boundary;
    return alloc(bytes, 1);
  }

  void write(uint64_t gpa, std::span<const std::byte> bytes) const {
    for (size_t i = 0; i < bytes.size(); ++i) *host(gpa + i) = bytes[i];
  }
  std::vector<std::byte> read(uint64_t gpa, size_t len) const {
    std::vector<std::byte> out(len);
    for (size_t i = 0; i < len; ++i) out[i] = *host(gpa + i);
    return out;
  }

 private:
  struct alignas(64) Chunk {
    std::byte bytes[64];
  };
  size_t region_bytes_;
  std::vector<std::unique_ptr<Chunk[]>> storage_;
  std::unique_ptr<GuestMemoryMap> map_;
  uint64_t next_free_;
};

// A driver and a started device queue on the same TestMemory.
struct QueuePair {
  QueuePair(TestMemory& memory, const DriverOptions& options, DriverQueue::Kick kick = {})
      : mem(memory),
        ring_gpa(memory.alloc(DriverQueue::required_bytes(options), 4096)),
        driver(options, DriverRingArea{memory.host(ring_gpa), ring_gpa, DriverQueue::required_bytes(options)},
               std::move(kick)),
        device("test-queue") {
    device.set_last_avail_index(options.initial_index);
    if (!device.start(driver.device_config(), memory.map())) throw std::runtime_error("test: device did not start");
  }
  TestMemory& mem;
  uint64_t ring_gpa;
  DriverQueue driver;
  DeviceQueue device;
};

// The same with a packed ring (VIRTIO_F_RING_PACKED); the device starts at the
// driver's base, as vhost-user's SET_VRING_BASE would tell it.
struct PackedQueuePair {
  PackedQueuePair(TestMemory& memory, const DriverOptions& options, PackedDriverQueue::Kick kick = {})
      : mem(memory),
        ring_gpa(memory.alloc(PackedDriverQueue::required_bytes(options), 4096)),
        driver(options,
               DriverRingArea{memory.host(ring_gpa), ring_gpa, PackedDriverQueue::required_bytes(options)},
               std::move(kick)),
        device("test-packed-queue") {
    device.set_last_avail_index(driver.base());
    if (!device.start(driver.device_config(), memory.map())) throw std::runtime_error("test: device did not start");
  }
  TestMemory& mem;
  uint64_t ring_gpa;
  PackedDriverQueue driver;
  DeviceQueue device;
};

inline std::vector<std::byte> pattern(size_t len, uint32_t seed) {
  std::vector<std::byte> out(len);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<std::byte>(x);
  }
  return out;
}

}  // namespace uvhost::virtio::testing
