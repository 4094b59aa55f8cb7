// stats.h - summary statistics for repeated benchmark runs.
//
// The machines we measure on are shared and noisy, so every figure uvhost prints
// is a sample of repeated runs summarized with a confidence interval:
//  - summarize(): mean, sample standard deviation, and the 95% confidence interval
//    of the mean from Student's t distribution (Boost.Math) with n-1 degrees of
//    freedom. Assumption stated: run means are roughly normal and independent;
//    with few runs the t interval is wide, which is the honest answer.
//  - ratio_of_means(): A/B as a ratio with a 95% interval from the delta method
//    (first-order propagation of both means' standard errors, Welch-Satterthwaite
//    degrees of freedom). Used for "lock X vs std::mutex" columns.
// Medians and percentiles are offered for skewed samples.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace uvhost::bench {

struct Summary {
  std::size_t n = 0;
  double mean = 0;
  double stddev = 0;     // sample standard deviation (n-1); 0 when n < 2
  double ci95_half = 0;  // half-width of the 95% CI of the mean; 0 when n < 2
  double min = 0;
  double max = 0;
  double median = 0;
  double ci_low() const noexcept { return mean - ci95_half; }
  double ci_high() const noexcept { return mean + ci95_half; }
  // Relative half-width (ci95_half / |mean|), e.g. 0.03 for +-3%.
  double relative_ci() const noexcept;
};

Summary summarize(std::span<const double> samples);

struct Ratio {
  double value = 0;      // mean(a) / mean(b)
  double ci95_half = 0;  // half-width of its 95% CI (delta method)
};
Ratio ratio_of_means(const Summary& a, const Summary& b);

// Two-sided 95% quantile of Student's t with `dof` degrees of freedom (Boost.Math).
double t_quantile_975(double dof);

// Linear-interpolated percentile, p in [0, 100]. Sorts a copy.
double percentile(std::span<const double> samples, double p);

// "12.3 M", "456 k": a value with an SI suffix, 3 significant digits.
std::string si(double value);
// `value` with `digits` significant digits and no exponent for everyday magnitudes.
std::string significant(double value, int digits);
// "1.234 +- 0.05" style for tables: value and CI half-width, 3 significant digits.
std::string with_ci(double value, double half, const char* unit = "");
// A summary's cell: "12.3 M ±1.2 M" (si) or "0.532 ±0.021" (significant digits); with
// one run there is no interval, and the cell says so: "12.3 M (1 run)".
std::string si_with_ci(const Summary& s);
std::string with_ci(const Summary& s, const char* unit = "");
// The relative form: "12.3 M ±4%", or "12.3 M (1 run)".
std::string si_with_relative_ci(const Summary& s);

}  // namespace uvhost::bench
