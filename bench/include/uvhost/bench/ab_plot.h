// ab_plot.h - `uvhost bench compare --plot FILE.png|FILE.svg`.
//
// One row of two panels per workload: throughput ("thu") and normalized throughput
// (thu per CPU-second) at every point (size/sessions on the x axis), a bar for A and
// one for B, each the mean of the runs with its 95% CI as an error bar. Drawn by
// gnuplot through gnuplot.h (pngcairo for .png and anything else, svg for .svg); the
// data travels inside the script, so no files but FILE are written.
#pragma once

#include <string>

#include "uvhost/bench/ab_compare.h"

namespace uvhost::bench {

// False with `error` set when gnuplot is missing or fails; never throws.
bool plot_compare(const CompareResult& result, const std::string& path, std::string& error);

}  // namespace uvhost::bench
