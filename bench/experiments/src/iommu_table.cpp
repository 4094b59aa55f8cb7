// iommu_table.cpp - the iommu-lock lab's versioned guest memory table (see iommu_table.h).
#include "uvhost/experiments/iommu_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>

namespace uvhost::experiments {


std::vector<IommuTable::Layout> IommuTable::vm_layout() {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  // What QEMU (q35, 4 GiB of RAM, one 512 MiB DIMM) hands a vhost-user backend: RAM
  // below the VGA hole, RAM from 768 KiB to the 2 GiB PCI hole, the rest above 4 GiB,
  // and a hot-plugged DIMM after it.
  return {{0, 640 * 1024},
          {0xc0000, 2 * kGiB - 0xc0000},
          {4 * kGiB, 2 * kGiB},
          {8 * kGiB, 512 * kMiB}};
}

IommuTable::IommuTable(std::vector<Layout> layout, IommuTableKind kind) : layout_(std::move(layout)), kind_(kind) {
  if (layout_.empty()) throw std::invalid_argument("iommu table: no regions");
  std::sort(layout_.begin(), layout_.end(),
            [](const Layout& a, const Layout& b) { return a.guest_phys_addr < b.guest_phys_addr; });
  for (const Layout& r : layout_) {
    if (r.size < kPage || r.guest_phys_addr + r.size > kFrontendStride) {
      throw std::invalid_argument("iommu table: region smaller than a page or above the frontend stride");
    }
    // Address space only: PROT_NONE and MAP_NORESERVE, never touched (translation
    // computes pointers and reads no guest memory).
    void* p = ::mmap(nullptr, r.size + kShifts * kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (p == MAP_FAILED) {
      release();  // the destructor does not run for a constructor that throws
      throw std::runtime_error("iommu table: cannot reserve host address space");
    }
    reservations_.push_back(static_cast<std::byte*>(p));
  }
  if (kind_ == IommuTableKind::kIotlb) {
    // Candidate pages anywhere in guest RAM (a uniformly chosen byte picks the page).
    uint64_t total = 0;
    for (const Layout& r : layout_) total += r.size;
    std::mt19937_64 rng(0x10746b);
    std::uniform_int_distribution<uint64_t> byte_pick(0, total - 1);
    candidates_.reserve(kIotlbPages * kCandidates);
    for (std::size_t n = 0; n < kIotlbPages * kCandidates; ++n) {
      uint64_t at = byte_pick(rng);
      std::size_t region = 0;
      while (at >= layout_[region].size) at -= layout_[region++].size;
      const uint64_t offset = std::min(at & ~(kPage - 1), (layout_[region].size - kPage) & ~(kPage - 1));
      candidates_.push_back(layout_[region].guest_phys_addr + offset);
    }
  }
}

IommuTable::~IommuTable() { release(); }

void IommuTable::release() noexcept {
  for (std::size_t i = 0; i < reservations_.size(); ++i) {
    ::munmap(reservations_[i], layout_[i].size + kShifts * kPage);
  }
  reservations_.clear();
}

std::unique_ptr<virtio::GuestMemoryMap> IommuTable::build_versions(uint64_t first_region_version,
                                                                   uint64_t version) const {
  std::vector<std::unique_ptr<virtio::MemoryRegion>> regions;
  regions.reserve(layout_.size());
  for (std::size_t i = 0; i < layout_.size(); ++i) {
    const uint64_t v = i == 0 ? first_region_version : version;
    const Layout& r = layout_[i];
    regions.push_back(virtio::MemoryRegion::borrow(r.guest_phys_addr,
                                                   kFrontendBase + v * kFrontendStride + r.guest_phys_addr,
                                                   {host_base(i, v), static_cast<std::size_t>(r.size)}));
  }
  auto map = virtio::GuestMemoryMap::create(std::move(regions));
  if (!map) throw std::runtime_error("iommu table: map refused");
  return map;
}

std::unique_ptr<virtio::GuestMemoryMap> IommuTable::build(uint64_t version) const {
  return build_versions(version, version);
}

std::unique_ptr<virtio::GuestMemoryMap> IommuTable::build_mixed(uint64_t a, uint64_t b) const {
  return build_versions(a, b);
}

std::vector<IommuTable::Access> IommuTable::make_accesses(std::size_t count, uint64_t seed) const {
  // Buffer lengths of a virtio-net datapath: small packets, headers, full frames, pages.
  static constexpr uint32_t kLengths[] = {64, 256, 1514, 4096};
  static constexpr double kLengthWeights[] = {0.3, 0.2, 0.4, 0.1};
  std::mt19937_64 rng(seed);
  std::discrete_distribution<int> length_pick(std::begin(kLengthWeights), std::end(kLengthWeights));
  if (kind_ == IommuTableKind::kIotlb) {
    std::uniform_int_distribution<std::size_t> page_pick(0, kIotlbPages - 1);
    std::vector<Access> accesses;
    accesses.reserve(count);
    for (std::size_t n = 0; n < count; ++n) {
      const std::size_t page = page_pick(rng);
      const uint32_t len = kLengths[length_pick(rng)];
      const uint64_t offset = (rng() % (kPage - len + 1)) & ~uint64_t{63};
      accesses.push_back({kIovaBase + page * kPage + offset, len, static_cast<uint32_t>(page)});
    }
    return accesses;
  }
  uint64_t total = 0;
  for (const Layout& r : layout_) total += r.size;
  std::uniform_int_distribution<uint64_t> byte_pick(0, total - 1);
  std::vector<Access> accesses;
  accesses.reserve(count);
  for (std::size_t n = 0; n < count; ++n) {
    // A uniformly chosen byte of guest RAM picks the region (so in proportion to size).
    uint64_t at = byte_pick(rng);
    uint32_t region = 0;
    while (at >= layout_[region].size) at -= layout_[region++].size;
    const uint32_t len = kLengths[length_pick(rng)];
    const uint64_t size = layout_[region].size;
    uint64_t offset = at & ~uint64_t{63};
    if (offset + len > size) offset = (size - len) & ~uint64_t{63};
    accesses.push_back({layout_[region].guest_phys_addr + offset, len, region});
  }
  return accesses;
}

const std::byte* IommuTable::host_of(uint64_t gpa) const noexcept {
  for (std::size_t i = 0; i < layout_.size(); ++i) {
    const Layout& r = layout_[i];
    if (gpa >= r.guest_phys_addr && gpa - r.guest_phys_addr < r.size) return host_base(i, 0) + (gpa - r.guest_phys_addr);
  }
  return nullptr;
}

bool IommuTable::check_iova(const Access& access, const std::byte* host) const noexcept {
  const uint64_t offset = (access.guest_addr - kIovaBase) % kPage;
  for (std::size_t k = 0; k < kCandidates; ++k) {
    const std::byte* page = host_of(candidate(access.region, k));
    if (page != nullptr && host == page + offset) return true;
  }
  return false;
}

IommuTable::Publisher::Publisher(const IommuTable& table) : table_(table) {
  if (table_.kind_ == IommuTableKind::kIotlb) memory_ = table_.build(0);
}

std::unique_ptr<virtio::GuestMemoryMap> IommuTable::Publisher::initial() {
  if (table_.kind_ == IommuTableKind::kMemoryTable) return table_.build(0);
  std::string error;
  for (std::size_t page = 0; page < kIotlbPages; ++page) {
    const uint64_t gpa = table_.candidate(page, 0);
    const virtio::IovaMapping mapping{kIovaBase + page * kPage, kPage, kFrontendBase + gpa, virtio::Access::kReadWrite};
    if (!iotlb_.update(mapping, *memory_, error)) throw std::runtime_error("iommu table: " + error);
  }
  return iotlb_.view(*memory_);
}

std::unique_ptr<virtio::GuestMemoryMap> IommuTable::Publisher::next() {
  ++version_;
  if (table_.kind_ == IommuTableKind::kMemoryTable) return table_.build(version_);  // SET_MEM_TABLE
  // IOTLB_MSG: one page moves to another of its candidates; the view is rebuilt.
  const std::size_t page = version_ % kIotlbPages;
  const uint64_t gpa = table_.candidate(page, (version_ / kIotlbPages + 1) % kCandidates);
  std::string error;
  const virtio::IovaMapping mapping{kIovaBase + page * kPage, kPage, kFrontendBase + gpa, virtio::Access::kReadWrite};
  if (!iotlb_.update(mapping, *memory_, error)) throw std::runtime_error("iommu table: " + error);
  return iotlb_.view(*memory_);
}

}  // namespace uvhost::experiments
