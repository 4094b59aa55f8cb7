// The iommu-lock lab (vfio type1's IOVA lookups behind a mutex or an rwsem; its table
// is tested in experiments/tests/): under every guard policy, with a writer replacing
// the map, every translation returns the host address of the map version it saw; a
// tiny run of the whole experiment fills every cell and produces complete JSON.
#include "uvhost/bench/lab/iommu_lock_lab.h"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace uvhost::bench::lab {
namespace {

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

// The same on the IOTLB path: IOVA lookups through the IOTLB's view while IOTLB
// updates (one page remapped, the view rebuilt) replace it.
TEST(IommuLockLab, NoTornReadsThroughTheIotlbUnderAnyPolicy) {
  IommuTable table(IommuTable::vm_layout(), IommuTableKind::kIotlb);
  IommuLockLabConfig config = tiny();
  config.table = IommuTableKind::kIotlb;
  config.duration_ms = 100;
  config.reads_per_update = 50;
  for (sync::GuardPolicy policy : sync::kAllGuardPolicies) {
    IommuRunSample s = run_iommu_once(config, table, 3, IommuMix::kMixed, policy);
    EXPECT_GT(s.translations, 1000u) << sync::to_string(policy);
    EXPECT_GE(s.updates, 1u) << sync::to_string(policy);
    EXPECT_EQ(s.mismatches, 0u) << sync::to_string(policy);
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
  EXPECT_EQ(result.total(&IommuLockLabCell::mismatches), 0u);

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

// Made-up runs with a known answer: rwsem takes half the mutex's ns per translation
// (better) and lets the writer do half its updates (worse), rcu is the mutex again
// (noise), pthread-rwlock takes twice the ns (worse) with twice the updates (better).
IommuLockLabCell synthetic_cell(int threads, IommuMix mix, sync::GuardPolicy policy, double ns,
                                double updates) {
  IommuLockLabCell cell;
  cell.threads = threads;
  cell.mix = mix;
  cell.policy = policy;
  std::vector<double> wall, cpu, per_s, ups;
  for (double jitter : {0.99, 1.0, 1.01, 1.0}) {
    IommuRunSample s;
    s.wall_ns_per_translation = ns * jitter;
    s.cpu_ns_per_translation = ns * jitter;
    s.translations_per_s = 1e9 / (ns * jitter);
    s.updates_per_s = mix == IommuMix::kMixed ? updates * jitter : 0;
    cell.samples.push_back(s);
    wall.push_back(s.wall_ns_per_translation);
    cpu.push_back(s.cpu_ns_per_translation);
    per_s.push_back(s.translations_per_s);
    ups.push_back(s.updates_per_s);
  }
  cell.wall_ns_per_translation = summarize(wall);
  cell.cpu_ns_per_translation = summarize(cpu);
  cell.translations_per_s = summarize(per_s);
  cell.updates_per_s = summarize(ups);
  return cell;
}

IommuLockLabResult synthetic_result() {
  IommuLockLabResult result;
  result.config.threads = {4};
  result.config.mixes = {IommuMix::kMixed, IommuMix::kReadOnly};
  result.config.policies = {sync::GuardPolicy::kMutex, sync::GuardPolicy::kRwSem, sync::GuardPolicy::kRcu,
                            sync::GuardPolicy::kPthreadRwlock};
  for (IommuMix mix : result.config.mixes) {
    result.cells.push_back(synthetic_cell(4, mix, sync::GuardPolicy::kMutex, 100, 1000));
    result.cells.push_back(synthetic_cell(4, mix, sync::GuardPolicy::kRwSem, 50, 500));
    result.cells.push_back(synthetic_cell(4, mix, sync::GuardPolicy::kRcu, 100, 1000));
    result.cells.push_back(synthetic_cell(4, mix, sync::GuardPolicy::kPthreadRwlock, 200, 2000));
  }
  return result;
}

TEST(IommuLockLab, VerdictsFollowTheRatioCiAgainstTheMutex) {
  const IommuLockLabResult result = synthetic_result();
  const auto* mutex = result.find(4, IommuMix::kMixed, sync::GuardPolicy::kMutex);
  auto vs = [&](sync::GuardPolicy policy) {
    return iommu_vs_mutex(*result.find(4, IommuMix::kMixed, policy), *mutex);
  };
  EXPECT_EQ(vs(sync::GuardPolicy::kRwSem).wall_ns.verdict, Verdict::kBetter);  // fewer ns is better
  EXPECT_EQ(vs(sync::GuardPolicy::kRwSem).translations_per_s.verdict, Verdict::kBetter);
  EXPECT_EQ(vs(sync::GuardPolicy::kRwSem).updates_per_s.verdict, Verdict::kWorse);  // more updates is better
  EXPECT_EQ(vs(sync::GuardPolicy::kRcu).wall_ns.verdict, Verdict::kNoise);
  EXPECT_EQ(vs(sync::GuardPolicy::kRcu).updates_per_s.verdict, Verdict::kNoise);
  EXPECT_EQ(vs(sync::GuardPolicy::kPthreadRwlock).wall_ns.verdict, Verdict::kWorse);
  EXPECT_EQ(vs(sync::GuardPolicy::kPthreadRwlock).cpu_ns.verdict, Verdict::kWorse);
  EXPECT_EQ(vs(sync::GuardPolicy::kPthreadRwlock).updates_per_s.verdict, Verdict::kBetter);
  // Read-only: no writer, so no updates verdict.
  const auto* ro_mutex = result.find(4, IommuMix::kReadOnly, sync::GuardPolicy::kMutex);
  EXPECT_EQ(iommu_vs_mutex(*result.find(4, IommuMix::kReadOnly, sync::GuardPolicy::kRwSem), *ro_mutex)
                .updates_per_s.verdict,
            Verdict::kInvalid);

  std::ostringstream out;
  print_iommu_lock_tables(result, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("mix 372:1 vs mutex"), std::string::npos) << text;
  EXPECT_NE(text.find("lower is better"), std::string::npos) << text;
  EXPECT_NE(text.find("ns verdict"), std::string::npos) << text;
  EXPECT_NE(text.find("updates verdict"), std::string::npos) << text;
  // The mix's verdict table: rwsem better on ns, worse on updates; rcu noise on both.
  std::string section = text.substr(text.find("mix 372:1 vs mutex"));
  section = section.substr(0, section.find("\n\n"));
  auto row_of = [&](const std::string& policy) {
    std::istringstream lines(section);
    for (std::string line; std::getline(lines, line);) {
      if (line.find(" " + policy + " ") != std::string::npos) return line;
    }
    return std::string();
  };
  const std::string rwsem = row_of("rwsem");
  EXPECT_NE(rwsem.find("better"), std::string::npos) << section;
  EXPECT_NE(rwsem.find("worse"), std::string::npos) << section;
  EXPECT_NE(row_of("rcu").find("noise"), std::string::npos) << section;
  EXPECT_EQ(row_of("rcu").find("better"), std::string::npos) << section;

  const nlohmann::json j = iommu_lock_lab_json(result);
  for (const auto& cell : j["cells"]) {
    const auto& ns = cell["vs_mutex"]["wall_ns_per_translation"];
    EXPECT_EQ(ns["better"], "lower");
    const std::string policy = cell["policy"];
    const std::string expected = policy == "rwsem"            ? "better"
                                 : policy == "pthread-rwlock" ? "worse"
                                                              : "noise";
    EXPECT_EQ(ns["verdict"], expected) << policy;
    EXPECT_EQ(cell["vs_mutex"].contains("updates_per_s"), cell["mix"] == "mix");
  }

  const auto charts = iommu_lock_charts(result);
  ASSERT_EQ(charts.size(), 4u);  // wall and CPU ns, per mix
  EXPECT_EQ(charts[0].groups, std::vector<std::string>{"4 threads"});
  ASSERT_EQ(charts[0].series.size(), 4u);
  EXPECT_EQ(charts[0].series[1].name, "rwsem");
  EXPECT_NEAR(charts[0].series[1].mean[0], 50, 1e-9);
  EXPECT_GT(charts[0].series[1].half[0], 0);
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
