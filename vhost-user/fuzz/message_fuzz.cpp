// message_fuzz.cpp - libFuzzer target: a stream of vhost-user requests, with synthetic
// fds (eventfds, memfds, sockets and timerfds made by this harness), fed to the parser
// and the backend device state machine (with a InlineDatapath behind it, polled between
// messages), either straight into BackendDevice::handle() or through a real socket and
// the Connection framing, under each memory guard policy. Checks beyond the
// sanitizers: no fd leaks (the number of open eventfds, timerfds, memfds and sockets
// returns to its baseline), and the device never hangs (continuation timeout 0).
//
// Input layout (little-endian), kept in sync with make_corpus.py:
//   [0]   bits 0-1 queue pairs - 1; bits 2-3 memory guard policy (0 rcu, the default,
//         1 mutex, 2 rwsem, 3 pthread-rwlock)
//   then records until the input ends:
//   [0]   fd spec: bits 0-3 count (capped at 8); bits 4-5 and 7 the kind (k = bits 4-5
//         | bit 7 >> 5): 0 eventfd, 1 guest RAM memfd, 2 small 4 KiB memfd,
//         3 alternate eventfd/RAM, 4 socket, 5 timerfd, 6 alternate RAM/socket,
//         7 alternate eventfd/timerfd; bit 6 send through the socket (else handle())
//   [1-4] request   [5-8] flags   [9-10] payload length n   [11..] n payload bytes
//   request 0xffffffff: no message; the payload is a guest RAM write: u32 offset, bytes
//   request 0xfffffffe: no message; poll the sink datapath
//
// Speed (each check costs per input; this target runs ~10^7 inputs): replies are
// drained with one nonblocking recv every few messages rather than parsed one by one;
// the RAM and small memfds are made once and handed out as dups (their contents are
// zeroed per input, so no state leaks between inputs); fd leaks are counted cheaply
// every few inputs and exactly at exit. The RCU policy's grace period per memory
// change costs little here (one membarrier: replaying a corpus under the mutex policy
// instead was no faster), so all four policies are fuzzed, chosen per input.
#include <dirent.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

#include "uvhost/sync/read_mostly.h"
#include "uvhost/vhost_user/backend_device.h"
#include "uvhost/vhost_user/connection.h"
#include "uvhost/testing/inline_datapath.h"

