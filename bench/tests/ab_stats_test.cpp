// Tests for the A/B statistics: hand-computed values, the guards, and simulated
// comparisons from a seeded RNG (false-alarm rate near 5%, a real shift detected,
// drift cancelled by pairing).
#include "uvhost/bench/ab_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "uvhost/bench/stats.h"

namespace uvhost::bench {
namespace {

// Log ratios {0.1, 0, 0.2}: mean 0.1, sd 0.1, se 0.1/sqrt(3), t = sqrt(3) with 2 dof.
// q(0.975, 2) = 4.302653; p = 1 - t/sqrt(2 + t^2) = 1 - sqrt(3/5) (closed form for 2 dof).
TEST(AbStats, PairedTKnownValues) {
  const std::vector<double> a{100, 200, 50};
  const std::vector<double> b{100 * std::exp(0.1), 200, 50 * std::exp(0.2)};
  const AbComparison c = compare_ab(a, b, AbMethod::kPairedT);
  ASSERT_TRUE(c.valid()) << c.reason;
  EXPECT_EQ(c.n, 3u);
  EXPECT_NEAR(c.relative, 0.1051709, 1e-6);  // exp(0.1) - 1
  EXPECT_NEAR(c.ci_low, -0.1379257, 1e-6);   // exp(0.1 - 4.302653 * 0.0577350) - 1
  EXPECT_NEAR(c.ci_high, 0.4168184, 1e-6);   // exp(0.1 + 4.302653 * 0.0577350) - 1
  EXPECT_NEAR(c.t, std::sqrt(3.0), 1e-9);
  EXPECT_DOUBLE_EQ(c.dof, 2);
  EXPECT_NEAR(c.p_value, 1 - std::sqrt(0.6), 1e-9);
  EXPECT_EQ(c.verdict, Verdict::kNoise);
  EXPECT_EQ(format_relative(c), "+10.5% [-13.8, +41.7]");
}

// Log ratios {0.1, 0.11, 0.09, 0.1, 0.1}: mean 0.1, sd sqrt(0.0002/4), se 0.0031623,
// q(0.975, 4) = 2.776445: CI of the log ratio [0.091220, 0.108780].
TEST(AbStats, PairedTDetectsConsistentGain) {
  const std::vector<double> a{10, 20, 30, 40, 50};
  const std::vector<double> logs{0.1, 0.11, 0.09, 0.1, 0.1};
  std::vector<double> b;
  for (std::size_t i = 0; i < a.size(); ++i) b.push_back(a[i] * std::exp(logs[i]));
  const AbComparison better = compare_ab(a, b, AbMethod::kPairedT);
  EXPECT_EQ(better.verdict, Verdict::kBetter);
  EXPECT_NEAR(better.ci_low, std::expm1(0.1 - 2.776445 * std::sqrt(0.00005) / std::sqrt(5.0)), 1e-6);
  EXPECT_NEAR(better.ci_high, std::expm1(0.1 + 2.776445 * std::sqrt(0.00005) / std::sqrt(5.0)), 1e-6);
  EXPECT_LT(better.p_value, 1e-4);

  // The same numbers for a lower-is-better metric (latency) are a regression; swapped
  // they are a gain of the mirrored size.
  EXPECT_EQ(compare_ab(a, b, AbMethod::kPairedT, Direction::kLowerIsBetter).verdict, Verdict::kWorse);
  const AbComparison swapped = compare_ab(b, a, AbMethod::kPairedT);
  EXPECT_EQ(swapped.verdict, Verdict::kWorse);
  EXPECT_NEAR(swapped.relative, std::expm1(-0.1), 1e-9);
}

// a = {10, 12, 14}, b = {20, 22, 24}: Welch t = 10 / sqrt(4/3 + 4/3) = 6.123724 with
// exactly 4 dof; for 4 dof p = 1 - 1.5x + 0.5x^3 with x = t / sqrt(4 + t^2) = 0.0036022.
TEST(AbStats, WelchKnownValues) {
  const std::vector<double> a{10, 12, 14};
  const std::vector<double> b{20, 22, 24};
  const AbComparison c = compare_ab(a, b, AbMethod::kWelch);
  ASSERT_TRUE(c.valid()) << c.reason;
  EXPECT_NEAR(c.relative, 22.0 / 12.0 - 1, 1e-12);
  EXPECT_NEAR(c.t, 6.1237244, 1e-6);
  EXPECT_NEAR(c.dof, 4, 1e-12);
  EXPECT_NEAR(c.p_value, 0.0036022, 1e-6);
  // The CI is the delta-method interval of the ratio of means, shifted by -1.
  const Ratio r = ratio_of_means(summarize(b), summarize(a));
  EXPECT_NEAR(c.ci_low, r.value - r.ci95_half - 1, 1e-12);
  EXPECT_NEAR(c.ci_high, r.value + r.ci95_half - 1, 1e-12);
  EXPECT_EQ(c.verdict, Verdict::kBetter);
}

TEST(AbStats, GuardsRejectWhatCannotBeCompared) {
  const std::vector<double> one{1};
  const std::vector<double> two{1, 2};
  const std::vector<double> three{1, 2, 3};
  const std::vector<double> with_zero{1, 0};
  const std::vector<double> with_nan{1, std::numeric_limits<double>::quiet_NaN()};
  const std::vector<double> with_inf{std::numeric_limits<double>::infinity(), 1};
  const std::vector<double> negative{-1, 1};
  for (AbMethod m : {AbMethod::kPairedT, AbMethod::kWelch}) {
    EXPECT_EQ(compare_ab(one, one, m).verdict, Verdict::kInvalid);
    EXPECT_EQ(compare_ab(two, with_zero, m).verdict, Verdict::kInvalid);
    EXPECT_EQ(compare_ab(with_nan, two, m).verdict, Verdict::kInvalid);
    EXPECT_EQ(compare_ab(two, with_inf, m).verdict, Verdict::kInvalid);
    EXPECT_EQ(compare_ab(negative, two, m).verdict, Verdict::kInvalid);
    EXPECT_FALSE(compare_ab(two, with_zero, m).reason.empty());
    EXPECT_EQ(format_relative(compare_ab(one, one, m)), "n/a");
  }
  // Pairing needs equal lengths; Welch does not.
  EXPECT_EQ(compare_ab(two, three, AbMethod::kPairedT).verdict, Verdict::kInvalid);
  EXPECT_TRUE(compare_ab(two, three, AbMethod::kWelch).valid());
}

TEST(AbStats, ConstantSamplesGiveAPointInterval) {
  const std::vector<double> a{100, 100, 100};
  const std::vector<double> same{100, 100, 100};
  const std::vector<double> up{110, 110, 110};
  for (AbMethod m : {AbMethod::kPairedT, AbMethod::kWelch}) {
    const AbComparison eq = compare_ab(a, same, m);
    EXPECT_EQ(eq.verdict, Verdict::kNoise);
    EXPECT_DOUBLE_EQ(eq.p_value, 1);
    const AbComparison gain = compare_ab(a, up, m);
    EXPECT_EQ(gain.verdict, Verdict::kBetter);
    EXPECT_NEAR(gain.relative, 0.1, 1e-12);
    EXPECT_NEAR(gain.ci_low, 0.1, 1e-12);
    EXPECT_DOUBLE_EQ(gain.p_value, 0);
    EXPECT_TRUE(std::isinf(gain.t));
  }
}

TEST(AbStats, MinimumEffectTurnsASmallSignificantChangeIntoNoise) {
  AbComparison c;
  c.verdict = Verdict::kWorse;
  c.relative = -0.006;
  c.ci_low = -0.009;
  c.ci_high = -0.002;
  AbComparison kept = c;
  apply_min_effect(c, 0.01);
  EXPECT_EQ(c.verdict, Verdict::kNoise);
  EXPECT_TRUE(c.below_min_effect);
  EXPECT_EQ(c.ci_low, -0.009);  // the interval is reported as measured
  apply_min_effect(kept, 0.005);  // 0.6% >= 0.5%: stays
  EXPECT_EQ(kept.verdict, Verdict::kWorse);
  EXPECT_FALSE(kept.below_min_effect);
  apply_min_effect(kept, 0);
  EXPECT_EQ(kept.verdict, Verdict::kWorse);

  AbComparison better;
  better.verdict = Verdict::kBetter;
  better.relative = 0.03;
  apply_min_effect(better, 0.01);
  EXPECT_EQ(better.verdict, Verdict::kBetter);

  AbComparison noise;
  noise.verdict = Verdict::kNoise;
  noise.relative = 0.001;
  apply_min_effect(noise, 0.01);
  EXPECT_FALSE(noise.below_min_effect);  // only a CI verdict is ever demoted
  AbComparison invalid;
  apply_min_effect(invalid, 0.01);
  EXPECT_EQ(invalid.verdict, Verdict::kInvalid);
}

TEST(AbStats, MethodNamesRoundTrip) {
  for (AbMethod m : {AbMethod::kPairedT, AbMethod::kWelch}) {
    EXPECT_EQ(base::parse_enum<AbMethod>(to_string(m)), m);
    EXPECT_NE(method_assumption(m).find("assume"), std::string_view::npos);
  }
  EXPECT_FALSE(base::parse_enum<AbMethod>("t-test").has_value());
}

// Wilson 95% for 19/20: center (0.95 + z^2/40) / (1 + z^2/20) = 0.877504, half 0.113632.
TEST(AbStats, WilsonIntervalKnownValues) {
  const Proportion p = wilson_interval(19, 20);
  EXPECT_DOUBLE_EQ(p.rate, 0.95);
  EXPECT_NEAR(p.low, 0.7638688, 1e-6);
  EXPECT_NEAR(p.high, 0.9911186, 1e-6);
  const Proportion none = wilson_interval(0, 10);
  EXPECT_DOUBLE_EQ(none.low, 0);
  EXPECT_NEAR(none.high, 0.2775328, 1e-6);  // (z^2/10) / (1 + z^2/10)
  const Proportion all = wilson_interval(10, 10);
  EXPECT_DOUBLE_EQ(all.high, 1);
  EXPECT_NEAR(all.low, 1 - 0.2775328, 1e-6);
  EXPECT_EQ(wilson_interval(0, 0).trials, 0u);
}

// Simulated runs: each round's machine speed drifts (a factor shared by A and B of the
// round), and each run has its own log-normal noise.
struct Simulation {
  std::mt19937_64 rng;
  double noise;  // relative sd of one run
  double drift;  // relative sd of the round's shared speed factor
  void draw(std::size_t runs, double b_factor, std::vector<double>& a, std::vector<double>& b) {
    std::normal_distribution<double> run_noise(0, noise);
    std::normal_distribution<double> round_drift(0, drift);
    a.clear();
    b.clear();
    for (std::size_t i = 0; i < runs; ++i) {
      const double speed = 1e6 * std::exp(round_drift(rng));
      a.push_back(speed * std::exp(run_noise(rng)));
      b.push_back(speed * b_factor * std::exp(run_noise(rng)));
    }
  }
};

double verdict_rate(Simulation& sim, std::size_t comparisons, std::size_t runs, double b_factor,
                    AbMethod method, Verdict wanted) {
  std::vector<double> a, b;
  std::size_t hits = 0;
  for (std::size_t i = 0; i < comparisons; ++i) {
    sim.draw(runs, b_factor, a, b);
    if (compare_ab(a, b, method).verdict == wanted) ++hits;
  }
  return static_cast<double>(hits) / static_cast<double>(comparisons);
}

// Equal distributions: a 95% CI contains the truth 95% of the time, so ~95% of the
// comparisons say noise. 2000 comparisons: the binomial sd is 0.5%, the band +-4 sd.
TEST(AbStats, EqualDistributionsSayNoiseAbout95Percent) {
  for (AbMethod m : {AbMethod::kPairedT, AbMethod::kWelch}) {
    Simulation sim{std::mt19937_64(20261130), 0.02, 0.0};
    const double rate = verdict_rate(sim, 2000, 10, 1.0, m, Verdict::kNoise);
    EXPECT_GE(rate, 0.93) << to_string(m);
    EXPECT_LE(rate, 0.97) << to_string(m);
  }
}

TEST(AbStats, FivePercentShiftWithTwoPercentNoiseIsDetected) {
  for (AbMethod m : {AbMethod::kPairedT, AbMethod::kWelch}) {
    Simulation sim{std::mt19937_64(7), 0.02, 0.0};
    EXPECT_GE(verdict_rate(sim, 500, 10, 1.05, m, Verdict::kBetter), 0.99) << to_string(m);
    EXPECT_GE(verdict_rate(sim, 500, 10, 0.95, m, Verdict::kWorse), 0.99) << to_string(m);
  }
}

// Why paired-t is the default: with 10% round-to-round drift and 1% run noise, a 3%
// slowdown is hidden from Welch (drift inflates both samples' variance) but not from
// the paired log ratios, where each round's drift cancels.
TEST(AbStats, PairingCancelsDrift) {
  Simulation paired{std::mt19937_64(11), 0.01, 0.10};
  Simulation unpaired{std::mt19937_64(11), 0.01, 0.10};
  const double paired_rate = verdict_rate(paired, 500, 10, 0.97, AbMethod::kPairedT, Verdict::kWorse);
  const double welch_rate = verdict_rate(unpaired, 500, 10, 0.97, AbMethod::kWelch, Verdict::kWorse);
  EXPECT_GE(paired_rate, 0.95);
  EXPECT_LE(welch_rate, 0.30);
  // And with drift but no difference, paired-t still keeps its 5% false-alarm rate.
  Simulation equal{std::mt19937_64(12), 0.01, 0.10};
  const double noise_rate = verdict_rate(equal, 2000, 10, 1.0, AbMethod::kPairedT, Verdict::kNoise);
  EXPECT_GE(noise_rate, 0.93);
  EXPECT_LE(noise_rate, 0.97);
}

}  // namespace
}  // namespace uvhost::bench

