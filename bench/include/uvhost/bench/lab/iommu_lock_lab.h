// iommu_lock_lab.h - a read-mostly DMA-mapping table behind a mutex, an rwsem, a
// pthread rwlock or RCU. vfio type1 converted vfio_iommu.lock from a mutex to an rwsem
// because IOVA lookups vastly outnumber map changes (24921 reads : 67 writes = 372:1
// at VM boot, none afterwards) and measured no benefit. Our equivalent table is the
// guest memory map the datapath translates every descriptor through:
// virtio::GuardedGuestMemory, replaced wholesale on SET_MEM_TABLE / an IOTLB update.
// `table`: what is translated through and replaced (experiments::IommuTableKind): the
// memory table (SET_MEM_TABLE), or the IOTLB of a device behind a virtual IOMMU - the
// path vfio's lock was on: IOVA lookups in thousands of page translations, and an
// update per IOTLB_MSG (one page remapped, the view rebuilt, as BackendDevice does).
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

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <iterator>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "uvhost/base/name_table.h"
#include "uvhost/bench/gnuplot.h"
#include "uvhost/bench/lab/lab_engine.h"
#include "uvhost/bench/lab/lab_summary.h"
#include "uvhost/bench/stats.h"
#include "uvhost/experiments/iommu_table.h"
#include "uvhost/sync/read_mostly.h"

namespace uvhost::bench::lab {

using experiments::IommuTable;
using experiments::IommuTableKind;

enum class IommuMix { kMixed, kReadOnly };
// "mix" or "read-only" (tables print the mix as "372:1").
inline constexpr auto kIommuMixNames =
    base::name_table<IommuMix>({{IommuMix::kMixed, "mix"}, {IommuMix::kReadOnly, "read-only"}});
constexpr const auto& enum_names(IommuMix) noexcept { return kIommuMixNames; }
using base::to_string;

struct IommuLockLabConfig {
  IommuTableKind table = IommuTableKind::kMemoryTable;
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

struct IommuLockLabCell : LabCell<IommuRunSample> {
  int threads = 0;
  IommuMix mix = IommuMix::kMixed;
  sync::GuardPolicy policy = sync::GuardPolicy::kMutex;
  uint64_t mismatches = 0;  // over all runs
  Summary translations_per_s, wall_ns_per_translation, cpu_ns_per_translation, p999_ns, max_ns, updates_per_s,
      translations_per_update, writer_cpu_pct;
  auto key() const noexcept { return std::tie(threads, mix, policy); }
  auto key() noexcept { return std::tie(threads, mix, policy); }
};

// Cells threads-major, then mix, then policy (config order); find(threads, mix, policy),
// total(&IommuLockLabCell::mismatches).
using IommuLockLabResult = LabResult<IommuLockLabConfig, IommuLockLabCell>;

void validate(const IommuLockLabConfig& config);  // throws std::invalid_argument
IommuRunSample run_iommu_once(const IommuLockLabConfig& config, const IommuTable& table, int threads, IommuMix mix,
                              sync::GuardPolicy policy);

IommuLockLabResult run_iommu_lock_lab(const IommuLockLabConfig& config,
                                      const std::function<void(const std::string&)>& progress = {});

// A policy against the mutex at the same (threads, mix): ns per translation (lower is
// better), translations/s and, for the mix, the writer's updates/s (higher is better).
struct IommuVsMutex {
  BaselineRatio wall_ns, cpu_ns, translations_per_s, updates_per_s;
};
IommuVsMutex iommu_vs_mutex(const IommuLockLabCell& cell, const IommuLockLabCell& mutex);

// The upstream table's shape (policy rows, a column per thread count: ns per translation
// and the ratio to the mutex), one per mix, each followed by its verdicts against the
// mutex (ns per translation and, for the mix, updates/s), then a detail table.
void print_iommu_lock_tables(const IommuLockLabResult& result, std::ostream& out);

// Per mix: wall and CPU ns per translation, a group per thread count, a bar per policy.
std::vector<BarChart> iommu_lock_charts(const IommuLockLabResult& result);

nlohmann::json iommu_lock_lab_json(const IommuLockLabResult& result);

}  // namespace uvhost::bench::lab
