// lab_summary.cpp - see lab_summary.h.
#include "uvhost/bench/lab/lab_summary.h"

#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "uvhost/bench/ab_report.h"

namespace uvhost::bench::lab {
double per_second(double count, int64_t wall_ns) {
  return wall_ns > 0 ? count * 1e9 / static_cast<double>(wall_ns) : 0.0;
}

nlohmann::json summary_json(const Summary& s) { return to_json(s); }

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

nlohmann::json ratio_json(const BaselineRatio& r) {
  return {{"value", r.value},
          {"ci95_half", r.ci95_half},
          {"verdict", std::string(to_string(r.verdict))},
          {"better", r.direction == Direction::kHigherIsBetter ? "higher" : "lower"}};
}

void add_bar(BarSeries& series, const Summary& s) {
  series.mean.push_back(s.mean);
  series.half.push_back(s.ci95_half);
}

VariantVerdicts variant_verdicts(const Summary& throughput, const Summary& base_throughput, const Summary& worker_cpu,
                                 const Summary& base_worker_cpu) {
  return {ratio_vs_baseline(throughput, base_throughput, Direction::kHigherIsBetter),
          ratio_vs_baseline(worker_cpu, base_worker_cpu, Direction::kLowerIsBetter)};
}

void print_variant_sweep(const VariantSweepNames& names, const std::vector<int>& counts,
                         const std::vector<std::string>& variants, const VariantCellAt& at, std::ostream& out) {
  // Worker-CPU ratios against the first variant: the "original" column of the upstream
  // measurement.
  const std::string& base = variants[0];
  std::vector<std::string> headers{names.count_header};
  for (const std::string& v : variants) {
    headers.push_back(fmt::format("{} {}", v, names.tp_column));
    headers.push_back(fmt::format("{} worker %", v));
  }
  for (std::size_t k = 1; k < variants.size(); ++k) headers.push_back(fmt::format("worker {}/{}", variants[k], base));
  TextTable table(headers);
  for (int count : counts) {
    std::vector<std::string> row{std::to_string(count)};
    for (std::size_t k = 0; k < variants.size(); ++k) {
      row.push_back(with_ci(at(count, k).throughput->mean, at(count, k).throughput->ci95_half));
      row.push_back(with_ci(at(count, k).worker_cpu->mean, at(count, k).worker_cpu->ci95_half));
    }
    for (std::size_t k = 1; k < variants.size(); ++k) {
      const Ratio r = ratio_of_means(*at(count, k).worker_cpu, *at(count, 0).worker_cpu);
      row.push_back(with_ci(r.value, r.ci95_half));
    }
    table.add_row(std::move(row));
  }
  table.print(out);
  out << "\n";
  if (variants.size() < 2) return;

  out << fmt::format(
      "vs {}: ratio of means ±95% CI and verdict - better/worse: the CI excludes 1 ({}: higher "
      "is better; worker CPU: lower is better), noise: it contains 1\n",
      base, names.throughput_name);
  TextTable verdicts({names.count_header, names.variant_header, names.throughput_name + " ×" + base, "verdict",
                      "worker CPU ×" + base, "verdict"});
  for (int count : counts) {
    if (count != counts.front()) verdicts.add_separator();
    const VariantFigures b = at(count, 0);
    for (std::size_t k = 1; k < variants.size(); ++k) {
      const VariantFigures c = at(count, k);
      const VariantVerdicts v = variant_verdicts(*c.throughput, *b.throughput, *c.worker_cpu, *b.worker_cpu);
      verdicts.add_row({std::to_string(count), variants[k], ratio_text(v.throughput),
                        std::string(to_string(v.throughput.verdict)), ratio_text(v.worker_cpu),
                        std::string(to_string(v.worker_cpu.verdict))});
    }
  }
  verdicts.print(out);
  out << "\n";
}

nlohmann::json variant_vs_first(const VariantFigures& cell, const VariantFigures& base, const std::string& variant_key,
                                std::string_view first, const std::string& throughput_key) {
  const VariantVerdicts v = variant_verdicts(*cell.throughput, *base.throughput, *cell.worker_cpu, *base.worker_cpu);
  return {{variant_key, std::string(first)},
          {throughput_key, ratio_json(v.throughput)},
          {"worker_cpu_pct", ratio_json(v.worker_cpu)}};
}

}  // namespace uvhost::bench::lab