namespace uvhost::bench {
namespace {

// The power formula against the simulation: per-run noise 2% gives log ratios of sd
// 2% * sqrt(2); an effect of exactly the predicted detectable size, simulated, is found
// about 80% of the time (1000 comparisons: binomial sd ~1.3%, band +-6 sd, which also
// covers the normal approximation in the formula).
TEST(AbStats, DetectableEffectIsFoundAboutEightyPercent) {
  const double sd = 0.02 * std::sqrt(2.0);
  const double effect = paired_t_detectable_effect(sd, 10);
  EXPECT_GT(effect, 0.02);
  EXPECT_LT(effect, 0.04);
  Simulation sim{std::mt19937_64(99), 0.02, 0.0};
  const double rate = verdict_rate(sim, 1000, 10, std::exp(-std::log1p(effect)), AbMethod::kPairedT, Verdict::kWorse);
  EXPECT_GE(rate, 0.72);
  EXPECT_LE(rate, 0.88);
}

TEST(AbStats, PairsNeededIsTheFewestThatReachTheEffect) {
  const double sd = 0.05;
  const std::size_t n = paired_t_pairs_needed(sd, 0.03);
  ASSERT_GT(n, 2u);
  EXPECT_LE(paired_t_detectable_effect(sd, n), 0.03);
  EXPECT_GT(paired_t_detectable_effect(sd, n - 1), 0.03);
  // More spread, more runs; no spread at all, the minimum.
  EXPECT_GT(paired_t_pairs_needed(0.10, 0.03), n);
  EXPECT_EQ(paired_t_pairs_needed(0.0, 0.03), 2u);
  EXPECT_EQ(paired_t_pairs_needed(1.0, 0.001, 0.8, 100), 0u);  // not within 100
  EXPECT_TRUE(std::isinf(paired_t_detectable_effect(sd, 1)));
}

}  // namespace
}  // namespace uvhost::bench

