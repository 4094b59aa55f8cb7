// Tests for the calibration: the spin arithmetic, and whole calibrations against a
// seeded random model of a machine whose truth is known (A/A: no difference; A/B:
// B does 3% more work per transaction).
#include "uvhost/bench/calibrate.h"

#include <gtest/gtest.h>

#include <array>

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "ab_test_model.h"

namespace uvhost::bench {
namespace {

TEST(Calibrate, SpinArithmetic) {
  // rr at 100 k tps: 10 us per transaction, 3% = 300 ns, over 2 frontend packets.
  EXPECT_EQ(slowdown_spin_ns(0.03, 100'000, Workload::kRr), 150u);
  // stream at 1 Mpps: 1 us per packet, 3% = 30 ns.
  EXPECT_EQ(slowdown_spin_ns(0.03, 1'000'000, Workload::kStreamTx), 30u);
  EXPECT_EQ(slowdown_spin_ns(0.03, 1'000'000, Workload::kStreamRx), 30u);
  EXPECT_EQ(slowdown_spin_ns(0.03, 0, Workload::kRr), 0u);
  EXPECT_EQ(slowdown_spin_ns(0, 1000, Workload::kRr), 0u);
}

// 100 trials: each rate's binomial sd is ~2%, so the bands are wide enough for any
// seed while still failing a broken CI (a too-narrow one says "worse" on A/A often).
TEST(Calibrate, WellBehavedMachinePasses) {
  ModelMachine machine(20261130, 0.01);
  CalibrateSpec spec;
  spec.point = Point{Workload::kRr, 64, 1};  // the model's arithmetic below is for rr
  spec.trials = 100;
  spec.runs = 10;
  std::vector<std::string> progress;
  const CalibrateResult result = run_calibrate(
      spec, [&](const Config& c, const Point& p) { return machine.run(c, p); },
      [&](const std::string& line) { progress.push_back(line); });

  // Model: 10 us per transaction; the pilot sizes the spin at 3% / 2 of it.
  ASSERT_EQ(result.pilot_throughput.size(), 3u);
  EXPECT_GE(result.spin_ns, 140u);
  EXPECT_LE(result.spin_ns, 160u);
  EXPECT_EQ(result.slowed.frontend_spin_ns, result.spin_ns);
  EXPECT_EQ(result.slowed.label, "A+3%");
  EXPECT_EQ(result.aa.size(), 100u);
  EXPECT_EQ(result.ab.size(), 100u);
  EXPECT_EQ(result.aa[0].spec.runs, 10u);
  ASSERT_EQ(result.checks.size(), 6u);
  for (const RateCheck& c : result.checks) {
    EXPECT_EQ(c.aa_noise.trials, 100u);
    EXPECT_GE(c.aa_noise.rate, 0.88) << c.metric << " " << to_string(c.method);
    EXPECT_LE(c.aa_noise.low, c.aa_noise.rate);
    EXPECT_GE(c.aa_noise.high, c.aa_noise.rate);
  }
  // thu: 1% noise per run against a 2.9% effect over 10 pairs is seen every time.
  const RateCheck* d = result.default_check();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->metric, "thu");
  EXPECT_EQ(d->method, AbMethod::kPairedT);
  EXPECT_GE(d->ab_worse.rate, 0.95);
  EXPECT_TRUE(d->ab_pass());
  // 3% more work per transaction: throughput -2.9%, within the pilot's 1% noise.
  EXPECT_NEAR(result.measured_ab_effect(), -0.03 / 1.03, 0.01);
  // Per-run noise 1%: log ratios of sd 1% * sqrt(2).
  EXPECT_NEAR(result.aa_log_ratio_sd(), 0.01 * std::sqrt(2.0), 0.003);
  // pilots + progress per run + one line per trial's comparison.
  EXPECT_EQ(progress.size(), 3u + 1u + 200u * 21u);

  std::ostringstream out;
  print_calibrate_report(result, out);
  const std::string t = out.str();
  for (const char* needle : {"A/A noise", "A/B worse", "paired-t", "welch", "normalize", "PASS",
                             "compare's default", "A/B effect measured", "run-to-run spread"}) {
    EXPECT_NE(t.find(needle), std::string::npos) << needle << "\n" << t;
  }
  const nlohmann::json j = calibrate_json(result);
  EXPECT_EQ(j["aa_trials"].size(), 100u);
  EXPECT_EQ(j["checks"].size(), 6u);
  EXPECT_EQ(j["spin_ns"], result.spin_ns);
  EXPECT_NEAR(j["aa_log_ratio_sd"].get<double>(), result.aa_log_ratio_sd(), 1e-12);
  EXPECT_GE(j["runs_needed_for_slowdown"].get<int>(), 2);
}

// A machine far noisier than the effect (20% per run vs 3%): A/B cannot see it, and
// calibration must say so (FAIL on power), while A/A still mostly says noise.
TEST(Calibrate, NoisyMachineFailsPower) {
  ModelMachine machine(5, 0.20);
  CalibrateSpec spec;
  spec.trials = 40;
  spec.runs = 4;
  const CalibrateResult result =
      run_calibrate(spec, [&](const Config& c, const Point& p) { return machine.run(c, p); });
  const RateCheck* d = result.default_check();
  ASSERT_NE(d, nullptr);
  EXPECT_LT(d->ab_worse.rate, 0.5);
  EXPECT_FALSE(d->ab_pass());
  EXPECT_GE(d->aa_noise.rate, 0.85);
  std::ostringstream out;
  print_calibrate_report(result, out);
  EXPECT_NE(out.str().find("FAIL"), std::string::npos);
}

// In slices every trial's round goes through the pair runner (A and A+spin in one
// run); the pilot runs, one side each, through the plain runner.
TEST(Calibrate, SlicesRunEveryRoundThroughThePairRunner) {
  ModelMachine machine(7, 0.01);
  CalibrateSpec spec;
  spec.point = Point{Workload::kRr, 64, 1};
  spec.trials = 3;
  spec.runs = 4;
  spec.interleave = Interleave::kSlices;
  spec.slice_seconds = 0.05;
  size_t single = 0, pairs = 0;
  const CalibrateResult result = run_calibrate(
      spec,
      [&](const Config& c, const Point& p) {
        ++single;
        return machine.run(c, p);
      },
      {},
      [&](const Config& a, const Config& b, bool, const Point& p) {
        ++pairs;
        return std::array<RunResult, 2>{machine.run(a, p), machine.run(b, p)};
      });
  EXPECT_EQ(single, 3u);                 // the pilots
  EXPECT_EQ(pairs, 3u * 2u * 4u);        // trials x (A/A + A/B) x rounds
  EXPECT_EQ(result.aa[0].spec.interleave, Interleave::kSlices);
  EXPECT_TRUE(result.aa[0].spec.live_keys.empty());
  EXPECT_EQ(result.ab[0].spec.live_keys, (std::vector<std::string>{"spin_ns"}));
  std::ostringstream out;
  print_calibrate_report(result, out);
  EXPECT_NE(out.str().find("slices"), std::string::npos) << out.str();
  EXPECT_EQ(calibrate_json(result)["interleave"], "slices");
  EXPECT_NE(out.str().find("by the 95% CI alone"), std::string::npos) << out.str();
  EXPECT_TRUE(calibrate_json(result).contains("ci_only_default_check"));
  // Slices without a pair runner is a caller's mistake.
  EXPECT_THROW(run_calibrate(spec, [&](const Config& c, const Point& p) { return machine.run(c, p); }),
               std::invalid_argument);
}

TEST(Calibrate, RejectsBadSpecsAndDeadPilots) {
  ModelMachine machine(6);
  const Runner model = [&](const Config& c, const Point& p) { return machine.run(c, p); };
  CalibrateSpec spec;
  spec.trials = 0;
  EXPECT_THROW(run_calibrate(spec, model), std::invalid_argument);
  spec.trials = 1;
  spec.runs = 1;
  EXPECT_THROW(run_calibrate(spec, model), std::invalid_argument);
  spec.runs = 2;
  spec.slowdown = 0;
  EXPECT_THROW(run_calibrate(spec, model), std::invalid_argument);
  spec.slowdown = 0.03;
  // A backend that moves nothing cannot size the spin.
  EXPECT_THROW(run_calibrate(spec, [](const Config&, const Point&) { return RunResult{}; }),
               std::runtime_error);
}

}  // namespace
}  // namespace uvhost::bench
