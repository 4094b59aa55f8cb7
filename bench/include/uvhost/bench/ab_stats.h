// ab_stats.h - is B different from A? Statistics for repeated, interleaved A/B runs.
//
// Input: per-run samples a[i] and b[i] of one metric (throughput, say), where run i of
// A and run i of B were measured back to back. Output: the relative difference of B
// vs A ((B - A) / A, e.g. +0.031 for +3.1%) with a 95% confidence interval, a p-value,
// and a verdict:
//   - better: the whole CI lies on the good side of 0 (above it when higher is better),
//   - worse:  the whole CI lies on the bad side,
//   - noise:  the CI contains 0 - the runs cannot tell A and B apart,
//   - invalid: the samples cannot be compared (fewer than 2, a zero, negative or
//     non-finite value, unequal lengths for a paired method); `reason` says which.
// The verdict always follows the CI; the p-value is reported beside it.
//
// Methods (each names its assumption in method_assumption()):
//   - kPairedT (default): Student's t on the log ratios d[i] = ln(b[i] / a[i]), n-1
//     degrees of freedom. Pairing cancels slow machine drift (another tenant, thermal,
//     frequency) that moves A and B of the same round together; the log makes the
//     comparison relative and symmetric. Assumption: the log ratios are roughly
//     normal and independent of each other. The CI [d - q*se, d + q*se] is
//     back-transformed: relative = exp(mean d) - 1 (the ratio of geometric means),
//     interval exp(.) - 1, so it is not symmetric around the estimate.
//   - kWelch: Welch's unequal-variance t test on the two samples as independent
//     groups (p-value), and the CI of mean(b)/mean(a) from the delta method with
//     Welch-Satterthwaite degrees of freedom (stats.h ratio_of_means); relative =
//     mean(b)/mean(a) - 1. Ignores the pairing, so drift widens its interval.
//     Assumption: each sample's mean is roughly normal, the runs are independent.
//     The delta-method CI and Welch's p-value are two approximations; at the very
//     edge (p close to 0.05) they may disagree, and the verdict follows the CI.
//   - kSignedRank: Wilcoxon's signed-rank test on the same log ratios d[i], with the
//     Hodges-Lehmann estimate (the median of the Walsh averages (d[i] + d[j]) / 2,
//     i <= j) and its distribution-free 95% CI (the Walsh averages at the ranks the
//     signed-rank statistic's 2.5% critical value gives: exact distribution up to
//     kExactSignedRankPairs pairs, normal approximation above), back-transformed
//     with exp(.) - 1. Assumption: the log ratios are independent and symmetric about
//     their center; no normality. Why it exists: on our VMs the host now and then
//     moves a whole run to a slower regime (a round's two runs then differ by tens of
//     percent),
//     and one such round widens the t interval for everything; ranks limit what one
//     round can do. With fewer than 6 pairs no 95% interval exists (invalid).
// t quantiles and tail probabilities come from Boost.Math's students_t.
//
// wilson_interval(): the 95% Wilson score interval of a proportion, for rates such
// as "this many of the 20 A/A comparisons said noise" (uvhost bench calibrate).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "uvhost/base/name_table.h"

