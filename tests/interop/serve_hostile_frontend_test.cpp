// serve_hostile_frontend_test.cpp - a real `uvhost serve` process (the binary named by
// UVHOST_BINARY) against our embedded frontend playing hostile or unusual frontends:
//  - a frontend that cuts its guest memory short (a memfd, a hugetlbfs file) mid-traffic
//    and kicks: the daemon lives, that port's connection ends with one error line and
//    its err eventfd written, the other port's frames all arrive (exact count), and the
//    daemon's fds and mappings are back to what they were before the hostile frontend;
//  - a frontend writing garbage into its ring: the err eventfd of that vring is written;
//  - a frontend that sets no kick fd (NOFD): its frames are processed in the default
//    poll mode (exact count).
// The waits below are bounded so that a broken daemon fails the test instead of hanging
// it; nothing is asserted about how long anything takes.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "uvhost/testing/temp_dir.h"
#include "uvhost/vhost_user/frontend.h"

namespace {

using uvhost::vhost_user::Frontend;
using uvhost::vhost_user::FrontendOptions;
using namespace std::chrono_literals;

constexpr auto kPatience = 20s;  // a hang guard, not a timing assertion

bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

// The value of `key=` in `line`, or nullopt.
std::optional<uint64_t> field(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return std::nullopt;
  return std::strtoull(line.c_str() + at + key.size() + 2, nullptr, 10);
}

// The daemon's open fds, pipes left out: the daemon opens none, but a sanitizer runtime
// does: ThreadSanitizer starts its symbolizer on the first suppressed report (tsan.supp)
// and keeps that pipe pair open for the rest of the process.
int count_fds(pid_t pid) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    std::error_code error;
    if (std::filesystem::read_symlink(entry.path(), error).string().starts_with("pipe:")) continue;
    ++count;
  }
  return count;
}

// What each of the daemon's fds refers to, one "fd -> target" per line: the failure
// message of an fd count that does not return shows which ones stayed or came.
std::string list_fds(pid_t pid) {
  std::string out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    std::error_code error;
    out += entry.path().filename().string() + " -> " + std::filesystem::read_symlink(entry.path(), error).string() + "\n";
  }
  return out;
}

struct Range {
  uintptr_t begin = 0, end = 0;
};

// Mappings of `pid` that overlap `range`, as /proc/PID/maps lines.
std::vector<std::string> maps_overlapping(pid_t pid, Range range) {
  std::vector<std::string> out;
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/maps"));
  for (std::string line; std::getline(in, line);) {
    const uintptr_t begin = std::strtoull(line.c_str(), nullptr, 16);
    const uintptr_t end = std::strtoull(line.c_str() + line.find('-') + 1, nullptr, 16);
    if (begin < range.end && range.begin < end) out.push_back(line);
  }
  return out;
}

// The start addresses of `pid`'s mappings of files whose maps name contains `name`.
std::vector<Range> mappings_of(pid_t pid, const std::string& name) {
  std::vector<Range> found;
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/maps"));
  for (std::string line; std::getline(in, line);) {
    if (line.find(name) == std::string::npos) continue;
    const uintptr_t begin = std::strtoull(line.c_str(), nullptr, 16);
    const uintptr_t end = std::strtoull(line.c_str() + line.find('-') + 1, nullptr, 16);
    found.push_back(Range{begin, end});
  }
  return found;
}

// The one mapping in `after` that is not in `before`.
std::optional<Range> new_mapping(const std::vector<Range>& before, const std::vector<Range>& after) {
  std::optional<Range> found;
  for (const Range& range : after) {
    bool old = false;
    for (const Range& known : before) old = old || (known.begin == range.begin && known.end == range.end);
    if (old) continue;
    if (found) return std::nullopt;  // more than one: ambiguous
    found = range;
  }
  return found;
}

