// guest_memory.cpp - region mapping and guest address translation.
#include "uvhost/virtio/guest_memory.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>

#include <spdlog/spdlog.h>

namespace uvhost::virtio {
namespace {

// relaxed: only uniqueness matters, not ordering with anything else.
std::atomic<uint64_t> g_next_generation{1};

// True when [start, start + len) wraps around 2^64 (len > 0).
constexpr bool range_wraps(uint64_t start, uint64_t len) noexcept {
  return len - 1 > std::numeric_limits<uint64_t>::max() - start;
}

// What backs `fd`, and the granule its mappings are split at (a huge page on hugetlbfs).
struct BackingInfo {
  MemoryRegion::Backing backing = MemoryRegion::Backing::kFile;
  size_t page_size = 4096;
  bool sealed_against_shrink = false;
};

BackingInfo inspect_backing(int fd) {
  BackingInfo info;
  struct statfs fs {};
  if (::fstatfs(fd, &fs) == 0 && static_cast<uint64_t>(fs.f_type) == HUGETLBFS_MAGIC) {
    info.backing = MemoryRegion::Backing::kHugetlbfs;
    if (fs.f_bsize > 0) info.page_size = static_cast<size_t>(fs.f_bsize);
  }
  // F_GET_SEALS answers only for fds that can take seals (memfds); EINVAL otherwise.
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals >= 0) {
    if (info.backing != MemoryRegion::Backing::kHugetlbfs) info.backing = MemoryRegion::Backing::kMemfd;
    info.sealed_against_shrink = (seals & F_SEAL_SHRINK) != 0;
  }
  return info;
}

constexpr size_t round_up(size_t value, size_t granule) noexcept { return (value + granule - 1) / granule * granule; }

}  // namespace

std::unique_ptr<MemoryRegion> MemoryRegion::map_fd(const RegionSpec& spec) {
  auto fail = [&](const char* why) -> std::unique_ptr<MemoryRegion> {
    spdlog::error("guest memory: cannot map region gpa={:#x} size={:#x} offset={:#x} fd={}: {}",
                  spec.guest_phys_addr, spec.size, spec.mmap_offset, spec.fd, why);
    if (spec.fd >= 0) ::close(spec.fd);
    return nullptr;
  };
  if (spec.size == 0) return fail("zero size");
  if (range_wraps(spec.guest_phys_addr, spec.size)) return fail("guest range wraps");
  if (range_wraps(spec.frontend_addr, spec.size)) return fail("frontend range wraps");
  // The offset need not be page aligned (QEMU passes offsets inside a hugepage file),
  // so map from 0 and skip it, as long as the sum fits.
  if (spec.mmap_offset > std::numeric_limits<size_t>::max() - spec.size) return fail("offset + size overflows");
  // A file already too short would fault at the first access: refuse it now (the fault
  // handler covers a file cut short later).
  struct stat file {};
  if (::fstat(spec.fd, &file) != 0) return fail(std::strerror(errno));
  if (S_ISREG(file.st_mode) && static_cast<uint64_t>(file.st_size) < spec.mmap_offset + spec.size) {
    spdlog::error("guest memory: cannot map region gpa={:#x} size={:#x} offset={:#x} fd={}: the fd holds {} bytes, "
                  "the region needs {}",
                  spec.guest_phys_addr, spec.size, spec.mmap_offset, spec.fd, file.st_size,
                  spec.mmap_offset + spec.size);
    ::close(spec.fd);
    return nullptr;
  }
  const BackingInfo backing = inspect_backing(spec.fd);
  // Whole pages of the file's page size: the fault handler replaces exactly this range,
  // and a hugetlbfs mapping can only be split at huge page boundaries.
  const size_t mapping_len = round_up(static_cast<size_t>(spec.mmap_offset + spec.size), backing.page_size);
  if (mapping_len < spec.mmap_offset + spec.size) return fail("offset + size overflows");
  void* mapping = ::mmap(nullptr, mapping_len, PROT_READ | PROT_WRITE, MAP_SHARED, spec.fd, 0);
  if (mapping == MAP_FAILED) return fail(std::strerror(errno));
  const auto fault_id = guest_memory_fault::register_mapping(mapping, mapping_len);
  if (!fault_id) {
    ::munmap(mapping, mapping_len);
    return fail("too many guest memory mappings in the process to protect against SIGBUS");
  }
  spdlog::info("guest memory: region gpa={:#x} size={:#x} on {} ({}sealed against shrinking; a shrink is survived "
               "either way)",
               spec.guest_phys_addr, spec.size, to_string(backing.backing),
               backing.sealed_against_shrink ? "" : "not ");

  std::unique_ptr<MemoryRegion> region(new MemoryRegion());
  region->guest_phys_addr_ = spec.guest_phys_addr;
  region->frontend_addr_ = spec.frontend_addr;
  region->size_ = spec.size;
  region->mapping_ = mapping;
  region->mapping_len_ = mapping_len;
  region->host_ = static_cast<std::byte*>(mapping) + spec.mmap_offset;
  region->fd_ = spec.fd;
  region->mmap_offset_ = spec.mmap_offset;
  region->backing_ = backing.backing;
  region->sealed_against_shrink_ = backing.sealed_against_shrink;
  region->fault_id_ = fault_id;
  return region;
}

