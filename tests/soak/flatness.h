// flatness.h - the verdict on a daemon's figures over a soak: did anything grow?
//
// Contract
// --------
//  - Samples are taken between churn cycles, with every port connected, so the
//    daemon holds the same set of connections at each sample as at the baseline.
//  - judge_flatness() returns one line per finding (empty: flat):
//      * fds, threads and maps: every sample equals the baseline exactly (a leaked
//        eventfd, memfd, socket or mapping per connection shows at once);
//      * RSS: the median of the last quarter of the samples exceeds the median of the
//        first quarter by more than `rss_growth_kib` (growth), or the peak of the
//        second half exceeds the peak of the first half by more than that (a trend
//        that the medians would hide). Needs at least 4 samples (else a finding).
#pragma once

#include <string>
#include <vector>

#include "proc_figures.h"

namespace uvhost::soak {

struct Sample {
  double seconds = 0;   // since the baseline
  uint64_t cycles = 0;  // churn cycles done
  ProcFigures figures;
};

struct RssSummary {
  long first_quarter_median_kib = 0;
  long last_quarter_median_kib = 0;
  long first_half_peak_kib = 0;
  long second_half_peak_kib = 0;
};

RssSummary summarize_rss(const std::vector<Sample>& samples);
std::vector<std::string> judge_flatness(const std::vector<Sample>& samples, const ProcFigures& baseline,
                                        long rss_growth_kib);

}  // namespace uvhost::soak
