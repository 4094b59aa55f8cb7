// iommu_load: readers translating under each guard policy while a writer replaces the
// map never see a torn or freed map, every sampled translation is recorded, and a
// read-only load has no writer.
#include "uvhost/experiments/iommu_load.h"

#include <gtest/gtest.h>

namespace uvhost::experiments {
namespace {

// The histogram interface the load needs: record(ns) and merge().
struct CountingHistogram {
  uint64_t samples = 0;
  void record(uint64_t) noexcept { ++samples; }
  void merge(const CountingHistogram& other) noexcept { samples += other.samples; }
};

TEST(IommuLoad, WriterReplacesTheMapWithoutTornReads) {
  IommuTable table;
  for (sync::GuardPolicy policy : sync::kAllGuardPolicies) {
    const auto c = run_iommu_load<CountingHistogram>(table, policy, {2, true, 100, 50, 16});
    EXPECT_GT(c.translations, 100u);
    EXPECT_EQ(c.translations % 16, 0u);
    EXPECT_EQ(c.histogram.samples, c.translations / 16);
    EXPECT_EQ(c.mismatches, 0u);
    EXPECT_GE(c.updates, 1u);
    EXPECT_GT(c.reader_cpu_ns, 0);
    EXPECT_GE(c.wall_ns, 100'000'000);
  }
}

TEST(IommuLoad, ReadOnlyHasNoWriter) {
  IommuTable table;
  const auto c = run_iommu_load<CountingHistogram>(table, sync::GuardPolicy::kRcu, {3, false, 10, 1, 64});
  EXPECT_EQ(c.updates, 0u);
  EXPECT_EQ(c.writer_cpu_ns, 0);
  EXPECT_GT(c.translations, 0u);
  EXPECT_EQ(c.mismatches, 0u);
}

}  // namespace
}  // namespace uvhost::experiments
