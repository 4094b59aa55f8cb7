// iotlb.h - the device's IOTLB (VIRTIO_F_ACCESS_PLATFORM): the IOVA translations the
// frontend sent with VHOST_USER_IOTLB_MSG, and the IOVA view of guest memory made from
// them, which the datapath translates every ring and buffer address through.
//
// Contract
// --------
//  - update(): one translation, [iova, iova + size) -> frontend [uaddr, uaddr + size)
//    with an access. Refused (false, `error` says why, nothing changed) when the size is
//    0, a range wraps, the access is not read, write or both, or the frontend range is
//    not inside the memory table (the spec: "addresses and size must be within vhost
//    memory regions"). A translation overlapping older ones replaces the overlapped
//    parts: the newest one wins, as in an IOMMU's page table.
//  - invalidate(): removes every translation of [iova, iova + size), cutting those that
//    straddle its ends. A size of 0, or a range running past 2^64, means "to the end of
//    the IOVA space" (QEMU sends addr_mask + 1, which is 0 for a global invalidation).
//  - At most kMaxEntries translations are kept: when full, an update evicts the oldest
//    one (a later access to it is a miss again; a frontend that floods us with updates
//    costs us a bounded table).
//  - view(table): the IOVA view of `table` (GuestMemoryMap::iova_view), to publish.
//  - Counters (updates, invalidations, evictions) are plain numbers for the control
//    thread; not thread-safe: the device's control thread owns the table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "uvhost/virtio/guest_memory.h"

namespace uvhost::vhost_user {

// A connection's IOTLB figures: translations held, updates and invalidations received,
// evictions, misses sent on the back-end channel and misses that could not be sent.
struct IotlbStats {
  uint64_t entries = 0;
  uint64_t updates = 0;
  uint64_t invalidations = 0;
  uint64_t evictions = 0;
  uint64_t misses = 0;
  uint64_t misses_unreported = 0;
};

class Iotlb {
 public:
  static constexpr size_t kMaxEntries = 4096;

  bool update(const virtio::IovaMapping& mapping, const virtio::GuestMemoryMap& table, std::string& error);
  void invalidate(uint64_t iova, uint64_t size);
  void clear();

  std::unique_ptr<virtio::GuestMemoryMap> view(const virtio::GuestMemoryMap& table) const;

  size_t size() const noexcept { return entries_.size(); }
  uint64_t updates() const noexcept { return updates_; }
  uint64_t invalidations() const noexcept { return invalidations_; }
  uint64_t evictions() const noexcept { return evictions_; }

 private:
  struct Entry {
    uint64_t last;  // inclusive
    uint64_t frontend_addr;
    virtio::Access access;
    uint64_t serial;  // insertion order, for eviction
  };
  // Removes [first, last] from every entry.
  void remove_range(uint64_t first, uint64_t last);
  void evict_oldest();

  std::map<uint64_t, Entry> entries_;  // by first IOVA; never overlapping
  uint64_t next_serial_ = 0;
  uint64_t updates_ = 0;
  uint64_t invalidations_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace uvhost::vhost_user
