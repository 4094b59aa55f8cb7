// iommu_table.h - the table under test of the iommu-lock lab (bench/lab/iommu_lock_lab.h):
// a VM-shaped guest memory table whose maps come in versions a reader can tell apart,
// or the IOTLB of a device behind a virtual IOMMU (VIRTIO_F_ACCESS_PLATFORM) on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "uvhost/base/name_table.h"
#include "uvhost/vhost_user/iotlb.h"
#include "uvhost/virtio/guest_memory.h"

namespace uvhost::experiments {

// What the readers translate through and the writer replaces.
//  - kMemoryTable: the memory table itself; an update is a SET_MEM_TABLE (a whole new
//    table, every region moved).
//  - kIotlb: the IOVA view of a fixed memory table made from an IOTLB of kIotlbPages
//    4 KiB translations scattered over guest RAM (a guest's DMA working set: thousands
//    of ranges, a binary search per lookup); an update is what BackendDevice does for
//    VHOST_USER_IOTLB_MSG: one page remapped in vhost_user::Iotlb, its whole view
//    rebuilt and published (the guest's IOMMU recycling an IOVA).
enum class IommuTableKind { kMemoryTable, kIotlb };
inline constexpr auto kIommuTableKindNames = base::name_table<IommuTableKind>({
    {IommuTableKind::kMemoryTable, "memory-table"},
    {IommuTableKind::kIotlb, "iotlb"},
});
constexpr const auto& enum_names(IommuTableKind) noexcept { return kIommuTableKindNames; }
using base::to_string;

// A guest memory table shaped like a VM's (QEMU q35, 4 GiB + a DIMM), whose maps can
// be rebuilt in any number of versions that each translate to different host
// addresses, so a reader can tell which version it translated through.
//
//  - Host memory: each region is backed by an address-space reservation (PROT_NONE,
//    MAP_NORESERVE: nothing is ever touched, translation only computes pointers) a
//    little larger than the region; version v places the region at a host shift of
//    (v % kShifts) pages inside it.
//  - Version v also sets every region's frontend address to
//    kFrontendBase + v * kFrontendStride + guest address.
//  - check(): one translation, verified against the version read from region 0's
//    frontend address: the host pointer must be the one version v gives. A map that
//    mixed two versions (a torn read) or a freed map fails the check.
//  - kIotlb: the memory table is version 0's for good; IOVA page i (kIovaBase + i
//    pages) translates to one of kCandidates guest pages chosen for it at construction,
//    and check() accepts exactly those (a freed or garbled view translates elsewhere or
//    not at all). Accesses are IOVAs, each inside one page.
//  - Publisher: what one run's writer publishes, initial() then next() per update.
//  - Thread safety: build() and the const functions may run concurrently; a Publisher
//    belongs to one thread.
class IommuTable {
 public:
  struct Layout {
    uint64_t guest_phys_addr;
    uint64_t size;
  };
  // One access of a descriptor's buffer: inside region `region`.
  struct Access {
    uint64_t guest_addr;
    uint32_t len;
    uint32_t region;
  };

  static constexpr uint64_t kPage = 4096;
  static constexpr uint64_t kShifts = 64;
  static constexpr uint64_t kFrontendBase = uint64_t{0x7f00} << 32;
  static constexpr uint64_t kFrontendStride = uint64_t{1} << 36;  // > any guest address here

  // The default: 640 KiB low RAM, RAM up to 2 GiB, 2 GiB above 4 GiB, a 512 MiB DIMM.
  static std::vector<Layout> vm_layout();

  static constexpr std::size_t kIotlbPages = 2048;
  static constexpr std::size_t kCandidates = 4;
  static constexpr uint64_t kIovaBase = uint64_t{0xfe} << 32;

  // Reserves host address space for every region. Throws std::runtime_error if mmap
  // fails, std::invalid_argument for an empty layout.
  explicit IommuTable(std::vector<Layout> layout = vm_layout(), IommuTableKind kind = IommuTableKind::kMemoryTable);
  ~IommuTable();
  IommuTable(const IommuTable&) = delete;
  IommuTable& operator=(const IommuTable&) = delete;

  // The map of version `version` (regions borrowed from the reservations).
  std::unique_ptr<virtio::GuestMemoryMap> build(uint64_t version) const;
  // A deliberately inconsistent map: region 0 (where check() reads the version) of
  // version `a`, every other region of version `b`. For testing check() itself.
  std::unique_ptr<virtio::GuestMemoryMap> build_mixed(uint64_t a, uint64_t b) const;

  // What a run's writer publishes (see the contract).
  class Publisher {
   public:
    explicit Publisher(const IommuTable& table);
    std::unique_ptr<virtio::GuestMemoryMap> initial();
    std::unique_ptr<virtio::GuestMemoryMap> next();

   private:
    const IommuTable& table_;
    uint64_t version_ = 0;
    std::unique_ptr<virtio::GuestMemoryMap> memory_;  // kIotlb: version 0's table
    vhost_user::Iotlb iotlb_;
  };
  Publisher publisher() const { return Publisher(*this); }

  // `count` accesses spread over the regions in proportion to their size, at 64-byte
  // aligned offsets, lengths 64, 256, 1514 or 4096 bytes, never crossing a region
  // (kIotlb: over the IOVA pages, never crossing a page).
  std::vector<Access> make_accesses(std::size_t count, uint64_t seed) const;

  // Translates `access` through `map` into `scratch` (cleared first) and verifies the
  // host pointer. Call it inside the read section that produced `map`.
  bool check(const virtio::GuestMemoryMap& map, const Access& access, virtio::IoVector& scratch) const {
    scratch.clear();
    if (map.translate(access.guest_addr, access.len, scratch) != virtio::TranslateStatus::kOk) return false;
    if (scratch.size() != 1 || scratch[0].len != access.len) return false;
    if (kind_ == IommuTableKind::kIotlb) return check_iova(access, scratch[0].data);
    const uint64_t version = (map.region(0).frontend_addr() - kFrontendBase) / kFrontendStride;
    const Layout& r = layout_[access.region];
    const std::byte* expected = host_base(access.region, version) + (access.guest_addr - r.guest_phys_addr);
    return scratch[0].data == expected;
  }

  const std::vector<Layout>& layout() const noexcept { return layout_; }
  IommuTableKind kind() const noexcept { return kind_; }
  // kIotlb: the guest address candidate k of IOVA page i.
  uint64_t candidate(std::size_t page, std::size_t k) const { return candidates_[page * kCandidates + k]; }

 private:
  std::byte* host_base(std::size_t region, uint64_t version) const noexcept {
    return reservations_[region] + (version % kShifts) * kPage;
  }
  std::unique_ptr<virtio::GuestMemoryMap> build_versions(uint64_t first_region_version, uint64_t version) const;
  bool check_iova(const Access& access, const std::byte* host) const noexcept;
  // The host address of guest address `gpa` in version 0, or nullptr.
  const std::byte* host_of(uint64_t gpa) const noexcept;
  void release() noexcept;  // unmaps the reservations

  std::vector<Layout> layout_;          // sorted by guest address (region 0 is the lowest)
  IommuTableKind kind_;
  std::vector<uint64_t> candidates_;    // kIotlb: kCandidates guest pages per IOVA page
  std::vector<std::byte*> reservations_;  // one per region, size + kShifts pages
};

}  // namespace uvhost::experiments
