// calibrate.cpp - A/A and A/B trials with a known answer, and their rates.
#include "uvhost/bench/calibrate.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "uvhost/bench/ab_report.h"
#include "uvhost/bench/stats.h"
#include "uvhost/bench/table.h"

namespace uvhost::bench {
namespace {

CompareSpec trial_spec(const CalibrateSpec& spec, const Config& a, const Config& b) {
  CompareSpec c;
  c.a = a;
  c.b = b;
  c.points = {spec.point};
  c.runs = spec.runs;
  c.method = CompareDefaults::kMethod;
  c.seconds = spec.seconds;
  c.warmup_seconds = spec.warmup_seconds;
  c.min_effect = spec.min_effect;
  c.interleave = spec.interleave;
  c.slice_seconds = spec.slice_seconds;
  if (a.frontend_spin_ns != b.frontend_spin_ns) c.live_keys = {"spin_ns"};
  return c;
}

const MetricComparison& metric_of(const CompareResult& r, const std::string& metric) {
  const PointComparison& p = r.points.front();
  return metric == "thu" ? p.thu : p.normalize;
}

std::string trial_line(const char* kind, uint32_t trial, uint32_t trials, const CompareResult& r) {
  const PointComparison& p = r.points.front();
  const AbMethod m = CompareDefaults::kMethod;
  return fmt::format("trial {}/{} {}: thu {} {}, normalize {} {}", trial + 1, trials, kind,
                     to_string(p.thu.by(m).verdict), format_relative(p.thu.by(m)),
                     to_string(p.normalize.by(m).verdict), format_relative(p.normalize.by(m)));
}

std::string rate_cell(const Proportion& p) {
  return fmt::format("{}/{} = {:.0f}% [{:.0f}, {:.0f}]", p.successes, p.trials, p.rate * 100, p.low * 100,
                     p.high * 100);
}

nlohmann::json to_json(const Proportion& p) {
  return {{"successes", p.successes},
          {"trials", p.trials},
          {"rate", p.rate},
          {"wilson95_low", p.low},
          {"wilson95_high", p.high}};
}

}  // namespace

uint64_t slowdown_spin_ns(double slowdown, double throughput, Workload workload) {
  if (!(throughput > 0) || !(slowdown > 0)) return 0;
  double per_packet_ns = 1e9 / throughput * slowdown;
  // rr: the frontend spins once for the request it sends and once for the response.
  if (workload == Workload::kRr) per_packet_ns /= 2;
  return static_cast<uint64_t>(std::llround(per_packet_ns));
}

const RateCheck* CalibrateResult::default_check() const noexcept {
  for (const RateCheck& c : checks) {
    if (c.metric == "thu" && c.method == CompareDefaults::kMethod) return &c;
  }
  return nullptr;
}

double CalibrateResult::measured_ab_effect() const {
  std::vector<double> effects;
  for (const CompareResult& r : ab) {
    const AbComparison& c = r.points.front().thu.paired_t;
    if (c.valid()) effects.push_back(c.relative);
  }
  return percentile(effects, 50);
}

double CalibrateResult::aa_log_ratio_sd() const {
  double variance_sum = 0;
  std::size_t trials = 0;
  for (const CompareResult& r : aa) {
    const PointComparison& p = r.points.front();
    const std::vector<double> a_thu = thu_values(p.a_runs, p.point.workload);
    const std::vector<double> b_thu = thu_values(p.b_runs, p.point.workload);
    std::vector<double> d;
    for (std::size_t i = 0; i < a_thu.size() && i < b_thu.size(); ++i) {
      if (a_thu[i] > 0 && b_thu[i] > 0) d.push_back(std::log(b_thu[i] / a_thu[i]));
    }
    if (d.size() < 2) continue;
    const double sd = summarize(d).stddev;
    variance_sum += sd * sd;
    ++trials;
  }
  return trials == 0 ? std::nan("") : std::sqrt(variance_sum / static_cast<double>(trials));
}

RateCheck CalibrateResult::ci_only_default_check() const {
  const AbMethod method = CompareDefaults::kMethod;
  auto ci_verdict = [&](const CompareResult& r) {
    const AbComparison& c = r.points.front().thu.by(method);
    return c.valid() ? verdict_of_interval(c.ci_low, c.ci_high, Direction::kHigherIsBetter) : Verdict::kInvalid;
  };
  std::size_t noise = 0, worse = 0;
  for (const CompareResult& r : aa) noise += ci_verdict(r) == Verdict::kNoise;
  for (const CompareResult& r : ab) worse += ci_verdict(r) == Verdict::kWorse;
  RateCheck c;
  c.metric = "thu";
  c.method = method;
  c.aa_noise = wilson_interval(noise, aa.size());
  c.ab_worse = wilson_interval(worse, ab.size());
  return c;
}

std::vector<RateCheck> rate_checks(const std::vector<CompareResult>& aa,
                                   const std::vector<CompareResult>& ab) {
  std::vector<RateCheck> checks;
  for (const char* metric : {"thu", "normalize"}) {
    for (AbMethod method : {AbMethod::kPairedT, AbMethod::kWelch, AbMethod::kSignedRank}) {
      std::size_t noise = 0;
      std::size_t worse = 0;
      for (const CompareResult& r : aa) noise += metric_of(r, metric).by(method).verdict == Verdict::kNoise;
      for (const CompareResult& r : ab) worse += metric_of(r, metric).by(method).verdict == Verdict::kWorse;
      RateCheck c;
      c.metric = metric;
      c.method = method;
      c.aa_noise = wilson_interval(noise, aa.size());
      c.ab_worse = wilson_interval(worse, ab.size());
      checks.push_back(std::move(c));
    }
  }
  return checks;
}

CalibrateResult run_calibrate(const CalibrateSpec& spec, const Runner& runner, const ProgressFn& progress,
                              const PairRunner& pair_runner) {
  if (in_one_call(spec.interleave) && !pair_runner) {
    throw std::invalid_argument("calibration in slices or processes needs a pair runner");
  }
  if (spec.trials < 1) throw std::invalid_argument("calibration needs at least 1 trial");
  if (spec.runs < 2) throw std::invalid_argument("calibration needs at least 2 runs per comparison");
  if (!(spec.slowdown > 0) || spec.slowdown >= 1) throw std::invalid_argument("slowdown must be in (0, 1)");
  if (spec.pilot_runs < 1) throw std::invalid_argument("calibration needs at least 1 pilot run");

  CalibrateResult result;
  result.spec = spec;
  Config a = spec.base;
  if (a.label.empty()) a.label = "A";

  for (uint32_t i = 0; i < spec.pilot_runs; ++i) {
    const RunResult r = runner(a, spec.point);
    result.pilot_throughput.push_back(r.throughput(spec.point.workload));
    if (progress) {
      progress(fmt::format("pilot {}/{}: {} {}/s", i + 1, spec.pilot_runs, si(result.pilot_throughput.back()),
                           spec.point.workload == Workload::kRr ? "trans" : "pkt"));
    }
  }
  // The median: one disturbed pilot run does not set the spin.
  const double pilot = percentile(result.pilot_throughput, 50);
  result.spin_ns = slowdown_spin_ns(spec.slowdown, pilot, spec.point.workload);
  if (result.spin_ns == 0) {
    throw std::runtime_error(
        fmt::format("the pilot runs measured no usable throughput ({}), cannot size the spin", pilot));
  }
  result.slowed = a;
  result.slowed.frontend_spin_ns = a.frontend_spin_ns + result.spin_ns;
  result.slowed.label = fmt::format("A+{:g}%", spec.slowdown * 100);
  if (progress) {
    progress(fmt::format("spin {} ns per frontend packet makes B {:g}% slower per {}", result.spin_ns,
                         spec.slowdown * 100,
                         spec.point.workload == Workload::kRr ? "transaction" : "packet"));
  }

  // A trial's runs report through `progress` with the trial in front.
  for (uint32_t t = 0; t < spec.trials; ++t) {
    for (const bool is_aa : {true, false}) {
      const char* kind = is_aa ? "A/A" : "A/B";
      ProgressFn inner;
      if (progress)
        inner = [&](const std::string& line) { progress(fmt::format("trial {} {}  {}", t + 1, kind, line)); };
      const CompareSpec trial = trial_spec(spec, a, is_aa ? a : result.slowed);
      CompareResult r = in_one_call(spec.interleave) ? run_compare_interleaved(trial, pair_runner, inner)
                                                     : run_compare(trial, runner, inner);
      if (progress) progress(trial_line(kind, t, spec.trials, r));
      (is_aa ? result.aa : result.ab).push_back(std::move(r));
    }
  }
  result.checks = rate_checks(result.aa, result.ab);
  return result;
}

void print_calibrate_report(const CalibrateResult& result, std::ostream& out) {
  const CalibrateSpec& spec = result.spec;
  out << "calibration of uvhost bench compare at " << describe(spec.point) << "\n";
  out << "A: " << describe(spec.base) << "\n";
  out << fmt::format(
      "B: A with the frontend spinning {} ns per packet ({:g}% more work per {}; pilot median {} {}/s)\n",
      result.spin_ns, spec.slowdown * 100, spec.point.workload == Workload::kRr ? "transaction" : "packet",
      si(percentile(result.pilot_throughput, 50)), spec.point.workload == Workload::kRr ? "trans" : "pkt");
  out << fmt::format("{} trials of A/A and of A/B (compare's defaults unless overridden), each: {}\n",
                     spec.trials, interleave_line(trial_spec(spec, result.spec.base, result.slowed)));
  out << fmt::format(
      "targets: A/A says noise >= {:.0f}%, A/B says worse >= {:.0f}%; rates with Wilson 95% "
      "intervals\n\n",
      kAaNoiseTarget * 100, kAbWorseTarget * 100);
  TextTable table({"metric", "method", "A/A noise", "", "A/B worse", ""});
  for (const RateCheck& c : result.checks) {
    table.add_row({c.metric, std::string(to_string(c.method)), rate_cell(c.aa_noise),
                   c.aa_pass() ? "PASS" : "FAIL", rate_cell(c.ab_worse), c.ab_pass() ? "PASS" : "FAIL"});
  }
  table.print(out);
  out << fmt::format(
      "\nA/B effect measured: thu {:+.1f}% (median of the trials; intended {:+.1f}%; far off means "
      "the pilot runs were disturbed)\n",
      result.measured_ab_effect() * 100, -spec.slowdown / (1 + spec.slowdown) * 100);
  const double sd = result.aa_log_ratio_sd();
  if (std::isfinite(sd)) {
    const std::size_t needed = paired_t_pairs_needed(sd, spec.slowdown);
    out << fmt::format(
        "run-to-run spread of thu (A/A, sd of the paired log ratios): {:.1f}%; at {} runs a paired-t "
        "comparison finds an effect of {:.1f}% or more 80% of the time; a {:g}% effect needs {} runs\n",
        sd * 100, spec.runs, paired_t_detectable_effect(sd, spec.runs) * 100, spec.slowdown * 100,
        needed == 0 ? std::string("more than 10000") : std::to_string(needed));
  }
  if (const RateCheck* d = result.default_check()) {
    out << fmt::format("compare's default (thu, {}, minimum effect {:g}%): {}\n", to_string(d->method),
                       spec.min_effect * 100, d->aa_pass() && d->ab_pass() ? "PASS" : "FAIL");
    const RateCheck ci = result.ci_only_default_check();
    out << fmt::format("the same by the 95% CI alone (no minimum effect): A/A noise {} {}, A/B worse {} {}\n",
                       rate_cell(ci.aa_noise), ci.aa_pass() ? "PASS" : "FAIL", rate_cell(ci.ab_worse),
                       ci.ab_pass() ? "PASS" : "FAIL");
  }
  if (spec.trials < 60) {
    out << "note: with few trials a rate's Wilson interval is wide; a 95% CI that is exactly right still "
           "shows 2 or more false alarms in 20 A/A trials about a quarter of the time.\n";
  }
}

nlohmann::json calibrate_json(const CalibrateResult& result) {
  const CalibrateSpec& spec = result.spec;
  const double sd = result.aa_log_ratio_sd();
  nlohmann::json checks = nlohmann::json::array();
  for (const RateCheck& c : result.checks) {
    checks.push_back({{"metric", c.metric},
                      {"method", to_string(c.method)},
                      {"aa_noise", to_json(c.aa_noise)},
                      {"aa_pass", c.aa_pass()},
                      {"ab_worse", to_json(c.ab_worse)},
                      {"ab_pass", c.ab_pass()}});
  }
  nlohmann::json aa = nlohmann::json::array();
  nlohmann::json ab = nlohmann::json::array();
  for (const CompareResult& r : result.aa) aa.push_back(compare_json(r));
  for (const CompareResult& r : result.ab) ab.push_back(compare_json(r));
  return {{"workload", to_string(spec.point.workload)},
          {"size", spec.point.size},
          {"sessions", spec.point.sessions},
          {"a", describe(spec.base)},
          {"b", describe(result.slowed)},
          {"trials", spec.trials},
          {"runs", spec.runs},
          {"seconds", spec.seconds},
          {"warmup_seconds", spec.warmup_seconds},
          {"interleave", to_string(spec.interleave)},
          {"slice_seconds", spec.slice_seconds},
          {"min_effect", spec.min_effect},
          {"slowdown", spec.slowdown},
          {"pilot_throughput", result.pilot_throughput},
          {"spin_ns", result.spin_ns},
          {"measured_ab_effect", result.measured_ab_effect()},
          {"aa_log_ratio_sd", std::isfinite(sd) ? nlohmann::json(sd) : nlohmann::json(nullptr)},
          {"detectable_effect_80", std::isfinite(sd) ? nlohmann::json(paired_t_detectable_effect(sd, spec.runs))
                                                     : nlohmann::json(nullptr)},
          {"runs_needed_for_slowdown", std::isfinite(sd) ? nlohmann::json(paired_t_pairs_needed(sd, spec.slowdown))
                                                         : nlohmann::json(nullptr)},
          {"targets", {{"aa_noise", kAaNoiseTarget}, {"ab_worse", kAbWorseTarget}}},
          {"checks", checks},
          {"ci_only_default_check",
           [&] {
             const RateCheck ci = result.ci_only_default_check();
             return nlohmann::json{{"aa_noise", to_json(ci.aa_noise)}, {"ab_worse", to_json(ci.ab_worse)}};
           }()},
          {"aa_trials", aa},
          {"ab_trials", ab}};
}

}  // namespace uvhost::bench
