// message_fuzz.cpp - libFuzzer target: a stream of vhost-user requests, with synthetic
// fds (eventfds and memfds made by this harness), fed to the parser and the backend
// device state machine (with a InlineDatapath behind it, polled between messages), either
// straight into BackendDevice::handle() or through a real socket and the Connection
// framing. Checks beyond the sanitizers: no fd leaks (the number of open eventfds,
// memfds and sockets returns to its baseline), and the device never hangs
// (continuation timeout 0).
//
// Input layout (little-endian), kept in sync with make_corpus.py:
//   [0]   queue pairs - 1 (low 2 bits)
//   then records until the input ends:
//   [0]   fd spec: bits 0-3 count (capped at 8), bits 4-5 kind (0 eventfd, 1 guest RAM
//         memfd, 2 small 4 KiB memfd, 3 alternate eventfd/RAM), bit 6 send through the
//         socket (else handle() directly)
//   [1-4] request   [5-8] flags   [9-10] payload length n   [11..] n payload bytes
//   request 0xffffffff: no message; the payload is a guest RAM write: u32 offset, bytes
//   request 0xfffffffe: no message; poll the sink datapath
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

#include "uvhost/vhost_user/backend_device.h"
#include "uvhost/vhost_user/connection.h"
#include "uvhost/vhost_user/inline_datapath.h"

namespace {

using namespace uvhost::vhost_user;

constexpr size_t kGuestRamBytes = 64 * 1024;
constexpr uint32_t kGuestWrite = 0xffffffff;
constexpr uint32_t kPoll = 0xfffffffe;

int g_guest_ram_fd = -1;
std::byte* g_guest_ram = nullptr;
int g_baseline_fds = 0;
uint64_t g_iterations = 0;

// Counts the kinds of fds this harness hands to the device (eventfds, memfds, sockets).
// Other fds are left out on purpose: the sanitizer runtime opens pipes of its own
// (UBSan's IsAccessibleMemoryRange) at moments we do not control.
int count_harness_fds() {
  int count = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    const std::string_view what(target, static_cast<size_t>(n));
    if (what.starts_with("socket:") || what.starts_with("anon_inode:[eventfd]") || what.starts_with("/memfd:")) {
      ++count;
    }
  }
  ::closedir(dir);
  return count;
}

UniqueFd make_fd(unsigned kind, size_t i) {
  if (kind == 3) kind = (i % 2 == 0) ? 0 : 1;
  switch (kind) {
    case 0: return UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    case 1: return UniqueFd(::fcntl(g_guest_ram_fd, F_DUPFD_CLOEXEC, 0));
    default: {
      UniqueFd fd(::memfd_create("fuzz-small", MFD_CLOEXEC));
      if (fd && ::ftruncate(fd.get(), 4096) != 0) fd.reset();
      return fd;
    }
  }
}

void drain_replies(Connection& frontend) {
  while (frontend.is_open() && frontend.wait_readable(std::chrono::milliseconds(0))) {
    if (frontend.receive().status != ReceiveStatus::kMessage) break;
  }
}

uint32_t le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // hostile input logs errors by design
  g_guest_ram_fd = ::memfd_create("fuzz-guest-ram", MFD_CLOEXEC);
  if (g_guest_ram_fd < 0 || ::ftruncate(g_guest_ram_fd, kGuestRamBytes) != 0) std::abort();
  void* p = ::mmap(nullptr, kGuestRamBytes, PROT_READ | PROT_WRITE, MAP_SHARED, g_guest_ram_fd, 0);
  if (p == MAP_FAILED) std::abort();
  g_guest_ram = static_cast<std::byte*>(p);
  g_baseline_fds = count_harness_fds();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::memset(g_guest_ram, 0, kGuestRamBytes);  // each input starts from a blank guest
  {
    DeviceOptions options;
    options.queue_pairs = 1u + (data[0] & 3u);
    options.max_mem_slots = 8;
    auto pair = Connection::pair();
    if (!pair) return 0;
    Connection frontend = std::move(pair->first);
    InlineDatapath sink(options.queue_pairs * 2);
    BackendDevice device(std::move(pair->second), sink, options);
    // A message must arrive whole: everything was written before handle_one() runs.
    device.connection().set_continuation_timeout(std::chrono::milliseconds(0));

    size_t at = 1;
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
      const unsigned kind = (fd_spec >> 4) & 3u;
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
      drain_replies(frontend);
      (void)sink.poll();
    }
  }
  // Everything the device received must be closed once it is gone. Counting fds costs a
  // directory walk, so check every 64 inputs (a leak accumulates, so it is still found).
  if (++g_iterations % 64 == 0 && count_harness_fds() != g_baseline_fds) {
    std::fprintf(stderr, "message_fuzz: fd leak: %d open, baseline %d\n", count_harness_fds(), g_baseline_fds);
    std::abort();
  }
  return 0;
}