namespace {

using namespace uvhost::vhost_user;
using uvhost::base::UniqueFd;
using uvhost::sync::GuardPolicy;

constexpr size_t kGuestRamBytes = 64 * 1024;
constexpr size_t kSmallBytes = 4096;
constexpr uint32_t kGuestWrite = 0xffffffff;
constexpr uint32_t kPoll = 0xfffffffe;
constexpr std::array<GuardPolicy, 4> kPolicies = {GuardPolicy::kRcu, GuardPolicy::kMutex, GuardPolicy::kRwSem,
                                                  GuardPolicy::kPthreadRwlock};
// Replies are drained every this many messages: each is under 40 bytes (under 1 KiB of
// socket buffer with its skb), far below the ~200 KiB a Unix socket holds, so the
// device's reply send never blocks.
constexpr unsigned kDrainEvery = 16;
// The cheap fd count runs every this many inputs (a leak accumulates, so it is found;
// the exact count at exit covers the last inputs, and a single replayed input).
constexpr uint64_t kFdCheckEvery = 16;

int g_guest_ram_fd = -1;
std::byte* g_guest_ram = nullptr;
int g_small_fd = -1;
std::byte* g_small = nullptr;
int g_fd_dir = -1;           // /proc/self/fd, kept open: one getdents per count
int g_baseline_harness = 0;  // exact: harness kinds only
long g_baseline_total = 0;   // every fd (the cheap first look)
uint64_t g_iterations = 0;

// Calls fn(name) for each entry of /proc/self/fd (without "." and ".."; the directory
// fd itself included); the count, or -1. getdents64 on a directory fd kept open: no
// opendir (and its 32 KiB buffer) each time.
template <class F>
long for_each_fd(F&& fn) {
  if (::lseek(g_fd_dir, 0, SEEK_SET) != 0) return -1;
  alignas(dirent64) static char buffer[8192];
  long count = 0;
  for (;;) {
    const ssize_t n = ::getdents64(g_fd_dir, buffer, sizeof(buffer));
    if (n < 0) return -1;
    if (n == 0) break;
    for (size_t at = 0; at < static_cast<size_t>(n);) {
      unsigned short reclen;
      std::memcpy(&reclen, buffer + at + offsetof(dirent64, d_reclen), sizeof(reclen));
      const char* name = buffer + at + offsetof(dirent64, d_name);
      at += reclen;
      if (name[0] == '.') continue;
      ++count;
      fn(name);
    }
  }
  return count;
}

// Counts the kinds of fds this harness hands to the device (eventfds and timerfds, that
// is anon inodes; memfds; sockets). Other fds are left out on purpose: the sanitizer
// runtime opens pipes of its own (UBSan's IsAccessibleMemoryRange) at moments we do
// not control.
int count_harness_fds() {
  int count = 0;
  const long total = for_each_fd([&count](const char* name) {
    char target[64];
    const ssize_t n = ::readlinkat(g_fd_dir, name, target, sizeof(target));
    if (n <= 0) return;
    const std::string_view what(target, static_cast<size_t>(n));
    if (what.starts_with("socket:") || what.starts_with("anon_inode:") || what.starts_with("/memfd:")) {
      ++count;
    }
  });
  return total < 0 ? -1 : count;
}

// Aborts if fds of the harness kinds stayed open. `exact`: always count them one by
// one (a readlink each); else only when the total number of fds moved.
void check_fd_leak(bool exact) {
  if (!exact) {
    const long total = for_each_fd([](const char*) {});
    if (total == g_baseline_total) return;
    g_baseline_total = total;  // sanitizer pipes come and go; judge by the exact count
  }
  const int open = count_harness_fds();
  if (open != g_baseline_harness) {
    std::fprintf(stderr, "message_fuzz: fd leak: %d eventfds/timerfds/memfds/sockets open, baseline %d\n",
                 open, g_baseline_harness);
    std::abort();
  }
}

void check_fd_leak_at_exit() {
  // libFuzzer exits through exit() after its last input (-runs, -max_total_time) and
  // after replaying files: the inputs since the last periodic check are judged here.
  check_fd_leak(true);
}

UniqueFd make_socket() {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return UniqueFd();
  ::close(ends[1]);
  return UniqueFd(ends[0]);
}

UniqueFd make_fd(unsigned kind, size_t i) {
  switch (kind) {
    case 3: kind = (i % 2 == 0) ? 0 : 1; break;
    case 6: kind = (i % 2 == 0) ? 1 : 4; break;
    case 7: kind = (i % 2 == 0) ? 0 : 5; break;
    default: break;
  }
  switch (kind) {
    // Fresh eventfds: their counters must not carry kicks from one input to the next.
    case 0: return UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    case 1: return UniqueFd(::fcntl(g_guest_ram_fd, F_DUPFD_CLOEXEC, 0));
    case 2: return UniqueFd(::fcntl(g_small_fd, F_DUPFD_CLOEXEC, 0));
    case 4: return make_socket();
    default: return UniqueFd(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  }
}

// Discards the device's replies: one nonblocking recv takes every queued byte (a
// Unix stream read goes on across messages); nothing here parses them.
void drain_replies(const Connection& frontend) {
  static char scratch[4096];
  constexpr auto kFull = static_cast<ssize_t>(sizeof(scratch));
  while (::recv(frontend.fd(), scratch, sizeof(scratch), MSG_DONTWAIT) == kFull) {
  }
}

uint32_t le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

std::byte* make_shared_memfd(const char* name, size_t bytes, int& fd) {
  fd = ::memfd_create(name, MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) std::abort();
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) std::abort();
  return static_cast<std::byte*>(p);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // hostile input logs errors by design
  g_guest_ram = make_shared_memfd("fuzz-guest-ram", kGuestRamBytes, g_guest_ram_fd);
  g_small = make_shared_memfd("fuzz-small", kSmallBytes, g_small_fd);
  g_fd_dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (g_fd_dir < 0) std::abort();
  g_baseline_total = for_each_fd([](const char*) {});
  g_baseline_harness = count_harness_fds();
  if (g_baseline_total < 0 || g_baseline_harness < 0) std::abort();
  std::atexit(check_fd_leak_at_exit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // Each input starts from a blank guest (the device and the datapath write into both).
  std::memset(g_guest_ram, 0, kGuestRamBytes);
  std::memset(g_small, 0, kSmallBytes);
  {
    DeviceOptions options;
    options.queue_pairs = 1u + (data[0] & 3u);
    options.memory_policy = kPolicies[(data[0] >> 2) & 3u];
    options.max_mem_slots = 8;
    auto pair = Connection::pair();
    if (!pair) return 0;
    Connection frontend = std::move(pair->first);
    InlineDatapath sink(options.queue_pairs * 2);
    BackendDevice device(std::move(pair->second), sink, options);
    // A message must arrive whole: everything was written before handle_one() runs.
    device.connection().set_continuation_timeout(std::chrono::milliseconds(0));

    size_t at = 1;
    unsigned undrained = 0;
    while (at + 11 <= size && device.is_open()) {
      const uint8_t fd_spec = data[at];
      const uint32_t request = le32(data + at + 1);
      const uint32_t flags = le32(data + at + 5);
      size_t length = static_cast<size_t>(data[at + 9] | (data[at + 10] << 8));
      at += 11;
      if (length > size - at) length = size - at;
      const uint8_t* payload = data + at;
      at += length;

      if (request == kGuestWrite) {
        if (length >= 4) {
          const size_t offset = le32(payload) % kGuestRamBytes;
          const size_t n = std::min(length - 4, kGuestRamBytes - offset);
          std::memcpy(g_guest_ram + offset, payload + 4, n);
        }
        continue;
      }
      if (request == kPoll) {
        (void)sink.poll();
        continue;
      }

      const size_t fd_count = std::min<size_t>(fd_spec & 0xfu, kMaxFds);
      const unsigned kind = ((fd_spec >> 4) & 3u) | ((fd_spec >> 5) & 4u);
      std::vector<UniqueFd> fds;
      for (size_t i = 0; i < fd_count; ++i) {
        UniqueFd fd = make_fd(kind, i);
        if (fd) fds.push_back(std::move(fd));
      }
      if ((fd_spec & 0x40) != 0) {
        std::vector<std::byte> bytes(kHeaderSize + length);
        std::memcpy(bytes.data(), &request, 4);
        std::memcpy(bytes.data() + 4, &flags, 4);
        const auto declared = static_cast<uint32_t>(length);
        std::memcpy(bytes.data() + 8, &declared, 4);
        if (length > 0) std::memcpy(bytes.data() + kHeaderSize, payload, length);
        std::vector<int> raw_fds;
        for (const UniqueFd& fd : fds) raw_fds.push_back(fd.get());
        if (!frontend.send(bytes, raw_fds).ok) break;
        fds.clear();  // our copies; the device got its own
        (void)device.handle_one();
      } else {
        RawMessage raw;
        raw.header = Header{request, flags, static_cast<uint32_t>(length)};
        raw.payload.assign(reinterpret_cast<const std::byte*>(payload),
                           reinterpret_cast<const std::byte*>(payload) + length);
        raw.fds = std::move(fds);
        (void)device.handle(std::move(raw));
      }
      if (++undrained == kDrainEvery) {
        drain_replies(frontend);
        undrained = 0;
      }
      (void)sink.poll();
    }
  }
  // Everything the device received must be closed once it is gone.
  if (++g_iterations % kFdCheckEvery == 0) check_fd_leak(false);
  return 0;
}
