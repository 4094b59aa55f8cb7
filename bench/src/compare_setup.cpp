// compare_setup.cpp - the shared setup of compare and calibrate (see compare_setup.h).
#include "uvhost/bench/compare_setup.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "uvhost/bench/bench_report.h"
#include "uvhost/bench/live_switch.h"
#include "uvhost/bench/qemu_frontend.h"

namespace uvhost::bench {

Runner real_runner(const RunOptions& options, std::shared_ptr<size_t> failures) {
  if (options.frontend == Frontend::kQemu) (void)find_guest(options.guest_dir);  // throws the "build it" reason
  return retrying(
      [options](const Config& config, const Point& point) { return run_point(config, point, options); },
      kRunRetries, std::move(failures));
}

PairRunner real_pair_runner(const RunOptions& options, Interleave interleave, std::shared_ptr<size_t> failures) {
  if (interleave == Interleave::kRuns) throw std::invalid_argument("a pair runner measures A and B in one call");
  const bool side_by_side = interleave == Interleave::kProcesses;
  if (options.frontend == Frontend::kQemu) {
    if (!side_by_side) throw std::invalid_argument("the qemu frontend interleaves only in processes (two guests)");
    (void)find_guest(options.guest_dir);  // throws the "build it" reason
  }
  return retrying_pairs(
      [options, side_by_side](const Config& a, const Config& b, bool a_first, const Point& point) {
        if (options.frontend == Frontend::kQemu) return run_qemu_side_by_side(a, b, a_first, point, options);
        return side_by_side ? run_point_side_by_side(a, b, a_first, point, options)
                            : run_point_interleaved(a, b, a_first, point, options);
      },
      kRunRetries, std::move(failures));
}

namespace {

// Why two backend processes side by side cannot run A and B (empty: they can).
std::string why_not_side_by_side(Frontend frontend, const Config& a, const Config& b) {
  if (frontend == Frontend::kQemu) {
    const std::string problem = qemu_config_problem(a);
    return problem.empty() ? qemu_config_problem(b) : problem;
  }
  if (a.backend == BackendKind::kSocket || b.backend == BackendKind::kSocket) {
    return "a running backend (socket=) cannot be paused and resumed by the run";
  }
  return {};
}

}  // namespace

InterleaveChoice choose_interleave(InterleaveRequest request, Frontend frontend, const Config& a, const Config& b) {
  InterleaveChoice choice;
  if (request == InterleaveRequest::kRuns) return choice;
  if (request == InterleaveRequest::kAuto || request == InterleaveRequest::kSlices) {
    std::optional<LiveSwitch> sw;
    if (frontend != Frontend::kEmbedded) {
      choice.why = "a guest's configuration is not switched live";
    } else {
      sw = live_switch(a, b, choice.why);
    }
    if (sw) {
      choice.interleave = Interleave::kSlices;
      choice.live_keys = std::move(sw->keys);
      choice.why.clear();
      return choice;
    }
    if (request == InterleaveRequest::kSlices) {
      choice.refused = true;
      return choice;
    }
  }
  const std::string why_not = why_not_side_by_side(frontend, a, b);
  if (why_not.empty()) {
    choice.interleave = Interleave::kProcesses;
    if (request == InterleaveRequest::kProcesses) choice.why.clear();
    return choice;
  }
  if (choice.why.empty() || request == InterleaveRequest::kProcesses) {
    choice.why = why_not;
  } else if (choice.why != why_not) {
    choice.why += "; " + why_not;
  }
  choice.refused = request == InterleaveRequest::kProcesses;
  return choice;
}

InterleaveChoice choose_calibrate_interleave(InterleaveRequest request, Frontend frontend, const Config& base) {
  if (frontend == Frontend::kQemu) {
    InterleaveChoice refused;
    refused.why = "calibrate slows B down with injected per-packet frontend work, which a guest cannot do "
                  "(for an A/A, compare a configuration against itself)";
    refused.refused = true;
    return refused;
  }
  // B differs from A only in the frontend's injected work: any amount stands for it.
  Config slowed = base;
  slowed.frontend_spin_ns += 1;
  return choose_interleave(request, frontend, base, slowed);
}

}  // namespace uvhost::bench
