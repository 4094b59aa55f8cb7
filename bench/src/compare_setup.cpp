// compare_setup.cpp - the shared setup of compare and calibrate (see compare_setup.h).
#include "uvhost/bench/compare_setup.h"

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

PairRunner real_pair_runner(const RunOptions& options, std::shared_ptr<size_t> failures) {
  return retrying_pairs(
      [options](const Config& a, const Config& b, bool a_first, const Point& point) {
        return run_point_interleaved(a, b, a_first, point, options);
      },
      kRunRetries, std::move(failures));
}

InterleaveChoice choose_interleave(InterleaveRequest request, Frontend frontend, const Config& a, const Config& b) {
  InterleaveChoice choice;
  if (request == InterleaveRequest::kRuns) return choice;
  std::optional<LiveSwitch> sw;
  if (frontend != Frontend::kEmbedded) {
    choice.why_runs = "the qemu frontend runs one configuration per guest boot";
  } else {
    sw = live_switch(a, b, choice.why_runs);
  }
  if (!sw) {
    choice.refused = request == InterleaveRequest::kSlices;
    return choice;
  }
  choice.interleave = Interleave::kSlices;
  choice.live_keys = std::move(sw->keys);
  choice.why_runs.clear();
  return choice;
}

InterleaveChoice choose_calibrate_interleave(InterleaveRequest request, Frontend frontend, const Config& base) {
  // B differs from A only in the frontend's injected work: any amount stands for it.
  Config slowed = base;
  slowed.frontend_spin_ns += 1;
  return choose_interleave(request, frontend, base, slowed);
}

}  // namespace uvhost::bench
