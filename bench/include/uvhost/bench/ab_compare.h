// ab_compare.h - `uvhost bench compare`: is config B better than config A?
//
// Contract
//  - run_compare() measures every point (workload x size x sessions) `runs` times for
//    each side, A and B back to back; the order alternates each round (A B, B A, A B,
//    ...) so that whatever favours the first or the second run of a pair (a warm cache,
//    a CPU frequency step) cancels over an even number of rounds.
//  - One run is one call of the Runner. The CLI passes run_point() with its
//    RunOptions; tests pass any runner that really measures something. A runner that
//    throws aborts the comparison: the exception is rethrown as std::runtime_error
//    naming the point, the round and the side.
//  - run_compare_interleaved() is the same with a PairRunner: a round is one call that
//    measures A and B together (run_point_interleaved: one backend, the sides switched
//    live every few tens of ms; run_point_side_by_side: two backends, the frontend
//    switching between them as often), a_first alternating per round as above. The rounds'
//    results are analyzed exactly like separate runs. spec.interleave says which was
//    used (reports print it).
//  - Per point it summarizes (stats.h) and compares (ab_stats.h, B vs A) with BOTH
//    methods, paired-t, welch and signed-rank, so one set of runs answers any question:
//      thu        throughput (RunResult::throughput: tps for rr, pps otherwise), higher is better
//      normalize  throughput per CPU-second (RunResult::normalized),            higher is better
//      cpu        CPU used in cores (cpu_seconds / seconds),                     lower is better
//      p99        rr only: round-trip p99 in us,                                 lower is better
//    `method` picks the one the tables show.
//  - Progress: one line per finished run through `progress` (the CLI prints to stderr).
//
// CompareDefaults holds the run count and run length that compare uses when not told
// otherwise; `uvhost bench calibrate` uses the same struct, so a calibration tests
// exactly what a default comparison does.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "uvhost/bench/ab_stats.h"
#include "uvhost/bench/stats.h"
#include "uvhost/bench/workload.h"

namespace uvhost::bench {

using base::to_string;

struct CompareDefaults {
  // 20 rounds of 0.5 s per side after 0.2 s warm-up. Chosen by `uvhost bench
  // calibrate` (docs/BENCHMARKS.md, "Calibration"): the fewest rounds that see the
  // calibration's injected slowdown in at least 80% of trials when A and B are
  // interleaved in slices of one run (Interleave::kSlices, where the configs allow
  // it); in separate runs the VM's speed steps between A's and B's runs hide it.
  static constexpr uint32_t kRuns = 20;
  static constexpr double kSeconds = 0.5;
  // Interleave::kProcesses measures 1.5 s per side instead: there each slice's rate
  // varies more (testpmd's rate into rxonly swings about 8% from one 50 ms slice to the
  // next), and that slice-to-slice noise, not the rounds' differences, sets the spread
  // of a round's B/A; three times the measured time per round cuts it by sqrt(3) for
  // about a third more time per round, most of which is starting the two backends.
  static constexpr double kProcessesSeconds = 1.5;
  static constexpr double kWarmupSeconds = 0.2;
  static constexpr AbMethod kMethod = AbMethod::kPairedT;
  // Better/worse needs the 95% CI to exclude 0 AND a change of at least 1%
  // (apply_min_effect): just above the spread of the calibration's A/A trial means.
  static constexpr double kMinEffect = 0.01;
  // Interleave::kProcesses: its rounds spread more even at 1.5 s (a round's B/A about
  // 2.2% for testpmd, against 1.7% in slices of one process), so the smallest change it
  // claims is scaled alike.
  static constexpr double kProcessesMinEffect = 0.015;
};

using Runner = std::function<RunResult(const Config&, const Point&)>;
// One round of both sides: {A's result, B's result}.
using PairRunner = std::function<std::array<RunResult, 2>(const Config& a, const Config& b, bool a_first, const Point&)>;

// How A and B alternate:
//  - runs: whole runs, each its own backend process, A B / B A per round;
//  - slices: within each round's run, one backend process switched live (live_switch.h);
//  - processes: within each round, two backend processes alive together, the frontend
//    alternating between them in slices and the idle one paused
//    (run_point_side_by_side): for differences no live switch makes (another backend,
//    keys fixed at a port's creation, another binary).
enum class Interleave { kRuns, kSlices, kProcesses };
inline constexpr auto kInterleaveNames = base::name_table<Interleave>(
    {{Interleave::kRuns, "runs"}, {Interleave::kSlices, "slices"}, {Interleave::kProcesses, "processes"}});
constexpr const auto& enum_names(Interleave) noexcept { return kInterleaveNames; }
// Whether a round measures A and B in one call (a PairRunner) rather than two runs.
constexpr bool in_one_call(Interleave interleave) noexcept { return interleave != Interleave::kRuns; }
using ProgressFn = std::function<void(const std::string&)>;

struct CompareSpec {
  Config a;
  Config b;
  std::vector<Point> points;
  uint32_t runs = CompareDefaults::kRuns;
  AbMethod method = CompareDefaults::kMethod;
  // For the report only (the runner owns them): the measured window and warmup.
  double seconds = CompareDefaults::kSeconds;
  double warmup_seconds = CompareDefaults::kWarmupSeconds;
  double min_effect = CompareDefaults::kMinEffect;  // see apply_min_effect
  Interleave interleave = Interleave::kRuns;
  double slice_seconds = 0;           // kSlices, kProcesses: each sub-window's length
  std::vector<std::string> live_keys; // kSlices: what was switched live
  Frontend frontend = Frontend::kEmbedded;  // kQemu with kProcesses: two guests, whole-second windows
};

// One metric of one point: each side's summary and B vs A by both methods.
struct MetricComparison {
  Summary a;
  Summary b;
  AbComparison paired_t;
  AbComparison welch;
  AbComparison signed_rank;
  const AbComparison& by(AbMethod method) const noexcept {
    switch (method) {
      case AbMethod::kWelch:
        return welch;
      case AbMethod::kSignedRank:
        return signed_rank;
      case AbMethod::kPairedT:
        break;
    }
    return paired_t;
  }
};

struct PointComparison {
  Point point;
  std::vector<RunResult> a_runs;  // in round order
  std::vector<RunResult> b_runs;
  std::vector<bool> a_first;  // per round: whether A ran before B
  MetricComparison thu;
  MetricComparison normalize;
  MetricComparison cpu;
  MetricComparison p99;  // rr only; empty summaries otherwise
};

struct CompareResult {
  CompareSpec spec;
  std::vector<PointComparison> points;
};

// The metric's per-run values (what the statistics see), for tables, JSON and tests.
std::vector<double> thu_values(const std::vector<RunResult>& runs, Workload workload);
std::vector<double> normalize_values(const std::vector<RunResult>& runs, Workload workload);
std::vector<double> cpu_cores_values(const std::vector<RunResult>& runs);
std::vector<double> p99_values(const std::vector<RunResult>& runs);

// Summaries and comparisons of one point's runs (a_runs, b_runs filled in), every
// comparison's verdict held to `min_effect`.
void analyze_point(PointComparison& point, double min_effect);

// Throws std::invalid_argument when runs < 2 or there are no points.
CompareResult run_compare(const CompareSpec& spec, const Runner& runner, const ProgressFn& progress = {});
// The same with rounds of both sides at once; in_one_call(spec.interleave) should hold.
CompareResult run_compare_interleaved(const CompareSpec& spec, const PairRunner& runner,
                                      const ProgressFn& progress = {});

}  // namespace uvhost::bench
