// ab_plot.cpp - the compare result as bar charts (see ab_plot.h).
#include "uvhost/bench/ab_plot.h"

#include <fmt/format.h>

#include <vector>

#include "uvhost/bench/gnuplot.h"

namespace uvhost::bench {
namespace {

BarSeries series_of(const std::string& name, const CompareResult& result, Workload workload, bool normalize,
                    bool a) {
  BarSeries s;
  s.name = name;
  for (const PointComparison& p : result.points) {
    if (p.point.workload != workload) continue;
    const MetricComparison& m = normalize ? p.normalize : p.thu;
    const Summary& side = a ? m.a : m.b;
    s.mean.push_back(side.mean);
    s.half.push_back(side.ci95_half);
  }
  return s;
}

}  // namespace

bool plot_compare(const CompareResult& result, const std::string& path, std::string& error) {
  const std::string a_name = "A: " + describe(result.spec.a);
  const std::string b_name = "B: " + describe(result.spec.b);
  std::vector<Workload> workloads;
  for (const PointComparison& p : result.points) {
    bool seen = false;
    for (Workload w : workloads) seen = seen || w == p.point.workload;
    if (!seen) workloads.push_back(p.point.workload);
  }
  std::vector<BarChart> charts;
  for (Workload w : workloads) {
    std::vector<std::string> groups;
    for (const PointComparison& p : result.points) {
      if (p.point.workload == w) groups.push_back(fmt::format("{}/{}", p.point.size, p.point.sessions));
    }
    const std::string unit = w == Workload::kRr ? "transactions/s" : "packets/s";
    for (const bool normalize : {false, true}) {
      BarChart chart;
      chart.title = fmt::format("{} {} (size/sessions)", to_string(w), normalize ? "normalize" : "thu");
      chart.y_label = normalize ? unit + " per CPU-second" : unit;
      chart.groups = groups;
      chart.series = {series_of(a_name, result, w, normalize, true),
                      series_of(b_name, result, w, normalize, false)};
      charts.push_back(std::move(chart));
    }
  }
  const std::string title = fmt::format("uvhost bench compare: {} runs of {} s per side, mean ±95% CI",
                                        result.spec.runs, result.spec.seconds);
  return write_bar_charts(path, title, charts, 2, error);
}

}  // namespace uvhost::bench
