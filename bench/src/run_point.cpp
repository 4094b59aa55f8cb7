// run_point.cpp - one measured run: backend up, frontend connected, warm-up, window,
// teardown (see workload.h). Every failure becomes one std::runtime_error that says
// what failed and ends with the backend's last log lines.
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

#include "uvhost/bench/backend_process.h"
#include "uvhost/bench/frontend_driver.h"
#include "uvhost/bench/process_threads.h"
#include "uvhost/bench/qemu_frontend.h"
#include "uvhost/bench/workload.h"
#include "uvhost/vhost_user/frontend.h"

namespace uvhost::bench {

namespace {

constexpr auto kUvhostStartTimeout = std::chrono::seconds{10};
// testpmd zeroes its 512 MB and may take several seconds on a busy machine.
constexpr auto kTestpmdStartTimeout = std::chrono::seconds{40};
constexpr auto kConnectTimeout = std::chrono::seconds{5};

// A run's folder: the given one (kept), or a fresh one under /tmp (removed afterwards).
class WorkDir {
 public:
  explicit WorkDir(const std::string& given) {
    if (!given.empty()) {
      std::filesystem::create_directories(given);
      path_ = given;
      return;
    }
    std::string pattern = "/tmp/uvhost-bench.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::system_error(errno, std::generic_category(), "mkdtemp");
    path_ = pattern;
    owned_ = true;
  }
  ~WorkDir() {
    if (!owned_) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  std::string file(const char* name) const { return (std::filesystem::path(path_) / name).string(); }

 private:
  std::string path_;
  bool owned_ = false;
};

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
  if (config.backend == BackendKind::kSocket && config.socket.empty()) {
    throw std::runtime_error("a running backend needs its socket path");
  }
}

}  // namespace

RunResult run_point(const Config& config, const Point& point, const RunOptions& options) {
  validate(config, point, options);
  if (options.frontend == Frontend::kQemu) return run_qemu_point(config, point, options);
  const vhost_user::FrontendOptions frontend_options = frontend_options_for(point, options.queue_pairs);
  const int frontend_cpu = options.pin ? options.frontend_cpu : -1;
  const int backend_cpu = options.pin ? options.backend_cpu : -1;

  WorkDir dir(options.work_dir);
  DpdkPrefix prefix;
  std::unique_ptr<BackendProcess> backend;
  std::string socket;
  pid_t cpu_pid = 0;
  switch (config.backend) {
    case BackendKind::kUvhost:
      socket = dir.file("vu.sock");
      backend = std::make_unique<BackendProcess>(uvhost_argv(config, point, options, socket, dir.file("ctl.sock")),
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

  RunResult result;
  std::vector<ThreadSample> backend_start, backend_end;
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
    spec.spin_ns = config.frontend_spin_ns;
    spec.on_window_start = [&] {
      if (cpu_pid > 0) backend_start = snapshot_threads(cpu_pid);
    };
    spec.on_window_end = [&] {
      if (cpu_pid > 0) backend_end = snapshot_threads(cpu_pid);
    };
    DriveResult drive;
    try {
      drive = drive_frontend(*frontend, spec);
    } catch (const std::exception& e) {
      throw failure(fmt::format("{} size {} sessions {}: {}", to_string(point.workload), point.size, point.sessions,
                                e.what()));
    }
    if (!frontend->stop()) throw failure("stopping the frontend: " + frontend->error());

    result.seconds = drive.seconds;
    result.packets = drive.packets;
    result.bytes = drive.bytes;
    result.transactions = drive.transactions;
    if (point.workload == Workload::kRr) {
      result.p50_us = drive.latency.percentile(50) * 1e-3;
      result.p99_us = drive.latency.percentile(99) * 1e-3;
      result.p999_us = drive.latency.percentile(99.9) * 1e-3;
    }
    result.threads.push_back(ThreadCpu{"frontend", "frontend", drive.frontend_cpu_seconds});
  }

  if (backend) {
    backend->stop();
    // `uvhost serve` ends cleanly on SIGINT; anything else means it failed on the way.
    if (config.backend == BackendKind::kUvhost && backend->exit_description() != "exited with status 0") {
      throw failure("uvhost serve did not stop cleanly");
    }
  }
  for (ThreadCpu& t : thread_cpu_between(backend_start, backend_end, result.seconds, "backend")) {
    result.threads.push_back(std::move(t));
  }
  for (const ThreadCpu& t : result.threads) result.cpu_seconds += t.cpu_seconds;
  return result;
}

}  // namespace uvhost::bench
