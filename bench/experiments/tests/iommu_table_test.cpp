// The iommu-lock lab's table: its accesses stay inside their regions, each version
// translates to its own host addresses, and check() catches a torn map.
#include "uvhost/experiments/iommu_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace uvhost::experiments {
namespace {

TEST(IommuTable, AccessesStayInsideTheirRegionAndTranslatePerVersion) {
  IommuTable table;
  const auto accesses = table.make_accesses(20000, 7);
  ASSERT_EQ(accesses.size(), 20000u);
  std::vector<int> per_region(table.layout().size(), 0);
  for (const auto& a : accesses) {
    const auto& r = table.layout()[a.region];
    ASSERT_GE(a.guest_addr, r.guest_phys_addr);
    ASSERT_LE(a.guest_addr + a.len, r.guest_phys_addr + r.size);
    ++per_region[a.region];
  }
  // In proportion to size: the 2 GiB regions get most, the 640 KiB one almost none.
  EXPECT_GT(per_region[1], 5000);
  EXPECT_GT(per_region[2], 5000);
  EXPECT_GT(per_region[3], 500);

  virtio::IoVector scratch(4);
  auto v1 = table.build(1);
  auto v2 = table.build(2);
  for (std::size_t i = 0; i < 1000; ++i) {
    ASSERT_TRUE(table.check(*v1, accesses[i], scratch));
    ASSERT_TRUE(table.check(*v2, accesses[i], scratch));
  }
  // The versions really translate to different host addresses.
  virtio::IoVector a(4);
  virtio::IoVector b(4);
  ASSERT_EQ(v1->translate(accesses[0].guest_addr, accesses[0].len, a), virtio::TranslateStatus::kOk);
  ASSERT_EQ(v2->translate(accesses[0].guest_addr, accesses[0].len, b), virtio::TranslateStatus::kOk);
  EXPECT_NE(a[0].data, b[0].data);
}

TEST(IommuTable, CheckCatchesAMapThatMixesVersions) {
  IommuTable table;
  const auto accesses = table.make_accesses(1000, 11);
  virtio::IoVector scratch(4);
  auto torn = table.build_mixed(3, 4);  // region 0 says version 3, the others are version 4
  int failed = 0;
  for (const auto& access : accesses) {
    if (access.region != 0 && !table.check(*torn, access, scratch)) ++failed;
  }
  int outside_region0 = 0;
  for (const auto& access : accesses) outside_region0 += access.region != 0 ? 1 : 0;
  EXPECT_EQ(failed, outside_region0);
  EXPECT_GT(failed, 900);
  // An address in no region fails too.
  IommuTable::Access hole{0xa0000, 64, 0};  // the VGA hole
  EXPECT_FALSE(table.check(*table.build(1), hole, scratch));
}

}  // namespace
}  // namespace uvhost::experiments

namespace uvhost::experiments {
namespace {

// The IOTLB kind: accesses are IOVAs inside one page; every published view translates
// them to one of the page's candidates; an update moves exactly one page.
TEST(IommuTableIotlb, ViewsTranslateEachIovaPageToOneOfItsCandidates) {
  IommuTable table(IommuTable::vm_layout(), IommuTableKind::kIotlb);
  const auto accesses = table.make_accesses(5000, 3);
  for (const auto& a : accesses) {
    ASSERT_LT(a.region, IommuTable::kIotlbPages);
    ASSERT_EQ((a.guest_addr - IommuTable::kIovaBase) / IommuTable::kPage, a.region);
    ASSERT_LE((a.guest_addr - IommuTable::kIovaBase) % IommuTable::kPage + a.len, IommuTable::kPage);
  }
  IommuTable::Publisher publisher = table.publisher();
  auto first = publisher.initial();
  virtio::IoVector scratch(4);
  for (const auto& a : accesses) ASSERT_TRUE(table.check(*first, a, scratch));
  // Page 1 is the first to move; page 2 keeps its translation.
  const IommuTable::Access page1{IommuTable::kIovaBase + IommuTable::kPage, 64, 1};
  const IommuTable::Access page2{IommuTable::kIovaBase + 2 * IommuTable::kPage, 64, 2};
  virtio::IoVector before(4), after(4), other(4), other_after(4);
  ASSERT_EQ(first->translate(page1.guest_addr, 64, before), virtio::TranslateStatus::kOk);
  ASSERT_EQ(first->translate(page2.guest_addr, 64, other), virtio::TranslateStatus::kOk);
  auto second = publisher.next();
  ASSERT_EQ(second->translate(page1.guest_addr, 64, after), virtio::TranslateStatus::kOk);
  ASSERT_EQ(second->translate(page2.guest_addr, 64, other_after), virtio::TranslateStatus::kOk);
  EXPECT_NE(before[0].data, after[0].data);
  EXPECT_EQ(other[0].data, other_after[0].data);
  EXPECT_TRUE(table.check(*second, page1, scratch));
  for (const auto& a : accesses) ASSERT_TRUE(table.check(*second, a, scratch));
  // The memory table itself does not translate IOVAs.
  EXPECT_FALSE(table.check(*table.build(0), page1, scratch));
}

}  // namespace
}  // namespace uvhost::experiments
