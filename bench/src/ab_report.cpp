// ab_report.cpp - tables, JSON and CSV of an A/B comparison.
#include "uvhost/bench/ab_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "uvhost/bench/bench_report.h"
#include "uvhost/bench/qemu_frontend.h"
#include "uvhost/bench/table.h"

namespace uvhost::bench {
namespace {

// A user-given label in front of the config ("busy50: poll=busy,busy_us=50"); none when
// the label is just the side's letter.
std::string side_name(const Config& config, const char* letter) {
  return config.label.empty() || config.label == letter ? std::string() : config.label + ": ";
}

std::string mean_ci(const Summary& s) { return si_with_ci(s); }

std::string pair_of(const Summary& a, const Summary& b, int decimals) {
  return fmt::format("{:.{}f}/{:.{}f}", a.mean, decimals, b.mean, decimals);
}

// "worse", or "noise <1%" when the minimum effect turned a CI verdict into noise.
std::string verdict_cell(const AbComparison& c, double min_effect) {
  if (c.below_min_effect) return fmt::format("noise <{:g}%", min_effect * 100);
  return std::string(to_string(c.verdict));
}

nlohmann::json to_json(const MetricComparison& m) {
  return {{"a", to_json(m.a)},
          {"b", to_json(m.b)},
          {"paired_t", to_json(m.paired_t)},
          {"welch", to_json(m.welch)},
          {"signed_rank", to_json(m.signed_rank)}};
}

nlohmann::json config_json(const Config& config) {
  return {{"label", config.label}, {"config", describe(config)}};
}

void print_workload_table(const CompareResult& result, Workload workload, std::ostream& out) {
  const AbMethod method = result.spec.method;
  const bool rr = workload == Workload::kRr;
  std::vector<std::string> headers{
      "size",    "sessions",       "A thu", "B thu", "+thu% [95% CI]", "verdict", "+normalize% [95% CI]",
      "verdict", "CPU A/B (cores)"};
  if (rr) headers.emplace_back("p99 A/B (us)");
  TextTable table(headers);
  for (const PointComparison& p : result.points) {
    if (p.point.workload != workload) continue;
    std::vector<std::string> row{std::to_string(p.point.size),
                                 std::to_string(p.point.sessions),
                                 mean_ci(p.thu.a),
                                 mean_ci(p.thu.b),
                                 format_relative(p.thu.by(method)),
                                 verdict_cell(p.thu.by(method), result.spec.min_effect),
                                 format_relative(p.normalize.by(method)),
                                 verdict_cell(p.normalize.by(method), result.spec.min_effect),
                                 pair_of(p.cpu.a, p.cpu.b, 2)};
    if (rr) row.push_back(pair_of(p.p99.a, p.p99.b, 1));
    table.add_row(std::move(row));
  }
  out << to_string(workload) << " (thu: " << (rr ? "transactions/s" : "packets/s")
      << ", normalize: thu per CPU-second of every measured thread)\n";
  table.print(out);
  // Invalid comparisons say why, under the table (a failed run reads 0).
  for (const PointComparison& p : result.points) {
    if (p.point.workload != workload) continue;
    for (const AbComparison* c : {&p.thu.by(method), &p.normalize.by(method)}) {
      if (!c->valid()) out << "  " << describe(p.point) << ": n/a because " << c->reason << "\n";
    }
  }
}

}  // namespace

std::string interleave_line(const CompareSpec& spec) {
  if (spec.interleave == Interleave::kSlices) {
    return fmt::format(
        "{} rounds per point, each one backend process running A and B in turn: {} s measured per side "
        "in ~{:g} ms slices (A B B A ..., first side alternating per round, switched live: {}) after {} s "
        "warmup",
        spec.runs, spec.seconds, spec.slice_seconds * 1e3,
        spec.live_keys.empty() ? std::string("nothing differs") : fmt::format("{}", fmt::join(spec.live_keys, ", ")),
        spec.warmup_seconds);
  }
  if (spec.interleave == Interleave::kProcesses && spec.frontend == Frontend::kQemu) {
    const long window = guest_seconds(spec.slice_seconds);
    return fmt::format(
        "{} rounds per point, each with two Linux guests under QEMU (A's and B's, each on its own uvhost "
        "serve) booted once and alive together: {} s measured per side in {} s windows (A B B A ..., "
        "first side alternating per round; each window one iperf3 or ping run after its {} s warmup, the "
        "idle guest and its backend paused with SIGSTOP)",
        spec.runs, window * guest_windows(spec.seconds, spec.slice_seconds), window,
        guest_seconds(spec.warmup_seconds));
  }
  if (spec.interleave == Interleave::kProcesses) {
    return fmt::format(
        "{} rounds per point, each with A's and B's backend processes alive together: {} s measured per side "
        "in ~{:g} ms slices (A B B A ..., first side alternating per round; the frontend switches between "
        "them, the idle one paused with SIGSTOP) after {} s warmup each",
        spec.runs, spec.seconds, spec.slice_seconds * 1e3, spec.warmup_seconds);
  }
  return fmt::format(
      "{} runs per side and point, each its own backend process, {} s measured after {} s warmup, A and B "
      "back to back (order alternating)",
      spec.runs, spec.seconds, spec.warmup_seconds);
}

nlohmann::json to_json(const AbComparison& c) {
  nlohmann::json j{{"method", to_string(c.method)}, {"verdict", to_string(c.verdict)}, {"n", c.n}};
  if (!c.valid()) {
    j["reason"] = c.reason;
    return j;
  }
  j["relative"] = c.relative;
  j["ci_low"] = c.ci_low;
  j["ci_high"] = c.ci_high;
  j["t"] = c.t;  // +-inf is written as null
  j["dof"] = c.dof;
  j["p_value"] = c.p_value;
  j["below_min_effect"] = c.below_min_effect;
  return j;
}

nlohmann::json to_json(const Summary& s) {
  return {{"n", s.n},           {"mean", s.mean}, {"stddev", s.stddev}, {"ci95_half", s.ci95_half},
          {"median", s.median}, {"min", s.min},   {"max", s.max}};
}

void print_compare_report(const CompareResult& result, std::ostream& out) {
  const CompareSpec& spec = result.spec;
  out << "A: " << side_name(spec.a, "A") << describe(spec.a) << "\n";
  out << "B: " << side_name(spec.b, "B") << describe(spec.b) << "\n";
  out << "interleave: " << interleave_line(spec) << "\n";
  out << "method: " << method_assumption(spec.method) << "\n";
  if (spec.min_effect > 0) {
    out << fmt::format(
        "+x%: B vs A, 95% CI in brackets; verdict better/worse when the CI excludes 0 and |x| >= {:g}% "
        "(--min-effect), noise otherwise (\"noise <{:g}%\": the CI excluded 0, the change is under the minimum)\n",
        spec.min_effect * 100, spec.min_effect * 100);
  } else {
    out << "+x%: B vs A, 95% CI in brackets; verdict noise when the CI contains 0\n";
  }
  std::vector<Workload> seen;
  for (const PointComparison& p : result.points) {
    bool known = false;
    for (Workload w : seen) known = known || w == p.point.workload;
    if (known) continue;
    seen.push_back(p.point.workload);
    out << "\n";
    print_workload_table(result, p.point.workload, out);
  }
}

nlohmann::json compare_json(const CompareResult& result) {
  const CompareSpec& spec = result.spec;
  nlohmann::json points = nlohmann::json::array();
  for (const PointComparison& p : result.points) {
    nlohmann::json rounds = nlohmann::json::array();
    for (std::size_t i = 0; i < p.a_runs.size() && i < p.b_runs.size(); ++i) {
      rounds.push_back({{"round", i + 1},
                        {"a_first", i < p.a_first.size() && p.a_first[i]},
                        {"a", run_to_json(p.a_runs[i])},
                        {"b", run_to_json(p.b_runs[i])}});
    }
    nlohmann::json metrics{
        {"thu", to_json(p.thu)}, {"normalize", to_json(p.normalize)}, {"cpu_cores", to_json(p.cpu)}};
    if (p.point.workload == Workload::kRr) metrics["p99_us"] = to_json(p.p99);
    points.push_back({{"workload", to_string(p.point.workload)},
                      {"size", p.point.size},
                      {"sessions", p.point.sessions},
                      {"runs", rounds},
                      {"metrics", metrics}});
  }
  return {{"a", config_json(spec.a)},
          {"b", config_json(spec.b)},
          {"runs", spec.runs},
          {"seconds", spec.seconds},
          {"warmup_seconds", spec.warmup_seconds},
          {"min_effect", spec.min_effect},
          {"interleave", to_string(spec.interleave)},
          {"frontend", to_string(spec.frontend)},
          {"slice_seconds", spec.slice_seconds},
          {"live_keys", spec.live_keys},
          {"method", to_string(spec.method)},
          {"assumption", method_assumption(spec.method)},
          {"points", points}};
}

void write_compare_csv(const CompareResult& result, std::ostream& out) {
  out << "workload,size,sessions,round,side,first,seconds,packets,bytes,transactions,throughput,normalized,"
         "cpu_seconds,p50_us,p99_us,p999_us\n";
  for (const PointComparison& p : result.points) {
    const Workload w = p.point.workload;
    for (std::size_t i = 0; i < p.a_runs.size() && i < p.b_runs.size(); ++i) {
      const bool a_first = i < p.a_first.size() && p.a_first[i];
      for (const bool is_a : {true, false}) {
        const RunResult& r = is_a ? p.a_runs[i] : p.b_runs[i];
        out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", to_string(w), p.point.size,
                           p.point.sessions, i + 1, is_a ? 'A' : 'B', is_a == a_first ? 1 : 0, r.seconds,
                           r.packets, r.bytes, r.transactions, r.throughput(w), r.normalized(w),
                           r.cpu_seconds, r.p50_us, r.p99_us, r.p999_us);
      }
    }
  }
}

}  // namespace uvhost::bench
