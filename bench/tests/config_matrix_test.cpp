// config_matrix_test.cpp - the config-matrix engine of `uvhost lab busypoll` and
// `busyloop-intr`: interleaving order, the comparisons against the baseline, the
// tables and JSON. The rotation test runs real work (a busy loop, timed with the
// clocks the bench uses); the verdict test feeds the engine results with a known
// cost and seeded noise, so the statistics it checks do not depend on how loaded
// the machine is (the A/B statistics themselves are tested in ab_stats_test).
#include "uvhost/bench/lab/config_matrix.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <stdexcept>

#include "uvhost/bench/cpu_time.h"

namespace uvhost::bench::lab {
namespace {

Config config(std::string label, uint64_t spin_ns) {
  Config c;
  c.label = std::move(label);
  c.frontend_spin_ns = spin_ns;
  return c;
}

// 200 "transactions", each a busy-wait of the configuration's spin_ns of this
// thread's CPU time. The window is CPU time too: the test machine is shared and
// preemption would otherwise add random wall time to either side.
RunResult spin_runner(const Config& c, const Point&) {
  RunResult r;
  const int64_t cpu0 = thread_cpu_ns();
  for (int i = 0; i < 200; ++i) {
    const int64_t until = thread_cpu_ns() + static_cast<int64_t>(c.frontend_spin_ns);
    while (thread_cpu_ns() < until) {
    }
  }
  r.cpu_seconds = static_cast<double>(thread_cpu_ns() - cpu0) * 1e-9;
  r.seconds = r.cpu_seconds;
  r.transactions = r.packets = 200;
  r.bytes = 200 * 64;
  r.threads.push_back({"frontend", "frontend", r.cpu_seconds});
  return r;
}

// 200 transactions whose time is the configuration's spin_ns each, times a seeded
// noise of +-10% per run: the engine sees what a real runner on a quiet machine
// reports, without a scheduler to make one run an outlier.
auto seeded_cost_runner(uint32_t seed) {
  return [rng = std::mt19937(seed)](const Config& c, const Point&) mutable {
    std::uniform_real_distribution<double> noise(0.9, 1.1);
    RunResult r;
    r.seconds = r.cpu_seconds = 200 * static_cast<double>(c.frontend_spin_ns) * 1e-9 * noise(rng);
    r.transactions = r.packets = 200;
    r.bytes = 200 * 64;
    r.threads.push_back({"frontend", "frontend", r.cpu_seconds});
    return r;
  };
}

TEST(ConfigMatrix, RotatesWhoGoesFirstAndKeepsEveryRun) {
  const std::vector<Config> configs{config("a", 0), config("b", 0), config("c", 0)};
  const std::vector<Point> points{{Workload::kRr, 64, 1}, {Workload::kStreamTx, 64, 1}};
  std::map<std::string, int> first;
  std::string last_point_started;
  size_t finished = 0;
  int per_point = 0;
  const ConfigMatrix m = run_config_matrix(
      configs, points, 3, spin_runner, [&](const MatrixRunEvent& e) {
        if (e.result != nullptr) {
          ++finished;
          EXPECT_EQ(e.done, finished);
          EXPECT_EQ(e.total, 18u);
          return;
        }
        if (per_point++ % 3 == 0) ++first[e.config.label];
      });
  EXPECT_EQ(finished, 18u);
  // 6 (round, point) slots, 3 configurations: each went first twice.
  EXPECT_EQ(first["a"], 2);
  EXPECT_EQ(first["b"], 2);
  EXPECT_EQ(first["c"], 2);
  ASSERT_EQ(m.runs.size(), 2u);
  for (const auto& per_config : m.runs) {
    ASSERT_EQ(per_config.size(), 3u);
    for (const auto& runs : per_config) EXPECT_EQ(runs.size(), 3u);
  }
}

TEST(ConfigMatrix, RefusesWhatCannotBeCompared) {
  const std::vector<Point> points{{Workload::kRr, 64, 1}};
  EXPECT_THROW(run_config_matrix({config("a", 0)}, points, 3, spin_runner), std::invalid_argument);
  EXPECT_THROW(run_config_matrix({config("a", 0), config("b", 0)}, points, 1, spin_runner), std::invalid_argument);
  auto failing = [](const Config&, const Point&) -> RunResult { throw std::runtime_error("backend died"); };
  EXPECT_THROW(run_config_matrix({config("a", 0), config("b", 0)}, points, 2, failing), std::runtime_error);
}

TEST(ConfigMatrix, ADoubledCostIsWorseAndTheTablesAndJsonSaySo) {
  // "slow" costs twice as much per transaction: about -50% throughput, far beyond
  // +-10% noise with 6 pairs.
  const std::vector<Config> configs{config("fast", 20000), config("slow", 40000)};
  const std::vector<Point> points{{Workload::kRr, 64, 1}};
  const ConfigMatrix m = run_config_matrix(configs, points, 6, seeded_cost_runner(7));
  const auto cmp = compare_to_baseline(m, AbMethod::kPairedT);
  ASSERT_EQ(cmp.size(), 1u);
  EXPECT_EQ(cmp[0].config_index, 1u);
  EXPECT_EQ(cmp[0].thu.verdict, Verdict::kWorse) << format_relative(cmp[0].thu);
  EXPECT_LT(cmp[0].thu.relative, -0.3);
  EXPECT_GT(cmp[0].base_thu, cmp[0].thu_mean);

  const auto tables = matrix_tables(m, cmp);
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_NE(tables[0].title.find("slow"), std::string::npos);
  EXPECT_NE(tables[0].table.str().find("worse"), std::string::npos);

  const nlohmann::json j = matrix_to_json(m, cmp, AbMethod::kPairedT, RunOptions{});
  EXPECT_EQ(j["method"], "paired-t");
  ASSERT_EQ(j["points"].size(), 1u);
  EXPECT_EQ(j["points"][0]["runs"]["fast"].size(), 6u);
  EXPECT_EQ(j["points"][0]["runs"]["slow"].size(), 6u);
  EXPECT_EQ(j["points"][0]["vs_baseline"]["slow"]["thu"]["verdict"], "worse");
}

}  // namespace
}  // namespace uvhost::bench::lab
