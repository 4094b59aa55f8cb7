// qemu_guest.h - one Linux guest under QEMU on its own `uvhost serve`, as a bench's
// traffic source: what run_qemu_point (one scripted run) and run_qemu_side_by_side (two
// guests alive together, each told when to run) share. Internal to the bench library.
//
// Contract
// --------
//  - QemuGuest(config, point, options, dir, prefix, tests) brings up, in this order: a
//    fresh network namespace (uvh-bench-<pid>-<n>), `uvhost serve` in it (pinned to
//    backend_cpu) with one port `backend=tap` on a fresh tap (+ the Config's port keys
//    and daemon flags), the tap's host end at 10.0.9.1/24, `iperf3 -s` there for stream
//    workloads (not pinned: the peer, its CPU not counted), and QEMU (pinned to
//    frontend_cpu; tcg unless the guest folder's `accel` says kvm) booting the guest of
//    scripts/build-guest.sh with `tests` and the point's orders on the kernel command
//    line (scripts/guest-init.sh), its console in <prefix>guest.log and its second
//    serial port on the FIFO pair <prefix>orders.{in,out} (QEMU's `pipe` chardev).
//    Files go in `dir` with `prefix`. Throws std::runtime_error with the logs' tails.
//  - order(line) writes one line to the guest's second serial port (guest-init.sh's
//    bench-serve reads it).
//  - wait_for(prefix, deadline): the next console line starting with `prefix`, skipping
//    others; throws failure() when QEMU or uvhost ends or the deadline passes.
//  - measure(test, deadline): waits for the guest's `UVHOST-TEST: name=<test>` result
//    line, snapshotting every QEMU thread (side "frontend") and every uvhost thread
//    (side "backend") when the console shows `UVHOST-WINDOW: begin` / `end`; returns
//    the window's result (seconds, packets, bytes, rr's transactions and percentiles)
//    and the snapshots. Throws failure() when the guest's run failed.
//  - pause()/resume(): SIGSTOP/SIGCONT to QEMU, uvhost and iperf3 -s: a paused guest
//    and its backend take no CPU (the guest's clock jumps over the pause: only pause
//    one between runs, never inside a window).
//  - finish(): waits (20 s at most) for QEMU to end after the guest's poweroff, stops
//    everything and throws failure() unless uvhost ended cleanly. The destructor stops
//    whatever is left and deletes the namespace (with its tap).
//  - failure(what): a std::runtime_error naming the point and `what`, with uvhost's,
//    QEMU's and the console's last lines.
//  - Root is needed (network namespace, tap). One thread at a time.
#pragma once

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "uvhost/bench/backend_process.h"
#include "uvhost/bench/process_threads.h"
#include "uvhost/bench/qemu_frontend.h"
#include "uvhost/bench/run_dir.h"
#include "uvhost/bench/workload.h"

namespace uvhost::bench::detail {

// Boot (5 s idle under TCG, far more on a loaded machine), the guest's wait for the
// peer (up to 30 s), then its warm-up and window: the time a guest may take beyond those
// two.
inline constexpr double kGuestSlackSeconds = 150;

// A deadline `seconds` from now.
inline std::chrono::steady_clock::time_point deadline_in(double seconds) {
  return std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                std::chrono::duration<double>(seconds));
}

// One measured window as the guest reported it, and the CPU snapshots at its edges.
struct GuestWindow {
  RunResult result;  // seconds, packets, bytes; rr: transactions and percentiles (no CPU)
  std::vector<ThreadSample> qemu_start, qemu_end, uvhost_start, uvhost_end;
};

// The guest-init test that runs `workload` (bench-tx, bench-rx, bench-rr).
const char* guest_test(Workload workload);

// Throws std::runtime_error when the qemu frontend cannot run this config or point.
void validate_qemu_run(const Config& config, const Point& point, const RunOptions& options);

class QemuGuest {
 public:
  using Clock = std::chrono::steady_clock;

  QemuGuest(const Config& config, const Point& point, const RunOptions& options, RunDir& dir,
            const std::string& prefix, const std::string& tests);
  ~QemuGuest();
  QemuGuest(const QemuGuest&) = delete;
  QemuGuest& operator=(const QemuGuest&) = delete;

  void order(const std::string& line);
  std::string wait_for(const std::string& prefix, Clock::time_point deadline);
  GuestWindow measure(const std::string& test, Clock::time_point deadline);
  void pause();
  void resume();
  void finish();
  std::runtime_error failure(const std::string& what);

  // Whole seconds of warm-up and window the guest runs (options rounded up).
  long warmup_seconds() const noexcept { return warmup_; }
  long window_seconds() const noexcept { return seconds_; }

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
  Point point_;
  long warmup_ = 1, seconds_ = 1;
  bool paused_ = false;
};

}  // namespace uvhost::bench::detail
