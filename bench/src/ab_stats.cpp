// ab_stats.cpp - paired t on log ratios, Welch's t with the delta-method ratio CI,
// and the Wilson interval of a proportion.
#include "uvhost/bench/ab_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "uvhost/bench/stats.h"

namespace uvhost::bench {
namespace {

// Two-sided p-value of a t statistic with `dof` degrees of freedom.
double two_sided_p(double t, double dof) {
  if (std::isinf(t)) return 0;
  boost::math::students_t dist(dof);
  // cdf(complement(.)) keeps precision in the far tail, where 1 - cdf(.) would round to 0.
  return 2 * boost::math::cdf(boost::math::complement(dist, std::fabs(t)));
}

// Every value must be a positive finite number: a run that moved nothing (0) or a
// broken measurement (NaN, inf) is a failed run, not a sample of the metric.
bool check_values(std::span<const double> values, char side, std::string& reason) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    if (!std::isfinite(v) || v <= 0) {
      reason = fmt::format("run {} of {} is {} (every value must be positive and finite)", i + 1, side, v);
      return false;
    }
  }
  return true;
}

AbComparison paired_t(std::span<const double> a, std::span<const double> b, Direction direction) {
  AbComparison r;
  r.method = AbMethod::kPairedT;
  if (a.size() != b.size()) {
    r.reason = fmt::format("paired-t needs as many runs of A as of B ({} vs {})", a.size(), b.size());
    return r;
  }
  r.n = a.size();
  if (r.n < 2) {
    r.reason = fmt::format("{} pair(s): at least 2 are needed for an interval", r.n);
    return r;
  }
  if (!check_values(a, 'A', r.reason) || !check_values(b, 'B', r.reason)) return r;

  std::vector<double> logs(r.n);
  for (std::size_t i = 0; i < r.n; ++i) logs[i] = std::log(b[i] / a[i]);
  const Summary s = summarize(logs);
  const double se = s.stddev / std::sqrt(static_cast<double>(r.n));
  r.dof = static_cast<double>(r.n - 1);
  const double q = t_quantile_975(r.dof);
  r.relative = std::expm1(s.mean);
  r.ci_low = std::expm1(s.mean - q * se);
  r.ci_high = std::expm1(s.mean + q * se);
  if (se > 0) {
    r.t = s.mean / se;
  } else {
    // Every pair has exactly the same ratio: no spread, so the interval is a point.
    r.t = s.mean == 0 ? 0 : std::copysign(std::numeric_limits<double>::infinity(), s.mean);
  }
  r.p_value = s.mean == 0 && se == 0 ? 1 : two_sided_p(r.t, r.dof);
  r.verdict = verdict_of_interval(r.ci_low, r.ci_high, direction);
  return r;
}

AbComparison welch(std::span<const double> a, std::span<const double> b, Direction direction) {
  AbComparison r;
  r.method = AbMethod::kWelch;
  r.n = std::min(a.size(), b.size());
  if (r.n < 2) {
    r.reason = fmt::format("{} run(s) of A, {} of B: at least 2 of each are needed", a.size(), b.size());
    return r;
  }
  if (!check_values(a, 'A', r.reason) || !check_values(b, 'B', r.reason)) return r;

  const Summary sa = summarize(a);
  const Summary sb = summarize(b);
  const Ratio ratio = ratio_of_means(sb, sa);  // mean(b) / mean(a), delta-method CI
  r.relative = ratio.value - 1;
  r.ci_low = ratio.value - ratio.ci95_half - 1;
  r.ci_high = ratio.value + ratio.ci95_half - 1;

  // Welch's t on the difference of means, Welch-Satterthwaite degrees of freedom.
  const double va = sa.stddev * sa.stddev / static_cast<double>(sa.n);  // squared standard errors
  const double vb = sb.stddev * sb.stddev / static_cast<double>(sb.n);
  const double diff = sb.mean - sa.mean;
  if (va + vb > 0) {
    r.t = diff / std::sqrt(va + vb);
    r.dof = (va + vb) * (va + vb) /
            (va * va / static_cast<double>(sa.n - 1) + vb * vb / static_cast<double>(sb.n - 1));
    r.p_value = two_sided_p(r.t, r.dof);
  } else {
    // Both samples constant: the difference is exact.
    r.dof = static_cast<double>(sa.n + sb.n - 2);
    r.t = diff == 0 ? 0 : std::copysign(std::numeric_limits<double>::infinity(), diff);
    r.p_value = diff == 0 ? 1 : 0;
  }
  r.verdict = verdict_of_interval(r.ci_low, r.ci_high, direction);
  return r;
}

