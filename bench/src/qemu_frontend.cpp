// qemu_frontend.cpp - one measured run with a Linux guest under QEMU as the traffic
// source (see qemu_frontend.h): namespace and tap, uvhost serve, iperf3 -s, QEMU, the
// console watched for the window's edges and the result line, then teardown.
#include "uvhost/bench/qemu_frontend.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "uvhost/bench/backend_process.h"
#include "uvhost/bench/process_threads.h"
#include "uvhost/bench/run_dir.h"

extern char** environ;

namespace uvhost::bench {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kHostIp = "10.0.9.1";
constexpr const char* kGuestIp = "10.0.9.2";
constexpr int kGuestMemMb = 256;
constexpr auto kUvhostStartTimeout = std::chrono::seconds{10};
// Boot (5 s idle under TCG, far more on a loaded machine), the guest's wait for the
// peer (up to 30 s), then its warm-up and window: everything beyond those two.
constexpr double kGuestSlackSeconds = 150;

// Runs argv to its end (searched in PATH, output into `log` when given); its exit status,
// or -1 when it could not start.
int run_command(const std::vector<std::string>& argv, const std::string& log = "") {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  const std::string out = log.empty() ? "/dev/null" : log;
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

void must(const std::vector<std::string>& argv, const std::string& log) {
  if (run_command(argv, log) != 0) {
    std::string line;
    for (const std::string& a : argv) line += (line.empty() ? "" : " ") + a;
    throw std::runtime_error(fmt::format("`{}` failed (output in {})", line, log));
  }
}

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string tail_lines(const std::string& path, size_t lines = 15) {
  const std::string text = file_text(path);
  size_t pos = text.size(), seen = 0;
  while (pos > 0 && seen <= lines) {
    --pos;
    if (text[pos] == '\n') ++seen;
  }
  return text.substr(seen > lines ? pos + 1 : 0);
}

// A network namespace, deleted (with the tap uvhost made in it) when this goes away;
// declared before the processes that run in it, so they are stopped first.
class Netns {
 public:
  Netns(std::string name, const std::string& log) : name_(std::move(name)) {
    delete_stale(log);
    must({"ip", "netns", "add", name_}, log);
    made_ = true;
    must(exec({"ip", "link", "set", "lo", "up"}), log);
    // No IPv6 chatter (router solicitations, MLD) on the tap: only the run's traffic.
    (void)run_command(
        exec({"sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"}),
        log);
  }
  ~Netns() {
    if (made_) (void)run_command({"ip", "netns", "del", name_});
  }
  Netns(const Netns&) = delete;
  Netns& operator=(const Netns&) = delete;
  // A bench killed outright (SIGKILL: no destructor runs) leaves its namespaces behind:
  // deletes those named uvh-bench-<pid>-<n> whose pid is gone.
  static void delete_stale(const std::string& log) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("uvh-bench-", 0) != 0) continue;
      const std::string pid = name.substr(10, name.find('-', 10) - 10);
      if (pid.empty() || std::filesystem::exists("/proc/" + pid)) continue;
      (void)run_command({"ip", "netns", "del", name}, log);
    }
  }
  // argv run inside the namespace (`ip netns exec` execs it: the pid stays the command's).
  std::vector<std::string> exec(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {"ip", "netns", "exec", name_});
    return argv;
  }

 private:
  std::string name_;
  bool made_ = false;
};

std::string unique_suffix() {
  static std::atomic<unsigned> counter{0};
  // relaxed: only uniqueness matters, no other memory is published through it.
  return fmt::format("{}-{}", ::getpid(), counter.fetch_add(1, std::memory_order_relaxed));
}

const char* guest_test(Workload workload) {
  switch (workload) {
    case Workload::kStreamTx:
      return "bench-tx";
    case Workload::kStreamRx:
      return "bench-rx";
    case Workload::kRr:
      return "bench-rr";
  }
  return "bench-rr";
}