std::unique_ptr<MemoryRegion> MemoryRegion::borrow(uint64_t guest_phys_addr, uint64_t frontend_addr,
                                                   std::span<std::byte> host) {
  if (host.empty() || range_wraps(guest_phys_addr, host.size()) || range_wraps(frontend_addr, host.size())) {
    spdlog::error("guest memory: bad borrowed region gpa={:#x} size={:#x}", guest_phys_addr, host.size());
    return nullptr;
  }
  std::unique_ptr<MemoryRegion> region(new MemoryRegion());
  region->guest_phys_addr_ = guest_phys_addr;
  region->frontend_addr_ = frontend_addr;
  region->size_ = host.size();
  region->host_ = host.data();
  return region;
}

MemoryRegion::~MemoryRegion() {
  // Out of the fault registry before the range is unmapped (and maybe reused).
  if (fault_id_) guest_memory_fault::unregister_mapping(*fault_id_);
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_len_);
  if (fd_ >= 0) ::close(fd_);
}

int64_t MemoryRegion::backing_size_now() const noexcept {
  struct stat file {};
  if (fd_ < 0 || ::fstat(fd_, &file) != 0) return -1;
  return static_cast<int64_t>(file.st_size);
}

const MemoryRegion* GuestMemoryMap::faulted_region() const noexcept {
  // The caller's fault_count() (acquire) made every flag set before it visible.
  for (const auto& region : regions_) {
    if (region->faulted()) return region.get();
  }
  return nullptr;
}

GuestMemoryMap::GuestMemoryMap(std::vector<std::shared_ptr<MemoryRegion>> regions)
    : regions_(std::move(regions)), generation_(g_next_generation.fetch_add(1, std::memory_order_relaxed)) {
  for (const auto& region : regions_) by_frontend_.push_back(region.get());
}

std::unique_ptr<GuestMemoryMap> GuestMemoryMap::create(std::vector<std::unique_ptr<MemoryRegion>> regions) {
  std::vector<std::shared_ptr<MemoryRegion>> shared;
  shared.reserve(regions.size());
  for (auto& region : regions) shared.push_back(std::move(region));
  return from_regions(std::move(shared));
}

std::unique_ptr<GuestMemoryMap> GuestMemoryMap::from_regions(std::vector<std::shared_ptr<MemoryRegion>> regions) {
  for (const auto& region : regions) {
    if (!region) {
      spdlog::error("guest memory: null region in memory table");
      return nullptr;
    }
  }
  std::sort(regions.begin(), regions.end(),
            [](const auto& a, const auto& b) { return a->guest_phys_addr() < b->guest_phys_addr(); });
  for (size_t i = 1; i < regions.size(); ++i) {
    if (regions[i]->guest_phys_addr() <= regions[i - 1]->guest_last()) {
      spdlog::error("guest memory: regions overlap in guest physical space at {:#x}", regions[i]->guest_phys_addr());
      return nullptr;
    }
  }
  std::unique_ptr<GuestMemoryMap> map(new GuestMemoryMap(std::move(regions)));
  for (const auto& region : map->regions_) {
    map->guest_ranges_.push_back(GuestRange{region->guest_phys_addr(), region->guest_last(), region->host(),
                                            static_cast<uint8_t>(Access::kReadWrite)});
  }
  std::sort(map->by_frontend_.begin(), map->by_frontend_.end(),
            [](const MemoryRegion* a, const MemoryRegion* b) { return a->frontend_addr() < b->frontend_addr(); });
  for (size_t i = 1; i < map->by_frontend_.size(); ++i) {
    if (map->by_frontend_[i]->frontend_addr() <= map->by_frontend_[i - 1]->frontend_last()) {
      spdlog::error("guest memory: regions overlap in frontend address space at {:#x}",
                    map->by_frontend_[i]->frontend_addr());
      return nullptr;
    }
  }
  return map;
}

