// ab_stats.cpp - paired t on log ratios, Welch's t with the delta-method ratio CI,
// and the Wilson interval of a proportion.
#include "uvhost/bench/ab_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
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

std::string percent(double fraction) {
  return fmt::format("{:+.1f}", fraction * 100);
}

}  // namespace

Verdict verdict_of_interval(double ci_low, double ci_high, Direction direction) noexcept {
  if (ci_low <= 0 && ci_high >= 0) return Verdict::kNoise;
  const bool higher = ci_low > 0;
  return (higher == (direction == Direction::kHigherIsBetter)) ? Verdict::kBetter : Verdict::kWorse;
}

std::string_view to_string(AbMethod method) noexcept {
  return method == AbMethod::kWelch ? "welch" : "paired-t";
}

std::optional<AbMethod> parse_ab_method(std::string_view text) noexcept {
  if (text == "paired-t") return AbMethod::kPairedT;
  if (text == "welch") return AbMethod::kWelch;
  return std::nullopt;
}

std::string_view method_assumption(AbMethod method) noexcept {
  if (method == AbMethod::kWelch) {
    return "welch: Welch's t on the two samples as independent groups, CI of mean(B)/mean(A) by the delta "
           "method; assumes each sample mean is roughly normal and the runs independent (ignores pairing, so "
           "machine drift widens the interval)";
  }
  return "paired-t: Student's t on ln(B[i]/A[i]) of the back-to-back runs, CI back-transformed with "
         "exp(.)-1; "
         "assumes the log ratios are roughly normal and independent (pairing cancels slow machine drift)";
}

std::string_view to_string(Verdict verdict) noexcept {
  switch (verdict) {
    case Verdict::kBetter:
      return "better";
    case Verdict::kWorse:
      return "worse";
    case Verdict::kNoise:
      return "noise";
    case Verdict::kInvalid:
      break;
  }
  return "n/a";
}

AbComparison compare_ab(std::span<const double> a, std::span<const double> b, AbMethod method,
                        Direction direction) {
  return method == AbMethod::kWelch ? welch(a, b, direction) : paired_t(a, b, direction);
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