namespace uvhost::bench {

using base::to_string;

enum class AbMethod { kPairedT, kWelch, kSignedRank };
inline constexpr auto kAbMethodNames = base::name_table<AbMethod>(
    {{AbMethod::kPairedT, "paired-t"}, {AbMethod::kWelch, "welch"}, {AbMethod::kSignedRank, "signed-rank"}});
constexpr const auto& enum_names(AbMethod) noexcept { return kAbMethodNames; }
// One line: what the method computes and what it assumes, for report headers.
std::string_view method_assumption(AbMethod method) noexcept;

enum class Verdict { kBetter, kWorse, kNoise, kInvalid };
inline constexpr auto kVerdictNames = base::name_table<Verdict>({{Verdict::kBetter, "better"},
                                                                 {Verdict::kWorse, "worse"},
                                                                 {Verdict::kNoise, "noise"},
                                                                 {Verdict::kInvalid, "n/a"}});
constexpr const auto& enum_names(Verdict) noexcept { return kVerdictNames; }

// Which way is good for the metric: throughput up, latency and CPU down.
enum class Direction { kHigherIsBetter, kLowerIsBetter };

struct AbComparison {
  AbMethod method = AbMethod::kPairedT;
  Verdict verdict = Verdict::kInvalid;
  std::string reason;   // why kInvalid; empty otherwise
  std::size_t n = 0;    // pairs (paired-t, signed-rank) or min(len a, len b) (welch)
  double relative = 0;  // B vs A: +0.05 = B is 5% higher
  double ci_low = 0;    // 95% CI of `relative`
  double ci_high = 0;
  double t = 0;        // the test statistic: t (+-inf when every pair has the same nonzero
                       // ratio); signed-rank: W+ - n(n+1)/4, the rank sum above its null mean
  double dof = 0;      // its degrees of freedom (signed-rank: 0)
  double p_value = 1;  // two-sided
  // The CI excluded 0 but |relative| stayed under the comparison's minimum effect, so
  // the verdict was set to noise (apply_min_effect).
  bool below_min_effect = false;
  bool valid() const noexcept { return verdict != Verdict::kInvalid; }
};

// The verdict rule on its own, for a CI of the relative difference computed elsewhere
// (the labs' ratio_of_means: pass ratio - 1): noise when [ci_low, ci_high] contains 0,
// otherwise better or worse by `direction`. compare_ab() uses it too.
Verdict verdict_of_interval(double ci_low, double ci_high, Direction direction) noexcept;

// The smallest change a verdict claims: a better/worse comparison whose |relative| is
// under `min_effect` (a fraction: 0.01 = 1%) becomes noise with below_min_effect set.
// Why: a CI says whether the difference is 0 *within this comparison*; calibration on
// our VMs (docs/BENCHMARKS.md, "Calibration") found A/A comparisons of identical
// configs drifting from trial to trial by more than their own CIs: differences that
// small are the machine's, not the configs'. min_effect 0 leaves the CI rule alone.
void apply_min_effect(AbComparison& comparison, double min_effect) noexcept;

// Compares b against a. kPairedT and kSignedRank need a.size() == b.size(); kWelch
// does not.
AbComparison compare_ab(std::span<const double> a, std::span<const double> b, AbMethod method,
                        Direction direction = Direction::kHigherIsBetter);

// "+3.1% [+0.4, +5.9]" (percent, CI in brackets), or "n/a" when invalid.
std::string format_relative(const AbComparison& comparison);

struct Proportion {
  std::size_t successes = 0;
  std::size_t trials = 0;
  double rate = 0;  // successes / trials (0 when trials == 0)
  double low = 0;   // 95% Wilson score interval
  double high = 0;
};
Proportion wilson_interval(std::size_t successes, std::size_t trials);

// Power of the paired t, for planning how many runs a comparison needs. `log_ratio_sd`
// is the standard deviation of the per-round log ratios ln(b/a) seen when A and B are
// the same (an A/A comparison). With the usual normal-shift approximation, a true
// difference delta (in log ratio) is found with probability `power` by a two-sided 5%
// test on n pairs when delta >= (t(0.975, n-1) + t(power, n-1)) * sd / sqrt(n).
// The smallest relative effect (exp(delta) - 1) found with that power at `pairs` pairs;
// +inf when pairs < 2 or sd is not finite.
double paired_t_detectable_effect(double log_ratio_sd, std::size_t pairs, double power = 0.8);
// The fewest pairs (at least 2) that find a relative effect of `effect` (e.g. 0.03,
// either direction) with that power; 0 when even max_pairs are not enough.
std::size_t paired_t_pairs_needed(double log_ratio_sd, double effect, double power = 0.8,
                                  std::size_t max_pairs = 10000);

// The signed-rank statistic's distribution: exact (counted) up to this many pairs.
inline constexpr std::size_t kExactSignedRankPairs = 60;
// The largest k with P(W+ <= k - 1) <= alpha_half under "no difference" for n pairs
// (W+: the sum of the ranks of the positive differences): the 1-based rank, among the
// n(n+1)/2 sorted Walsh averages, of the lower end of the 1 - 2 * alpha_half CI (the
// upper end is rank n(n+1)/2 + 1 - k). 0 when no such interval exists (n < 6 at 5%).
std::size_t signed_rank_ci_rank(std::size_t n, double alpha_half = 0.025);

}  // namespace uvhost::bench
