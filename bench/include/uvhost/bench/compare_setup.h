// compare_setup.h - how `uvhost bench compare` and `uvhost bench calibrate` are set up
// from what their user asked for: the policy the commands share, so the CLI only
// parses flags and calls in.
//
// Contract
//  - kRunRetries: how many more times a failed run is tried (bench_report.h,
//    retrying()). Why more than none: a rare stall of one run must not throw away a
//    comparison of hundreds of runs; why so few: a run that keeps failing is a real
//    problem, and it is rethrown.
//  - real_runner(options, failures) / real_pair_runner(options, interleave, failures):
//    one real run of the whole stack (run_point, or for a pair run_point_interleaved
//    when interleave is kSlices and run_point_side_by_side when kProcesses, with
//    `options`), a failed run repeated kRunRetries times and counted in `*failures`.
//    With options.frontend == kQemu the pair runner is run_qemu_side_by_side (only
//    kProcesses). real_runner with options.frontend == kQemu first checks that the guest image
//    exists (throws std::runtime_error saying how to build it).
//  - choose_interleave(request, frontend, a, b):
//      runs:      kRuns.
//      slices:    kSlices (with the keys switched live) when A and B differ only in
//                 what a running backend switches live (live_switch.h) and the
//                 frontend is ours; refused otherwise.
//      processes: kProcesses when the frontend is ours and both backends are started
//                 by the run (not socket=), or the frontend is qemu and both sides
//                 are uvhost without injected frontend work (two guests,
//                 run_qemu_side_by_side); refused otherwise.
//      auto:      slices where possible, else processes, else runs.
//    `why` says why a finer interleaving was not possible (empty when none was
//    skipped); `refused` is set when the one asked for is not possible.
//  - choose_calibrate_interleave(request, frontend, base): the same for calibrate's A
//    and B = A plus injected frontend work (a difference that is always live, so auto
//    gives slices; `processes` calibrates the two-process arrangement). With the qemu
//    frontend it is refused: a guest cannot do the injected work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "uvhost/base/name_table.h"
#include "uvhost/bench/ab_compare.h"
#include "uvhost/bench/workload.h"

namespace uvhost::bench {

using base::to_string;

inline constexpr int kRunRetries = 2;

Runner real_runner(const RunOptions& options, std::shared_ptr<size_t> failures);
PairRunner real_pair_runner(const RunOptions& options, Interleave interleave, std::shared_ptr<size_t> failures);

// What the user asked for (--interleave auto, runs, slices or processes).
enum class InterleaveRequest { kAuto, kRuns, kSlices, kProcesses };
inline constexpr auto kInterleaveRequestNames =
    base::name_table<InterleaveRequest>({{InterleaveRequest::kAuto, "auto"},
                                         {InterleaveRequest::kRuns, "runs"},
                                         {InterleaveRequest::kSlices, "slices"},
                                         {InterleaveRequest::kProcesses, "processes"}});
constexpr const auto& enum_names(InterleaveRequest) noexcept { return kInterleaveRequestNames; }

struct InterleaveChoice {
  Interleave interleave = Interleave::kRuns;
  std::vector<std::string> live_keys;  // kSlices: what is switched live
  std::string why;                     // why a finer interleaving was not possible
  bool refused = false;                // the one asked for is not possible (`why` says why)
};

InterleaveChoice choose_interleave(InterleaveRequest request, Frontend frontend, const Config& a, const Config& b);
InterleaveChoice choose_calibrate_interleave(InterleaveRequest request, Frontend frontend, const Config& base);

}  // namespace uvhost::bench