// P(W+ <= w), w = 0..n(n+1)/2, for n pairs and no difference: every subset of the ranks
// 1..n is equally likely to be the positive ones, so count the subsets of each sum.
// Counts are kept as doubles scaled by 2^-n (exact integers up to 2^53 before scaling;
// n <= kExactSignedRankPairs keeps the relative error far below what a CI rank needs).
std::vector<double> signed_rank_cdf(std::size_t n) {
  const std::size_t total = n * (n + 1) / 2;
  std::vector<double> ways(total + 1, 0.0);
  ways[0] = 1;
  for (std::size_t rank = 1; rank <= n; ++rank) {
    for (std::size_t sum = total; sum >= rank; --sum) ways[sum] += ways[sum - rank];
  }
  const double scale = std::ldexp(1.0, -static_cast<int>(n));
  double cumulative = 0;
  for (double& w : ways) {
    cumulative += w * scale;
    w = cumulative;
  }
  return ways;
}

// Ranks of |d| among the nonzero d (ties share their average rank); zeros are dropped,
// as in Wilcoxon's own treatment. Returns W+ and fills the tie correction sum(t^3 - t).
double positive_rank_sum(const std::vector<double>& d, std::size_t& nonzero, double& tie_term) {
  std::vector<std::pair<double, bool>> magnitudes;  // |d|, positive
  for (double x : d) {
    if (x != 0) magnitudes.emplace_back(std::fabs(x), x > 0);
  }
  std::sort(magnitudes.begin(), magnitudes.end());
  nonzero = magnitudes.size();
  tie_term = 0;
  double w_plus = 0;
  for (std::size_t i = 0; i < magnitudes.size();) {
    std::size_t j = i;
    while (j < magnitudes.size() && magnitudes[j].first == magnitudes[i].first) ++j;
    const double average_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;
    const auto t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    for (std::size_t k = i; k < j; ++k) {
      if (magnitudes[k].second) w_plus += average_rank;
    }
    i = j;
  }
  return w_plus;
}

AbComparison signed_rank(std::span<const double> a, std::span<const double> b, Direction direction) {
  AbComparison r;
  r.method = AbMethod::kSignedRank;
  if (a.size() != b.size()) {
    r.reason = fmt::format("signed-rank needs as many runs of A as of B ({} vs {})", a.size(), b.size());
    return r;
  }
  r.n = a.size();
  const std::size_t k = signed_rank_ci_rank(r.n);
  if (k == 0) {
    r.reason = fmt::format("{} pair(s): a 95% signed-rank interval needs at least 6", r.n);
    return r;
  }
  if (!check_values(a, 'A', r.reason) || !check_values(b, 'B', r.reason)) return r;

  std::vector<double> logs(r.n);
  for (std::size_t i = 0; i < r.n; ++i) logs[i] = std::log(b[i] / a[i]);
  std::vector<double> walsh;
  walsh.reserve(r.n * (r.n + 1) / 2);
  for (std::size_t i = 0; i < r.n; ++i) {
    for (std::size_t j = i; j < r.n; ++j) walsh.push_back((logs[i] + logs[j]) / 2);
  }
  std::sort(walsh.begin(), walsh.end());
  const std::size_t m = walsh.size();
  const double center = m % 2 == 1 ? walsh[m / 2] : (walsh[m / 2 - 1] + walsh[m / 2]) / 2;
  r.relative = std::expm1(center);
  r.ci_low = std::expm1(walsh[k - 1]);
  r.ci_high = std::expm1(walsh[m - k]);

  // p-value: the normal approximation of W+ with the tie correction (the verdict
  // follows the exact-rank CI above, not this).
  std::size_t nonzero = 0;
  double tie_term = 0;
  const double w_plus = positive_rank_sum(logs, nonzero, tie_term);
  const auto nz = static_cast<double>(nonzero);
  const double mean = nz * (nz + 1) / 4;
  const double variance = nz * (nz + 1) * (2 * nz + 1) / 24 - tie_term / 48;
  r.t = w_plus - mean;
  r.dof = 0;
  if (variance > 0) {
    const double z = (std::fabs(r.t) - 0.5) / std::sqrt(variance);  // continuity-corrected
    r.p_value = std::min(1.0, 2 * boost::math::cdf(boost::math::complement(boost::math::normal(), std::max(z, 0.0))));
  } else {
    r.p_value = 1;  // every ratio exactly 1
  }
  r.verdict = verdict_of_interval(r.ci_low, r.ci_high, direction);
  return r;
}

std::string percent(double fraction) {
  return fmt::format("{:+.1f}", fraction * 100);
}

}  // namespace

Verdict verdict_of_interval(double ci_low, double ci_high, Direction direction) noexcept {
  if (ci_low <= 0 && ci_high >= 0) return Verdict::kNoise;
  const bool higher = ci_low > 0;
  return (higher == (direction == Direction::kHigherIsBetter)) ? Verdict::kBetter : Verdict::kWorse;
}

void apply_min_effect(AbComparison& comparison, double min_effect) noexcept {
  if (!comparison.valid() || comparison.verdict == Verdict::kNoise) return;
  if (std::fabs(comparison.relative) < min_effect) {
    comparison.verdict = Verdict::kNoise;
    comparison.below_min_effect = true;
  }
}

