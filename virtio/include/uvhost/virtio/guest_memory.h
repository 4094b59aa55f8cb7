// guest_memory.h - the guest's memory as the frontend hands it over, and translation
// of guest addresses to host pointers.
//
// Contract
// --------
//  - A MemoryRegion is one range of guest memory: guest physical address, size, the
//    frontend's own virtual address for it (vhost-user gives ring addresses in that
//    space), and where it lies in our address space. A region made by map_fd() owns
//    its mmap and its fd: the destructor munmaps and closes. A region made by borrow()
//    (tests, embedded frontends) owns nothing.
//  - A GuestMemoryMap is an immutable set of non-overlapping regions (overlap in guest
//    physical or in frontend address space is refused at creation). It is never
//    modified after creation; a new SET_MEM_TABLE builds a new map, which is published
//    through uvhost::sync::ReadMostly (guarded_guest_memory.h) so that the old map is
//    unmapped only when no reader can still use it.
//  - Every map gets a process-unique generation() number: users that cache pointers
//    derived from a map (the ring pointers of a queue) compare it to notice a new map.
//  - Translation trusts nothing in its arguments: addresses and lengths come from the
//    guest. translate() checks that [addr, addr + len) does not wrap around 2^64 and
//    lies entirely inside mapped regions; a range covering adjacent regions comes back
//    as several pieces. On any failure nothing is appended (never a silent truncation).
//  - The map does not read guest memory; it only computes pointers. Lookup is a linear
//    scan for up to 8 regions (the usual vhost-user table) and a binary search beyond;
//    translate() is inline for the one-region case, the per-descriptor hot path.
//  - A region made by map_fd() is refused when its fd is a file shorter than
//    mmap_offset + size (fstat), and is registered with the SIGBUS recovery of
//    guest_memory_fault.h: if the frontend cuts the file short later, an access beyond
//    the new end does not kill the process; the region then reads zeros and faulted()
//    turns true. Whether the fd was sealed against shrinking (F_SEAL_SHRINK) is logged
//    at map time and kept (sealed_against_shrink()).
//  - faulted_region(): the first region of the map that faulted, or nullptr. Callers
//    poll guest_memory_fault::fault_count() (one load) and ask only when it
//    moved.
//  - An IOVA view (VIRTIO_F_ACCESS_PLATFORM) is a map made by iova_view(): its
//    "guest addresses" are I/O virtual addresses, each range pointing into the regions
//    of the memory table it was made from, which it shares (the mmaps stay until the
//    last map holding them is gone). Each range carries the access the IOMMU grants
//    (read, write or both); every translation names the access it needs and gets
//    kNoAccess when a range it touches does not grant it. A memory-table map grants
//    both everywhere. Frontend-address lookups and host_to_guest() (dirty logging, in
//    guest physical addresses) work on a view as on its table.
//  - Thread safety: all const member functions may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "uvhost/base/name_table.h"
#include "uvhost/virtio/guest_memory_fault.h"
#include "uvhost/virtio/io_vector.h"

namespace uvhost::virtio {

using base::to_string;

// One region as vhost-user's SET_MEM_TABLE describes it (plus its fd).
struct RegionSpec {
  uint64_t guest_phys_addr = 0;
  uint64_t size = 0;
  uint64_t frontend_addr = 0;  // "userspace_addr": the frontend's virtual address
  uint64_t mmap_offset = 0;    // where the region starts inside the fd
  int fd = -1;
};

class MemoryRegion {
 public:
  // mmaps spec.fd (shared, read/write) and takes ownership of the fd: it is closed by
  // the destructor, or right away when mapping fails. Returns nullptr (and logs why)
  // for a zero size, a range that wraps, or an mmap failure.
  static std::unique_ptr<MemoryRegion> map_fd(const RegionSpec& spec);

