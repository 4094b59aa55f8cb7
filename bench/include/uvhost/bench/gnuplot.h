// gnuplot.h - plots for `uvhost bench compare` and the labs, drawn by gnuplot (Debian's
// gnuplot-nox; scripts/setup.sh installs it).
//
// Contract
// --------
//  - gnuplot_terminal(path): the `set terminal` argument for the file's extension:
//    ".svg" -> svg, anything else -> pngcairo; sized for a multi-panel page.
//  - BarChart: groups on the x axis (e.g. "64/1" for size/sessions), one bar per series
//    in each group (e.g. per configuration), each bar a mean with a 95% CI half-width
//    drawn as an error bar. write_bar_charts() puts several charts on one page
//    (`columns` per row) and runs gnuplot; data travels inline in the script
//    (named data blocks), so no temporary data files are left behind.
//  - LineChart: numeric x (e.g. offered transactions/s), one line per series with a
//    95% CI error bar at each point, optionally log-scaled axes; write_line_charts()
//    does for them what write_bar_charts() does for bars.
//  - run_gnuplot(script): pipes the script to `gnuplot`; false with `error` set (and
//    gnuplot's complaint) when gnuplot is missing or fails. Never throws.
#pragma once

#include <string>
#include <vector>

namespace uvhost::bench {

struct BarSeries {
  std::string name;
  std::vector<double> mean;  // one per group
  std::vector<double> half;  // 95% CI half-width, one per group
};

struct BarChart {
  std::string title;
  std::string y_label;
  std::vector<std::string> groups;
  std::vector<BarSeries> series;
};

struct LineSeries {
  std::string name;
  std::vector<double> x, mean, half;  // one entry per point; a point with mean <= 0 on a log axis is skipped
};
struct LineChart {
  std::string title;
  std::string x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<LineSeries> series;
};

std::string gnuplot_terminal(const std::string& path);
bool write_bar_charts(const std::string& path, const std::string& page_title, const std::vector<BarChart>& charts,
                      int columns, std::string& error);
bool write_line_charts(const std::string& path, const std::string& page_title, const std::vector<LineChart>& charts,
                       int columns, std::string& error);
bool run_gnuplot(const std::string& script, std::string& error);

}  // namespace uvhost::bench