// `uvhost serve` with its stderr (the log) in a file; SIGTERM and reaped at the end.
class ServeProcess {
 public:
  ServeProcess(const std::string& dir, const std::vector<std::string>& ports) : log_(dir + "/serve.log") {
    const char* binary = std::getenv("UVHOST_BINARY");
    if (binary == nullptr) throw std::runtime_error("UVHOST_BINARY is not set");
    std::vector<std::string> args{binary, "serve"};
    for (const std::string& port : ports) {
      args.push_back("--port");
      args.push_back(port);
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && alive()) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  pid_t pid() const { return pid_; }
  std::string log() const { return read_file(log_); }
  bool alive() {
    int status = 0;
    return ::waitpid(pid_, &status, WNOHANG) == 0;
  }
  // Ends it with SIGTERM; true if it exited 0 (it lived until then).
  bool stop() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    const bool ok = ::waitpid(pid_, &status, 0) == pid_ && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    pid_ = -1;
    return ok;
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
};

std::unique_ptr<Frontend> connect(const std::string& socket, FrontendOptions options = {}) {
  std::string error;
  auto frontend = uvhost::vhost_user::connect_frontend(socket, options, kPatience, error);
  EXPECT_NE(frontend, nullptr) << error;
  return frontend;
}

std::array<std::byte, 60> test_frame(uint64_t sequence) {
  std::array<std::byte, 60> frame{};
  for (size_t i = 0; i < 6; ++i) frame[i] = std::byte{0x02};
  frame[12] = std::byte{0x88};
  frame[13] = std::byte{0xb5};
  std::memcpy(frame.data() + 14, &sequence, sizeof(sequence));
  return frame;
}

// Sends `count` frames and waits until the device completed every one. false if not.
bool send_all(Frontend& frontend, uint64_t count, uint64_t first_sequence = 0) {
  for (uint64_t i = 0; i < count;) {
    const auto frame = test_frame(first_sequence + i);
    if (frontend.send(frame)) {
      ++i;
      continue;
    }
    if (frontend.broken() || !frontend.wait_tx_space(kPatience)) return false;
  }
  return eventually([&] {
    frontend.reap_tx();
    return frontend.tx_in_flight() == 0;
  });
}

bool readable(int fd) {
  pollfd entry{fd, POLLIN, 0};
  return ::poll(&entry, 1, 0) == 1;
}

// "NAME: connection N ended" from the daemon's log, once it is there.
std::optional<std::string> wait_for_end(ServeProcess& serve, const std::string& port) {
  std::optional<std::string> line;
  (void)eventually([&] {
    const auto ends = lines_with(serve.log(), port + ": connection 1 ended");
    if (!ends.empty()) line = ends.front();
    return line.has_value();
  });
  return line;
}

// Two sink ports: `good` sends frames all along while `bad`'s frontend (memory in
// `memory_dir`, a memfd when empty) cuts its memory to nothing and kicks.
void cut_memory_under_traffic(const std::string& memory_dir, const std::string& memory_name) {
  uvhost::testing::TempDir dir;
  const std::string bad_sock = dir.path() + "/bad.sock";
  const std::string good_sock = dir.path() + "/good.sock";
  ServeProcess serve(dir.path(), {"sock=" + bad_sock + ",name=bad,backend=sink",
                                  "sock=" + good_sock + ",name=good,backend=sink"});

  auto good = connect(good_sock);
  ASSERT_NE(good, nullptr);
  std::atomic<bool> stop_good{false};
  std::atomic<uint64_t> good_sent{0};
  std::atomic<bool> good_ok{true};
  std::thread good_thread([&] {
    // Batches of 64 completed frames until told to stop: frames cross the fault.
    while (!stop_good.load()) {
      if (!send_all(*good, 64, good_sent.load())) {
        good_ok = false;
        return;
      }
      good_sent += 64;
    }
  });
  // A failed ASSERT below returns early: the sender is stopped and joined on the way out.
  struct StopOnExit {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~StopOnExit() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } stop_on_exit{stop_good, good_thread};
  ASSERT_TRUE(eventually([&] { return good_sent.load() >= 256; }));

  const int fds_before = count_fds(serve.pid());
  const std::string fd_list_before = list_fds(serve.pid());
  const std::vector<Range> maps_before = mappings_of(serve.pid(), memory_name);
  FrontendOptions bad_options;
  bad_options.memory_dir = memory_dir;
  bad_options.err_fds = true;
  auto bad = connect(bad_sock, bad_options);
  ASSERT_NE(bad, nullptr);
  ASSERT_TRUE(send_all(*bad, 100));
  const std::optional<Range> region = new_mapping(maps_before, mappings_of(serve.pid(), memory_name));
  ASSERT_TRUE(region.has_value()) << "no one new mapping of " << memory_name << " in the daemon";

  // The hostile part: the memory goes, then a kick. (Our own mapping of it is dead too:
  // nothing below touches it.)
  ASSERT_EQ(::ftruncate(bad->memory_fd(), 0), 0) << std::strerror(errno);
  const uint64_t good_at_cut = good_sent.load();
  ASSERT_EQ(::eventfd_write(bad->kick_fd(1), 1), 0);

  const auto end = wait_for_end(serve, "bad");
  ASSERT_TRUE(end.has_value()) << serve.log();
  EXPECT_NE(end->find("device failed"), std::string::npos) << *end;
  EXPECT_TRUE(serve.alive());
  EXPECT_TRUE(readable(bad->err_fd(1))) << "the transmit vring's err eventfd was not written";
  bad.reset();

  // Nothing left of the hostile connection (the good one still runs): the daemon's fd
  // count is what it was before, and nothing is mapped where the region was.
  EXPECT_TRUE(eventually([&] { return count_fds(serve.pid()) == fds_before; }))
      << "fds before " << fds_before << ", now " << count_fds(serve.pid()) << "\nbefore:\n"
      << fd_list_before << "now:\n" << list_fds(serve.pid());
  const int fds_after = count_fds(serve.pid());
  EXPECT_TRUE(maps_overlapping(serve.pid(), *region).empty())
      << "still mapped: " << maps_overlapping(serve.pid(), *region).front();

  // The other port carried on: more frames after the cut, every one arrived.
  ASSERT_TRUE(eventually([&] { return good_sent.load() >= good_at_cut + 512 || !good_ok.load(); }));
  stop_good = true;
  good_thread.join();
  ASSERT_TRUE(good_ok.load());
  ASSERT_TRUE(good->stop()) << good->error();
  const auto good_end = wait_for_end(serve, "good");
  ASSERT_TRUE(good_end.has_value()) << serve.log();
  EXPECT_EQ(field(*good_end, "rx_packets"), good_sent.load()) << *good_end;
  EXPECT_EQ(field(*good_end, "rx_dropped"), 0u) << *good_end;


  const std::string log = serve.log();
  const auto errors = lines_with(log, "[error]");
  ASSERT_EQ(errors.size(), 1u) << log;
  EXPECT_NE(errors[0].find("bad: guest memory region gpa [0x0,"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("its file holds 0 bytes"), std::string::npos) << errors[0];
  // What the run showed, for docs/OPERATIONS.md.
  std::cout << "the one error line: " << errors[0] << "\n"
            << "bad: " << *end << "\ngood: " << *good_end << " (frames sent " << good_sent.load() << ", "
            << good_sent.load() - good_at_cut << " after the cut)\ndaemon fds before/after the hostile connection: "
            << fds_before << "/" << fds_after << "\n";
  EXPECT_TRUE(serve.stop()) << log;
}

TEST(ServeHostileFrontend, MemfdCutShortUnderTraffic) { cut_memory_under_traffic("", "memfd:uvhost-frontend"); }

// A hugetlbfs mount of our own in a temporary directory, with enough free huge pages.
class HugetlbfsMount {
 public:
  HugetlbfsMount() {
    if (::geteuid() != 0) {
      why_not_ = "needs root to mount hugetlbfs";
      return;
    }
    if (free_huge_pages() < 4) {
      std::ofstream("/proc/sys/vm/nr_hugepages") << 64;
      if (free_huge_pages() < 4) {
        why_not_ = "no free huge pages (echo 64 > /proc/sys/vm/nr_hugepages failed)";
        return;
      }
    }
    if (::mount("none", dir_.path().c_str(), "hugetlbfs", 0, nullptr) != 0) {
      why_not_ = std::string("mount -t hugetlbfs: ") + std::strerror(errno);
      return;
    }
    mounted_ = true;
  }
  ~HugetlbfsMount() {
    if (mounted_) ::umount2(dir_.path().c_str(), MNT_DETACH);
  }
  const std::string& why_not() const { return why_not_; }
  const std::string& path() const { return dir_.path(); }

 private:
  static long free_huge_pages() {
    std::istringstream in(read_file("/proc/meminfo"));
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("HugePages_Free:", 0) == 0) return std::strtol(line.c_str() + 15, nullptr, 10);
    }
    return 0;
  }
  uvhost::testing::TempDir dir_;
  bool mounted_ = false;
  std::string why_not_;
};