  // Wraps memory that is already mapped; the caller keeps it alive and unmaps it.
  static std::unique_ptr<MemoryRegion> borrow(uint64_t guest_phys_addr, uint64_t frontend_addr,
                                              std::span<std::byte> host);

  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  uint64_t guest_phys_addr() const noexcept { return guest_phys_addr_; }
  uint64_t frontend_addr() const noexcept { return frontend_addr_; }
  uint64_t size() const noexcept { return size_; }
  std::byte* host() const noexcept { return host_; }
  // Last guest physical / frontend address inside the region (inclusive: no overflow).
  uint64_t guest_last() const noexcept { return guest_phys_addr_ + (size_ - 1); }
  uint64_t frontend_last() const noexcept { return frontend_addr_ + (size_ - 1); }

  // What backs a mapped region, for the logs: "memfd", "hugetlbfs" or "file".
  enum class Backing { kBorrowed, kMemfd, kHugetlbfs, kFile };
  Backing backing() const noexcept { return backing_; }
  bool sealed_against_shrink() const noexcept { return sealed_against_shrink_; }
  // True once an access of this region raised SIGBUS (its file was cut short): it reads
  // zeros from then on. Always false for borrowed regions.
  bool faulted() const noexcept { return fault_id_ && guest_memory_fault::faulted(*fault_id_); }
  // The size of the backing file now (fstat), -1 if unknown: for the fault's log line.
  int64_t backing_size_now() const noexcept;
  // offset + size: the file size this region needs.
  uint64_t required_backing_size() const noexcept { return mmap_offset_ + size_; }

 private:
  MemoryRegion() = default;

  uint64_t guest_phys_addr_ = 0;
  uint64_t frontend_addr_ = 0;
  uint64_t size_ = 0;
  std::byte* host_ = nullptr;
  void* mapping_ = nullptr;  // what mmap returned (owned regions only)
  size_t mapping_len_ = 0;
  int fd_ = -1;
  uint64_t mmap_offset_ = 0;
  Backing backing_ = Backing::kBorrowed;
  bool sealed_against_shrink_ = false;
  std::optional<guest_memory_fault::MappingId> fault_id_;
};

inline constexpr auto kBackingNames = base::name_table<MemoryRegion::Backing>({
    {MemoryRegion::Backing::kBorrowed, "borrowed"},
    {MemoryRegion::Backing::kMemfd, "memfd/tmpfs"},
    {MemoryRegion::Backing::kHugetlbfs, "hugetlbfs"},
    {MemoryRegion::Backing::kFile, "file"},
});
constexpr const auto& enum_names(MemoryRegion::Backing) noexcept { return kBackingNames; }

enum class TranslateStatus {
  kOk,
  kUnmapped,       // some byte of the range is in no region
  kWraps,          // addr + len overflows 2^64
  kTooManyPieces,  // the output vector is full
  kNoAccess,       // mapped, but a range does not grant the access asked for (IOVA view)
};
inline constexpr auto kTranslateStatusNames = base::name_table<TranslateStatus>({
    {TranslateStatus::kOk, "ok"},
    {TranslateStatus::kUnmapped, "address not in guest memory"},
    {TranslateStatus::kWraps, "address + length wraps around"},
    {TranslateStatus::kTooManyPieces, "buffer split into too many pieces"},
    {TranslateStatus::kNoAccess, "the IOMMU mapping does not grant this access"},
});

// What the device does with a range of guest memory; an IOMMU grants either or both
// (vhost-user's IOTLB permission values: 1 read, 2 write, 3 both).
enum class Access : uint8_t { kRead = 1, kWrite = 2, kReadWrite = 3 };
inline constexpr auto kAccessNames = base::name_table<Access>({
    {Access::kRead, "read"},
    {Access::kWrite, "write"},
    {Access::kReadWrite, "read/write"},
});
constexpr const auto& enum_names(Access) noexcept { return kAccessNames; }
constexpr bool grants(uint8_t granted, Access need) noexcept {
  return (granted & static_cast<uint8_t>(need)) == static_cast<uint8_t>(need);
}

// One IOTLB entry as an IOVA view takes it: [iova, iova + size) is the frontend's
// [frontend_addr, frontend_addr + size), with `access`.
struct IovaMapping {
  uint64_t iova = 0;
  uint64_t size = 0;
  uint64_t frontend_addr = 0;
  Access access = Access::kReadWrite;
};
constexpr const auto& enum_names(TranslateStatus) noexcept { return kTranslateStatusNames; }

class GuestMemoryMap {
 private:
  // What a lookup needs, stored flat (no pointer chase per translation).
  struct GuestRange {
    uint64_t first;  // guest physical address (or IOVA) of the range's first byte
    uint64_t last;   // ... and of its last byte (inclusive: cannot overflow)
    std::byte* host;
    uint8_t access;  // the Access bits granted: both for a memory table
  };

