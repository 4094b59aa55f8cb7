// ab_compare.cpp - interleaved A/B runs per point and their statistics.
#include "uvhost/bench/ab_compare.h"

#include <fmt/format.h>

#include <stdexcept>

#include "uvhost/bench/bench_report.h"

namespace uvhost::bench {
namespace {

MetricComparison compare_metric(const std::vector<double>& a, const std::vector<double>& b,
                                Direction direction, double min_effect) {
  MetricComparison m;
  m.a = summarize(a);
  m.b = summarize(b);
  m.paired_t = compare_ab(a, b, AbMethod::kPairedT, direction);
  m.welch = compare_ab(a, b, AbMethod::kWelch, direction);
  m.signed_rank = compare_ab(a, b, AbMethod::kSignedRank, direction);
  for (AbComparison* c : {&m.paired_t, &m.welch, &m.signed_rank}) apply_min_effect(*c, min_effect);
  return m;
}

std::string progress_line(const Point& point, uint32_t round, uint32_t runs, char side, const RunResult& r) {
  return fmt::format("run {}/{} {}: {}", round + 1, runs, side, run_line(point, r));
}

}  // namespace

std::vector<double> thu_values(const std::vector<RunResult>& runs, Workload workload) {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(r.throughput(workload));
  return v;
}

std::vector<double> normalize_values(const std::vector<RunResult>& runs, Workload workload) {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(r.normalized(workload));
  return v;
}

std::vector<double> cpu_cores_values(const std::vector<RunResult>& runs) {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(r.seconds > 0 ? r.cpu_seconds / r.seconds : 0.0);
  return v;
}

std::vector<double> p99_values(const std::vector<RunResult>& runs) {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(r.p99_us);
  return v;
}

void analyze_point(PointComparison& p, double min_effect) {
  const Workload w = p.point.workload;
  p.thu = compare_metric(thu_values(p.a_runs, w), thu_values(p.b_runs, w), Direction::kHigherIsBetter, min_effect);
  p.normalize = compare_metric(normalize_values(p.a_runs, w), normalize_values(p.b_runs, w),
                               Direction::kHigherIsBetter, min_effect);
  p.cpu = compare_metric(cpu_cores_values(p.a_runs), cpu_cores_values(p.b_runs), Direction::kLowerIsBetter,
                         min_effect);
  if (w == Workload::kRr) {
    p.p99 = compare_metric(p99_values(p.a_runs), p99_values(p.b_runs), Direction::kLowerIsBetter, min_effect);
  } else {
    p.p99 = MetricComparison{};
  }
}

namespace {

// Both run_compare flavours: `round(point, round_index, a_first)` fills one round.
template <typename Round>
CompareResult run_rounds(const CompareSpec& spec, Round&& round) {
  if (spec.runs < 2) throw std::invalid_argument("a comparison needs at least 2 runs of each side");
  if (spec.points.empty()) throw std::invalid_argument("a comparison needs at least one point");
  if (!(spec.min_effect >= 0) || spec.min_effect >= 1) throw std::invalid_argument("min_effect must be in [0, 1)");
  CompareResult result;
  result.spec = spec;
  for (const Point& point : spec.points) {
    PointComparison pc;
    pc.point = point;
    for (uint32_t r = 0; r < spec.runs; ++r) {
      // Even rounds A then B, odd rounds B then A: an order effect adds to A in half
      // the rounds and to B in the other half.
      const bool a_first = r % 2 == 0;
      pc.a_first.push_back(a_first);
      auto [a, b] = round(point, r, a_first);
      pc.a_runs.push_back(std::move(a));
      pc.b_runs.push_back(std::move(b));
    }
    analyze_point(pc, spec.min_effect);
    result.points.push_back(std::move(pc));
  }
  return result;
}

}  // namespace

CompareResult run_compare(const CompareSpec& spec, const Runner& runner, const ProgressFn& progress) {
  return run_rounds(spec, [&](const Point& point, uint32_t round, bool a_first) {
    std::array<RunResult, 2> sides;
    for (int slot = 0; slot < 2; ++slot) {
      const bool is_a = (slot == 0) == a_first;
      const Config& config = is_a ? spec.a : spec.b;
      const char side = is_a ? 'A' : 'B';
      RunResult r;
      try {
        r = runner(config, point);
      } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format("{}, round {} of {}, {} ({}): {}", describe(point), round + 1,
                                             spec.runs, side, describe(config), e.what()));
      }
      if (progress) progress(progress_line(point, round, spec.runs, side, r));
      sides[is_a ? 0 : 1] = std::move(r);
    }
    return sides;
  });
}

CompareResult run_compare_interleaved(const CompareSpec& spec, const PairRunner& runner,
                                      const ProgressFn& progress) {
  return run_rounds(spec, [&](const Point& point, uint32_t round, bool a_first) {
    std::array<RunResult, 2> sides;
    try {
      sides = runner(spec.a, spec.b, a_first, point);
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("{}, round {} of {}, A ({}) with B ({}) in slices: {}",
                                           describe(point), round + 1, spec.runs, describe(spec.a),
                                           describe(spec.b), e.what()));
    }
    if (progress) {
      progress(progress_line(point, round, spec.runs, 'A', sides[0]));
      progress(progress_line(point, round, spec.runs, 'B', sides[1]));
    }
    return sides;
  });
}

}  // namespace uvhost::bench
