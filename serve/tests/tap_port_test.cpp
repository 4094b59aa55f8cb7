// tap_port_test.cpp - a port with backend=tap through the daemon, in a private network
// namespace (this test binary unshares one; skipped without CAP_NET_ADMIN): frames the
// guest sends appear on the tap (read with an AF_PACKET socket), frames written to the
// tap reach the guest, and a tap deleted under a running port is a logged error and a
// counter - the port, its frontend and the daemon carry on and stop cleanly.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve_test_support.h"
#include "uvhost/base/unique_fd.h"

namespace uvhost::serve {
namespace {

using namespace uvhost::serve::testing;

class TapPortTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Every thread made after this (the daemon's) lives in the new namespace.
    namespaced_ = ::unshare(CLONE_NEWNET) == 0;
  }
  void SetUp() override {
    if (!namespaced_) GTEST_SKIP() << "no private network namespace (needs CAP_NET_ADMIN)";
  }
  static bool namespaced_;
};
bool TapPortTest::namespaced_ = false;

// An AF_PACKET socket on `ifname`: sees every frame the tap's host side gets, and
// sends frames into it (towards the guest).
class PacketSocket {
 public:
  explicit PacketSocket(const std::string& ifname) : fd_(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL))) {
    EXPECT_GE(fd_.get(), 0) << std::strerror(errno);
    address_.sll_family = AF_PACKET;
    address_.sll_protocol = htons(ETH_P_ALL);
    address_.sll_ifindex = static_cast<int>(::if_nametoindex(ifname.c_str()));
    EXPECT_NE(address_.sll_ifindex, 0) << ifname;
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&address_), sizeof(address_)), 0) << std::strerror(errno);
  }

  // Frames of our test EtherType (0x88B5) until `count` or the timeout.
  std::vector<std::vector<std::byte>> receive(size_t count, std::chrono::milliseconds timeout) {
    std::vector<std::vector<std::byte>> out;
    const auto deadline = Clock::now() + timeout;
    std::vector<std::byte> buffer(65536);
    while (out.size() < count && Clock::now() < deadline) {
      pollfd entry{fd_.get(), POLLIN, 0};
      if (::poll(&entry, 1, 10) != 1) continue;
      const ssize_t n = ::recv(fd_.get(), buffer.data(), buffer.size(), 0);
      if (n >= 14 && buffer[12] == std::byte{0x88} && buffer[13] == std::byte{0xB5}) {
        out.emplace_back(buffer.begin(), buffer.begin() + n);
      }
    }
    return out;
  }
  bool send(const std::vector<std::byte>& frame) {
    return ::sendto(fd_.get(), frame.data(), frame.size(), 0, reinterpret_cast<const sockaddr*>(&address_),
                    sizeof(address_)) == static_cast<ssize_t>(frame.size());
  }

 private:
  base::UniqueFd fd_;
  sockaddr_ll address_{};
};

TEST_F(TapPortTest, FramesCrossTheTapBothWaysAndADeletedTapIsCounted) {
  TempDir dir;
  PortSpec spec = port("t", dir.file("t.sock"), BackendKind::kTap);
  spec.tap_name = "uvtest0";
  Daemon daemon({spec});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto frontend = connect(dir.file("t.sock"), error);
  ASSERT_NE(frontend, nullptr) << error;
  PacketSocket host("uvtest0");

  // guest -> tap
  const auto frames = make_frames(100, 1);
  std::vector<std::vector<std::byte>> seen;
  for (size_t first = 0; first < frames.size(); first += 10) {
    const std::vector<std::vector<std::byte>> batch(frames.begin() + static_cast<std::ptrdiff_t>(first),
                                                    frames.begin() + static_cast<std::ptrdiff_t>(first + 10));
    ASSERT_TRUE(send_all(*frontend, batch));
    auto part = host.receive(batch.size(), kPatience);
    seen.insert(seen.end(), part.begin(), part.end());
  }
  EXPECT_EQ(seen, frames);

  // tap -> guest
  const auto inbound = make_frames(50, 500);
  for (const auto& frame : inbound) ASSERT_TRUE(host.send(frame));
  // The kernel may send the guest frames of its own (IPv6 neighbour discovery on a
  // fresh link): keep only ours.
  std::vector<std::vector<std::byte>> got;
  const auto deadline = Clock::now() + kPatience;
  while (got.size() < inbound.size() && Clock::now() < deadline) {
    frontend->poll_rx([&](const vhost_user::RxPacket& packet) {
      if (packet.frame.size() >= 14 && packet.frame[12] == std::byte{0x88} && packet.frame[13] == std::byte{0xB5}) {
        got.emplace_back(packet.frame.begin(), packet.frame.end());
      }
    });
    (void)frontend->wait_rx(10ms);
  }
  EXPECT_EQ(got, inbound);

  // The tap goes away under the running port.
  ASSERT_EQ(std::system("ip link del uvtest0"), 0);
  const auto more = make_frames(200, 900);
  ASSERT_TRUE(send_all(*frontend, more));  // the rings keep moving: frames are dropped, counted
  ASSERT_TRUE(wait_tx_done(*frontend)) << frontend->error();
  const nlohmann::json stats = daemon.control({{"cmd", "stats"}});
  const auto& backend = stats.at("ports").at(0).at("backend_stats");
  EXPECT_TRUE(backend.at("gone").get<bool>()) << backend.dump();
  frontend.reset();
  const auto reports = stop_and_report(daemon);
  EXPECT_EQ(reports[0].totals.from_guest_packets + reports[0].totals.from_guest_dropped, frames.size() + more.size());
  EXPECT_GE(reports[0].totals.from_guest_dropped, 1u);
  EXPECT_GE(reports[0].totals.to_guest_packets, inbound.size());  // ours, and maybe the kernel's
}

}  // namespace
}  // namespace uvhost::serve
