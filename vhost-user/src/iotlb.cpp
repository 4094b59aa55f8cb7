// iotlb.cpp - the device's IOTLB (see iotlb.h).
#include "uvhost/vhost_user/iotlb.h"

#include <algorithm>
#include <limits>
#include <vector>

#include <fmt/format.h>

namespace uvhost::vhost_user {

namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

bool wraps(uint64_t start, uint64_t size) noexcept { return size - 1 > kMax - start; }

}  // namespace

bool Iotlb::update(const virtio::IovaMapping& mapping, const virtio::GuestMemoryMap& table, std::string& error) {
  const auto access = static_cast<uint8_t>(mapping.access);
  if (mapping.size == 0) {
    error = fmt::format("IOTLB update of iova {:#x} has size 0", mapping.iova);
    return false;
  }
  if (wraps(mapping.iova, mapping.size) || wraps(mapping.frontend_addr, mapping.size)) {
    error = fmt::format("IOTLB update iova {:#x} uaddr {:#x} size {:#x} wraps around", mapping.iova,
                        mapping.frontend_addr, mapping.size);
    return false;
  }
  if (access < 1 || access > 3) {
    error = fmt::format("IOTLB update of iova {:#x}: permission {} (must be 1 read, 2 write or 3 both)", mapping.iova,
                        access);
    return false;
  }
  if (!table.covers_frontend(mapping.frontend_addr, mapping.size)) {
    error = fmt::format("IOTLB update iova {:#x} -> uaddr {:#x} size {:#x} is not inside the memory table",
                        mapping.iova, mapping.frontend_addr, mapping.size);
    return false;
  }
  const uint64_t last = mapping.iova + (mapping.size - 1);
  remove_range(mapping.iova, last);
  if (entries_.size() >= kMaxEntries) evict_oldest();
  entries_.emplace(mapping.iova, Entry{last, mapping.frontend_addr, mapping.access, next_serial_++});
  ++updates_;
  return true;
}

void Iotlb::invalidate(uint64_t iova, uint64_t size) {
  const uint64_t last = size == 0 || wraps(iova, size) ? kMax : iova + (size - 1);
  remove_range(iova, last);
  ++invalidations_;
}

void Iotlb::clear() { entries_.clear(); }

void Iotlb::remove_range(uint64_t first, uint64_t last) {
  // The entry that starts before `first` may reach into the range; then every entry
  // starting inside it.
  auto it = entries_.upper_bound(first);
  if (it != entries_.begin()) --it;
  while (it != entries_.end() && it->first <= last) {
    const uint64_t entry_first = it->first;
    const Entry entry = it->second;
    if (entry.last < first) {
      ++it;
      continue;
    }
    it = entries_.erase(it);
    // What is left of it on either side stays, with its frontend addresses shifted.
    if (entry_first < first) {
      entries_.emplace(entry_first, Entry{first - 1, entry.frontend_addr, entry.access, entry.serial});
    }
    if (entry.last > last) {
      const uint64_t tail = last + 1;
      it = entries_.emplace(tail, Entry{entry.last, entry.frontend_addr + (tail - entry_first), entry.access,
                                        entry.serial}).first;
      ++it;
    }
  }
}

void Iotlb::evict_oldest() {
  auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                 [](const auto& a, const auto& b) { return a.second.serial < b.second.serial; });
  if (oldest == entries_.end()) return;
  entries_.erase(oldest);
  ++evictions_;
}

std::unique_ptr<virtio::GuestMemoryMap> Iotlb::view(const virtio::GuestMemoryMap& table) const {
  std::vector<virtio::IovaMapping> mappings;
  mappings.reserve(entries_.size());
  for (const auto& [first, entry] : entries_) {
    mappings.push_back(virtio::IovaMapping{first, entry.last - first + 1, entry.frontend_addr, entry.access});
  }
  return table.iova_view(mappings);
}

}  // namespace uvhost::vhost_user
