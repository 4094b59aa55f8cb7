// gnuplot.cpp - see gnuplot.h.
#include "uvhost/bench/gnuplot.h"

#include <sys/wait.h>

#include <cstdio>
#include <string_view>

#include <fmt/format.h>

namespace uvhost::bench {
namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// gnuplot strings in double quotes: escape what would end or bend them.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The start of a multi-panel page: terminal, output file, `style` (the chart kind's
// settings), then the multiplot layout for `panels` charts, `columns` per row. Empty
// with `error` set when there is nothing to plot.
std::string page_start(const std::string& path, const std::string& page_title, size_t panels, int columns,
                       std::string_view style, std::string& error) {
  if (panels == 0) {
    error = "nothing to plot";
    return {};
  }
  if (columns < 1) columns = 1;
  const int rows = (static_cast<int>(panels) + columns - 1) / columns;
  std::string s = fmt::format("set terminal {}\nset output {}\n", gnuplot_terminal(path), quoted(path));
  s += style;
  s += fmt::format("set multiplot layout {},{} title {}\n", rows, columns, quoted(page_title));
  return s;
}

}  // namespace

std::string gnuplot_terminal(const std::string& path) {
  if (ends_with(path, ".svg")) return "svg size 1400,900 dynamic background rgb 'white'";
  return "pngcairo size 1400,900 noenhanced";
}

bool run_gnuplot(const std::string& script, std::string& error) {
  // stderr folded into what we read back, so gnuplot's own message reaches the user.
  FILE* pipe = ::popen("gnuplot 2>&1 >/dev/null", "w");
  if (pipe == nullptr) {
    error = "cannot start gnuplot";
    return false;
  }
  std::fwrite(script.data(), 1, script.size(), pipe);
  const int status = ::pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    error = WIFEXITED(status) && WEXITSTATUS(status) == 127
                ? "gnuplot not found (install gnuplot-nox; scripts/setup.sh does)"
                : fmt::format("gnuplot failed (status {})", status);
    return false;
  }
  return true;
}

bool write_bar_charts(const std::string& path, const std::string& page_title, const std::vector<BarChart>& charts,
                      int columns, std::string& error) {
  std::string s = page_start(path, page_title, charts.size(), columns,
                             "set style data histogram\nset style histogram errorbars gap 1 lw 1\n"
                             "set style fill solid 0.6 border -1\nset key top left\nset grid ytics\n"
                             "set yrange [0:*]\nset xtics rotate by -30\n",
                             error);
  if (s.empty()) return false;
  for (size_t c = 0; c < charts.size(); ++c) {
    const BarChart& chart = charts[c];
    // One data block per chart: a row per group, then mean and half-width per series.
    s += fmt::format("$chart{} << EOD\n", c);
    for (size_t g = 0; g < chart.groups.size(); ++g) {
      s += quoted(chart.groups[g]);
      for (const BarSeries& series : chart.series) {
        const double mean = g < series.mean.size() ? series.mean[g] : 0;
        const double half = g < series.half.size() ? series.half[g] : 0;
        s += fmt::format(" {:.6g} {:.6g}", mean, half);
      }
      s += '\n';
    }
    s += "EOD\n";
    s += fmt::format("set title {}\nset ylabel {}\n", quoted(chart.title), quoted(chart.y_label));
    s += "plot ";
    for (size_t k = 0; k < chart.series.size(); ++k) {
      if (k > 0) s += ", ";
      s += fmt::format("$chart{} using {}:{}:xtic(1) title {}", c, 2 + 2 * k, 3 + 2 * k, quoted(chart.series[k].name));
    }
    s += '\n';
  }
  s += "unset multiplot\n";
  return run_gnuplot(s, error);
}

bool write_line_charts(const std::string& path, const std::string& page_title, const std::vector<LineChart>& charts,
                       int columns, std::string& error) {
  std::string s = page_start(path, page_title, charts.size(), columns,
                             "set key top left\nset grid xtics ytics\nset style data linespoints\n", error);
  if (s.empty()) return false;
  for (size_t c = 0; c < charts.size(); ++c) {
    const LineChart& chart = charts[c];
    s += fmt::format("set title {}\nset xlabel {}\nset ylabel {}\n", quoted(chart.title), quoted(chart.x_label),
                     quoted(chart.y_label));
    s += chart.log_x ? "set logscale x\n" : "unset logscale x\n";
    s += chart.log_y ? "set logscale y\nset yrange [*:*]\n" : "unset logscale y\nset yrange [0:*]\n";
    // One data block per series: x, mean, half-width.
    for (size_t k = 0; k < chart.series.size(); ++k) {
      const LineSeries& series = chart.series[k];
      s += fmt::format("$line{}_{} << EOD\n", c, k);
      for (size_t i = 0; i < series.x.size() && i < series.mean.size(); ++i) {
        if ((chart.log_x && series.x[i] <= 0) || (chart.log_y && series.mean[i] <= 0)) continue;
        const double half = i < series.half.size() ? series.half[i] : 0;
        s += fmt::format("{:.6g} {:.6g} {:.6g}\n", series.x[i], series.mean[i], half);
      }
      s += "EOD\n";
    }
    s += "plot ";
    for (size_t k = 0; k < chart.series.size(); ++k) {
      if (k > 0) s += ", ";
      s += fmt::format("$line{0}_{1} using 1:2:3 with yerrorlines title {2}", c, k, quoted(chart.series[k].name));
    }
    s += '\n';
  }
  s += "unset multiplot\n";
  return run_gnuplot(s, error);
}

}  // namespace uvhost::bench