std::string_view method_assumption(AbMethod method) noexcept {
  if (method == AbMethod::kSignedRank) {
    return "signed-rank: Wilcoxon's signed-rank test on ln(B[i]/A[i]) of each round (A and B back to back or in slices), Hodges-Lehmann "
           "estimate and its distribution-free CI, back-transformed with exp(.)-1; assumes the log ratios are "
           "independent and symmetric about their center, not normal (one disturbed round moves it little)";
  }
  if (method == AbMethod::kWelch) {
    return "welch: Welch's t on the two samples as independent groups, CI of mean(B)/mean(A) by the delta "
           "method; assumes each sample mean is roughly normal and the runs independent (ignores pairing, so "
           "machine drift widens the interval)";
  }
  return "paired-t: Student's t on ln(B[i]/A[i]) of each round (A and B back to back or in slices), CI back-transformed with "
         "exp(.)-1; "
         "assumes the log ratios are roughly normal and independent (pairing cancels slow machine drift)";
}

AbComparison compare_ab(std::span<const double> a, std::span<const double> b, AbMethod method,
                        Direction direction) {
  switch (method) {
    case AbMethod::kWelch:
      return welch(a, b, direction);
    case AbMethod::kSignedRank:
      return signed_rank(a, b, direction);
    case AbMethod::kPairedT:
      break;
  }
  return paired_t(a, b, direction);
}

std::size_t signed_rank_ci_rank(std::size_t n, double alpha_half) {
  if (n == 0 || !(alpha_half > 0 && alpha_half < 0.5)) return 0;
  const std::size_t total = n * (n + 1) / 2;
  if (n <= kExactSignedRankPairs) {
    const std::vector<double> cdf = signed_rank_cdf(n);
    std::size_t k = 0;  // count the w with P(W+ <= w) <= alpha_half: then P(W+ <= k - 1) <= alpha_half
    while (k <= total && cdf[k] <= alpha_half) ++k;
    return k;
  }
  const double nn = static_cast<double>(n);
  const double mean = nn * (nn + 1) / 4;
  const double sd = std::sqrt(nn * (nn + 1) * (2 * nn + 1) / 24);
  const double z = boost::math::quantile(boost::math::normal(), 1 - alpha_half);
  const double k = std::floor(mean - z * sd + 0.5);  // + 0.5: continuity
  return k < 1 ? 0 : static_cast<std::size_t>(k);
}

std::string format_relative(const AbComparison& comparison) {
  if (!comparison.valid()) return "n/a";
  return fmt::format("{}% [{}, {}]", percent(comparison.relative), percent(comparison.ci_low),
                     percent(comparison.ci_high));
}

Proportion wilson_interval(std::size_t successes, std::size_t trials) {
  Proportion p;
  p.successes = successes;
  p.trials = trials;
  if (trials == 0) return p;
  const double n = static_cast<double>(trials);
  p.rate = static_cast<double>(successes) / n;
  const double z = boost::math::quantile(boost::math::normal(), 0.975);
  const double z2n = z * z / n;
  const double center = (p.rate + z2n / 2) / (1 + z2n);
  const double half = z / (1 + z2n) * std::sqrt(p.rate * (1 - p.rate) / n + z2n / (4 * n));
  // Clamp rounding noise at the ends (successes == 0 or == trials touch 0 or 1 exactly).
  p.low = std::max(0.0, center - half);
  p.high = std::min(1.0, center + half);
  return p;
}

namespace {

// The log-ratio shift a paired t on `pairs` pairs finds with probability `power`.
double detectable_log_shift(double log_ratio_sd, std::size_t pairs, double power) {
  const double dof = static_cast<double>(pairs - 1);
  boost::math::students_t dist(dof);
  const double q = boost::math::quantile(dist, 0.975) + boost::math::quantile(dist, power);
  return q * log_ratio_sd / std::sqrt(static_cast<double>(pairs));
}

}  // namespace

double paired_t_detectable_effect(double log_ratio_sd, std::size_t pairs, double power) {
  if (pairs < 2 || !std::isfinite(log_ratio_sd) || log_ratio_sd < 0 || !(power > 0 && power < 1)) {
    return std::numeric_limits<double>::infinity();
  }
  return std::expm1(detectable_log_shift(log_ratio_sd, pairs, power));
}

std::size_t paired_t_pairs_needed(double log_ratio_sd, double effect, double power, std::size_t max_pairs) {
  if (!std::isfinite(log_ratio_sd) || log_ratio_sd < 0 || !(effect > 0 && effect < 1) ||
      !(power > 0 && power < 1)) {
    return 0;
  }
  // A slowdown of `effect` and a speed-up of `effect` are not the same log shift; plan
  // for the smaller of the two (the slowdown: |ln(1 - e)| > ln(1 + e)).
  const double wanted = std::log1p(effect);
  for (std::size_t n = 2; n <= max_pairs; ++n) {
    if (detectable_log_shift(log_ratio_sd, n, power) <= wanted) return n;
  }
  return 0;
}

}  // namespace uvhost::bench
