// stats.cpp - means, confidence intervals and ratios for benchmark samples.
#include "uvhost/bench/stats.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <fmt/format.h>
#include <numeric>

namespace uvhost::bench {

double Summary::relative_ci() const noexcept { return mean != 0 ? ci95_half / std::fabs(mean) : 0.0; }

double t_quantile_975(double dof) {
  if (!(dof > 0)) return 0;
  boost::math::students_t dist(dof);
  return boost::math::quantile(dist, 0.975);
}

double percentile(std::span<const double> samples, double p) {
  if (samples.empty()) return 0;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const auto hi = static_cast<std::size_t>(std::ceil(rank));
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Summary summarize(std::span<const double> samples) {
  Summary s;
  s.n = samples.size();
  if (s.n == 0) return s;
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(s.n);
  auto [mn, mx] = std::minmax_element(samples.begin(), samples.end());
  s.min = *mn;
  s.max = *mx;
  s.median = percentile(samples, 50);
  if (s.n >= 2) {
    double sq = 0;
    for (double x : samples) sq += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(sq / static_cast<double>(s.n - 1));
    s.ci95_half = t_quantile_975(static_cast<double>(s.n - 1)) * s.stddev / std::sqrt(static_cast<double>(s.n));
  }
  return s;
}

Ratio ratio_of_means(const Summary& a, const Summary& b) {
  Ratio r;
  if (b.mean == 0) return r;
  r.value = a.mean / b.mean;
  if (a.n < 2 || b.n < 2 || a.mean == 0) return r;
  const double var_a = a.stddev * a.stddev / static_cast<double>(a.n);  // squared standard errors
  const double var_b = b.stddev * b.stddev / static_cast<double>(b.n);
  // Var(A/B) ~ (A/B)^2 (varA/A^2 + varB/B^2)
  const double rel_a = var_a / (a.mean * a.mean);
  const double rel_b = var_b / (b.mean * b.mean);
  const double se = std::fabs(r.value) * std::sqrt(rel_a + rel_b);
  // Welch-Satterthwaite degrees of freedom for the combined error.
  const double num = (rel_a + rel_b) * (rel_a + rel_b);
  const double den = rel_a * rel_a / static_cast<double>(a.n - 1) + rel_b * rel_b / static_cast<double>(b.n - 1);
  const double dof = den > 0 ? num / den : static_cast<double>(a.n + b.n - 2);
  r.ci95_half = t_quantile_975(dof) * se;
  return r;
}

std::string si(double value) {
  const double mag = std::fabs(value);
  if (mag >= 1e9) return fmt::format("{:.3g} G", value / 1e9);
  if (mag >= 1e6) return fmt::format("{:.3g} M", value / 1e6);
  if (mag >= 1e3) return fmt::format("{:.3g} k", value / 1e3);
  return fmt::format("{:.3g}", value);
}

std::string significant(double value, int digits) {
  if (value == 0 || !std::isfinite(value)) return fmt::format("{}", value);
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(value))));
  if (magnitude >= 9 || magnitude < -4) return fmt::format("{:.{}g}", value, digits);
  const int decimals = std::max(0, digits - 1 - magnitude);
  return fmt::format("{:.{}f}", value, decimals);
}

std::string with_ci(double value, double half, const char* unit) {
  return fmt::format("{}{} ±{}", significant(value, 3), unit, significant(half, 2));
}

namespace {
constexpr const char* kNoInterval = " (1 run)";
}  // namespace

std::string si_with_ci(const Summary& s) {
  if (s.n < 2) return si(s.mean) + kNoInterval;
  return fmt::format("{} ±{}", si(s.mean), si(s.ci95_half));
}

std::string with_ci(const Summary& s, const char* unit) {
  if (s.n < 2) return fmt::format("{}{}{}", significant(s.mean, 3), unit, kNoInterval);
  return with_ci(s.mean, s.ci95_half, unit);
}

std::string si_with_relative_ci(const Summary& s) {
  if (s.n < 2) return si(s.mean) + kNoInterval;
  return fmt::format("{} ±{:.0f}%", si(s.mean), 100 * s.relative_ci());
}

}  // namespace uvhost::bench
