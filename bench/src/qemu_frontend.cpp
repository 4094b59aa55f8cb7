// qemu_frontend.cpp - one measured run with a Linux guest under QEMU as the traffic
// source (see qemu_frontend.h): the guest runs the workload's test once from its kernel
// command line, then powers off.
#include "uvhost/bench/qemu_frontend.h"

#include "qemu_guest.h"
#include "uvhost/bench/run_dir.h"

namespace uvhost::bench {

RunResult run_qemu_point(const Config& config, const Point& point, const RunOptions& options) {
  detail::validate_qemu_run(config, point, options);
  RunDir dir(options.work_dir, "uvhost-bench-qemu");
  const std::string test = detail::guest_test(point.workload);
  detail::QemuGuest guest(config, point, options, dir, "", test);
  detail::GuestWindow window = guest.measure(
      test, detail::deadline_in(detail::kGuestSlackSeconds +
                                static_cast<double>(guest.warmup_seconds() + guest.window_seconds())));
  guest.finish();

  RunResult result = std::move(window.result);
  for (ThreadCpu& t : thread_cpu_between(window.qemu_start, window.qemu_end, result.seconds, "frontend")) {
    result.threads.push_back(std::move(t));
  }
  for (ThreadCpu& t : thread_cpu_between(window.uvhost_start, window.uvhost_end, result.seconds, "backend")) {
    result.threads.push_back(std::move(t));
  }
  for (const ThreadCpu& t : result.threads) result.cpu_seconds += t.cpu_seconds;
  return result;
}

}  // namespace uvhost::bench
