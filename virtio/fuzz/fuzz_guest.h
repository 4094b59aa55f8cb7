// fuzz_guest.h - what the virtio device fuzzers share: reading their input's fields and
// the guest memory image that follows the header.
//
// Guest memory: region A (16 KiB at 0x0), region B (16 KiB at 0x4000, adjacent to A, so
// buffers can span both), region C (4 KiB at 0x10000, after a hole), filled from the
// input after its header; missing bytes are zero. Each region is its own exact-size
// heap allocation, so ASan flags any access outside. Frontend (vhost-user) addresses
// are guest addresses + kFrontendDelta.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "uvhost/virtio/descriptor_chain.h"
#include "uvhost/virtio/guest_memory.h"

namespace uvhost::virtio::fuzz {

inline constexpr uint64_t kFrontendDelta = 0x7f000000;

inline uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

// Flag bits 4-5 of both fuzzers' flags byte.
inline ChainDirection direction_of(uint8_t flags) {
  const auto bits = static_cast<unsigned>((flags >> 4) & 3u);
  return bits == 1 ? ChainDirection::kReadableOnly : bits == 2 ? ChainDirection::kWritableOnly : ChainDirection::kAny;
}

class FuzzGuest {
 public:
  // The memory image is data[header_bytes, size).
  FuzzGuest(const uint8_t* data, size_t size, size_t header_bytes) {
    struct RegionLayout {
      uint64_t gpa;
      size_t size;
    };
    constexpr RegionLayout kRegions[] = {{0x0, 0x4000}, {0x4000, 0x4000}, {0x10000, 0x1000}};
    std::vector<std::unique_ptr<MemoryRegion>> regions;
    size_t offset = header_bytes;
    for (const RegionLayout& layout : kRegions) {
      storage_.push_back(std::make_unique<std::byte[]>(layout.size));
      std::byte* bytes = storage_.back().get();
      const size_t n = offset < size ? std::min(layout.size, size - offset) : 0;
      if (n > 0) std::memcpy(bytes, data + offset, n);
      offset += layout.size;
      regions.push_back(MemoryRegion::borrow(layout.gpa, layout.gpa + kFrontendDelta, {bytes, layout.size}));
    }
    memory_ = GuestMemoryMap::create(std::move(regions));
    if (!memory_) __builtin_trap();
  }

  const GuestMemoryMap& memory() const { return *memory_; }

 private:
  std::vector<std::unique_ptr<std::byte[]>> storage_;
  std::unique_ptr<GuestMemoryMap> memory_;
};

// Whether two pop results name the same host pieces.
inline bool same_pieces(const IoVector& a, const IoVector& b) {
  if (a.size() != b.size() || a.total_bytes() != b.total_bytes()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].data != b[i].data || a[i].len != b[i].len) return false;
  }
  return true;
}

}  // namespace uvhost::virtio::fuzz