TEST(ServeHostileFrontend, HugetlbfsFileCutShortUnderTraffic) {
  HugetlbfsMount mount;
  if (!mount.why_not().empty()) GTEST_SKIP() << mount.why_not();
  cut_memory_under_traffic(mount.path(), mount.path() + "/uvhost-frontend-");
}

TEST(ServeHostileFrontend, BrokenRingWritesItsErrEventfd) {
  uvhost::testing::TempDir dir;
  const std::string sock = dir.path() + "/port.sock";
  ServeProcess serve(dir.path(), {"sock=" + sock + ",name=p,backend=sink"});
  FrontendOptions options;
  options.err_fds = true;
  auto frontend = connect(sock, options);
  ASSERT_NE(frontend, nullptr);
  ASSERT_TRUE(send_all(*frontend, 10));
  EXPECT_FALSE(readable(frontend->err_fd(1)));

  // The guest moves avail->idx a whole ring past the device: a ring violation.
  const auto config = frontend->vring_config(1);
  ASSERT_TRUE(config.has_value());
  auto* avail_idx = reinterpret_cast<std::atomic<uint16_t>*>(frontend->guest_memory() + config->avail_addr + 2);
  avail_idx->store(static_cast<uint16_t>(avail_idx->load() + 1000), std::memory_order_release);
  ASSERT_EQ(::eventfd_write(frontend->kick_fd(1), 1), 0);

  ASSERT_TRUE(eventually([&] { return readable(frontend->err_fd(1)); })) << serve.log();
  eventfd_t value = 0;
  ASSERT_EQ(::eventfd_read(frontend->err_fd(1), &value), 0);
  EXPECT_EQ(value, 1u);  // once, not once per handler run
  EXPECT_FALSE(readable(frontend->err_fd(0))) << "the receive vring did not break";
  EXPECT_EQ(lines_with(serve.log(), "[error]").size(), 1u) << serve.log();
  frontend.reset();
  EXPECT_TRUE(serve.stop()) << serve.log();
}

TEST(ServeHostileFrontend, RingWithoutKickFdIsPolled) {
  uvhost::testing::TempDir dir;
  const std::string sock = dir.path() + "/port.sock";
  ServeProcess serve(dir.path(), {"sock=" + sock + ",name=p,backend=sink"});  // poll=notify, the default
  FrontendOptions options;
  options.no_kick_fd = true;
  auto frontend = connect(sock, options);
  ASSERT_NE(frontend, nullptr);
  constexpr uint64_t kFrames = 5000;
  ASSERT_TRUE(send_all(*frontend, kFrames));
  ASSERT_TRUE(frontend->stop()) << frontend->error();
  const auto end = wait_for_end(serve, "p");
  ASSERT_TRUE(end.has_value()) << serve.log();
  EXPECT_EQ(field(*end, "rx_packets"), kFrames) << *end;
  EXPECT_EQ(lines_with(serve.log(), "vring 1 has no kick fd (NOFD): polled").size(), 1u) << serve.log();
  EXPECT_TRUE(serve.stop()) << serve.log();
}

}  // namespace
