// qemu_guest.cpp - one guest under QEMU on its own `uvhost serve` (see qemu_guest.h):
// namespace and tap, uvhost serve, iperf3 -s, QEMU, the console watched for the
// window's edges and the result lines, then teardown.
#include "qemu_guest.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>
#include <thread>

extern char** environ;

namespace uvhost::bench {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kHostIp = "10.0.9.1";
constexpr const char* kGuestIp = "10.0.9.2";
constexpr int kGuestMemMb = 256;
constexpr auto kUvhostStartTimeout = std::chrono::seconds{10};

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

long guest_seconds(double seconds) noexcept { return static_cast<long>(std::max(1.0, std::ceil(seconds))); }

uint32_t guest_windows(double seconds, double slice_seconds) noexcept {
  return static_cast<uint32_t>(std::max(1.0, std::round(seconds / static_cast<double>(guest_seconds(slice_seconds)))));
}

std::string qemu_config_problem(const Config& config) {
  if (config.backend != BackendKind::kUvhost) return "a guest runs on its own `uvhost serve` (backend=uvhost only)";
  if (config.frontend_spin_ns != 0) return "a guest cannot do injected per-packet frontend work (spin_ns, calibrate)";
  if (!config.frontend_in_order || config.frontend_ring != RingFormat::kSplit) {
    return "a guest's driver negotiates its own features (in_order and ring apply to the embedded frontend)";
  }
  return {};
}

namespace detail {

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

void validate_qemu_run(const Config& config, const Point& point, const RunOptions& options) {
  if (const std::string problem = qemu_config_problem(config); !problem.empty()) {
    throw std::runtime_error("--frontend qemu: " + problem);
  }
  if (options.queue_pairs != 1) throw std::runtime_error("--frontend qemu uses one queue pair");
  if (point.workload == Workload::kRr && point.size < 58) {
    throw std::runtime_error(
        "--frontend qemu rr needs a size of at least 58 (ping's timestamp in the payload)");
  }
}

// Everything one guest runs with, in the order it is torn down in reverse: the namespace
// outlives the processes in it.
struct QemuGuest::Parts {
  std::string setup_log, console_log, orders_path;
  std::unique_ptr<Netns> ns;
  std::unique_ptr<BackendProcess> uvhost, iperf, qemu;
  std::unique_ptr<Console> console;
  int orders_fd = -1;