std::unique_ptr<GuestMemoryMap> GuestMemoryMap::share() const { return from_regions(regions_); }

std::unique_ptr<GuestMemoryMap> GuestMemoryMap::iova_view(std::span<const IovaMapping> mappings) const {
  std::vector<const IovaMapping*> sorted;
  sorted.reserve(mappings.size());
  for (const IovaMapping& mapping : mappings) {
    if (mapping.size == 0 || range_wraps(mapping.iova, mapping.size) || range_wraps(mapping.frontend_addr, mapping.size)) {
      spdlog::error("guest memory: IOVA mapping {:#x}+{:#x} is empty or wraps", mapping.iova, mapping.size);
      return nullptr;
    }
    sorted.push_back(&mapping);
  }
  std::sort(sorted.begin(), sorted.end(), [](const IovaMapping* a, const IovaMapping* b) { return a->iova < b->iova; });
  std::unique_ptr<GuestMemoryMap> view = share();
  if (!view) return nullptr;
  std::vector<GuestRange>& ranges = view->guest_ranges_;
  ranges.clear();
  uint64_t previous_last = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const IovaMapping& mapping = *sorted[i];
    if (i > 0 && mapping.iova <= previous_last) {
      spdlog::error("guest memory: IOVA mappings overlap at {:#x}", mapping.iova);
      return nullptr;
    }
    previous_last = mapping.iova + (mapping.size - 1);
    // One range per region the mapping's frontend addresses fall in; gaps are left out.
    uint64_t offset = 0;
    while (offset < mapping.size) {
      const uint64_t frontend = mapping.frontend_addr + offset;
      const MemoryRegion* region = find_frontend(frontend);
      if (region == nullptr) {
        // Skip to the next region that starts inside the mapping, if any.
        auto next = std::upper_bound(by_frontend_.begin(), by_frontend_.end(), frontend,
                                     [](uint64_t a, const MemoryRegion* r) { return a < r->frontend_addr(); });
        if (next == by_frontend_.end() || (*next)->frontend_addr() - mapping.frontend_addr >= mapping.size) break;
        offset = (*next)->frontend_addr() - mapping.frontend_addr;
        continue;
      }
      const uint64_t in_region = region->frontend_last() - frontend + 1;  // >= 1; 0 means all 2^64
      const uint64_t left = mapping.size - offset;
      const uint64_t length = in_region == 0 ? left : std::min(left, in_region);
      const GuestRange range{mapping.iova + offset, mapping.iova + offset + (length - 1),
                             region->host() + (frontend - region->frontend_addr()),
                             static_cast<uint8_t>(mapping.access)};
      if (!ranges.empty() && ranges.back().last + 1 == range.first && ranges.back().access == range.access &&
          ranges.back().host + (ranges.back().last - ranges.back().first + 1) == range.host) {
        ranges.back().last = range.last;
      } else {
        ranges.push_back(range);
      }
      offset += length;
    }
  }
  return view;
}

bool GuestMemoryMap::covers_frontend(uint64_t frontend_addr, uint64_t len) const noexcept {
  if (len == 0 || range_wraps(frontend_addr, len)) return false;
  const uint64_t last = frontend_addr + (len - 1);
  uint64_t at = frontend_addr;
  for (;;) {
    const MemoryRegion* region = find_frontend(at);
    if (region == nullptr) return false;
    if (region->frontend_last() >= last) return true;
    at = region->frontend_last() + 1;
  }
}

