// iommu_lock_lab.h - a read-mostly DMA-mapping table behind a mutex, an rwsem, a
// pthread rwlock or RCU. vfio type1 converted vfio_iommu.lock from a mutex to an rwsem
// because IOVA lookups vastly outnumber map changes (24921 reads : 67 writes = 372:1
// at VM boot, none afterwards) and measured no benefit. Our equivalent table is the
// guest memory map the datapath translates every descriptor through:
// virtio::GuardedGuestMemory, replaced wholesale on SET_MEM_TABLE / an IOTLB update.
//
//  - `threads` readers (1, 2, 4, 8, 16: more than the cores on purpose - the argument
//    is about a preempted lock holder) translate guest addresses the datapath's way:
//    one read() section, translate() into a reused IoVector, use the result; addresses
//    spread over a VM-like table (IommuTable), lengths 64 B to 4 KiB.
//  - Every translation is checked inside its read section against the map version it
//    saw, so a torn or freed map is counted (`mismatches`, which must be 0).
//  - mix "372:1": one writer publishes a new map each time the readers together have
//    done another `reads_per_update` translations; "read-only": no writer.
//  - Per run: translations/s; ns per translation by wall time (readers x window /
//    translations) and by CPU; stalls: single read() sections timed every
//    `sample_every`-th translation into a LatencyHistogram (p99.9, max); updates/s
//    achieved and the writer's CPU.
// Method: lab_engine.h, policies rotated each run; ratios against the mutex with a
// verdict each (fewer ns, more updates/s is better). Each run uses a fresh
// GuardedGuestMemory and threads; each reader does one untimed read() first (RCU
// registration).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "uvhost/bench/gnuplot.h"
#include "uvhost/bench/lab/lab_summary.h"
#include "uvhost/bench/stats.h"
#include "uvhost/sync/read_mostly.h"
#include "uvhost/virtio/guest_memory.h"

namespace uvhost::bench::lab {

// ---- The table ---------------------------------------------------------------------

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
//  - Thread safety: build() and the const functions may run concurrently.
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

  // Reserves host address space for every region. Throws std::runtime_error if mmap
  // fails, std::invalid_argument for an empty layout.
  explicit IommuTable(std::vector<Layout> layout = vm_layout());
  ~IommuTable();
  IommuTable(const IommuTable&) = delete;
  IommuTable& operator=(const IommuTable&) = delete;

  // The map of version `version` (regions borrowed from the reservations).
  std::unique_ptr<virtio::GuestMemoryMap> build(uint64_t version) const;
  // A deliberately inconsistent map: region 0 (where check() reads the version) of
  // version `a`, every other region of version `b`. For testing check() itself.
  std::unique_ptr<virtio::GuestMemoryMap> build_mixed(uint64_t a, uint64_t b) const;

  // `count` accesses spread over the regions in proportion to their size, at 64-byte
  // aligned offsets, lengths 64, 256, 1514 or 4096 bytes, never crossing a region.
  std::vector<Access> make_accesses(std::size_t count, uint64_t seed) const;

  // Translates `access` through `map` into `scratch` (cleared first) and verifies the
  // host pointer. Call it inside the read section that produced `map`.
  bool check(const virtio::GuestMemoryMap& map, const Access& access, virtio::IoVector& scratch) const {
    scratch.clear();
    if (map.translate(access.guest_addr, access.len, scratch) != virtio::TranslateStatus::kOk) return false;
    if (scratch.size() != 1 || scratch[0].len != access.len) return false;
    const uint64_t version = (map.region(0).frontend_addr() - kFrontendBase) / kFrontendStride;
    const Layout& r = layout_[access.region];
    const std::byte* expected = host_base(access.region, version) + (access.guest_addr - r.guest_phys_addr);
    return scratch[0].data == expected;
  }

  const std::vector<Layout>& layout() const noexcept { return layout_; }

 private:
  std::byte* host_base(std::size_t region, uint64_t version) const noexcept {
    return reservations_[region] + (version % kShifts) * kPage;
  }
  std::unique_ptr<virtio::GuestMemoryMap> build_versions(uint64_t first_region_version, uint64_t version) const;
  void release() noexcept;  // unmaps the reservations

