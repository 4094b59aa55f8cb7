// The workqueue lab on a tiny configuration: it runs, every cell is filled, the
// strategies are all measured, and the table and JSON have the expected shape.
#include "uvhost/bench/lab/workqueue_lab.h"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace uvhost::bench::lab {
namespace {

WorkqueueLabConfig tiny() {
  WorkqueueLabConfig config;
  config.threads = {1, 4};
  config.runs = 2;
  config.duration_ms = 30;
  config.rate = 2000;
  config.work_ns = 100;
  return config;
}

TEST(WorkqueueLab, PacedRunDeliversTheOfferedRate) {
  WorkqueueLabConfig config = tiny();
  config.duration_ms = 100;
  WorkqueueRunSample s = run_workqueue_once(config, 4, sync::EnqueueStrategy::kUnlockThenWake);
  EXPECT_GT(s.offered_per_s, 0.0);
  // At this rate an offer almost never finds its item still queued; the bounds
  // are loose because the test machines are shared and oversubscribed.
  EXPECT_GT(s.throughput, 0.3 * s.offered_per_s);
  EXPECT_LT(s.throughput, 1.2 * s.offered_per_s + 100.0);
  EXPECT_GT(s.parks_per_s, 0.0) << "at 2000 items/s the worker idles between items";
  EXPECT_GE(s.worker_cpu_pct, 0.0);
}

TEST(WorkqueueLab, SaturatingRunRunsItems) {
  WorkqueueLabConfig config = tiny();
  config.saturate = true;
  WorkqueueRunSample s = run_workqueue_once(config, 4, sync::EnqueueStrategy::kLockless);
  EXPECT_GT(s.throughput, 0.0);
  EXPECT_GT(s.offered_per_s, s.throughput * 0.5);
  EXPECT_GT(s.enqueue_ns, 0.0);
}

TEST(WorkqueueLab, FullExperimentFillsEveryCellAndPrints) {
  WorkqueueLabConfig config = tiny();
  int progress_lines = 0;
  WorkqueueLabResult result = run_workqueue_lab(config, [&](const std::string&) { ++progress_lines; });
  EXPECT_EQ(progress_lines, 2 * 3 * 2);
  ASSERT_EQ(result.cells.size(), 6u);
  for (const auto& cell : result.cells) {
    EXPECT_EQ(cell.samples.size(), 2u);
    EXPECT_EQ(cell.throughput.n, 2u);
  }
  ASSERT_NE(result.find(4, sync::EnqueueStrategy::kLockless), nullptr);

  std::ostringstream table;
  print_workqueue_tables(result, table);
  EXPECT_NE(table.str().find("locked_wake worker %"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("worker lockless/locked_wake"), std::string::npos) << table.str();

  nlohmann::json j = workqueue_lab_json(result);
  EXPECT_EQ(j["experiment"], "workqueue");
  EXPECT_EQ(j["config"]["mode"], "paced");
  ASSERT_EQ(j["cells"].size(), 6u);
  EXPECT_EQ(j["cells"][0]["samples"].size(), 2u);
  EXPECT_TRUE(j["cells"][0]["worker_cpu_pct"].contains("ci95_half"));
}

TEST(WorkqueueLab, RejectsUnusableConfigurations) {
  WorkqueueLabConfig config = tiny();
  config.threads.clear();
  EXPECT_THROW(validate(config), std::invalid_argument);
  config = tiny();
  config.rate = 0;
  EXPECT_THROW(validate(config), std::invalid_argument);
  config.saturate = true;
  EXPECT_NO_THROW(validate(config));
}

}  // namespace
}  // namespace uvhost::bench::lab