// "key=value key=value" -> map (the guest's result line).
std::map<std::string, std::string> fields(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream in(line);
  std::string word;
  while (in >> word) {
    const size_t eq = word.find('=');
    if (eq != std::string::npos) out[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return out;
}

double number(const std::map<std::string, std::string>& f, const std::string& key) {
  const auto it = f.find(key);
  if (it == f.end()) throw std::runtime_error("the guest's result has no " + key);
  try {
    return std::stod(it->second);
  } catch (const std::exception&) {
    throw std::runtime_error(fmt::format("the guest's result has {}={}", key, it->second));
  }
}

// Console lines as they arrive: polls the serial log file, hands out whole lines.
class Console {
 public:
  explicit Console(std::string path) : path_(std::move(path)) {}
  // The next whole line, if one arrived.
  bool next(std::string& line) {
    for (;;) {
      const size_t nl = pending_.find('\n');
      if (nl != std::string::npos) {
        line = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return true;
      }
      std::ifstream in(path_, std::ios::binary);
      in.seekg(static_cast<std::streamoff>(offset_));
      char buffer[4096];
      in.read(buffer, sizeof buffer);
      const auto got = in.gcount();
      if (got <= 0) return false;
      offset_ += static_cast<size_t>(got);
      pending_.append(buffer, static_cast<size_t>(got));
    }
  }

 private:
  std::string path_;
  size_t offset_ = 0;
  std::string pending_;
};

std::vector<std::string> uvhost_tap_argv(const Config& config, const RunOptions& options,
                                         const std::string& socket, const std::string& control,
                                         const std::string& tap) {
  return uvhost_serve_argv(config, options, fmt::format("sock={},backend=tap,tap={},name=bench", socket, tap),
                           control);
}

}  // namespace

GuestImage find_guest(const std::string& guest_dir) {
  const char* how =
      "build it with scripts/build-guest.sh and pass --guest-dir with its cache (build/guest) or the folder "
      "of "
      "the GUEST_KERNEL it prints";
  if (guest_dir.empty()) throw std::runtime_error(fmt::format("--frontend qemu needs the guest: {}", how));
  auto has_guest = [](const std::filesystem::path& dir) {
    std::error_code ec;
    return std::filesystem::is_regular_file(dir / "vmlinux", ec) &&
           std::filesystem::is_regular_file(dir / "initramfs.cpio", ec);
  };
  std::filesystem::path dir = guest_dir;
  if (!has_guest(dir)) {
    // build-guest.sh's cache: one folder per guest (kernel version + script hash).
    std::vector<std::filesystem::path> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.is_directory(ec) && has_guest(entry.path())) found.push_back(entry.path());
    }
    if (found.size() != 1) {
      throw std::runtime_error(fmt::format("{} guest (vmlinux, initramfs.cpio) in {} or its folders: {}",
                                           found.empty() ? "no" : "more than one", guest_dir, how));
    }
    dir = found.front();
  }
  GuestImage image;
  image.kernel = (dir / "vmlinux").string();
  image.initrd = (dir / "initramfs.cpio").string();
  // tests/qemu's probe remembers whether KVM boots this guest; without it, TCG.
  image.accel = "tcg";
  std::string accel = file_text((dir / "accel").string());
  while (!accel.empty() && std::isspace(static_cast<unsigned char>(accel.back()))) accel.pop_back();
  if (accel == "kvm") image.accel = accel;
  return image;
}