  ~Parts() {
    if (orders_fd >= 0) ::close(orders_fd);
    // A paused process would ignore SIGINT: every one is continued first.
    for (BackendProcess* p : {qemu.get(), iperf.get(), uvhost.get()}) {
      if (p != nullptr && p->running()) (void)::kill(p->pid(), SIGCONT);
    }
    qemu.reset();
    iperf.reset();
    uvhost.reset();
  }
};

QemuGuest::QemuGuest(const Config& config, const Point& point, const RunOptions& options, RunDir& dir,
                     const std::string& prefix, const std::string& tests)
    : parts_(std::make_unique<Parts>()), point_(point) {
  validate_qemu_run(config, point, options);
  const GuestImage guest = find_guest(options.guest_dir);
  warmup_ = guest_seconds(options.warmup_seconds);
  seconds_ = guest_seconds(options.seconds);
  const int frontend_cpu = options.pin ? options.frontend_cpu : -1;
  const int backend_cpu = options.pin ? options.backend_cpu : -1;
  auto file = [&](const char* name) { return dir.file((prefix + name).c_str()); };

  Parts& p = *parts_;
  const std::string suffix = unique_suffix();
  p.setup_log = file("setup.log");
  p.ns = std::make_unique<Netns>("uvh-bench-" + suffix, p.setup_log);
  // IFNAMSIZ: 15 characters at most.
  const std::string tap = fmt::format("uvb{}", suffix).substr(0, 15);

  const std::string socket = file("vu.sock");
  p.uvhost = std::make_unique<BackendProcess>(
      p.ns->exec(uvhost_serve_argv(config, options, fmt::format("sock={},backend=tap,tap={},name=bench", socket, tap),
                                   file("ctl.sock"))),
      file("backend.log"), backend_cpu);
  p.uvhost->wait_ready(socket, "", kUvhostStartTimeout);
  // The tap appears when uvhost's port made its backend: wait for it (bounded).
  const auto tap_until = Clock::now() + kUvhostStartTimeout;
  while (run_command(p.ns->exec({"ip", "link", "show", "dev", tap})) != 0) {
    if (Clock::now() > tap_until)
      throw std::runtime_error(fmt::format("uvhost serve made no tap {}: {}", tap, p.uvhost->log_tail()));
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  must(p.ns->exec({"ip", "addr", "add", std::string(kHostIp) + "/24", "dev", tap}), p.setup_log);
  must(p.ns->exec({"ip", "link", "set", tap, "up"}), p.setup_log);

  if (point.workload != Workload::kRr) {
    const std::string iperf_log = file("iperf3.log");
    p.iperf = std::make_unique<BackendProcess>(p.ns->exec({"iperf3", "-s", "-B", kHostIp, "--forceflush"}),
                                               iperf_log, -1);
    // The guest retries its first ping for up to 30 s; still, iperf3 must be listening.
    const auto until = Clock::now() + std::chrono::seconds{5};
    while (file_text(iperf_log).find("Server listening") == std::string::npos) {
      if (!p.iperf->running() || Clock::now() > until) {
        throw std::runtime_error(fmt::format("iperf3 -s did not start: {}", tail_lines(iperf_log)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    }
  }

  // The second serial port: QEMU's pipe chardev reads PATH.in and writes PATH.out.
  p.orders_path = file("orders");
  for (const char* end : {".in", ".out"}) {
    const std::string fifo = p.orders_path + end;
    if (::mkfifo(fifo.c_str(), 0600) != 0 && errno != EEXIST) {
      throw std::system_error(errno, std::generic_category(), "mkfifo " + fifo);
    }
  }
  // Read-write: opening never waits for QEMU, and a write never fails for want of a reader.
  p.orders_fd = ::open((p.orders_path + ".in").c_str(), O_RDWR | O_CLOEXEC);
  if (p.orders_fd < 0) throw std::system_error(errno, std::generic_category(), "open " + p.orders_path + ".in");

  p.console_log = file("guest.log");
  { std::ofstream touch(p.console_log); }
  const std::string append = fmt::format(
      "console=ttyS0 loglevel=4 panic=-1 uvhost.tests={} uvhost.ip={}/24 uvhost.peer={} "
      "uvhost.secs={} uvhost.warmup={} uvhost.size={} uvhost.sessions={}",
      tests, kGuestIp, kHostIp, seconds_, warmup_, point.size, point.sessions);
  const std::vector<std::string> qemu_argv{
      "qemu-system-x86_64", "-name", "uvhost-bench,debug-threads=on",  // thread names: "CPU 0/TCG", ...
      "-accel", guest.accel, "-machine", "pc", "-m", std::to_string(kGuestMemMb), "-smp", "1", "-object",
      fmt::format("memory-backend-memfd,id=mem,size={}M,share=on", kGuestMemMb), "-numa", "node,memdev=mem",
      "-kernel", guest.kernel, "-initrd", guest.initrd, "-append", append, "-chardev",
      fmt::format("socket,id=c0,path={}", socket), "-netdev", "vhost-user,id=n0,chardev=c0",
      // vectors=0: QEMU 7.2 + TCG + vhost-user crashes with MSI-X vectors (tests/qemu).
      "-device", "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56,vectors=0,romfile=", "-nodefaults",
      "-nographic", "-serial", "file:" + p.console_log, "-serial", "pipe:" + p.orders_path, "-no-reboot"};
  p.qemu = std::make_unique<BackendProcess>(qemu_argv, file("qemu.log"), frontend_cpu);
  p.console = std::make_unique<Console>(p.console_log);
}

QemuGuest::~QemuGuest() = default;

std::runtime_error QemuGuest::failure(const std::string& what) {
  Parts& p = *parts_;
  auto state = [](BackendProcess* process) {
    return process == nullptr ? std::string("not started")
                              : process->running() ? std::string("running") : process->exit_description();
  };
  return std::runtime_error(fmt::format(
      "{} size {} sessions {} (--frontend qemu): {}\nuvhost serve ({}) log {} ends with:\n{}\nQEMU ({}) log {}:\n{}\n"
      "guest console {} ends with:\n{}",
      to_string(point_.workload), point_.size, point_.sessions, what, state(p.uvhost.get()),
      p.uvhost ? p.uvhost->log_path() : "", p.uvhost ? p.uvhost->log_tail() : "", state(p.qemu.get()),
      p.qemu ? p.qemu->log_path() : "", p.qemu ? p.qemu->log_tail(5) : "", p.console_log,
      tail_lines(p.console_log)));
}

void QemuGuest::order(const std::string& line) {
  const std::string text = line + "\n";
  if (::write(parts_->orders_fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    throw failure(fmt::format("writing `{}` to the guest's serial port: {}", line, std::strerror(errno)));
  }
}

std::string QemuGuest::wait_for(const std::string& prefix, Clock::time_point deadline) {
  Parts& p = *parts_;
  for (;;) {
    std::string line;
    while (p.console->next(line)) {
      if (line.rfind(prefix, 0) == 0) return line;
    }
    if (!p.qemu->running()) throw failure("QEMU ended before the guest printed " + prefix);
    if (!p.uvhost->running()) throw failure("uvhost serve ended during the run");
    if (Clock::now() > deadline) throw failure("no " + prefix + " from the guest in time");
    std::this_thread::sleep_for(std::chrono::milliseconds{2});
  }
}

GuestWindow QemuGuest::measure(const std::string& test, Clock::time_point deadline) {
  Parts& p = *parts_;
  GuestWindow window;
  const std::string begin = "UVHOST-WINDOW: begin", end = "UVHOST-WINDOW: end";
  const std::string result_prefix = fmt::format("UVHOST-TEST: name={} ", test);
  std::string result_line;
  while (result_line.empty()) {
    const std::string line = wait_for("UVHOST-", deadline);
    if (line.rfind(begin, 0) == 0) {
      window.qemu_start = snapshot_threads(p.qemu->pid());
      window.uvhost_start = snapshot_threads(p.uvhost->pid());
    } else if (line.rfind(end, 0) == 0) {
      window.qemu_end = snapshot_threads(p.qemu->pid());
      window.uvhost_end = snapshot_threads(p.uvhost->pid());
    } else if (line.rfind(result_prefix, 0) == 0 || line.rfind("UVHOST-TEST: name=bench-serve ", 0) == 0) {
      result_line = line;
    }
  }
  const auto f = fields(result_line);
  if (f.count("result") == 0 || f.at("result") != "PASS") throw failure("the guest's run failed: " + result_line);
  if (window.qemu_start.empty() || window.qemu_end.empty()) throw failure("the console showed no measured window");
  RunResult& result = window.result;
  try {
    result.seconds = number(f, "seconds");
    result.packets = static_cast<uint64_t>(number(f, "packets"));
    result.bytes = static_cast<uint64_t>(number(f, "bytes"));
    if (point_.workload == Workload::kRr) {
      result.transactions = static_cast<uint64_t>(number(f, "transactions"));
      result.p50_us = number(f, "p50_us");
      result.p99_us = number(f, "p99_us");
      result.p999_us = number(f, "p999_us");
    }
  } catch (const std::exception& e) {
    throw failure(fmt::format("{}: {}", e.what(), result_line));
  }
  return window;
}

void QemuGuest::pause() {
  Parts& p = *parts_;
  for (BackendProcess* process : {p.qemu.get(), p.uvhost.get(), p.iperf.get()}) {
    if (process != nullptr) (void)::kill(process->pid(), SIGSTOP);
  }
  paused_ = true;
}

void QemuGuest::resume() {
  Parts& p = *parts_;
  for (BackendProcess* process : {p.uvhost.get(), p.iperf.get(), p.qemu.get()}) {
    if (process != nullptr) (void)::kill(process->pid(), SIGCONT);
  }
  paused_ = false;
}

void QemuGuest::finish() {
  Parts& p = *parts_;
  if (paused_) resume();
  // The guest powers off after its last test (poweroff -f); QEMU then exits by itself.
  const auto off_until = Clock::now() + std::chrono::seconds{20};
  while (p.qemu->running() && Clock::now() < off_until) std::this_thread::sleep_for(std::chrono::milliseconds{20});
  p.qemu->stop();
  if (p.iperf) p.iperf->stop();
  p.uvhost->stop();
  // `uvhost serve` ends cleanly on SIGINT; anything else means it failed on the way.
  if (p.uvhost->exit_description() != "exited with status 0") throw failure("uvhost serve did not stop cleanly");
}

}  // namespace detail

}  // namespace uvhost::bench
