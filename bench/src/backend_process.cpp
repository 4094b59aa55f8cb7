// backend_process.cpp - see backend_process.h.
#include "uvhost/bench/backend_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "uvhost/base/unique_fd.h"

namespace uvhost::bench {

namespace {

using Clock = std::chrono::steady_clock;

bool is_socket(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

bool file_contains(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(needle) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

BackendProcess::BackendProcess(const std::vector<std::string>& argv, std::string log_path, int cpu)
    : log_path_(std::move(log_path)), program_(argv.empty() ? std::string{} : argv.front()) {
  if (argv.empty()) throw std::runtime_error("backend: empty command line");
  base::UniqueFd log(::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!log) throw std::runtime_error(fmt::format("backend: cannot open log {}: {}", log_path_, std::strerror(errno)));
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (cpu >= 0) CPU_SET(static_cast<size_t>(cpu), &cpus);
  const pid_t parent = ::getpid();

  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(fmt::format("backend: fork: {}", std::strerror(errno)));
  if (pid_ == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    if (cpu >= 0 && ::sched_setaffinity(0, sizeof cpus, &cpus) != 0) {
      static const char kMsg[] = "bench: sched_setaffinity failed\n";
      (void)!::write(log.get(), kMsg, sizeof kMsg - 1);
      ::_exit(127);
    }
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(log.get(), 1);
    ::dup2(log.get(), 2);
    ::execvp(args[0], args.data());
    static const char kExec[] = "bench: exec failed: ";
    (void)!::write(2, kExec, sizeof kExec - 1);
    const char* why = ::strerror(errno);
    (void)!::write(2, why, std::strlen(why));
    (void)!::write(2, "\n", 1);
    ::_exit(127);
  }
}

BackendProcess::~BackendProcess() { stop(); }

bool BackendProcess::reap(bool block) {
  if (reaped_ || pid_ <= 0) return true;
  for (;;) {
    const pid_t got = ::waitpid(pid_, &status_, block ? 0 : WNOHANG);
    if (got == pid_) {
      reaped_ = true;
      return true;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {  // ECHILD: not ours any more; nothing left to reap
      reaped_ = true;
      return true;
    }
    return false;
  }
}

bool BackendProcess::running() { return !reap(false); }

void BackendProcess::wait_ready(const std::string& socket_path, const std::string& log_line,
                                std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (is_socket(socket_path) && (log_line.empty() || file_contains(log_path_, log_line))) return;
    if (!running()) {
      throw std::runtime_error(fmt::format("{} {} before it was ready; its log ({}) ends with:\n{}", program_,
                                           exit_description(), log_path_, log_tail()));
    }
    if (Clock::now() >= deadline) {
      throw std::runtime_error(fmt::format("{} not ready within {} ms (socket {}{}); its log ({}) ends with:\n{}",
                                           program_, timeout.count(), socket_path,
                                           log_line.empty() ? "" : ", log line '" + log_line + "'", log_path_,
                                           log_tail()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
}

void BackendProcess::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0 || reaped_) return;
  if (reap(false)) return;
  ::kill(pid_, SIGINT);
  const auto deadline = Clock::now() + grace;
  while (Clock::now() < deadline) {
    if (reap(false)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  ::kill(pid_, SIGKILL);
  reap(true);
}

std::string BackendProcess::exit_description() const {
  if (!reaped_) return "is running";
  if (WIFEXITED(status_)) return fmt::format("exited with status {}", WEXITSTATUS(status_));
  if (WIFSIGNALED(status_)) return fmt::format("was killed by signal {} ({})", WTERMSIG(status_), ::strsignal(WTERMSIG(status_)));
  return "ended";
}

std::string BackendProcess::log_tail(size_t lines) const {
  std::ifstream in(log_path_);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    // testpmd redraws its statistics with terminal escapes: drop ESC so tails stay readable.
    std::erase(line, '\x1b');
    last.push_back(std::move(line));
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const std::string& l : last) out += "  | " + l + "\n";
  return out.empty() ? "  | (empty)\n" : out;
}

// ---------------------------------------------------------------- command lines

std::vector<std::string> uvhost_argv(const Config& config, const Point& point, const RunOptions& options,
                                     const std::string& socket, const std::string& control) {
  const char* backend = point.workload == Workload::kStreamTx   ? "sink"
                        : point.workload == Workload::kStreamRx ? "source"
                                                                : "loopback";
  std::string port =
      fmt::format("sock={},backend={},queues={},name={}", socket, backend, options.queue_pairs, kBenchPortName);
  if (point.workload == Workload::kStreamRx) port += fmt::format(",size={}", point.size);
  return uvhost_serve_argv(config, options, std::move(port), control);
}

std::vector<std::string> uvhost_serve_argv(const Config& config, const RunOptions& options, std::string port,
                                           const std::string& control) {
  for (const auto& [key, value] : config.port_keys) port += value.empty() ? "," + key : fmt::format(",{}={}", key, value);
  std::string binary = config.uvhost_binary.empty() ? options.uvhost_binary : config.uvhost_binary;
  if (binary.empty()) {  // this very binary (`uvhost bench`): its real path, for logs and ps
    std::error_code ec;
    binary = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) binary = "/proc/self/exe";
  }
  std::vector<std::string> argv{binary, "--log-level", "warn", "serve", "--port", port, "--control", control};
  argv.insert(argv.end(), config.serve_args.begin(), config.serve_args.end());
  return argv;
}

std::vector<std::string> testpmd_argv(const Point& point, const RunOptions& options, const std::string& socket,
                                      const std::string& prefix, int cpu) {
  std::string lcores;
  if (cpu >= 0) {
    lcores = fmt::format("0@{},1@{}", cpu, cpu);
  } else {
    const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    lcores = fmt::format("0@(0-{}),1@(0-{})", cpus - 1, cpus - 1);
  }
  std::vector<std::string> argv{options.testpmd_binary,
                                "--no-huge", "-m", "512", "--no-pci", "--lcores", lcores, "--file-prefix", prefix,
                                "--vdev", fmt::format("net_vhost0,iface={},queues={}", socket, options.queue_pairs),
                                "--", "--total-num-mbufs=16384", "--stats-period", "1",
                                fmt::format("--rxq={}", options.queue_pairs), fmt::format("--txq={}", options.queue_pairs)};
  switch (point.workload) {
    case Workload::kStreamTx: argv.emplace_back("--forward-mode=rxonly"); break;
    case Workload::kRr: argv.emplace_back("--forward-mode=macswap"); break;
    case Workload::kStreamRx: {
      // txonly builds each frame from segments of at most one mbuf's data room (2048).
      constexpr uint32_t kSegment = 2048;
      constexpr uint32_t kMaxSegments = 64;  // what we let testpmd chain (it allows more)
      if (point.size < 64 || (point.size + kSegment - 1) / kSegment > kMaxSegments) {
        throw std::runtime_error(fmt::format("testpmd txonly cannot make {}-byte frames (64..{})", point.size,
                                             kSegment * kMaxSegments));
      }
      std::string segments;
      for (uint32_t left = point.size; left > 0;) {
        const uint32_t take = std::min(left, kSegment);
        segments += segments.empty() ? fmt::format("{}", take) : fmt::format(",{}", take);
        left -= take;
      }
      argv.emplace_back("--forward-mode=txonly");
      argv.push_back("--txpkts=" + segments);
      break;
    }
  }
  return argv;
}

std::string dpdk_runtime_dir(const std::string& prefix) {
  if (::geteuid() == 0) return "/var/run/dpdk/" + prefix;
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  return std::string(xdg != nullptr ? xdg : "/tmp") + "/dpdk/" + prefix;
}

}  // namespace uvhost::bench
