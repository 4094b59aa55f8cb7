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

// Made-up runs with a known answer, against locked_wake: unlock_wake has the same
// throughput (noise) with half the worker CPU (better), lockless a third more
// throughput (better) with twice the worker CPU (worse).
WorkqueueLabCell synthetic_cell(int threads, sync::EnqueueStrategy strategy, double throughput, double cpu) {
  WorkqueueLabCell cell;
  cell.threads = threads;
  cell.strategy = strategy;
  std::vector<double> tp, worker;
  for (double jitter : {0.99, 1.0, 1.01}) {
    WorkqueueRunSample s;
    s.throughput = throughput * jitter;
    s.worker_cpu_pct = cpu * jitter;
    cell.samples.push_back(s);
    tp.push_back(s.throughput);
    worker.push_back(s.worker_cpu_pct);
  }
  cell.throughput = summarize(tp);
  cell.worker_cpu_pct = summarize(worker);
  return cell;
}

TEST(WorkqueueLab, VerdictsFollowTheRatioCiAgainstTheFirstStrategy) {
  WorkqueueLabResult result;
  result.config.threads = {8};
  result.cells = {synthetic_cell(8, sync::EnqueueStrategy::kLockedWake, 20000, 40),
                  synthetic_cell(8, sync::EnqueueStrategy::kUnlockThenWake, 20000, 20),
                  synthetic_cell(8, sync::EnqueueStrategy::kLockless, 30000, 80)};
  const auto* base = result.find(8, sync::EnqueueStrategy::kLockedWake);
  const auto* unlock = result.find(8, sync::EnqueueStrategy::kUnlockThenWake);
  const auto* lockless = result.find(8, sync::EnqueueStrategy::kLockless);
  auto verdicts = [&](const WorkqueueLabCell* c) {
    return variant_verdicts(c->throughput, base->throughput, c->worker_cpu_pct, base->worker_cpu_pct);
  };
  EXPECT_EQ(verdicts(unlock).throughput.verdict, Verdict::kNoise);
  EXPECT_EQ(verdicts(unlock).worker_cpu.verdict, Verdict::kBetter);  // less CPU is better
  EXPECT_EQ(verdicts(lockless).throughput.verdict, Verdict::kBetter);
  EXPECT_EQ(verdicts(lockless).worker_cpu.verdict, Verdict::kWorse);

  std::ostringstream out;
  print_workqueue_tables(result, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("vs locked_wake"), std::string::npos) << text;
  EXPECT_NE(text.find("worker CPU: lower is better"), std::string::npos) << text;
  EXPECT_NE(text.find("worker CPU ×locked_wake"), std::string::npos) << text;

  const nlohmann::json j = workqueue_lab_json(result);
  ASSERT_EQ(j["cells"].size(), 3u);
  EXPECT_EQ(j["cells"][0]["vs_first_strategy"]["worker_cpu_pct"]["verdict"], "noise");  // itself
  EXPECT_EQ(j["cells"][1]["vs_first_strategy"]["worker_cpu_pct"]["verdict"], "better");
  EXPECT_EQ(j["cells"][1]["vs_first_strategy"]["throughput"]["verdict"], "noise");
  EXPECT_EQ(j["cells"][2]["vs_first_strategy"]["throughput"]["verdict"], "better");
  EXPECT_EQ(j["cells"][2]["vs_first_strategy"]["worker_cpu_pct"]["verdict"], "worse");
  EXPECT_EQ(j["cells"][2]["vs_first_strategy"]["worker_cpu_pct"]["better"], "lower");

  const auto charts = workqueue_charts(result);
  ASSERT_EQ(charts.size(), 2u);  // throughput, worker CPU
  EXPECT_EQ(charts[1].groups, std::vector<std::string>{"8 producers"});
  ASSERT_EQ(charts[1].series.size(), 3u);
  EXPECT_EQ(charts[1].series[2].name, "lockless");
  EXPECT_NEAR(charts[1].series[2].mean[0], 80, 1e-9);
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