 public:
  // nullptr (logged) when regions overlap or one is null. Regions may come in any order.
  static std::unique_ptr<GuestMemoryMap> create(std::vector<std::unique_ptr<MemoryRegion>> regions);

  // A map sharing this one's regions with the same translation (a new generation).
  std::unique_ptr<GuestMemoryMap> share() const;
  // The IOVA view of this memory table (see the contract): `mappings` must not overlap
  // in IOVA space (nullptr, logged, if they do). The part of a mapping whose frontend
  // addresses lie in no region is left out (a later access to it is a miss); ranges
  // that continue one another in IOVA and host memory with the same access are merged,
  // so a ring the guest mapped page by page is one contiguous range.
  std::unique_ptr<GuestMemoryMap> iova_view(std::span<const IovaMapping> mappings) const;
  // Whether the frontend range [frontend_addr, frontend_addr + len) lies in regions.
  bool covers_frontend(uint64_t frontend_addr, uint64_t len) const noexcept;
  // The first address of [addr, addr + len) that no range translates (a miss to ask
  // the IOTLB for), or nullopt when every byte is mapped. Off the hot path.
  std::optional<uint64_t> first_unmapped(uint64_t guest_addr, uint64_t len) const noexcept;

  // Appends the host pieces of guest physical [addr, addr + len) to `out`. len == 0 is
  // kOk with nothing appended. On failure `out` is left as it was.
  // Inline: this runs once per descriptor; the common case is one region, one piece.
  [[gnu::always_inline]] TranslateStatus translate(uint64_t guest_addr, uint64_t len, IoVector& out,
                                                   Access need = Access::kRead) const {
    if (len == 0) return TranslateStatus::kOk;
    if (len - 1 > ~uint64_t{0} - guest_addr) return TranslateStatus::kWraps;
    const GuestRange* range = find_guest(guest_addr);
    if (range == nullptr) return TranslateStatus::kUnmapped;
    const uint64_t last = guest_addr + (len - 1);  // no wrap: checked above
    if (last > range->last) [[unlikely]] return translate_spanning(guest_addr, last, range, out, need);
    if (!grants(range->access, need)) [[unlikely]] return TranslateStatus::kNoAccess;
    return out.push_back(IoPiece{range->host + (guest_addr - range->first), static_cast<size_t>(len)})
               ? TranslateStatus::kOk
               : TranslateStatus::kTooManyPieces;
  }

  // The region of the last lookup, kept by a caller that translates many nearby
  // addresses in a row (one burst of chains): most lookups then compare two numbers.
  // Valid only with the map that filled it (a new map means a new cursor).
  struct RegionCursor {
    uint64_t first = 1;  // empty (first > last) until filled
    uint64_t last = 0;
    std::byte* host = nullptr;
    uint8_t access = 0;
  };

  // translate() for the common case only: true and one piece appended when the range
  // lies inside one region that grants `need` (and `out` has room); false, `out`
  // unchanged, otherwise.
  [[gnu::always_inline]] bool translate_within_region(uint64_t guest_addr, uint64_t len, IoVector& out,
                                                      RegionCursor& cursor, Access need) const {
    std::byte* host = host_within_region(guest_addr, len, cursor, need);
    return host != nullptr && out.push_back(IoPiece{host, static_cast<size_t>(len)});
  }

