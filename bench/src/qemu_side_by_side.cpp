// qemu_side_by_side.cpp - A and B as two guests under QEMU, both booted once and alive
// together, each told by the host when to run a short window while the other is paused
// (see run_qemu_side_by_side in qemu_frontend.h).
#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "qemu_guest.h"
#include "run_support.h"
#include "uvhost/bench/cpu_time.h"
#include "uvhost/bench/qemu_frontend.h"
#include "uvhost/bench/run_dir.h"
#include "uvhost/bench/stats.h"

namespace uvhost::bench {

namespace {

// One side's sums over its measured windows.
struct SideTotals {
  RunResult sum;
  std::vector<double> p50, p99, p999;
  detail::SideThreadCpu qemu_cpu, uvhost_cpu;
};

}  // namespace

std::array<RunResult, 2> run_qemu_side_by_side(const Config& a, const Config& b, bool a_first, const Point& point,
                                               const RunOptions& options) {
  detail::validate_qemu_run(a, point, options);
  detail::validate_qemu_run(b, point, options);
  if (!(options.slice_seconds > 0)) throw std::runtime_error("the slice must be longer than 0 s");
  const long window = guest_seconds(options.slice_seconds);
  const uint32_t slices = guest_windows(options.seconds, options.slice_seconds);
  const std::string test = detail::guest_test(point.workload);

  RunDir dir(options.work_dir, "uvhost-bench-qemu");
  std::array<std::unique_ptr<detail::QemuGuest>, 2> guests;
  // One boots while the other is paused, so neither boot slows the other.
  for (uint32_t s = 0; s < 2; ++s) {
    guests[s] = std::make_unique<detail::QemuGuest>(s == 0 ? a : b, point, options, dir, s == 0 ? "a." : "b.",
                                                    "bench-serve");
    (void)guests[s]->wait_for("UVHOST-SERVE: ready", detail::deadline_in(detail::kGuestSlackSeconds));
    guests[s]->pause();
  }
  const long warmup = guests[0]->warmup_seconds();

  std::array<SideTotals, 2> totals;
  std::array<std::vector<SliceResult>, 2> slice_records;
  int64_t first_measured_ns = -1;
  // One window of side s: resumed, ordered, measured, paused again once the guest is
  // ready for the next order (its iperf3 or ping has ended: nothing runs while paused).
  auto run_slice = [&](uint32_t s, bool measured) {
    detail::QemuGuest& guest = *guests[s];
    guest.resume();
    const int64_t start_ns = monotonic_ns();
    const int64_t start_steal = machine_steal_ns();
    guest.order(fmt::format("{} {}", test, window));
    detail::GuestWindow w =
        guest.measure(test, detail::deadline_in(detail::kGuestSlackSeconds + static_cast<double>(warmup + window)));
    (void)guest.wait_for("UVHOST-SERVE: ready", detail::deadline_in(detail::kGuestSlackSeconds));
    guest.pause();
    if (!measured) return;
    const int64_t end_steal = machine_steal_ns();
    if (first_measured_ns < 0) first_measured_ns = start_ns;
    SideTotals& t = totals[s];
    t.sum.seconds += w.result.seconds;
    t.sum.packets += w.result.packets;
    t.sum.bytes += w.result.bytes;
    t.sum.transactions += w.result.transactions;
    t.p50.push_back(w.result.p50_us);
    t.p99.push_back(w.result.p99_us);
    t.p999.push_back(w.result.p999_us);
    t.qemu_cpu.add(w.qemu_start, w.qemu_end);
    t.uvhost_cpu.add(w.uvhost_start, w.uvhost_end);
    SliceResult record;
    record.start_seconds = static_cast<double>(start_ns - first_measured_ns) * 1e-9;
    record.seconds = w.result.seconds;
    record.throughput = w.result.throughput(point.workload);
    record.steal_seconds =
        start_steal >= 0 && end_steal >= start_steal ? static_cast<double>(end_steal - start_steal) * 1e-9 : -1;
    slice_records[s].push_back(record);
  };
  // A window of each side unmeasured first (the guest's first run translates iperf3's
  // or ping's code under TCG), then A B B A ... (B A A B ... when !a_first).
  const uint32_t first = a_first ? 0 : 1;
  run_slice(1 - first, false);
  run_slice(first, false);
  for (uint32_t i = 0; i < 2 * slices; ++i) run_slice(((i + 1) / 2) % 2 == 0 ? first : 1 - first, true);

  std::array<RunResult, 2> result;
  for (uint32_t s = 0; s < 2; ++s) {
    guests[s]->resume();
    guests[s]->order("quit");
    guests[s]->finish();
    RunResult& r = result[s];
    r = totals[s].sum;
    if (point.workload == Workload::kRr) {
      r.p50_us = percentile(totals[s].p50, 50);
      r.p99_us = percentile(totals[s].p99, 50);
      r.p999_us = percentile(totals[s].p999, 50);
    }
    for (ThreadCpu& t : thread_cpu_between({}, totals[s].qemu_cpu.totals(), r.seconds, "frontend")) {
      r.threads.push_back(std::move(t));
    }
    for (ThreadCpu& t : thread_cpu_between({}, totals[s].uvhost_cpu.totals(), r.seconds, "backend")) {
      r.threads.push_back(std::move(t));
    }
    for (const ThreadCpu& t : r.threads) r.cpu_seconds += t.cpu_seconds;
    r.slices = std::move(slice_records[s]);
  }
  return result;
}

}  // namespace uvhost::bench
