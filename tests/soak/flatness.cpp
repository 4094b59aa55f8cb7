// flatness.cpp - judging a daemon's figures over a soak (flatness.h).
#include "flatness.h"

#include <algorithm>

#include <fmt/format.h>

namespace uvhost::soak {
namespace {

long median_rss(std::vector<Sample>::const_iterator first, std::vector<Sample>::const_iterator last) {
  std::vector<long> values;
  for (auto it = first; it != last; ++it) values.push_back(it->figures.rss_kib);
  if (values.empty()) return 0;
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

long peak_rss(std::vector<Sample>::const_iterator first, std::vector<Sample>::const_iterator last) {
  long peak = 0;
  for (auto it = first; it != last; ++it) peak = std::max(peak, it->figures.rss_kib);
  return peak;
}

}  // namespace

RssSummary summarize_rss(const std::vector<Sample>& samples) {
  const auto n = static_cast<std::ptrdiff_t>(samples.size());
  const std::ptrdiff_t quarter = std::max<std::ptrdiff_t>(1, n / 4);
  const auto begin = samples.begin(), end = samples.end();
  RssSummary summary;
  summary.first_quarter_median_kib = median_rss(begin, begin + std::min(quarter, n));
  summary.last_quarter_median_kib = median_rss(end - std::min(quarter, n), end);
  summary.first_half_peak_kib = peak_rss(begin, begin + n / 2);
  summary.second_half_peak_kib = peak_rss(begin + n / 2, end);
  return summary;
}

std::vector<std::string> judge_flatness(const std::vector<Sample>& samples, const ProcFigures& baseline,
                                        long rss_growth_kib) {
  std::vector<std::string> findings;
  for (const Sample& s : samples) {
    const auto& f = s.figures;
    if (f.fds != baseline.fds || f.threads != baseline.threads || f.maps != baseline.maps) {
      findings.push_back(fmt::format("at {:.0f} s (after {} cycles): fds {} threads {} maps {}, steady values {} {} {}",
                                     s.seconds, s.cycles, f.fds, f.threads, f.maps, baseline.fds, baseline.threads,
                                     baseline.maps));
    }
  }
  if (samples.size() < 4) {
    findings.push_back(fmt::format("only {} samples: too few to judge RSS (run longer or sample more often)",
                                   samples.size()));
    return findings;
  }
  const RssSummary rss = summarize_rss(samples);
  if (rss.last_quarter_median_kib - rss.first_quarter_median_kib > rss_growth_kib) {
    findings.push_back(fmt::format("RSS grew: median {} KiB in the first quarter, {} KiB in the last (bound {} KiB)",
                                   rss.first_quarter_median_kib, rss.last_quarter_median_kib, rss_growth_kib));
  }
  if (rss.second_half_peak_kib - rss.first_half_peak_kib > rss_growth_kib) {
    findings.push_back(fmt::format("RSS trend: peak {} KiB in the first half, {} KiB in the second (bound {} KiB)",
                                   rss.first_half_peak_kib, rss.second_half_peak_kib, rss_growth_kib));
  }
  return findings;
}

}  // namespace uvhost::soak
