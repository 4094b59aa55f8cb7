// run_backend.cpp - see run_backend.h.
#include "uvhost/bench/run_backend.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace uvhost::bench {

namespace {

constexpr auto kUvhostStartTimeout = std::chrono::seconds{10};
// testpmd zeroes its 512 MB and may take several seconds on a busy machine.
constexpr auto kTestpmdStartTimeout = std::chrono::seconds{40};
// After SIGINT testpmd spends about 2 s closing (its stats loop sleeps a period
// between checks). Nothing of what it prints then is read (the frontend counts), so
// it gets a short grace before SIGKILL; its EAL runtime folder is removed here.
constexpr auto kTestpmdStopGrace = std::chrono::milliseconds{200};

std::string unique_prefix() {
  static std::atomic<unsigned> counter{0};
  // relaxed: only uniqueness matters, no other memory is published through it.
  return fmt::format("uvhost-bench-{}-{}", ::getpid(), counter.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace

RunBackend::RunBackend(const Config& config, const Point& point, const RunOptions& options, const RunDir& dir,
                       const std::string& tag)
    : kind_(config.backend) {
  const int cpu = options.pin ? options.backend_cpu : -1;
  const std::string log = dir.file((tag + "backend.log").c_str());
  switch (config.backend) {
    case BackendKind::kUvhost:
      socket_ = dir.file((tag + "vu.sock").c_str());
      control_ = dir.file((tag + "ctl.sock").c_str());
      process_ = std::make_unique<BackendProcess>(uvhost_argv(config, point, options, socket_, control_), log, cpu);
      process_->wait_ready(socket_, "", kUvhostStartTimeout);
      cpu_pid_ = process_->pid();
      break;
    case BackendKind::kTestpmd:
      socket_ = dir.file((tag + "vu.sock").c_str());
      dpdk_.prefix = unique_prefix();
      process_ = std::make_unique<BackendProcess>(testpmd_argv(point, options, socket_, dpdk_.prefix, cpu), log, cpu);
      process_->wait_ready(socket_, "start packet forwarding", kTestpmdStartTimeout);
      cpu_pid_ = process_->pid();
      break;
    case BackendKind::kSocket:
      socket_ = config.socket;
      cpu_pid_ = config.backend_pid;
      break;
  }
}

RunBackend::~RunBackend() {
  if (process_) {
    if (paused_) (void)::kill(process_->pid(), SIGCONT);
    process_->stop(stop_grace());
  }
}

RunBackend::DpdkRuntimeDir::~DpdkRuntimeDir() {
  if (prefix.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dpdk_runtime_dir(prefix), ec);
}

std::runtime_error RunBackend::failure(const std::string& what) {
  if (!process_) return std::runtime_error(what);
  const bool alive = process_->running();
  return std::runtime_error(fmt::format("{}\nbackend (pid {}) {}; its log ({}) ends with:\n{}", what, process_->pid(),
                                        alive ? "is running" : process_->exit_description(), process_->log_path(),
                                        process_->log_tail()));
}

std::chrono::milliseconds RunBackend::stop_grace() const {
  return kind_ == BackendKind::kTestpmd ? kTestpmdStopGrace : std::chrono::milliseconds{std::chrono::seconds{5}};
}

void RunBackend::signal(int sig) {
  if (!process_) return;
  if (::kill(process_->pid(), sig) != 0) {
    throw failure(fmt::format("sending {} to the backend: {}", ::strsignal(sig), std::strerror(errno)));
  }
}

void RunBackend::pause() {
  signal(SIGSTOP);
  paused_ = process_ != nullptr;
}

void RunBackend::resume() {
  signal(SIGCONT);
  paused_ = false;
}

void RunBackend::stop() {
  if (!process_) return;
  if (paused_) resume();
  process_->stop(stop_grace());
  // `uvhost serve` ends cleanly on SIGINT; anything else means it failed on the way.
  if (kind_ == BackendKind::kUvhost && process_->exit_description() != "exited with status 0") {
    throw failure("uvhost serve did not stop cleanly");
  }
}

}  // namespace uvhost::bench