std::optional<uint64_t> GuestMemoryMap::first_unmapped(uint64_t guest_addr, uint64_t len) const noexcept {
  if (len == 0) return std::nullopt;
  if (range_wraps(guest_addr, len)) len = std::numeric_limits<uint64_t>::max() - guest_addr + 1;
  const uint64_t last = guest_addr + (len - 1);
  uint64_t at = guest_addr;
  for (;;) {
    const GuestRange* range = find_guest(at);
    if (range == nullptr) return at;
    if (range->last >= last) return std::nullopt;
    at = range->last + 1;
  }
}

const GuestMemoryMap::GuestRange* GuestMemoryMap::find_guest_binary(uint64_t guest_addr) const noexcept {
  // First range starting after addr; the candidate is the one before it.
  auto it = std::upper_bound(guest_ranges_.begin(), guest_ranges_.end(), guest_addr,
                             [](uint64_t a, const GuestRange& range) { return a < range.first; });
  if (it == guest_ranges_.begin()) return nullptr;
  const GuestRange& range = *std::prev(it);
  return guest_addr <= range.last ? &range : nullptr;
}

const MemoryRegion* GuestMemoryMap::find_frontend(uint64_t frontend_addr) const noexcept {
  auto it = std::upper_bound(by_frontend_.begin(), by_frontend_.end(), frontend_addr,
                             [](uint64_t a, const MemoryRegion* region) { return a < region->frontend_addr(); });
  if (it == by_frontend_.begin()) return nullptr;
  const MemoryRegion* region = *std::prev(it);
  return frontend_addr <= region->frontend_last() ? region : nullptr;
}

// [guest_addr, last] starts in `range` and runs past its end: one piece per region, all
// or nothing.
TranslateStatus GuestMemoryMap::translate_spanning(uint64_t guest_addr, uint64_t last, const GuestRange* range,
                                                   IoVector& out, Access need) const {
  const size_t size_before = out.size();
  uint64_t cursor = guest_addr;
  for (;;) {
    if (!grants(range->access, need)) {
      out.truncate(size_before);
      return TranslateStatus::kNoAccess;
    }
    const uint64_t piece_last = std::min(last, range->last);
    if (!out.push_back(IoPiece{range->host + (cursor - range->first), static_cast<size_t>(piece_last - cursor + 1)})) {
      out.truncate(size_before);
      return TranslateStatus::kTooManyPieces;
    }
    if (piece_last == last) return TranslateStatus::kOk;
    cursor = piece_last + 1;  // <= last, so no wrap
    range = find_guest(cursor);
    if (range == nullptr) {
      out.truncate(size_before);
      return TranslateStatus::kUnmapped;
    }
  }
}

std::byte* GuestMemoryMap::translate_contiguous(uint64_t guest_addr, uint64_t len, Access need) const noexcept {
  if (len == 0 || range_wraps(guest_addr, len)) return nullptr;
  const GuestRange* range = find_guest(guest_addr);
  if (range == nullptr || guest_addr + (len - 1) > range->last || !grants(range->access, need)) return nullptr;
  return range->host + (guest_addr - range->first);
}

std::byte* GuestMemoryMap::translate_frontend_contiguous(uint64_t frontend_addr, uint64_t len) const noexcept {
  if (len == 0 || range_wraps(frontend_addr, len)) return nullptr;
  const MemoryRegion* region = find_frontend(frontend_addr);
  if (region == nullptr || frontend_addr + (len - 1) > region->frontend_last()) return nullptr;
  return region->host() + (frontend_addr - region->frontend_addr());
}

std::optional<uint64_t> GuestMemoryMap::frontend_to_guest(uint64_t frontend_addr) const noexcept {
  const MemoryRegion* region = find_frontend(frontend_addr);
  if (region == nullptr) return std::nullopt;
  return region->guest_phys_addr() + (frontend_addr - region->frontend_addr());
}

std::optional<uint64_t> GuestMemoryMap::host_to_guest(const std::byte* host) const noexcept {
  // Compare as integers: relational comparison of pointers into different objects is
  // unspecified, and `host` may belong to no region at all.
  // By region, not by range: an IOVA view's ranges are keyed by IOVA, the log by GPA.
  const auto address = reinterpret_cast<uintptr_t>(host);
  for (const auto& region : regions_) {
    const auto first = reinterpret_cast<uintptr_t>(region->host());
    if (address >= first && address - first <= region->size() - 1) return region->guest_phys_addr() + (address - first);
  }
  return std::nullopt;
}

}  // namespace uvhost::virtio
