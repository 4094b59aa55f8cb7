// config_matrix.cpp - see config_matrix.h.
#include "uvhost/bench/lab/config_matrix.h"

#include <cstdio>
#include <stdexcept>

#include <fmt/format.h>

#include "uvhost/bench/lab/lab_summary.h"

namespace uvhost::bench::lab {
namespace {

double cores_of(const RunResult& run) { return run.seconds > 0 ? run.cpu_seconds / run.seconds : 0; }

double mean_of(const std::vector<double>& values) { return summarize(values).mean; }  // 0 when empty

nlohmann::json comparison_json(const AbComparison& c) {
  return {{"verdict", std::string(to_string(c.verdict))}, {"relative", c.relative}, {"ci_low", c.ci_low},
          {"ci_high", c.ci_high}, {"p_value", c.p_value}, {"n", c.n}, {"reason", c.reason}};
}

}  // namespace

ConfigMatrix run_config_matrix(const std::vector<Config>& configs, const std::vector<Point>& points, int rounds,
                               const PointRunner& runner, const MatrixObserver& observer) {
  if (configs.size() < 2) throw std::invalid_argument("a config matrix needs a baseline and one more configuration");
  if (rounds < 2) throw std::invalid_argument("a config matrix needs at least 2 rounds (one pair is no statistics)");
  ConfigMatrix matrix{configs, points, {}};
  matrix.runs.assign(points.size(), std::vector<std::vector<RunResult>>(configs.size()));
  const size_t total = points.size() * configs.size() * static_cast<size_t>(rounds);
  size_t done = 0;
  for (int round = 0; round < rounds; ++round) {
    for (size_t p = 0; p < points.size(); ++p) {
      // Rotate who goes first, so no configuration always runs right after the
      // (possibly warmer or noisier) previous point.
      const size_t first = (static_cast<size_t>(round) + p) % configs.size();
      for (size_t k = 0; k < configs.size(); ++k) {
        const size_t c = (first + k) % configs.size();
        if (observer) observer({configs[c], points[p], done, total, nullptr});
        RunResult result = runner(configs[c], points[p]);
        ++done;
        if (observer) observer({configs[c], points[p], done, total, &result});
        matrix.runs[p][c].push_back(std::move(result));
      }
    }
  }
  return matrix;
}

std::vector<BaselineComparison> compare_to_baseline(const ConfigMatrix& matrix, AbMethod method) {
  std::vector<BaselineComparison> out;
  for (size_t p = 0; p < matrix.points.size(); ++p) {
    const Workload workload = matrix.points[p].workload;
    auto column = [&](size_t c, auto metric) { return values_of(matrix.runs[p][c], metric); };
    auto thu = [&](const RunResult& r) { return r.throughput(workload); };
    auto normalized = [&](const RunResult& r) { return r.normalized(workload); };
    auto p99 = [](const RunResult& r) { return r.p99_us; };
    const auto base_thu = column(0, thu), base_norm = column(0, normalized), base_cores = column(0, cores_of),
               base_p99 = column(0, p99);
    for (size_t c = 1; c < matrix.configs.size(); ++c) {
      BaselineComparison cmp;
      cmp.point_index = p;
      cmp.config_index = c;
      const auto cfg_thu = column(c, thu), cfg_cores = column(c, cores_of), cfg_p99 = column(c, p99);
      cmp.thu = compare_ab(base_thu, cfg_thu, method);
      cmp.normalize = compare_ab(base_norm, column(c, normalized), method);
      cmp.cores = compare_ab(base_cores, cfg_cores, method, Direction::kLowerIsBetter);
      if (workload == Workload::kRr) cmp.p99 = compare_ab(base_p99, cfg_p99, method, Direction::kLowerIsBetter);
      cmp.base_thu = mean_of(base_thu);
      cmp.thu_mean = mean_of(cfg_thu);
      cmp.base_cores = mean_of(base_cores);
      cmp.cores_mean = mean_of(cfg_cores);
      cmp.base_p99_us = mean_of(base_p99);
      cmp.p99_us = mean_of(cfg_p99);
      out.push_back(std::move(cmp));
    }
  }
  return out;
}

std::vector<TitledTable> matrix_tables(const ConfigMatrix& matrix, const std::vector<BaselineComparison>& comparisons) {
  std::vector<TitledTable> tables;
  const std::string base = matrix.configs[0].label;
  for (Workload workload : {Workload::kRr, Workload::kStreamTx, Workload::kStreamRx}) {
    for (size_t c = 1; c < matrix.configs.size(); ++c) {
      const bool rr = workload == Workload::kRr;
      const std::string unit = rr ? "trans/s" : "pkt/s";
      TextTable table({"size", "sessions", base + " " + unit, matrix.configs[c].label + " " + unit, "+thu% [95% CI]",
                       "thu", "+normalize% [95% CI]", "normalize", "cores " + base + " -> " + matrix.configs[c].label,
                       rr ? "p99 us " + base + " -> " + matrix.configs[c].label : std::string("-")});
      bool any = false;
      for (const BaselineComparison& cmp : comparisons) {
        const Point& point = matrix.points[cmp.point_index];
        if (cmp.config_index != c || point.workload != workload) continue;
        any = true;
        table.add_row({std::to_string(point.size), std::to_string(point.sessions), si(cmp.base_thu), si(cmp.thu_mean),
                       format_relative(cmp.thu), std::string(to_string(cmp.thu.verdict)),
                       format_relative(cmp.normalize), std::string(to_string(cmp.normalize.verdict)),
                       fmt::format("{:.2f} -> {:.2f} ({})", cmp.base_cores, cmp.cores_mean, to_string(cmp.cores.verdict)),
                       rr ? fmt::format("{} -> {} ({})", significant(cmp.base_p99_us, 3), significant(cmp.p99_us, 3),
                                        to_string(cmp.p99.verdict))
                          : std::string("")});
      }
      if (!any) continue;
      tables.push_back({fmt::format("{}: {} ({}) vs {} ({})", to_string(workload), matrix.configs[c].label,
                                    describe(matrix.configs[c]), base, describe(matrix.configs[0])),
                        std::move(table)});
    }
  }
  return tables;
}

nlohmann::json matrix_to_json(const ConfigMatrix& matrix, const std::vector<BaselineComparison>& comparisons,
                              AbMethod method, const RunOptions& options) {
  nlohmann::json j;
  j["method"] = std::string(to_string(method));
  j["method_assumption"] = std::string(method_assumption(method));
  j["options"] = {{"seconds", options.seconds},   {"warmup_seconds", options.warmup_seconds},
                  {"queue_pairs", options.queue_pairs}, {"pin", options.pin},
                  {"frontend_cpu", options.frontend_cpu}, {"backend_cpu", options.backend_cpu}};
  j["configs"] = nlohmann::json::array();
  for (const Config& config : matrix.configs) j["configs"].push_back({{"label", config.label}, {"config", describe(config)}});
  j["points"] = nlohmann::json::array();
  for (size_t p = 0; p < matrix.points.size(); ++p) {
    const Point& point = matrix.points[p];
    nlohmann::json jp = {{"workload", std::string(to_string(point.workload))},
                         {"size", point.size},
                         {"sessions", point.sessions},
                         {"offered_rate", point.rate},
                         {"arrivals", std::string(to_string(point.arrivals))},
                         {"runs", nlohmann::json::object()}};
    for (size_t c = 0; c < matrix.configs.size(); ++c) {
      nlohmann::json runs = nlohmann::json::array();
      for (const RunResult& run : matrix.runs[p][c]) runs.push_back(run_to_json(run));
      jp["runs"][matrix.configs[c].label] = std::move(runs);
    }
    jp["vs_baseline"] = nlohmann::json::object();
    for (const BaselineComparison& cmp : comparisons) {
      if (cmp.point_index != p) continue;
      jp["vs_baseline"][matrix.configs[cmp.config_index].label] = {
          {"thu", comparison_json(cmp.thu)},         {"normalize", comparison_json(cmp.normalize)},
          {"cores", comparison_json(cmp.cores)},     {"p99_us", comparison_json(cmp.p99)},
          {"base_thu", cmp.base_thu},                {"thu_mean", cmp.thu_mean},
          {"base_cores", cmp.base_cores},            {"cores_mean", cmp.cores_mean},
          {"base_p99_us", cmp.base_p99_us},          {"p99_us_mean", cmp.p99_us}};
    }
    j["points"].push_back(std::move(jp));
  }
  return j;
}

std::vector<BarChart> matrix_charts(const ConfigMatrix& matrix) {
  std::vector<BarChart> charts;
  for (Workload workload : {Workload::kRr, Workload::kStreamTx, Workload::kStreamRx}) {
    const bool rr = workload == Workload::kRr;
    BarChart thu{fmt::format("{}: throughput", to_string(workload)), rr ? "transactions/s" : "packets/s", {}, {}};
    BarChart norm{fmt::format("{}: normalized", to_string(workload)),
                  rr ? "transactions per CPU-second" : "packets per CPU-second", {}, {}};
    for (const Config& config : matrix.configs) {
      thu.series.push_back({config.label, {}, {}});
      norm.series.push_back({config.label, {}, {}});
    }
    for (size_t p = 0; p < matrix.points.size(); ++p) {
      const Point& point = matrix.points[p];
      if (point.workload != workload) continue;
      thu.groups.push_back(fmt::format("{}/{}", point.size, point.sessions));
      norm.groups.push_back(thu.groups.back());
      for (size_t c = 0; c < matrix.configs.size(); ++c) {
        const auto& runs = matrix.runs[p][c];
        add_bar(thu.series[c], summarize(values_of(runs, [&](const RunResult& r) { return r.throughput(workload); })));
        add_bar(norm.series[c], summarize(values_of(runs, [&](const RunResult& r) { return r.normalized(workload); })));
      }
    }
    if (thu.groups.empty()) continue;
    charts.push_back(std::move(thu));
    charts.push_back(std::move(norm));
  }
  return charts;
}

MatrixObserver matrix_progress() {
  return [](const MatrixRunEvent& event) {
    if (event.result == nullptr) return;
    std::fprintf(stderr, "[%zu/%zu] %s %s\n", event.done, event.total, event.config.label.c_str(),
                 run_line(event.point, *event.result).c_str());
  };
}

}  // namespace uvhost::bench::lab
