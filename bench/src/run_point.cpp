// run_point.cpp - one measured run: backend up, frontend connected, warm-up, window,
// teardown (see workload.h). Every failure becomes one std::runtime_error that says
// what failed and ends with the backend's last log lines.
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <map>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

#include "uvhost/bench/backend_process.h"
#include "uvhost/bench/frontend_driver.h"
#include "uvhost/bench/live_switch.h"
#include "uvhost/bench/process_threads.h"
#include "uvhost/bench/qemu_frontend.h"
#include "uvhost/bench/run_dir.h"
#include "uvhost/bench/workload.h"
#include "uvhost/serve/control_client.h"
#include "uvhost/vhost_user/frontend.h"

namespace uvhost::bench {

namespace {

constexpr auto kUvhostStartTimeout = std::chrono::seconds{10};
// testpmd zeroes its 512 MB and may take several seconds on a busy machine.
constexpr auto kTestpmdStartTimeout = std::chrono::seconds{40};
constexpr auto kConnectTimeout = std::chrono::seconds{5};

// Pins the calling thread to one CPU for its lifetime, then restores its old mask.
class ThreadPin {
 public:
  explicit ThreadPin(int cpu) {
    if (cpu < 0) return;
    if (::sched_getaffinity(0, sizeof old_, &old_) != 0) throw std::system_error(errno, std::generic_category(), "sched_getaffinity");
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<size_t>(cpu), &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0) {
      throw std::system_error(errno, std::generic_category(), fmt::format("pinning the frontend to CPU {}", cpu));
    }
    pinned_ = true;
  }
  ~ThreadPin() {
    if (pinned_) (void)::sched_setaffinity(0, sizeof old_, &old_);
  }
  ThreadPin(const ThreadPin&) = delete;
  ThreadPin& operator=(const ThreadPin&) = delete;

