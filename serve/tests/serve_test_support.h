// serve_test_support.h - what the serve tests share: a temporary socket directory,
// port specs, and the embedded frontend's send/receive loops with bounded waits.
// Waits are bounded and generous (sanitizers, two shared cores); nothing is checked
// by sleeping a fixed time.
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "uvhost/serve/daemon.h"
#include "uvhost/testing/fds.h"
#include "uvhost/testing/frames.h"
#include "uvhost/vhost_user/connection.h"
#include "uvhost/vhost_user/frontend.h"
#include "uvhost/vhost_user/message.h"

namespace uvhost::serve::testing {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using vhost_user::Connection;
using vhost_user::Frontend;
using vhost_user::FrontendOptions;
using vhost_user::ReceiveStatus;
using vhost_user::Request;
using vhost_user::RxPacket;

// How long a step that should take milliseconds may take before the test gives up.
constexpr auto kPatience = 10s;

// ------------------------------------------------------------------ environment

using uvhost::testing::count_open_fds;

// A fresh directory for the sockets, removed with whatever is left in it.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/uvhost-serve-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    EXPECT_NE(made, nullptr) << std::strerror(errno);
    if (made != nullptr) path_ = made;
  }
  ~TempDir() {
    if (path_.empty()) return;
    if (DIR* dir = ::opendir(path_.c_str())) {
      while (dirent* entry = ::readdir(dir)) {
        if (entry->d_name[0] != '.') (void)::unlink((path_ + "/" + entry->d_name).c_str());
      }
      ::closedir(dir);
    }
    (void)::rmdir(path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline bool exists(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0;
}

// The permission bits of a socket file (or -1).
inline int socket_mode(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0 || !S_ISSOCK(info.st_mode)) return -1;
  return static_cast<int>(info.st_mode & 07777);
}

inline PortSpec port(const std::string& name, const std::string& path, BackendKind backend = BackendKind::kSink,
              uint32_t queue_pairs = 1) {
  PortSpec spec;
  spec.name = name;
  spec.socket_path = path;
  spec.backend = backend;
  spec.queue_pairs = queue_pairs;
  return spec;
}

inline PortSpec client_port(const std::string& name, const std::string& path, BackendKind backend = BackendKind::kSink) {
  PortSpec spec = port(name, path, backend);
  spec.client = true;
  return spec;
}

// Stops the daemon and returns what each port carried.
inline std::vector<PortReport> stop_and_report(Daemon& daemon) {
  daemon.request_stop();
  daemon.wait();
  return daemon.reports();
}

inline std::unique_ptr<Frontend> connect(const std::string& path, std::string& error, FrontendOptions options = {}) {
  error.clear();
  return vhost_user::connect_frontend(path, options, kPatience, error);
}

// ------------------------------------------------------------------ frames

constexpr std::array<size_t, 8> kSizes{60, 64, 128, 333, 777, 1000, 1500, 1514};
using uvhost::testing::make_frame;
using uvhost::testing::reflected;

inline std::vector<std::vector<std::byte>> make_frames(size_t count, uint32_t first_seq) {
  std::vector<std::vector<std::byte>> frames;
  for (size_t i = 0; i < count; ++i) {
    const auto seq = first_seq + static_cast<uint32_t>(i);
    frames.push_back(make_frame(kSizes[seq % kSizes.size()], seq));
  }
  return frames;
}


inline uint64_t total_bytes(const std::vector<std::vector<std::byte>>& frames) {
  uint64_t total = 0;
  for (const auto& frame : frames) total += frame.size();
  return total;
}

// Sends every frame on `pair`, waiting for room when the TX ring is full.
inline bool send_all(Frontend& frontend, const std::vector<std::vector<std::byte>>& frames, uint32_t pair = 0) {
  for (const auto& frame : frames) {
    const auto deadline = Clock::now() + kPatience;
    while (!frontend.send(frame, pair)) {
      if (frontend.broken() || Clock::now() >= deadline) return false;
      (void)frontend.wait_tx_space(100ms, pair, frame.size());
    }
  }
  return true;
}

// Reaps TX completions until nothing is in flight on `pair` (the backend took it all).
inline bool wait_tx_done(Frontend& frontend, uint32_t pair = 0) {
  const auto deadline = Clock::now() + kPatience;
  for (;;) {
    (void)frontend.reap_tx(pair);
    if (frontend.tx_in_flight(pair) == 0) return true;
    if (frontend.broken() || Clock::now() >= deadline) return false;
    (void)frontend.wait_tx_space(10ms, pair);
  }
}

// Receives on `pair` until `count` frames arrived or `timeout` passed.
inline std::vector<std::vector<std::byte>> receive(Frontend& frontend, size_t count, std::chrono::milliseconds timeout,
                                            uint32_t pair = 0) {
  std::vector<std::vector<std::byte>> out;
  const auto deadline = Clock::now() + timeout;
  while (out.size() < count && !frontend.broken()) {
    frontend.poll_rx(
        [&](const RxPacket& packet) {
          EXPECT_EQ(packet.queue_pair, pair);
          out.emplace_back(packet.frame.begin(), packet.frame.end());
        },
        SIZE_MAX, pair);
    if (out.size() >= count || Clock::now() >= deadline) break;
    (void)frontend.wait_rx(10ms, pair);
  }
  return out;
}


}  // namespace uvhost::serve::testing
