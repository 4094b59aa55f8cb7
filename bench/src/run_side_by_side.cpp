// run_side_by_side.cpp - A and B in two backend processes, the frontend alternating
// between them in slices, the idle one paused (see run_point_side_by_side in
// workload.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "run_support.h"
#include "uvhost/bench/cpu_time.h"
#include "uvhost/bench/frontend_driver.h"
#include "uvhost/bench/run_backend.h"
#include "uvhost/bench/run_dir.h"
#include "uvhost/bench/workload.h"
#include "uvhost/vhost_user/frontend.h"

namespace uvhost::bench {

namespace {

constexpr auto kConnectTimeout = std::chrono::seconds{5};

// Adds one slice's drive to a side's totals.
void add_slice(DriveResult& total, const DriveResult& slice) {
  total.seconds += slice.seconds;
  total.packets += slice.packets;
  total.bytes += slice.bytes;
  total.transactions += slice.transactions;
  total.latency.merge(slice.latency);
  total.frontend_cpu_seconds += slice.frontend_cpu_seconds;
}

// One side: its backend process and the frontend connected to it.
struct Side {
  const Config& config;
  std::unique_ptr<RunBackend> backend;
  std::unique_ptr<vhost_user::Frontend> frontend;
};

}  // namespace

std::array<RunResult, 2> run_point_side_by_side(const Config& a, const Config& b, bool a_first, const Point& point,
                                                const RunOptions& options) {
  detail::validate_run(a, point, options);
  detail::validate_run(b, point, options);
  if (options.frontend != Frontend::kEmbedded) throw std::runtime_error("side-by-side runs need the embedded frontend");
  if (options.idle_window) throw std::runtime_error("an idle window is not interleaved");
  if (a.backend == BackendKind::kSocket || b.backend == BackendKind::kSocket) {
    throw std::runtime_error("side-by-side runs start both backends (a running backend, socket=, cannot take part)");
  }
  if (!(options.slice_seconds > 0)) throw std::runtime_error("the slice must be longer than 0 s");
  if (!(options.settle_seconds >= 0)) throw std::runtime_error("the settle time cannot be negative");
  const uint32_t slices = static_cast<uint32_t>(std::max(1.0, std::round(options.seconds / options.slice_seconds)));

  RunDir dir(options.work_dir, "uvhost-bench");
  std::array<Side, 2> sides{Side{a, nullptr, nullptr}, Side{b, nullptr, nullptr}};
  std::array<DriveResult, 2> totals;
  std::array<detail::SideThreadCpu, 2> backend_cpu;
  std::array<std::vector<SliceResult>, 2> slice_records;
  int64_t first_measured_ns = -1;
  {
    detail::ThreadPin pin(options.pin ? options.frontend_cpu : -1);
    // Each backend comes up and takes its frontend while the other is paused, so a
    // polling one does not slow the other's start.
    for (uint32_t s = 0; s < 2; ++s) {
      if (s == 1) sides[0].backend->pause();
      Side& side = sides[s];
      side.backend = std::make_unique<RunBackend>(side.config, point, options, dir, s == 0 ? "a." : "b.");
      std::string error;
      side.frontend = vhost_user::connect_frontend(
          side.backend->socket(), frontend_options_for(point, options.queue_pairs, side.config.frontend_in_order,
                                                        side.config.frontend_ring),
          kConnectTimeout, error);
      if (!side.frontend) {
        throw side.backend->failure(fmt::format("connecting the frontend to {}: {}", side.backend->socket(), error));
      }
    }
    uint32_t running = 1;  // B, the last one started
    auto run_slice = [&](uint32_t s, double warmup_seconds, bool measured) {
      if (s != running) {
        sides[running].backend->pause();
        sides[s].backend->resume();
        running = s;
      }
      Side& side = sides[s];
      DriveSpec spec;
      spec.point = point;
      spec.queue_pairs = options.queue_pairs;
      spec.warmup_seconds = warmup_seconds;
      spec.seconds = options.seconds / slices;
      spec.spin_ns = {side.config.frontend_spin_ns, 0};
      spec.drain = true;
      std::vector<ThreadSample> start;
      SliceResult record;
      int64_t start_steal = -1;
      const pid_t pid = side.backend->cpu_pid();
      if (measured) {
        spec.on_window_start = [&](uint32_t) {
          const int64_t now = monotonic_ns();
          if (first_measured_ns < 0) first_measured_ns = now;
          record.start_seconds = static_cast<double>(now - first_measured_ns) * 1e-9;
          start_steal = machine_steal_ns();
          if (pid > 0) start = snapshot_threads(pid);
        };
        spec.on_window_end = [&](uint32_t) {
          if (pid > 0) backend_cpu[s].add(start, snapshot_threads(pid));
          const int64_t end_steal = machine_steal_ns();
          record.steal_seconds =
              start_steal >= 0 && end_steal >= start_steal ? static_cast<double>(end_steal - start_steal) * 1e-9 : -1;
        };
      }
      try {
        const DriveResult slice = drive_frontend(*side.frontend, spec);
        if (measured) {
          add_slice(totals[s], slice);
          record.seconds = slice.seconds;
          record.throughput = detail::run_result_of(slice, point, nullptr).throughput(point.workload);
          slice_records[s].push_back(record);
        }
      } catch (const std::exception& e) {
        throw side.backend->failure(
            fmt::format("{} ({}, side {}): {}", describe(point), describe(side.config), s == 0 ? 'A' : 'B', e.what()));
      }
    };
    // Slice i's side in A B B A A B ... order (B A A B ... when !a_first).
    const uint32_t first = a_first ? 0 : 1;
    auto side_of = [&](uint32_t i) { return ((i + 1) / 2) % 2 == 0 ? first : 1 - first; };
    // Warm-ups: the second side's, then the first side's as part of its first slice.
    run_slice(1 - first, options.warmup_seconds, false);
    for (uint32_t i = 0; i < 2 * slices; ++i) {
      const uint32_t s = side_of(i);
      const double unmeasured = i == 0 ? options.warmup_seconds : (s != running ? options.settle_seconds : 0);
      run_slice(s, unmeasured, true);
    }
    sides[1 - running].backend->resume();  // both answer their frontend's goodbye
    for (uint32_t s = 0; s < 2; ++s) {
      if (!sides[s].frontend->stop()) {
        throw sides[s].backend->failure("stopping the frontend: " + sides[s].frontend->error());
      }
      sides[s].frontend.reset();
    }
  }
  std::array<RunResult, 2> result;
  for (uint32_t s = 0; s < 2; ++s) {
    sides[s].backend->stop();
    result[s] = detail::run_result_of(totals[s], point, sides[s].backend->cpu_pid() > 0 ? &backend_cpu[s] : nullptr);
    result[s].slices = std::move(slice_records[s]);
  }
  return result;
}

}  // namespace uvhost::bench
