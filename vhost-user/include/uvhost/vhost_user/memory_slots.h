// memory_slots.h - the guest memory regions a frontend handed over (SET_MEM_TABLE,
// ADD_MEM_REG, REM_MEM_REG), validated, and turned into a GuestMemoryMap.
//
// Contract
// --------
//  - Every change (replace/add/remove) is all-or-nothing: the candidate set of regions
//    is validated and mapped first; only when that succeeds is it committed and the
//    new map returned (the caller publishes it through GuardedGuestMemory). On failure
//    the current set is unchanged and `error` says why, in one line.
//  - Validation trusts nothing: a region must have 1 <= size <= kMaxRegionSize; no
//    wrap of guest address + size, user address + size, or mmap offset + size; its fd
//    must be a regular file (memfd, hugetlbfs, tmpfs) holding offset + size bytes
//    (mapping past the end of a file succeeds and SIGBUSes on access); regions must
//    not overlap in guest physical nor in frontend virtual space; at most max_slots.
//  - An ADD_MEM_REG of a region already present - the same guest address, size,
//    frontend address and mmap offset, and an fd of the same file (device and inode) -
//    is counted, not refused as an overlap: QEMU before 8.1 sends its memory table once
//    per queue pair's vhost device on one connection (ADD/REM_MEM_REG were not yet
//    "one time" requests), so with multiqueue every region comes once per pair. add()
//    then returns nullptr with `error` empty (nothing changed, no map to publish), and
//    REM_MEM_REG takes such a region away only when its last reference goes (before
//    that: nullptr, `error` empty). Any other overlap is still refused.
//  - Each slot keeps its fd, so the map can be rebuilt on ADD/REM: each build maps
//    every region anew from a dup of its fd (the map owns those mappings; the old map
//    stays valid for readers until the guard retires it).
//  - Trust limit: a frontend that shrinks a memfd after we mapped it can still make
//    accesses SIGBUS (as with any vhost-user backend); sealed memfds
//    (F_SEAL_SHRINK) are immune.
//  - Not thread-safe: used by the device's control thread only.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "uvhost/vhost_user/message.h"
#include "uvhost/base/unique_fd.h"
#include "uvhost/virtio/guest_memory.h"

namespace uvhost::vhost_user {

struct MemorySlot {
  MemoryRegionDesc region;
  base::UniqueFd fd;
  uint64_t references = 1;  // ADD_MEM_REGs of this very region (see the contract)
};

class MemorySlots {
 public:
  static constexpr uint64_t kMaxRegionSize = uint64_t{1} << 40;  // 1 TiB per region

  explicit MemorySlots(size_t max_slots) : max_slots_(max_slots) {}

  // SET_MEM_TABLE: the whole set.
  std::unique_ptr<virtio::GuestMemoryMap> replace(std::vector<MemorySlot> slots, std::string& error);
  // ADD_MEM_REG.
  std::unique_ptr<virtio::GuestMemoryMap> add(MemorySlot slot, std::string& error);
  // REM_MEM_REG: the region with this guest address, user address and size (the mmap
  // offset is ignored, as the spec says).
  std::unique_ptr<virtio::GuestMemoryMap> remove(const MemoryRegionDesc& region, std::string& error);
  // Forgets every region; returns the (empty) map to publish.
  std::unique_ptr<virtio::GuestMemoryMap> clear();

  size_t size() const noexcept { return slots_.size(); }
  size_t max_slots() const noexcept { return max_slots_; }

 private:
  // Validates `candidate` and maps it; nullptr (error set) if anything is wrong.
  std::unique_ptr<virtio::GuestMemoryMap> build(const std::vector<MemorySlot>& candidate, std::string& error) const;

  size_t max_slots_;
  std::vector<MemorySlot> slots_;
};

}  // namespace uvhost::vhost_user