RunResult run_qemu_point(const Config& config, const Point& point, const RunOptions& options) {
  if (config.backend != BackendKind::kUvhost) {
    throw std::runtime_error("--frontend qemu runs its own `uvhost serve` (backend=uvhost only)");
  }
  if (config.frontend_spin_ns != 0) {
    throw std::runtime_error("--frontend qemu cannot inject per-packet frontend work (spin_ns, calibrate)");
  }
  if (options.queue_pairs != 1) throw std::runtime_error("--frontend qemu uses one queue pair");
  if (point.workload == Workload::kRr && point.size < 58) {
    throw std::runtime_error(
        "--frontend qemu rr needs a size of at least 58 (ping's timestamp in the payload)");
  }
  const GuestImage guest = find_guest(options.guest_dir);
  const auto warmup = static_cast<long>(std::max(1.0, std::ceil(options.warmup_seconds)));
  const auto seconds = static_cast<long>(std::max(1.0, std::ceil(options.seconds)));
  const int frontend_cpu = options.pin ? options.frontend_cpu : -1;
  const int backend_cpu = options.pin ? options.backend_cpu : -1;

  RunDir dir(options.work_dir, "uvhost-bench-qemu");
  const std::string suffix = unique_suffix();
  const std::string setup_log = dir.file("setup.log");
  Netns ns("uvh-bench-" + suffix, setup_log);
  // IFNAMSIZ: 15 characters at most.
  const std::string tap = fmt::format("uvb{}", suffix).substr(0, 15);

  const std::string socket = dir.file("vu.sock");
  BackendProcess uvhost(ns.exec(uvhost_tap_argv(config, options, socket, dir.file("ctl.sock"), tap)),
                        dir.file("backend.log"), backend_cpu);
  uvhost.wait_ready(socket, "", kUvhostStartTimeout);
  // The tap appears when uvhost's port made its backend: wait for it (bounded).
  const auto tap_until = Clock::now() + kUvhostStartTimeout;
  while (run_command(ns.exec({"ip", "link", "show", "dev", tap})) != 0) {
    if (Clock::now() > tap_until)
      throw std::runtime_error(fmt::format("uvhost serve made no tap {}: {}", tap, uvhost.log_tail()));
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  must(ns.exec({"ip", "addr", "add", std::string(kHostIp) + "/24", "dev", tap}), setup_log);
  must(ns.exec({"ip", "link", "set", tap, "up"}), setup_log);

  std::unique_ptr<BackendProcess> iperf;
  if (point.workload != Workload::kRr) {
    iperf = std::make_unique<BackendProcess>(ns.exec({"iperf3", "-s", "-B", kHostIp, "--forceflush"}),
                                             dir.file("iperf3.log"), -1);
    // The guest retries its first ping for up to 30 s; still, iperf3 must be listening.
    const auto until = Clock::now() + std::chrono::seconds{5};
    while (file_text(dir.file("iperf3.log")).find("Server listening") == std::string::npos) {
      if (!iperf->running() || Clock::now() > until) {
        throw std::runtime_error(
            fmt::format("iperf3 -s did not start: {}", tail_lines(dir.file("iperf3.log"))));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    }
  }

  const std::string console_log = dir.file("guest.log");
  { std::ofstream touch(console_log); }
  const std::string test = guest_test(point.workload);
  const std::string append = fmt::format(
      "console=ttyS0 loglevel=4 panic=-1 uvhost.tests={} uvhost.ip={}/24 uvhost.peer={} "
      "uvhost.secs={} uvhost.warmup={} uvhost.size={} uvhost.sessions={}",
      test, kGuestIp, kHostIp, seconds, warmup, point.size, point.sessions);
  const std::vector<std::string> qemu_argv{
      "qemu-system-x86_64", "-name", "uvhost-bench,debug-threads=on",  // thread names: "CPU 0/TCG", ...
      "-accel", guest.accel, "-machine", "pc", "-m", std::to_string(kGuestMemMb), "-smp", "1", "-object",
      fmt::format("memory-backend-memfd,id=mem,size={}M,share=on", kGuestMemMb), "-numa", "node,memdev=mem",
      "-kernel", guest.kernel, "-initrd", guest.initrd, "-append", append, "-chardev",
      fmt::format("socket,id=c0,path={}", socket), "-netdev", "vhost-user,id=n0,chardev=c0",
      // vectors=0: QEMU 7.2 + TCG + vhost-user crashes with MSI-X vectors (tests/qemu).
      "-device", "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56,vectors=0,romfile=", "-nodefaults",
      "-nographic", "-serial", "file:" + console_log, "-no-reboot"};
  BackendProcess qemu(qemu_argv, dir.file("qemu.log"), frontend_cpu);

  auto failure = [&](const std::string& what) {
    return std::runtime_error(
        fmt::format("{} size {} sessions {} (--frontend qemu): {}\nuvhost serve ({}) log {} ends "
                    "with:\n{}\nQEMU ({}) log {}:\n{}\n"
                    "guest console {} ends with:\n{}",
                    to_string(point.workload), point.size, point.sessions, what,
                    uvhost.running() ? "running" : uvhost.exit_description(), uvhost.log_path(),
                    uvhost.log_tail(), qemu.running() ? "running" : qemu.exit_description(), qemu.log_path(),
                    qemu.log_tail(5), console_log, tail_lines(console_log)));
  };

  // The console, until the guest's result line: CPU snapshots at the window's edges.
  Console console(console_log);
  std::vector<ThreadSample> qemu_start, qemu_end, uvhost_start, uvhost_end;
  std::string result_line;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                         kGuestSlackSeconds + static_cast<double>(warmup + seconds)));
  const std::string begin = "UVHOST-WINDOW: begin", end = "UVHOST-WINDOW: end";
  const std::string result_prefix = fmt::format("UVHOST-TEST: name={} ", test);
  while (result_line.empty()) {
    std::string line;
    while (console.next(line)) {
      if (line.rfind(begin, 0) == 0) {
        qemu_start = snapshot_threads(qemu.pid());
        uvhost_start = snapshot_threads(uvhost.pid());
      } else if (line.rfind(end, 0) == 0) {
        qemu_end = snapshot_threads(qemu.pid());
        uvhost_end = snapshot_threads(uvhost.pid());
      } else if (line.rfind(result_prefix, 0) == 0) {
        result_line = line;
        break;
      }
    }
    if (!result_line.empty()) break;
    if (!qemu.running()) throw failure("QEMU ended before the guest printed its result");
    if (!uvhost.running()) throw failure("uvhost serve ended during the run");
    if (Clock::now() > deadline) throw failure("no result from the guest in time");
    std::this_thread::sleep_for(std::chrono::milliseconds{2});
  }
  const auto f = fields(result_line);
  if (f.count("result") == 0 || f.at("result") != "PASS")
    throw failure("the guest's run failed: " + result_line);
  if (qemu_start.empty() || qemu_end.empty()) throw failure("the console showed no measured window");

  RunResult result;
  try {
    result.seconds = number(f, "seconds");
    result.packets = static_cast<uint64_t>(number(f, "packets"));
    result.bytes = static_cast<uint64_t>(number(f, "bytes"));
    if (point.workload == Workload::kRr) {
      result.transactions = static_cast<uint64_t>(number(f, "transactions"));
      result.p50_us = number(f, "p50_us");
      result.p99_us = number(f, "p99_us");
      result.p999_us = number(f, "p999_us");
    }
  } catch (const std::exception& e) {
    throw failure(fmt::format("{}: {}", e.what(), result_line));
  }

  // The guest powers off after its result (poweroff -f); QEMU then exits by itself.
  const auto off_until = Clock::now() + std::chrono::seconds{20};
  while (qemu.running() && Clock::now() < off_until)
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  qemu.stop();
  if (iperf) iperf->stop();
  uvhost.stop();
  // `uvhost serve` ends cleanly on SIGINT; anything else means it failed on the way.
  if (uvhost.exit_description() != "exited with status 0") throw failure("uvhost serve did not stop cleanly");

  for (ThreadCpu& t : thread_cpu_between(qemu_start, qemu_end, result.seconds, "frontend")) {
    result.threads.push_back(std::move(t));
  }
  for (ThreadCpu& t : thread_cpu_between(uvhost_start, uvhost_end, result.seconds, "backend")) {
    result.threads.push_back(std::move(t));
  }
  for (const ThreadCpu& t : result.threads) result.cpu_seconds += t.cpu_seconds;
  return result;
}

}  // namespace uvhost::bench