  // translate_contiguous() through a cursor: the host pointer of [addr, addr + len)
  // when it lies inside one region that grants `need`, else nullptr.
  [[gnu::always_inline]] std::byte* host_within_region(uint64_t guest_addr, uint64_t len, RegionCursor& cursor,
                                                             Access need) const {
    if (len == 0 || len - 1 > ~uint64_t{0} - guest_addr) return nullptr;
    const uint64_t last = guest_addr + (len - 1);
    if (guest_addr < cursor.first || last > cursor.last) [[unlikely]] {
      const GuestRange* range = find_guest(guest_addr);
      if (range == nullptr || last > range->last) return nullptr;
      cursor = RegionCursor{range->first, range->last, range->host, range->access};
    }
    if (!grants(cursor.access, need)) [[unlikely]] return nullptr;
    return cursor.host + (guest_addr - cursor.first);
  }

  // Host pointer for [addr, addr + len) when it lies inside one region that grants
  // `need`, else nullptr. len must be > 0. Used for rings and other structures we
  // access in place.
  std::byte* translate_contiguous(uint64_t guest_addr, uint64_t len, Access need = Access::kRead) const noexcept;
  // The same for a frontend virtual address (vhost-user SET_VRING_ADDR).
  std::byte* translate_frontend_contiguous(uint64_t frontend_addr, uint64_t len) const noexcept;
  std::optional<uint64_t> frontend_to_guest(uint64_t frontend_addr) const noexcept;
  // The guest physical address of a host pointer inside one of the regions (a piece
  // that translate() produced), for dirty-page logging of what the device wrote.
  std::optional<uint64_t> host_to_guest(const std::byte* host) const noexcept;

  // The first region (in guest address order) whose file was cut short under us, or
  // nullptr. A scan of the regions: call it when guest_memory_fault::fault_count() moved.
  const MemoryRegion* faulted_region() const noexcept;

  uint64_t generation() const noexcept { return generation_; }
  size_t region_count() const noexcept { return regions_.size(); }
  const MemoryRegion& region(size_t i) const noexcept { return *regions_[i]; }

 private:
  // vhost-user tables hold a handful of regions (8 without CONFIGURE_MEM_SLOTS): a
  // linear scan of the flat array beats a binary search there.
  static constexpr size_t kLinearScanLimit = 8;

  explicit GuestMemoryMap(std::vector<std::shared_ptr<MemoryRegion>> regions);
  // Sorts and checks the regions, fills the lookup tables with one range per region.
  static std::unique_ptr<GuestMemoryMap> from_regions(std::vector<std::shared_ptr<MemoryRegion>> regions);
  const GuestRange* find_guest(uint64_t guest_addr) const noexcept {
    if (guest_ranges_.size() <= kLinearScanLimit) [[likely]] {
      for (const GuestRange& range : guest_ranges_) {
        if (guest_addr >= range.first && guest_addr <= range.last) return &range;
      }
      return nullptr;
    }
    return find_guest_binary(guest_addr);
  }
  const GuestRange* find_guest_binary(uint64_t guest_addr) const noexcept;
  TranslateStatus translate_spanning(uint64_t guest_addr, uint64_t last, const GuestRange* range, IoVector& out,
                                     Access need) const;
  const MemoryRegion* find_frontend(uint64_t frontend_addr) const noexcept;

  std::vector<std::shared_ptr<MemoryRegion>> regions_;  // sorted by guest address
  std::vector<GuestRange> guest_ranges_;  // sorted by address: the regions, or an IOVA view's ranges
  std::vector<const MemoryRegion*> by_frontend_;        // sorted by frontend address
  uint64_t generation_;
};

}  // namespace uvhost::virtio
