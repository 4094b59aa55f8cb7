// run_point.cpp - one measured run: backend up, frontend connected, warm-up, window,
// teardown (see workload.h). Every failure becomes one std::runtime_error that says
// what failed and ends with the backend's last log lines.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "run_support.h"
#include "uvhost/bench/frontend_driver.h"
#include "uvhost/bench/live_switch.h"
#include "uvhost/bench/process_threads.h"
#include "uvhost/bench/qemu_frontend.h"
#include "uvhost/bench/run_backend.h"
#include "uvhost/bench/run_dir.h"
#include "uvhost/bench/workload.h"
#include "uvhost/serve/control_client.h"
#include "uvhost/vhost_user/frontend.h"

namespace uvhost::bench {

namespace detail {

void validate_run(const Config& config, const Point& point, const RunOptions& options) {
  if (!(options.seconds > 0)) throw std::runtime_error("the measured window must be longer than 0 s");
  if (!(options.warmup_seconds >= 0)) throw std::runtime_error("the warm-up cannot be negative");
  if (options.queue_pairs < 1 || options.queue_pairs > 128) throw std::runtime_error("queue pairs must be 1..128");
  if (point.sessions < 1) throw std::runtime_error("sessions must be at least 1");
  if (point.rate != 0 && point.workload != Workload::kRr) {
    throw std::runtime_error("an offered rate (open loop) is for rr only");
  }
  if (point.rate != 0 && options.frontend != Frontend::kEmbedded) {
    throw std::runtime_error("an offered rate (open loop) needs the embedded frontend");
  }
  if (options.idle_window && options.frontend != Frontend::kEmbedded) {
    throw std::runtime_error("an idle window needs the embedded frontend");
  }
  if (config.backend == BackendKind::kSocket && config.socket.empty()) {
    throw std::runtime_error("a running backend needs its socket path");
  }
}

RunResult run_result_of(const DriveResult& drive, const Point& point, const SideThreadCpu* backend_cpu) {
  RunResult r;
  r.seconds = drive.seconds;
  r.packets = drive.packets;
  r.bytes = drive.bytes;
  r.transactions = drive.transactions;
  if (point.workload == Workload::kRr) {
    r.p50_us = drive.latency.percentile(50) * 1e-3;
    r.p99_us = drive.latency.percentile(99) * 1e-3;
    r.p999_us = drive.latency.percentile(99.9) * 1e-3;
  }
  r.threads.push_back(ThreadCpu{"frontend", "frontend", drive.frontend_cpu_seconds});
  if (backend_cpu != nullptr) {
    for (ThreadCpu& t : thread_cpu_between({}, backend_cpu->totals(), r.seconds, "backend")) {
      r.threads.push_back(std::move(t));
    }
  }
  for (const ThreadCpu& t : r.threads) r.cpu_seconds += t.cpu_seconds;
  return r;
}

}  // namespace detail

namespace {

constexpr auto kConnectTimeout = std::chrono::seconds{5};

// Side B of an interleaved run and how to switch to it.
struct SecondSide {
  const Config& config;
  const LiveSwitch& to;
  bool a_first = true;
};

// One backend process, one frontend connection: `config` alone (run_point), or
// `config` and `second` interleaved (run_point_interleaved).
std::array<RunResult, 2> run_sides(const Config& config, const SecondSide* second, const Point& point,
                                   const RunOptions& options) {
  detail::validate_run(config, point, options);
  if (second != nullptr && options.frontend != Frontend::kEmbedded) {
    throw std::runtime_error("interleaved runs need the embedded frontend");
  }
  if (second != nullptr && options.idle_window) throw std::runtime_error("an idle window is not interleaved");
  if (options.frontend == Frontend::kQemu) return {run_qemu_point(config, point, options), RunResult{}};
  const vhost_user::FrontendOptions frontend_options = frontend_options_for(point, options.queue_pairs, config.frontend_in_order, config.frontend_ring);
  const int frontend_cpu = options.pin ? options.frontend_cpu : -1;

  RunDir dir(options.work_dir, "uvhost-bench");
  RunBackend backend(config, point, options, dir, "");
  const pid_t cpu_pid = backend.cpu_pid();
  const std::string& control = backend.control();

  const uint32_t sides = second != nullptr ? 2 : 1;
  std::array<RunResult, 2> result;
  std::array<DriveResult, 2> drive;
  std::array<detail::SideThreadCpu, 2> backend_cpu_by_side;
  std::vector<ThreadSample> backend_start;
  {
    detail::ThreadPin pin(frontend_cpu);
    std::string error;
    std::unique_ptr<vhost_user::Frontend> frontend =
        vhost_user::connect_frontend(backend.socket(), frontend_options, kConnectTimeout, error);
    if (!frontend) throw backend.failure(fmt::format("connecting the frontend to {}: {}", backend.socket(), error));
    DriveSpec spec;
    spec.point = point;
    spec.queue_pairs = options.queue_pairs;
    spec.warmup_seconds = options.warmup_seconds;
    spec.seconds = options.seconds;
    spec.idle_window = options.idle_window;
    spec.spin_ns = {config.frontend_spin_ns, second != nullptr ? second->config.frontend_spin_ns : 0};
    spec.on_window_start = [&](uint32_t) {
      if (cpu_pid > 0) backend_start = snapshot_threads(cpu_pid);
    };
    spec.on_window_end = [&](uint32_t side) {
      if (cpu_pid > 0) backend_cpu_by_side[side].add(backend_start, snapshot_threads(cpu_pid));
    };
    if (second != nullptr) {
      spec.sides = 2;
      spec.slices = static_cast<uint32_t>(std::max(1.0, std::round(options.seconds / options.slice_seconds)));
      spec.first_side = second->a_first ? 0 : 1;
      spec.settle_seconds = options.settle_seconds;
      spec.switch_to = [&](uint32_t side) {
        for (const nlohmann::json& request : side == 0 ? second->to.to_a : second->to.to_b) {
          std::string why;
          const std::optional<nlohmann::json> reply = serve::control_request(control, request, why);
          if (!reply) throw std::runtime_error(fmt::format("switching to {}: {}", side == 0 ? 'A' : 'B', why));
          if (!reply->value("ok", false)) {
            throw std::runtime_error(
                fmt::format("switching to {}: {} answered {}", side == 0 ? 'A' : 'B', request.dump(), reply->dump()));
          }
        }
      };
    }
    try {
      if (second != nullptr) {
        drive = drive_frontend_interleaved(*frontend, spec);
      } else {
        drive[0] = drive_frontend(*frontend, spec);
      }
    } catch (const std::exception& e) {
      throw backend.failure(fmt::format("{}: {}", describe(point), e.what()));
    }
    if (!frontend->stop()) throw backend.failure("stopping the frontend: " + frontend->error());
  }
  backend.stop();
  for (uint32_t s = 0; s < sides; ++s) {
    result[s] = detail::run_result_of(drive[s], point, cpu_pid > 0 ? &backend_cpu_by_side[s] : nullptr);
  }
  return result;
}

}  // namespace

RunResult run_point(const Config& config, const Point& point, const RunOptions& options) {
  return std::move(run_sides(config, nullptr, point, options)[0]);
}

std::array<RunResult, 2> run_point_interleaved(const Config& a, const Config& b, bool a_first, const Point& point,
                                               const RunOptions& options) {
  std::string why;
  const std::optional<LiveSwitch> to = live_switch(a, b, why);
  if (!to) throw std::runtime_error("A and B cannot share a run: " + why);
  if (!(options.slice_seconds > 0)) throw std::runtime_error("the slice must be longer than 0 s");
  if (!(options.settle_seconds >= 0)) throw std::runtime_error("the settle time cannot be negative");
  const SecondSide second{b, *to, a_first};
  return run_sides(a, &second, point, options);
}

}  // namespace uvhost::bench
