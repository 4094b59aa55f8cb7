// memory_slots.cpp - see memory_slots.h.
#include "uvhost/vhost_user/memory_slots.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace uvhost::vhost_user {

namespace {

bool wraps(uint64_t base, uint64_t size) { return size - 1 > ~uint64_t{0} - base; }

// The same region (all four numbers) backed by the same file.
bool same_region(const MemorySlot& a, const MemorySlot& b) {
  const MemoryRegionDesc& x = a.region;
  const MemoryRegionDesc& y = b.region;
  if (x.guest_phys_addr != y.guest_phys_addr || x.size != y.size || x.user_addr != y.user_addr ||
      x.mmap_offset != y.mmap_offset) {
    return false;
  }
  struct stat sa {};
  struct stat sb {};
  return ::fstat(a.fd.get(), &sa) == 0 && ::fstat(b.fd.get(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// Inclusive ranges [a, a + a_size - 1] and [b, ...] intersect? Sizes are >= 1, no wrap.
bool overlaps(uint64_t a, uint64_t a_size, uint64_t b, uint64_t b_size) {
  return a <= b + (b_size - 1) && b <= a + (a_size - 1);
}

bool validate_region(const MemorySlot& slot, std::string& error) {
  const MemoryRegionDesc& r = slot.region;
  const auto describe = [&r] {
    return fmt::format("region gpa={:#x} size={:#x} uva={:#x} offset={:#x}", r.guest_phys_addr, r.size, r.user_addr,
                       r.mmap_offset);
  };
  if (r.size == 0 || r.size > MemorySlots::kMaxRegionSize) {
    error = fmt::format("{}: size out of range (1..{:#x})", describe(), MemorySlots::kMaxRegionSize);
    return false;
  }
  if (wraps(r.guest_phys_addr, r.size) || wraps(r.user_addr, r.size) || wraps(r.mmap_offset, r.size)) {
    error = fmt::format("{}: an address + size wraps around 2^64", describe());
    return false;
  }
  struct stat info {};
  if (::fstat(slot.fd.get(), &info) != 0) {
    error = fmt::format("{}: fstat: {}", describe(), std::strerror(errno));
    return false;
  }
  if (!S_ISREG(info.st_mode)) {
    error = fmt::format("{}: fd is not a memory file (memfd, hugetlbfs, tmpfs)", describe());
    return false;
  }
  if (static_cast<uint64_t>(info.st_size) < r.mmap_offset + r.size) {
    error = fmt::format("{}: reaches past the end of its fd ({:#x} bytes)", describe(), info.st_size);
    return false;
  }
  // Remaining risk: the checks above hold at this instant only. The frontend keeps its
  // own fd to the same file and may ftruncate it smaller afterwards (between this fstat
  // and our mmap, or at any later time); an access past the new end then raises SIGBUS
  // in whichever thread touches it. Only F_SEAL_SHRINK (memfd_create with
  // MFD_ALLOW_SEALING, then F_ADD_SEALS) rules that out, and neither QEMU nor DPDK seal
  // their guest memory, so an unsealed region is accepted, as every vhost-user backend
  // does; the debug line below makes it visible. (Guarding every guest access against
  // SIGBUS would cost a signal handler and per-access recovery on the datapath.)
  // F_GET_SEALS fails (EINVAL) on files that do not support seals (hugetlbfs or tmpfs
  // files of QEMU's -mem-path): those cannot be sealed at all.
  const int seals = ::fcntl(slot.fd.get(), F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    spdlog::debug("{}: not sealed against shrinking (F_SEAL_SHRINK): the frontend could make accesses SIGBUS",
                  describe());
  }
  return true;
}

}  // namespace

std::unique_ptr<virtio::GuestMemoryMap> MemorySlots::build(const std::vector<MemorySlot>& candidate,
                                                           std::string& error) const {
  if (candidate.size() > max_slots_) {
    error = fmt::format("{} regions, at most {} memory slots", candidate.size(), max_slots_);
    return nullptr;
  }
  for (size_t i = 0; i < candidate.size(); ++i) {
    if (!validate_region(candidate[i], error)) return nullptr;
    const MemoryRegionDesc& a = candidate[i].region;
    for (size_t j = 0; j < i; ++j) {
      const MemoryRegionDesc& b = candidate[j].region;
      if (overlaps(a.guest_phys_addr, a.size, b.guest_phys_addr, b.size)) {
        error = fmt::format("regions overlap in guest physical space: {:#x}+{:#x} and {:#x}+{:#x}", a.guest_phys_addr,
                            a.size, b.guest_phys_addr, b.size);
        return nullptr;
      }
      if (overlaps(a.user_addr, a.size, b.user_addr, b.size)) {
        error = fmt::format("regions overlap in frontend address space: {:#x}+{:#x} and {:#x}+{:#x}", a.user_addr,
                            a.size, b.user_addr, b.size);
        return nullptr;
      }
    }
  }
  std::vector<std::unique_ptr<virtio::MemoryRegion>> regions;
  regions.reserve(candidate.size());
  for (const MemorySlot& slot : candidate) {
    // The map's region owns (and closes) its fd; the slot keeps the original for rebuilds.
    const int copy = ::fcntl(slot.fd.get(), F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
      error = fmt::format("dup of region fd: {}", std::strerror(errno));
      return nullptr;
    }
    const MemoryRegionDesc& r = slot.region;
    auto region = virtio::MemoryRegion::map_fd(
        virtio::RegionSpec{r.guest_phys_addr, r.size, r.user_addr, r.mmap_offset, copy});
    if (!region) {
      error = fmt::format("cannot mmap region gpa={:#x} size={:#x}", r.guest_phys_addr, r.size);
      return nullptr;
    }
    regions.push_back(std::move(region));
  }
  auto map = virtio::GuestMemoryMap::create(std::move(regions));
  if (!map) error = "guest memory map refused the regions";
  return map;
}

std::unique_ptr<virtio::GuestMemoryMap> MemorySlots::replace(std::vector<MemorySlot> slots, std::string& error) {
  auto map = build(slots, error);
  if (map) slots_ = std::move(slots);
  return map;
}

std::unique_ptr<virtio::GuestMemoryMap> MemorySlots::add(MemorySlot slot, std::string& error) {
  error.clear();
  for (MemorySlot& existing : slots_) {
    if (same_region(existing, slot)) {
      ++existing.references;  // `slot`'s fd, a second copy of the same file, closes here
      return nullptr;
    }
  }
  std::vector<MemorySlot> candidate;
  candidate.reserve(slots_.size() + 1);
  for (const MemorySlot& existing : slots_) {
    const int copy = ::fcntl(existing.fd.get(), F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
      error = fmt::format("dup of region fd: {}", std::strerror(errno));
      return nullptr;
    }
    candidate.push_back(MemorySlot{existing.region, base::UniqueFd(copy), existing.references});
  }
  slot.references = 1;
  candidate.push_back(std::move(slot));
  auto map = build(candidate, error);
  if (map) slots_ = std::move(candidate);
  return map;
}

std::unique_ptr<virtio::GuestMemoryMap> MemorySlots::remove(const MemoryRegionDesc& region, std::string& error) {
  size_t found = slots_.size();
  for (size_t i = 0; i < slots_.size(); ++i) {
    const MemoryRegionDesc& r = slots_[i].region;
    if (r.guest_phys_addr == region.guest_phys_addr && r.user_addr == region.user_addr && r.size == region.size) {
      found = i;
      break;
    }
  }
  error.clear();
  if (found == slots_.size()) {
    error = fmt::format("no region gpa={:#x} size={:#x} uva={:#x} to remove", region.guest_phys_addr, region.size,
                        region.user_addr);
    return nullptr;
  }
  if (slots_[found].references > 1) {
    --slots_[found].references;  // another vhost device of the frontend still has it
    return nullptr;
  }
  std::vector<MemorySlot> candidate;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (i == found) continue;
    const int copy = ::fcntl(slots_[i].fd.get(), F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
      error = fmt::format("dup of region fd: {}", std::strerror(errno));
      return nullptr;
    }
    candidate.push_back(MemorySlot{slots_[i].region, base::UniqueFd(copy), slots_[i].references});
  }
  auto map = build(candidate, error);
  if (map) slots_ = std::move(candidate);
  return map;
}

std::unique_ptr<virtio::GuestMemoryMap> MemorySlots::clear() {
  slots_.clear();
  return virtio::GuestMemoryMap::create({});
}

}  // namespace uvhost::vhost_user
