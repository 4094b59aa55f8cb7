// test_guest.h - a guest in a test: memory (one or more regions, optionally with holes),
// a bump allocator for buffers, and a driver queue wired to a device queue.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "uvhost/virtio/guest_memory.h"
#include "uvhost/virtio/packed_queue_driver.h"
#include "uvhost/virtio/split_queue.h"
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

// The books of a random round trip through a driver and a device (the property tests):
// random chains of random buffers (some spanning regions), what each popped chain must
// hold, a random reply written into its writable part, and what each reaped element
// must say and the guest must then find in its buffers. Chains are expected back in
// the order they were added (the device pops and uses them in order).
class RoundTripBooks {
 public:
  using Buffer = DriverQueue::Buffer;

  // Up to `max_buffers` buffers of 1..300 bytes, readable ones first and filled.
  std::vector<Buffer> make_chain(TestMemory& mem, std::mt19937& rng, size_t max_buffers) {
    const size_t n = 1 + rng() % max_buffers;
    const size_t readable = rng() % (n + 1);
    std::vector<Buffer> bufs;
    next_ = Expected{};
    for (size_t b = 0; b < n; ++b) {
      const auto len = static_cast<uint32_t>(1 + rng() % 300);
      const bool span = rng() % 16 == 0 && mem.can_span(len);
      const uint64_t gpa = span ? mem.alloc_spanning(len, 1 + rng() % len) : mem.alloc(len, 1);
      bufs.push_back({gpa, len, b >= readable});
      if (b < readable) {
        const auto bytes = pattern(len, static_cast<uint32_t>(rng()));
        mem.write(gpa, bytes);
        next_.readable.insert(next_.readable.end(), bytes.begin(), bytes.end());
      } else {
        next_.writable.push_back(bufs.back());
        next_.writable_bytes += len;
      }
    }
    return bufs;
  }
  // The chain from make_chain() was added with this id.
  void added(uint16_t id) {
    next_.id = id;
    in_flight_.push_back(std::move(next_));
  }

  // A popped chain: checks it against the oldest added, writes a random reply into its
  // writable part and returns the length written (for add_used).
  ::testing::AssertionResult popped(const DescriptorChain& chain, std::mt19937& rng, uint32_t& written) {
    if (in_flight_.empty()) return ::testing::AssertionFailure() << "popped a chain never added";
    const Expected& e = in_flight_.front();
    if (chain.head != e.id) return ::testing::AssertionFailure() << "popped " << chain.head << ", expected " << e.id;
    if (chain.readable.total_bytes() != e.readable.size() || chain.writable.total_bytes() != e.writable_bytes) {
      return ::testing::AssertionFailure() << "chain " << e.id << " has the wrong sizes";
    }
    std::vector<std::byte> got(e.readable.size());
    copy_from_pieces(chain.readable.pieces(), 0, got);
    if (got != e.readable) return ::testing::AssertionFailure() << "chain " << e.id << " read wrong bytes";
    written = e.writable_bytes == 0 ? 0 : static_cast<uint32_t>(1 + rng() % e.writable_bytes);
    auto reply = pattern(written, static_cast<uint32_t>(rng()));
    copy_to_pieces(chain.writable.pieces(), 0, reply);
    replies_.push_back(Reply{e.id, std::move(reply), e.writable});
    in_flight_.pop_front();
    return ::testing::AssertionSuccess();
  }

  // A reaped element: checks it against the oldest reply and the guest's buffers.
  ::testing::AssertionResult reaped(const UsedElement& used, const TestMemory& mem) {
    if (replies_.empty()) return ::testing::AssertionFailure() << "reaped " << used.id << " never used";
    const Reply& r = replies_.front();
    if (used.id != r.id || used.len != r.bytes.size()) {
      return ::testing::AssertionFailure() << "reaped " << used.id << "/" << used.len << ", expected " << r.id << "/"
                                           << r.bytes.size();
    }
    size_t offset = 0;
    for (const auto& buf : r.layout) {
      const size_t n = std::min<size_t>(buf.len, r.bytes.size() - offset);
      const auto begin = r.bytes.begin() + static_cast<std::ptrdiff_t>(offset);
      if (mem.read(buf.guest_addr, n) != std::vector<std::byte>(begin, begin + static_cast<std::ptrdiff_t>(n))) {
        return ::testing::AssertionFailure() << "chain " << r.id << ": the guest reads other bytes than written";
      }
      offset += n;
    }
    replies_.pop_front();
    ++completed_;
    return ::testing::AssertionSuccess();
  }

  uint32_t completed() const noexcept { return completed_; }

 private:
  struct Expected {
    uint16_t id = 0;
    std::vector<std::byte> readable;
    std::vector<Buffer> writable;
    uint32_t writable_bytes = 0;
  };
  struct Reply {
    uint16_t id;
    std::vector<std::byte> bytes;
    std::vector<Buffer> layout;  // the chain's writable buffers
  };
  Expected next_;
  std::deque<Expected> in_flight_;
  std::deque<Reply> replies_;
  uint32_t completed_ = 0;
};

}  // namespace uvhost::virtio::testing
