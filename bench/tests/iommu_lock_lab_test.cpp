// The iommu-lock lab (seed 002): its table translates correctly and its check catches
// a torn map; under every guard policy, with a writer replacing the map, every
// translation returns the host address of the map version it saw; a tiny run of the
// whole experiment fills every cell and produces complete JSON.
#include "uvhost/bench/lab/iommu_lock_lab.h"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace uvhost::bench::lab {
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

IommuLockLabConfig tiny() {
  IommuLockLabConfig config;
  config.threads = {1, 3};
  config.runs = 2;
  config.duration_ms = 20;
  return config;
}

// The correctness property: with a writer replacing the map under readers' feet,
// every translation under every policy matches the version its read section saw.
TEST(IommuLockLab, NoTornReadsUnderAnyPolicyWithAWriter) {
  IommuTable table;
  IommuLockLabConfig config = tiny();
  config.duration_ms = 100;
  config.reads_per_update = 50;  // many more updates than the seed's mix: more chances to tear
  for (sync::GuardPolicy policy : sync::kAllGuardPolicies) {
    IommuRunSample s = run_iommu_once(config, table, 3, IommuMix::kMixed, policy);
    EXPECT_GT(s.translations, 1000u) << sync::to_string(policy);
    // At least one map replaced under the readers (how many depends on how the
    // shared machine schedules the writer: a lock writer can be held off for long).
    EXPECT_GE(s.updates, 1u) << sync::to_string(policy);
    EXPECT_EQ(s.mismatches, 0u) << sync::to_string(policy);
    EXPECT_GT(s.latency_samples, 10u);
    EXPECT_GT(s.cpu_ns_per_translation, 0.0);
    EXPECT_GE(s.max_ns, s.p999_ns);
  }
}

TEST(IommuLockLab, ReadOnlyRunsHaveNoWriter) {
  IommuTable table;
  IommuRunSample s = run_iommu_once(tiny(), table, 2, IommuMix::kReadOnly, sync::GuardPolicy::kRwSem);
  EXPECT_EQ(s.updates, 0u);
  EXPECT_EQ(s.updates_per_s, 0.0);
  EXPECT_GT(s.translations_per_s, 0.0);
  EXPECT_EQ(s.mismatches, 0u);
}

TEST(IommuLockLab, FullExperimentFillsEveryCellAndWritesCompleteJson) {
  IommuLockLabConfig config = tiny();
  int progress_lines = 0;
  IommuLockLabResult result = run_iommu_lock_lab(config, [&](const std::string&) { ++progress_lines; });
  const std::size_t cells = 2 * 2 * 4;  // threads x mixes x policies
  EXPECT_EQ(progress_lines, static_cast<int>(cells) * 2);
  ASSERT_EQ(result.cells.size(), cells);
  for (const auto& cell : result.cells) {
    EXPECT_EQ(cell.samples.size(), 2u);
    EXPECT_EQ(cell.translations_per_s.n, 2u);
    EXPECT_GT(cell.translations_per_s.mean, 0.0);
    EXPECT_EQ(cell.mismatches, 0u);
  }
  EXPECT_EQ(result.total_mismatches(), 0u);

  std::ostringstream table;
  print_iommu_lock_tables(result, table);
  EXPECT_NE(table.str().find("mix 372:1"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("mix read-only"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("pthread-rwlock"), std::string::npos) << table.str();

  nlohmann::json j = iommu_lock_lab_json(result);
  EXPECT_EQ(j["experiment"], "iommu-lock");
  EXPECT_EQ(j["seed"], "002");
  EXPECT_EQ(j["config"]["reads_per_update"], 372);
  ASSERT_EQ(j["cells"].size(), cells);
  for (const auto& cell : j["cells"]) {
    EXPECT_EQ(cell["samples"].size(), 2u);
    for (const char* key : {"translations_per_s", "wall_ns_per_translation", "cpu_ns_per_translation", "p999_ns",
                            "max_ns", "updates_per_s", "translations_per_update", "writer_cpu_pct"}) {
      ASSERT_TRUE(cell.contains(key)) << key;
      EXPECT_TRUE(cell[key].contains("ci95_half")) << key;
    }
    ASSERT_TRUE(cell.contains("vs_mutex"));
    EXPECT_TRUE(cell["vs_mutex"]["translations_per_s"].contains("ci95_half"));
    if (cell["policy"] == "mutex") {
      EXPECT_DOUBLE_EQ(cell["vs_mutex"]["translations_per_s"]["value"].get<double>(), 1.0);
    }
    if (cell["mix"] == "mix") {
      EXPECT_GT(cell["updates_per_s"]["mean"].get<double>(), 0.0);
    }
  }
}

TEST(IommuLockLab, RejectsUnusableConfigurations) {
  IommuLockLabConfig config = tiny();
  config.threads.clear();
  EXPECT_THROW(validate(config), std::invalid_argument);
  config = tiny();
  config.policies.clear();
  EXPECT_THROW(validate(config), std::invalid_argument);
  config = tiny();
  config.reads_per_update = 0;
  EXPECT_THROW(validate(config), std::invalid_argument);
  EXPECT_NO_THROW(validate(tiny()));
}

}  // namespace
}  // namespace uvhost::bench::lab
