// load_sweep.cpp - see load_sweep.h.
#include "uvhost/bench/lab/load_sweep.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "uvhost/bench/ab_stats.h"
#include "uvhost/bench/bench_report.h"
#include "uvhost/bench/stats.h"

namespace uvhost::bench::lab {
namespace {

double backend_cores(const RunResult& run) {
  return run.seconds > 0 ? side_cpu_seconds(run, "backend") / run.seconds : 0;
}

double tps(const RunResult& r) { return r.tps(); }
double p50(const RunResult& r) { return r.p50_us; }
double p99(const RunResult& r) { return r.p99_us; }

std::string offered(const Point& point) {
  return point.rate == 0 ? fmt::format("closed x{}", point.sessions) : si(static_cast<double>(point.rate));
}

// "0.93x [0.88, 0.99]": B/A from a paired comparison's relative difference.
std::string ratio_cell(const AbComparison& c) {
  if (!c.valid()) return "n/a";
  return fmt::format("{}x [{}, {}]", significant(1 + c.relative, 3), significant(1 + c.ci_low, 3),
                     significant(1 + c.ci_high, 3));
}

}  // namespace

double backend_us_per_transaction(const RunResult& run) {
  return run.transactions > 0 ? side_cpu_seconds(run, "backend") * 1e6 / static_cast<double>(run.transactions) : 0;
}

LoadSweep run_load_sweep(const LoadSweepSpec& spec, const PointRunner& load_runner, const PointRunner& idle_runner,
                         const MatrixObserver& observer) {
  if (spec.rates.empty()) throw std::invalid_argument("a load sweep needs at least one rate");
  std::vector<Point> points;
  for (uint64_t rate : spec.rates) points.push_back(Point{Workload::kRr, spec.size, spec.sessions, rate, spec.arrivals});
  LoadSweep sweep{spec, run_config_matrix(spec.configs, points, spec.rounds, load_runner, observer), {}};
  if (spec.idle) {
    sweep.idle = run_config_matrix(spec.configs, {Point{Workload::kRr, spec.size, 1}}, spec.rounds, idle_runner,
                                   observer);
  }
  return sweep;
}

std::vector<TitledTable> load_sweep_tables(const LoadSweep& sweep) {
  std::vector<TitledTable> tables;
  const ConfigMatrix& m = sweep.load;
  TextTable load({"offered/s", "config", "trans/s", "p50 us", "p99 us", "backend us/trans", "backend cores"});
  for (size_t p = 0; p < m.points.size(); ++p) {
    for (size_t c = 0; c < m.configs.size(); ++c) {
      const auto& runs = m.runs[p][c];
      load.add_row({offered(m.points[p]), m.configs[c].label, si_with_ci(summarize(values_of(runs, tps))),
                    with_ci(summarize(values_of(runs, p50))), with_ci(summarize(values_of(runs, p99))),
                    with_ci(summarize(values_of(runs, backend_us_per_transaction))),
                    with_ci(summarize(values_of(runs, backend_cores)))});
    }
  }
  tables.push_back({fmt::format("rr {} B, {} arrivals, at most {} in flight (mean ±95% CI over {} rounds)",
                                sweep.spec.size, to_string(sweep.spec.arrivals), sweep.spec.sessions,
                                sweep.spec.rounds),
                    std::move(load)});

  const auto subject = std::find_if(m.configs.begin(), m.configs.end(),
                                    [&](const Config& c) { return c.label == sweep.spec.subject; });
  if (subject != m.configs.end()) {
    const size_t s = static_cast<size_t>(subject - m.configs.begin());
    for (size_t o = 0; o < m.configs.size(); ++o) {
      if (o == s) continue;
      const std::string& other = m.configs[o].label;
      TextTable ratios({"offered/s", "trans/s", "p50", "p99", "backend us/trans"});
      for (size_t p = 0; p < m.points.size(); ++p) {
        auto cmp = [&](auto metric, Direction direction) {
          return compare_ab(values_of(m.runs[p][o], metric), values_of(m.runs[p][s], metric), AbMethod::kPairedT,
                            direction);
        };
        ratios.add_row({offered(m.points[p]), ratio_cell(cmp(tps, Direction::kHigherIsBetter)),
                        ratio_cell(cmp(p50, Direction::kLowerIsBetter)), ratio_cell(cmp(p99, Direction::kLowerIsBetter)),
                        ratio_cell(cmp(backend_us_per_transaction, Direction::kLowerIsBetter))});
      }
      tables.push_back({fmt::format("{} / {} (paired-t 95% CI over the rounds)", sweep.spec.subject, other),
                        std::move(ratios)});
    }
  }

  if (!sweep.idle.points.empty()) {
    TextTable idle({"config", "backend cores, guest silent", "backend CPU %"});
    for (size_t c = 0; c < sweep.idle.configs.size(); ++c) {
      const Summary cores = summarize(values_of(sweep.idle.runs[0][c], backend_cores));
      idle.add_row({sweep.idle.configs[c].label, with_ci(cores),
                    with_ci(cores.mean * 100, cores.ci95_half * 100)});
    }
    tables.push_back({"idle: connected, warmed up with rr, then silent through the window", std::move(idle)});
  }
  return tables;
}

std::vector<LineChart> load_sweep_charts(const LoadSweep& sweep) {
  const ConfigMatrix& m = sweep.load;
  LineChart cpu{"backend CPU per transaction", "offered transactions/s", "us", true, true, {}};
  LineChart median{"p50 round trip", "offered transactions/s", "us", true, true, {}};
  LineChart tail{"p99 round trip", "offered transactions/s", "us", true, true, {}};
  for (size_t c = 0; c < m.configs.size(); ++c) {
    LineSeries cpu_line{m.configs[c].label, {}, {}, {}}, median_line{m.configs[c].label, {}, {}, {}},
        tail_line{m.configs[c].label, {}, {}, {}};
    for (size_t p = 0; p < m.points.size(); ++p) {
      if (m.points[p].rate == 0) continue;
      const double x = static_cast<double>(m.points[p].rate);
      const Summary us = summarize(values_of(m.runs[p][c], backend_us_per_transaction));
      const Summary p50s = summarize(values_of(m.runs[p][c], p50));
      const Summary p99s = summarize(values_of(m.runs[p][c], p99));
      median_line.x.push_back(x);
      median_line.mean.push_back(p50s.mean);
      median_line.half.push_back(p50s.ci95_half);
      cpu_line.x.push_back(x);
      cpu_line.mean.push_back(us.mean);
      cpu_line.half.push_back(us.ci95_half);
      tail_line.x.push_back(x);
      tail_line.mean.push_back(p99s.mean);
      tail_line.half.push_back(p99s.ci95_half);
    }
    cpu.series.push_back(std::move(cpu_line));
    median.series.push_back(std::move(median_line));
    tail.series.push_back(std::move(tail_line));
  }
  return {cpu, median, tail};
}

nlohmann::json load_sweep_json(const LoadSweep& sweep, const RunOptions& options) {
  nlohmann::json j;
  j["load"] = matrix_to_json(sweep.load, {}, AbMethod::kPairedT, options);
  if (!sweep.idle.points.empty()) j["idle"] = matrix_to_json(sweep.idle, {}, AbMethod::kPairedT, options);
  j["subject"] = sweep.spec.subject;
  j["arrivals"] = std::string(to_string(sweep.spec.arrivals));
  return j;
}

}  // namespace uvhost::bench::lab
