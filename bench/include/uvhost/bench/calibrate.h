// calibrate.h - `uvhost bench calibrate`: does `uvhost bench compare` tell the truth
// on this machine?
//
// A comparison's 95% CI is only as good as its assumptions (independent, roughly normal
// runs); a shared, noisy machine can break them. Calibration measures the comparison
// itself, with answers known in advance:
//  - A/A: `trials` comparisons of a config against itself. The truth is "no
//    difference", so at least 95% of them must say noise (the false-alarm rate a 95%
//    CI promises).
//  - A/B: `trials` comparisons of A against B = A slowed down by `slowdown` (3% by
//    default): B's frontend does Config::frontend_spin_ns of CPU work per packet
//    (injected_work.h: a fixed iteration count, not a clock-timed wait). The truth is
//    "B is worse", so at least 80% of them must say worse (the power to see a
//    difference of that size).
// Trial i runs its A/A comparison, then its A/B comparison, each exactly as
// run_compare() does (same runs, alternating order), so calibration tests what compare
// does with the same CompareDefaults. With interleave = kSlices (what compare does when
// A and B differ only in live-switchable keys, as A and A+spin do) each round is one
// call of the PairRunner (run_compare_interleaved), as compare would run it. With
// kProcesses the same, each round in two backend processes side by side: the A/A
// trials then compare two processes of the same backend (testpmd and testpmd, uvhost
// and uvhost), which is the arrangement a comparison against another backend uses.
//
// The slowdown's spin comes from a pilot: `pilot_runs` runs of A, median throughput;
// one packet's time is 1/throughput, and the spin adds `slowdown` of it. For rr each
// transaction is one packet sent and one received by the frontend, both spun, so
// spin_ns = slowdown / tps / 2; for stream workloads spin_ns = slowdown / pps. The spin
// lengthens the frontend's per-packet path; it slows throughput by ~slowdown only where
// the frontend's per-packet time is what limits it (rr with one session: the
// round trip), and it always costs CPU, so normalize sees it.
//
// Each rate (thu and normalize x paired-t, welch and signed-rank, all from the same runs) comes with
// its Wilson 95% interval and PASS/FAIL of the point estimate against its target. With
// 20 trials, PASS on A/A needs at most one false alarm: a perfectly calibrated 95% CI
// still fails that about a quarter of the time (binomial), so read the intervals.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "uvhost/bench/ab_compare.h"
#include "uvhost/bench/ab_stats.h"
#include "uvhost/bench/workload.h"

namespace uvhost::bench {

struct CalibrateDefaults {
  // A point where extra frontend work per packet really slows the run, and runs
  // repeat: stream-tx of 1500-byte frames with a backend that polls without end (the
  // frontend, which builds every frame, sets the pace). Elsewhere the injected work
  // hides (docs/BENCHMARKS.md, "Calibration"): rr with notify is bimodal, rr with
  // poll=always paces on the backend's loop, and stream-rx paces on the source.
  static constexpr std::string_view kConfig = "poll=always";
  static constexpr Workload kWorkload = Workload::kStreamTx;
  static constexpr uint32_t kSize = 1500;
  static constexpr uint32_t kSessions = 1;
  static constexpr uint32_t kTrials = 20;
  static constexpr double kSlowdown = 0.03;
};

struct CalibrateSpec {
  Config base;  // A (its label is set to "A" if empty)
  Point point{CalibrateDefaults::kWorkload, CalibrateDefaults::kSize, CalibrateDefaults::kSessions};
  uint32_t trials = CalibrateDefaults::kTrials;
  double slowdown = CalibrateDefaults::kSlowdown;
  uint32_t pilot_runs = 3;
  uint32_t runs = CompareDefaults::kRuns;
  // For the report only (the runner owns them).
  double seconds = CompareDefaults::kSeconds;
  double warmup_seconds = CompareDefaults::kWarmupSeconds;
  // kSlices, kProcesses: every comparison's rounds go through the PairRunner;
  // slice_seconds is for the report.
  Interleave interleave = Interleave::kRuns;
  double slice_seconds = 0;
  double min_effect = CompareDefaults::kMinEffect;  // as compare's --min-effect
};

inline constexpr double kAaNoiseTarget = 0.95;
inline constexpr double kAbWorseTarget = 0.80;

// The spin per frontend packet that makes a run of `throughput` (tps for rr, pps
// otherwise) do `slowdown` more work per transaction or packet. 0 when throughput <= 0.
uint64_t slowdown_spin_ns(double slowdown, double throughput, Workload workload);

struct RateCheck {
  std::string metric;  // "thu" or "normalize"
  AbMethod method = AbMethod::kPairedT;
  Proportion aa_noise;  // A/A comparisons that said noise
  Proportion ab_worse;  // A/B comparisons that said worse
  bool aa_pass() const noexcept { return aa_noise.trials > 0 && aa_noise.rate >= kAaNoiseTarget; }
  bool ab_pass() const noexcept { return ab_worse.trials > 0 && ab_worse.rate >= kAbWorseTarget; }
};

struct CalibrateResult {
  CalibrateSpec spec;
  std::vector<double> pilot_throughput;  // per pilot run
  uint64_t spin_ns = 0;
  Config slowed;                  // B
  std::vector<CompareResult> aa;  // per trial
  std::vector<CompareResult> ab;
  std::vector<RateCheck> checks;  // thu and normalize x paired-t, welch and signed-rank
  // The row for what compare shows by default (thu, CompareDefaults::kMethod).
  const RateCheck* default_check() const noexcept;
  // The effect B really had: median over the A/B trials of the paired-t thu relative
  // difference (about -slowdown / (1 + slowdown) when the pilot sized the spin right;
  // far off when the pilot runs were disturbed). 0 without valid trials.
  double measured_ab_effect() const;
  // The run-to-run spread the comparisons worked against: the standard deviation of
  // the per-round log ratios ln(B/A) of thu over the A/A trials (pooled: the root of
  // the mean of each trial's variance). With paired_t_detectable_effect() /
  // paired_t_pairs_needed() it says what the run count can see on this machine, and
  // how many runs a `slowdown` needs. NaN without A/A trials.
  double aa_log_ratio_sd() const;
  // The default check (thu, CompareDefaults::kMethod) by the CI alone, as if
  // min_effect were 0: how much the minimum effect does.
  RateCheck ci_only_default_check() const;
};

// Throws std::invalid_argument on a bad spec (trials < 1, runs < 2, slowdown <= 0,
// kSlices or kProcesses without a pair runner), std::runtime_error when the pilot measures no
// throughput or a run fails. The pilot runs use `runner` (one side).
CalibrateResult run_calibrate(const CalibrateSpec& spec, const Runner& runner,
                              const ProgressFn& progress = {}, const PairRunner& pair_runner = {});

// Rates from finished trials (run_calibrate uses it; tests call it on their own).
std::vector<RateCheck> rate_checks(const std::vector<CompareResult>& aa,
                                   const std::vector<CompareResult>& ab);

void print_calibrate_report(const CalibrateResult& result, std::ostream& out);
// Every trial's comparisons (both methods) and every raw run, plus the rates.
nlohmann::json calibrate_json(const CalibrateResult& result);

}  // namespace uvhost::bench