namespace uvhost::bench {
namespace {

// Critical values of Wilcoxon's signed-rank test, two-sided 5% (published tables:
// reject when W <= 0 at n = 6, 2 at 8, 8 at 10, 25 at 15, 52 at 20), so the CI's lower
// rank is one more; below 6 pairs no 95% interval exists.
TEST(AbStats, SignedRankCiRanksMatchTheTables) {
  EXPECT_EQ(signed_rank_ci_rank(5), 0u);
  EXPECT_EQ(signed_rank_ci_rank(6), 1u);
  EXPECT_EQ(signed_rank_ci_rank(8), 4u);
  EXPECT_EQ(signed_rank_ci_rank(10), 9u);
  EXPECT_EQ(signed_rank_ci_rank(15), 26u);
  EXPECT_EQ(signed_rank_ci_rank(20), 53u);
  // The normal approximation takes over smoothly past the exact range.
  const std::size_t exact = signed_rank_ci_rank(kExactSignedRankPairs);
  const std::size_t approx = signed_rank_ci_rank(kExactSignedRankPairs + 1);
  EXPECT_GT(approx, exact);
  EXPECT_LT(approx, exact + kExactSignedRankPairs);
}

TEST(AbStats, SignedRankEstimatesTheMedianRatio) {
  // Every round B is 10% above A, one round wildly off: the estimate stays near +10%.
  std::vector<double> a(12, 100.0), b(12, 110.0);
  b[3] = 400;
  const AbComparison c = compare_ab(a, b, AbMethod::kSignedRank);
  ASSERT_TRUE(c.valid()) << c.reason;
  EXPECT_NEAR(c.relative, 0.10, 0.01);
  EXPECT_EQ(c.verdict, Verdict::kBetter);
  EXPECT_LE(c.ci_low, c.relative);
  EXPECT_GE(c.ci_high, c.relative);
  EXPECT_LT(c.p_value, 0.01);
  EXPECT_EQ(to_string(c.method), "signed-rank");
  EXPECT_EQ(base::parse_enum<AbMethod>("signed-rank"), AbMethod::kSignedRank);
  // Too few pairs, or unpaired lengths: no interval.
  EXPECT_FALSE(compare_ab(std::vector<double>(5, 1.0), std::vector<double>(5, 2.0), AbMethod::kSignedRank).valid());
  EXPECT_FALSE(compare_ab(std::vector<double>(8, 1.0), std::vector<double>(9, 2.0), AbMethod::kSignedRank).valid());
}

TEST(AbStats, SignedRankSaysNoiseAboutNinetyFivePercentOnEqualRuns) {
  Simulation sim{std::mt19937_64(4242), 0.02, 0.0};
  const double rate = verdict_rate(sim, 2000, 20, 1.0, AbMethod::kSignedRank, Verdict::kNoise);
  EXPECT_GE(rate, 0.93);
  EXPECT_LE(rate, 0.98);  // the exact-rank CI is slightly conservative (discrete levels)
}

// Why it exists: runs that the host moved to a slower regime (-40%, each side 10% of
// the time) hide a 3% slowdown from the paired t (the outlier inflates its sd) but not
// from the ranks.
TEST(AbStats, SignedRankSeesThroughARegimeSwitch) {
  std::mt19937_64 rng(77);
  std::normal_distribution<double> noise(0, 0.01);
  std::bernoulli_distribution switched(0.1);
  std::size_t t_hits = 0, rank_hits = 0;
  constexpr std::size_t kComparisons = 400;
  for (std::size_t i = 0; i < kComparisons; ++i) {
    std::vector<double> a, b;
    for (int r = 0; r < 20; ++r) {
      a.push_back(1e6 * std::exp(noise(rng)) * (switched(rng) ? 0.6 : 1.0));
      b.push_back(0.97e6 * std::exp(noise(rng)) * (switched(rng) ? 0.6 : 1.0));
    }
    t_hits += compare_ab(a, b, AbMethod::kPairedT).verdict == Verdict::kWorse;
    rank_hits += compare_ab(a, b, AbMethod::kSignedRank).verdict == Verdict::kWorse;
  }
  // About one round in five carries a switch here; the ranks still find the 3% most of
  // the time, the t far less often.
  EXPECT_GE(static_cast<double>(rank_hits) / kComparisons, 0.7) << t_hits << " " << rank_hits;
  EXPECT_LT(t_hits + kComparisons / 5, rank_hits) << t_hits << " " << rank_hits;
}

}  // namespace
}  // namespace uvhost::bench