  std::vector<Layout> layout_;          // sorted by guest address (region 0 is the lowest)
  std::vector<std::byte*> reservations_;  // one per region, size + kShifts pages
};

// ---- The experiment ----------------------------------------------------------------

enum class IommuMix { kMixed, kReadOnly };
// "mix" or "read-only" (tables print the mix as "372:1").
std::string_view to_string(IommuMix mix) noexcept;

struct IommuLockLabConfig {
  std::vector<int> threads{1, 2, 4, 8, 16};
  std::vector<sync::GuardPolicy> policies{std::begin(sync::kAllGuardPolicies), std::end(sync::kAllGuardPolicies)};
  std::vector<IommuMix> mixes{IommuMix::kMixed, IommuMix::kReadOnly};
  int runs = 5;
  int duration_ms = 200;
  int reads_per_update = 372;  // vfio's boot-time ratio (24921 : 67)
  int sample_every = 64;       // one timed translation in this many
};

// One run of one (threads, mix, policy) cell.
struct IommuRunSample {
  double translations_per_s = 0;
  double wall_ns_per_translation = 0;  // readers x window / translations
  double cpu_ns_per_translation = 0;   // readers' CPU / translations
  double p999_ns = 0;                  // sampled single-translation latency
  double max_ns = 0;
  double updates_per_s = 0;
  double translations_per_update = 0;  // 0 when no update happened
  double writer_cpu_pct = 0;           // % of one core
  uint64_t translations = 0;
  uint64_t updates = 0;
  uint64_t mismatches = 0;             // failed checks: must be 0
  uint64_t latency_samples = 0;
};

struct IommuLockLabCell {
  int threads = 0;
  IommuMix mix = IommuMix::kMixed;
  sync::GuardPolicy policy = sync::GuardPolicy::kMutex;
  std::vector<IommuRunSample> samples;
  Summary translations_per_s, wall_ns_per_translation, cpu_ns_per_translation, p999_ns, max_ns, updates_per_s,
      translations_per_update, writer_cpu_pct;
  uint64_t mismatches = 0;  // over all runs
};

struct IommuLockLabResult {
  IommuLockLabConfig config;
  std::vector<IommuLockLabCell> cells;  // threads-major, then mix, then policy (config order)
  const IommuLockLabCell* find(int threads, IommuMix mix, sync::GuardPolicy policy) const noexcept;
  uint64_t total_mismatches() const noexcept;
};

// Throws std::invalid_argument for an unusable configuration.
void validate(const IommuLockLabConfig& config);

IommuRunSample run_iommu_once(const IommuLockLabConfig& config, const IommuTable& table, int threads, IommuMix mix,
                              sync::GuardPolicy policy);

IommuLockLabResult run_iommu_lock_lab(const IommuLockLabConfig& config,
                                      const std::function<void(const std::string&)>& progress = {});

// A policy against the mutex at the same (threads, mix) (lab_summary.h
// ratio_vs_baseline: the ratio_of_means CI and its verdict): wall and CPU ns per
// translation (lower is better), translations/s (higher is better) and, for the mix,
// the writer's achieved updates/s (higher is better: the writer kept up).
struct IommuVsMutex {
  BaselineRatio wall_ns, cpu_ns, translations_per_s, updates_per_s;
};
IommuVsMutex iommu_vs_mutex(const IommuLockLabCell& cell, const IommuLockLabCell& mutex);

// The upstream table's shape (policy rows, a column per thread count: ns per translation
// and the ratio to the mutex), one per mix, each followed by its verdicts against the
// mutex (ns per translation and, for the mix, updates/s), then a detail table.
void print_iommu_lock_tables(const IommuLockLabResult& result, std::ostream& out);

// Per mix: wall and CPU ns per translation, a group per thread count, a bar per policy
// with its 95% CI (for write_bar_charts, two columns).
std::vector<BarChart> iommu_lock_charts(const IommuLockLabResult& result);

nlohmann::json iommu_lock_lab_json(const IommuLockLabResult& result);

}  // namespace uvhost::bench::lab
