// The datapath half of the workqueue lab (the vhost work queue, woken outside its
// lock, on datapath::Worker): every kick written is consumed exactly once by the
// worker (no lost wake-up), under every enqueue strategy, on both kick paths, paced
// and saturating; a tiny run of the whole experiment fills every cell and produces
// complete JSON.
#include "uvhost/bench/lab/workqueue_datapath_lab.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace uvhost::bench::lab {
namespace {

WorkqueueDatapathConfig tiny() {
  WorkqueueDatapathConfig config;
  config.queues = {1, 4};
  config.runs = 2;
  config.duration_ms = 30;
  config.rate = 4000;
  config.work_ns = 100;
  return config;
}

void expect_exactly_once(const WorkqueueDatapathSample& s, const std::string& what) {
  EXPECT_GT(s.kicks_written, 0u) << what;
  EXPECT_EQ(s.lost, 0u) << what;
  EXPECT_EQ(s.kicks_consumed, s.kicks_written) << what << ": every kick consumed once, none invented";
  EXPECT_GE(s.handler_runs, 1u) << what;
  // Kicks coalesce into runs, never the other way round: a run needs a queue() that
  // found the handler not queued, and every such queue() follows a kick.
  EXPECT_LE(s.handler_runs, s.kicks_written) << what;
}

TEST(WorkqueueDatapathLab, PacedKicksAreConsumedExactlyOnceUnderEveryStrategy) {
  WorkqueueDatapathConfig config = tiny();
  config.duration_ms = 60;
  for (KickPath path : {KickPath::kEventfd, KickPath::kInject}) {
    for (sync::EnqueueStrategy strategy : sync::kAllEnqueueStrategies) {
      const std::string what = fmt::format("{} {}", to_string(path), sync::to_string(strategy));
      WorkqueueDatapathSample s = run_workqueue_datapath_once(config, path, 8, strategy);
      expect_exactly_once(s, what);
      EXPECT_GT(s.kicks_handled_per_s, 0.0) << what;
      EXPECT_GT(s.epoll_waits_per_s, 0.0) << what << ": at 4000 kicks/s the worker sleeps between kicks";
      EXPECT_GE(s.worker_cpu_pct, 0.0) << what;
    }
  }
}

// Saturating producers make kicks coalesce (many per handler run) and keep the worker
// racing between running and parking: the case where a lost wake-up would show.
TEST(WorkqueueDatapathLab, SaturatingKicksCoalesceButAreNeverLost) {
  WorkqueueDatapathConfig config = tiny();
  config.saturate = true;
  for (KickPath path : {KickPath::kEventfd, KickPath::kInject}) {
    for (sync::EnqueueStrategy strategy : sync::kAllEnqueueStrategies) {
      const std::string what = fmt::format("{} {}", to_string(path), sync::to_string(strategy));
      WorkqueueDatapathSample s = run_workqueue_datapath_once(config, path, 4, strategy);
      expect_exactly_once(s, what);
      EXPECT_LT(s.handler_runs, s.kicks_written) << what << ": saturating kicks coalesce";
    }
  }
}

TEST(WorkqueueDatapathLab, FullExperimentFillsEveryCellAndWritesCompleteJson) {
  WorkqueueDatapathConfig config = tiny();
  int progress_lines = 0;
  WorkqueueDatapathResult result = run_workqueue_datapath_lab(config, [&](const std::string&) { ++progress_lines; });
  const std::size_t cells = 2 * 2 * 3;  // paths x queue counts x strategies
  EXPECT_EQ(progress_lines, static_cast<int>(cells) * 2);
  ASSERT_EQ(result.cells.size(), cells);
  for (const auto& cell : result.cells) {
    EXPECT_EQ(cell.samples.size(), 2u);
    EXPECT_EQ(cell.worker_cpu_pct.n, 2u);
    EXPECT_EQ(cell.lost, 0u);
  }
  EXPECT_EQ(result.total_lost(), 0u);
  ASSERT_NE(result.find(KickPath::kInject, 4, sync::EnqueueStrategy::kLockless), nullptr);

  std::ostringstream table;
  print_workqueue_datapath_tables(result, table);
  EXPECT_NE(table.str().find("kick path eventfd"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("kick path inject"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("worker lockless/locked_wake"), std::string::npos) << table.str();

  nlohmann::json j = workqueue_datapath_json(result);
  EXPECT_EQ(j["config"]["mode"], "paced");
  EXPECT_EQ(j["lost"], 0u);
  ASSERT_EQ(j["cells"].size(), cells);
  for (const auto& cell : j["cells"]) {
    EXPECT_EQ(cell["samples"].size(), 2u);
    for (const char* key : {"kicks_written_per_s", "kicks_handled_per_s", "handler_runs_per_s", "worker_cpu_pct",
                            "producer_cpu_pct", "signal_ns", "wakeups_per_s", "epoll_waits_per_s"}) {
      ASSERT_TRUE(cell.contains(key)) << key;
      EXPECT_TRUE(cell[key].contains("ci95_half")) << key;
    }
    EXPECT_TRUE(cell["vs_first_strategy"]["worker_cpu_pct"].contains("ci95_half"));
  }
}

// Made-up runs with a known answer, against locked_wake on the inject path: lockless
// handles as many kicks (noise) with half the worker CPU (better), unlock_wake half
// the kicks (worse) with the same CPU (noise).
WorkqueueDatapathCell synthetic_cell(sync::EnqueueStrategy strategy, double handled, double cpu) {
  WorkqueueDatapathCell cell;
  cell.path = KickPath::kInject;
  cell.queues = 4;
  cell.strategy = strategy;
  std::vector<double> kicks, worker;
  for (double jitter : {0.98, 1.0, 1.02, 1.0}) {
    WorkqueueDatapathSample s;
    s.kicks_handled_per_s = handled * jitter;
    s.worker_cpu_pct = cpu * jitter;
    cell.samples.push_back(s);
    kicks.push_back(s.kicks_handled_per_s);
    worker.push_back(s.worker_cpu_pct);
  }
  cell.kicks_handled_per_s = summarize(kicks);
  cell.worker_cpu_pct = summarize(worker);
  return cell;
}

TEST(WorkqueueDatapathLab, VerdictsFollowTheRatioCiAgainstTheFirstStrategy) {
  WorkqueueDatapathResult result;
  result.config.queues = {4};
  result.config.paths = {KickPath::kInject};
  result.cells = {synthetic_cell(sync::EnqueueStrategy::kLockedWake, 4000, 30),
                  synthetic_cell(sync::EnqueueStrategy::kUnlockThenWake, 2000, 30),
                  synthetic_cell(sync::EnqueueStrategy::kLockless, 4000, 15)};
  const auto* base = result.find(KickPath::kInject, 4, sync::EnqueueStrategy::kLockedWake);
  // Kicks handled/s (higher is better) and worker CPU (lower is better) against the first strategy.
  const auto datapath_strategy_verdicts = [](const WorkqueueDatapathCell& c, const WorkqueueDatapathCell& b) {
    return variant_verdicts(c.kicks_handled_per_s, b.kicks_handled_per_s, c.worker_cpu_pct, b.worker_cpu_pct);
  };
  const auto lockless =
      datapath_strategy_verdicts(*result.find(KickPath::kInject, 4, sync::EnqueueStrategy::kLockless), *base);
  EXPECT_EQ(lockless.throughput.verdict, Verdict::kNoise);
  EXPECT_EQ(lockless.worker_cpu.verdict, Verdict::kBetter);
  const auto unlock = datapath_strategy_verdicts(
      *result.find(KickPath::kInject, 4, sync::EnqueueStrategy::kUnlockThenWake), *base);
  EXPECT_EQ(unlock.throughput.verdict, Verdict::kWorse);
  EXPECT_EQ(unlock.worker_cpu.verdict, Verdict::kNoise);

  std::ostringstream out;
  print_workqueue_datapath_tables(result, out);
  EXPECT_NE(out.str().find("kicks handled/s ×locked_wake"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("worse"), std::string::npos) << out.str();

  const nlohmann::json j = workqueue_datapath_json(result);
  ASSERT_EQ(j["cells"].size(), 3u);
  EXPECT_EQ(j["cells"][1]["vs_first_strategy"]["kicks_handled_per_s"]["verdict"], "worse");
  EXPECT_EQ(j["cells"][1]["vs_first_strategy"]["kicks_handled_per_s"]["better"], "higher");
  EXPECT_EQ(j["cells"][2]["vs_first_strategy"]["worker_cpu_pct"]["verdict"], "better");
  EXPECT_EQ(j["cells"][2]["vs_first_strategy"]["kicks_handled_per_s"]["verdict"], "noise");

  const auto charts = workqueue_datapath_charts(result);
  ASSERT_EQ(charts.size(), 2u);  // kicks handled and worker CPU, one path
  EXPECT_EQ(charts[0].groups, std::vector<std::string>{"4 queues"});
  EXPECT_EQ(charts[0].series.size(), 3u);
  EXPECT_NE(charts[0].title.find("inject"), std::string::npos);
}

TEST(WorkqueueDatapathLab, RejectsUnusableConfigurations) {
  WorkqueueDatapathConfig config = tiny();
  config.queues.clear();
  EXPECT_THROW(validate(config), std::invalid_argument);
  config = tiny();
  config.paths.clear();
  EXPECT_THROW(validate(config), std::invalid_argument);
  config = tiny();
  config.rate = 0;
  EXPECT_THROW(validate(config), std::invalid_argument);
  config.saturate = true;
  EXPECT_NO_THROW(validate(config));
}

}  // namespace
}  // namespace uvhost::bench::lab