 private:
  cpu_set_t old_{};
  bool pinned_ = false;
};

// Removes testpmd's EAL runtime folder when the run ends, however it ends.
struct DpdkPrefix {
  std::string name;
  ~DpdkPrefix() {
    if (name.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dpdk_runtime_dir(name), ec);
  }
};

std::string unique_prefix() {
  static std::atomic<unsigned> counter{0};
  // relaxed: only uniqueness matters, no other memory is published through it.
  return fmt::format("uvhost-bench-{}-{}", ::getpid(), counter.fetch_add(1, std::memory_order_relaxed));
}

void validate(const Config& config, const Point& point, const RunOptions& options) {
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

// Per-thread CPU summed over a side's sub-windows (tid -> name and ns).
class SideThreadCpu {
 public:
  void add(const std::vector<ThreadSample>& start, const std::vector<ThreadSample>& end) {
    for (const ThreadSample& t : end) {
      uint64_t base = 0;  // a thread born within the sub-window counts from 0
      for (const ThreadSample& s : start) {
        if (s.tid == t.tid) base = s.cpu_ns;
      }
      ThreadSample& sum = sums_[t.tid];
      sum.tid = t.tid;
      sum.name = t.name;
      sum.cpu_ns += t.cpu_ns >= base ? t.cpu_ns - base : 0;
    }
  }
  std::vector<ThreadSample> totals() const {
    std::vector<ThreadSample> out;
    for (const auto& [tid, sample] : sums_) out.push_back(sample);
    return out;
  }

 private:
  std::map<pid_t, ThreadSample> sums_;
};

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
  validate(config, point, options);
  if (second != nullptr && options.frontend != Frontend::kEmbedded) {
    throw std::runtime_error("interleaved runs need the embedded frontend");
  }
  if (second != nullptr && options.idle_window) throw std::runtime_error("an idle window is not interleaved");
  if (options.frontend == Frontend::kQemu) return {run_qemu_point(config, point, options), RunResult{}};
  const vhost_user::FrontendOptions frontend_options = frontend_options_for(point, options.queue_pairs);
  const int frontend_cpu = options.pin ? options.frontend_cpu : -1;
  const int backend_cpu = options.pin ? options.backend_cpu : -1;

  RunDir dir(options.work_dir, "uvhost-bench");
  DpdkPrefix prefix;
  std::unique_ptr<BackendProcess> backend;
  std::string socket;
  const std::string control = dir.file("ctl.sock");
  pid_t cpu_pid = 0;
  switch (config.backend) {
    case BackendKind::kUvhost:
      socket = dir.file("vu.sock");
      backend = std::make_unique<BackendProcess>(uvhost_argv(config, point, options, socket, control),
                                                 dir.file("backend.log"), backend_cpu);
      backend->wait_ready(socket, "", kUvhostStartTimeout);
      cpu_pid = backend->pid();
      break;
    case BackendKind::kTestpmd:
      socket = dir.file("vu.sock");
      prefix.name = unique_prefix();
      backend = std::make_unique<BackendProcess>(testpmd_argv(point, options, socket, prefix.name, backend_cpu),
                                                 dir.file("backend.log"), backend_cpu);
      // testpmd flushes, uncounted, what its queues hold when forwarding starts: the
      // frontend connects only after that.
      backend->wait_ready(socket, "start packet forwarding", kTestpmdStartTimeout);
      cpu_pid = backend->pid();
      break;
    case BackendKind::kSocket:
      socket = config.socket;
      cpu_pid = config.backend_pid;
      break;
  }
  auto failure = [&](const std::string& what) {
    if (!backend) return std::runtime_error(what);
    const bool alive = backend->running();
    return std::runtime_error(fmt::format("{}\nbackend (pid {}) {}; its log ({}) ends with:\n{}", what, backend->pid(),
                                          alive ? "is running" : backend->exit_description(), backend->log_path(),
                                          backend->log_tail()));
  };

  const uint32_t sides = second != nullptr ? 2 : 1;
  std::array<RunResult, 2> result;
  std::array<SideThreadCpu, 2> backend_cpu_by_side;
  std::vector<ThreadSample> backend_start;
  {
    ThreadPin pin(frontend_cpu);
    std::string error;
    std::unique_ptr<vhost_user::Frontend> frontend =
        vhost_user::connect_frontend(socket, frontend_options, kConnectTimeout, error);
    if (!frontend) throw failure(fmt::format("connecting the frontend to {}: {}", socket, error));
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
    std::array<DriveResult, 2> drive;
    try {
      if (second != nullptr) {
        drive = drive_frontend_interleaved(*frontend, spec);
      } else {
        drive[0] = drive_frontend(*frontend, spec);
      }
    } catch (const std::exception& e) {
      throw failure(fmt::format("{}: {}", describe(point), e.what()));
    }
    if (!frontend->stop()) throw failure("stopping the frontend: " + frontend->error());

    for (uint32_t s = 0; s < sides; ++s) {
      RunResult& r = result[s];
      const DriveResult& d = drive[s];
      r.seconds = d.seconds;
      r.packets = d.packets;
      r.bytes = d.bytes;
      r.transactions = d.transactions;
      if (point.workload == Workload::kRr) {
        r.p50_us = d.latency.percentile(50) * 1e-3;
        r.p99_us = d.latency.percentile(99) * 1e-3;
        r.p999_us = d.latency.percentile(99.9) * 1e-3;
      }
      r.threads.push_back(ThreadCpu{"frontend", "frontend", d.frontend_cpu_seconds});
    }
  }

  if (backend) {
    backend->stop();
    // `uvhost serve` ends cleanly on SIGINT; anything else means it failed on the way.
    if (config.backend == BackendKind::kUvhost && backend->exit_description() != "exited with status 0") {
      throw failure("uvhost serve did not stop cleanly");
    }
  }
  for (uint32_t s = 0; s < sides; ++s) {
    RunResult& r = result[s];
    if (cpu_pid > 0) {
      for (ThreadCpu& t : thread_cpu_between({}, backend_cpu_by_side[s].totals(), r.seconds, "backend")) {
        r.threads.push_back(std::move(t));
      }
    }
    for (const ThreadCpu& t : r.threads) r.cpu_seconds += t.cpu_seconds;
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
