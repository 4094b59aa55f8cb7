// lab_summary.cpp - see lab_summary.h.
#include "uvhost/bench/lab/lab_summary.h"

#include <cmath>

namespace uvhost::bench::lab {

double per_second(double count, int64_t wall_ns) {
  return wall_ns > 0 ? count * 1e9 / static_cast<double>(wall_ns) : 0.0;
}

nlohmann::json summary_json(const Summary& s) {
  return {{"n", s.n},           {"mean", s.mean}, {"stddev", s.stddev}, {"ci95_half", s.ci95_half},
          {"median", s.median}, {"min", s.min},   {"max", s.max}};
}

BaselineRatio ratio_vs_baseline(const Summary& value, const Summary& base, Direction direction) {
  BaselineRatio r;
  r.direction = direction;
  static_cast<Ratio&>(r) = ratio_of_means(value, base);
  const bool judgeable = value.n >= 2 && base.n >= 2 && std::isfinite(value.mean) &&
                         std::isfinite(base.mean) && value.mean > 0 && base.mean > 0 &&
                         std::isfinite(r.ci95_half);
  if (judgeable)
    r.verdict = verdict_of_interval(r.value - r.ci95_half - 1, r.value + r.ci95_half - 1, direction);
  return r;
}

std::string ratio_text(const BaselineRatio& r) {
  return r.verdict == Verdict::kInvalid ? std::string("-") : "×" + with_ci(r.value, r.ci95_half);
}

std::string_view better_word(Direction direction) noexcept {
  return direction == Direction::kHigherIsBetter ? "higher" : "lower";
}

nlohmann::json ratio_json(const BaselineRatio& r) {
  return {{"value", r.value},
          {"ci95_half", r.ci95_half},
          {"verdict", std::string(to_string(r.verdict))},
          {"better", std::string(better_word(r.direction))}};
}

void add_bar(BarSeries& series, const Summary& s) {
  series.mean.push_back(s.mean);
  series.half.push_back(s.ci95_half);
}

}  // namespace uvhost::bench::lab
