// service_notifier_test.cpp - ServiceNotifier against a real AF_UNIX datagram socket
// named by NOTIFY_SOCKET, as systemd's manager listens: READY=1, STATUS=, RELOADING=1
// and STOPPING=1 arrive as sd_notify sends them; an unchanged status is not resent;
// without NOTIFY_SOCKET nothing is sent and nothing fails.
#include "uvhost/serve/service_notifier.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "serve_test_support.h"
#include "uvhost/base/unique_fd.h"

namespace uvhost::serve {
namespace {

using uvhost::serve::testing::TempDir;

// A bound datagram socket, as the service manager's notify socket; NOTIFY_SOCKET
// points at it while it lives.
class NotifyListener {
 public:
  explicit NotifyListener(const std::string& path) : fd_(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    EXPECT_GE(fd_.get(), 0) << std::strerror(errno);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0) << std::strerror(errno);
    ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  }
  ~NotifyListener() {
    ::unsetenv("NOTIFY_SOCKET");
  }
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  // The next datagram, or nullopt when none comes within `timeout_ms`.
  std::optional<std::string> next(int timeout_ms = 2000) {
    pollfd entry{fd_.get(), POLLIN, 0};
    if (::poll(&entry, 1, timeout_ms) != 1) return std::nullopt;
    char buffer[4096];
    const ssize_t got = ::recv(fd_.get(), buffer, sizeof(buffer), 0);
    if (got < 0) return std::nullopt;
    return std::string(buffer, static_cast<size_t>(got));
  }

 private:
  base::UniqueFd fd_;
};

TEST(ServiceNotifierTest, StatusLineCountsPortsAndConnections) {
  EXPECT_EQ(service_status(4, 2), "4 ports, 2 connected");
  EXPECT_EQ(service_status(1, 0), "1 port, 0 connected");
  EXPECT_EQ(service_status(0, 0), "0 ports, 0 connected");
}

TEST(ServiceNotifierTest, ReadyStatusReloadingStoppingReachTheManager) {
  TempDir dir;
  NotifyListener manager(dir.file("notify.sock"));
  ASSERT_TRUE(ServiceNotifier::enabled());
  ServiceNotifier notifier;

  notifier.ready(service_status(2, 0));
  EXPECT_EQ(manager.next(), "READY=1\nSTATUS=2 ports, 0 connected");

  notifier.status(service_status(2, 0));  // unchanged: not sent
  notifier.status(service_status(2, 1));
  EXPECT_EQ(manager.next(), "STATUS=2 ports, 1 connected");

  notifier.reloading(service_status(2, 1));
  const auto reloading = manager.next();
  ASSERT_TRUE(reloading);
  EXPECT_EQ(reloading->rfind("RELOADING=1\nMONOTONIC_USEC=", 0), 0u) << *reloading;
  EXPECT_NE(reloading->find("\nSTATUS=2 ports, 1 connected"), std::string::npos) << *reloading;
  notifier.ready(service_status(3, 1));
  EXPECT_EQ(manager.next(), "READY=1\nSTATUS=3 ports, 1 connected");

  notifier.stopping(service_status(3, 1));
  EXPECT_EQ(manager.next(), "STOPPING=1\nSTATUS=3 ports, 1 connected");
  EXPECT_EQ(manager.next(100), std::nullopt);  // nothing else was sent
}

TEST(ServiceNotifierTest, WithoutNotifySocketNothingIsSentAndNothingFails) {
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_FALSE(ServiceNotifier::enabled());
  ServiceNotifier notifier;
  notifier.ready("x");
  notifier.status("y");
  notifier.reloading("y");
  notifier.stopping("z");
}

TEST(ServiceNotifierTest, AManagerThatWentAwayIsNoReasonToFail) {
  TempDir dir;
  const std::string path = dir.file("gone.sock");
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);  // nobody bound there
  ServiceNotifier notifier;
  notifier.ready("x");  // logged once, ignored
  notifier.stopping("x");
  ::unsetenv("NOTIFY_SOCKET");
}

}  // namespace
}  // namespace uvhost::serve
