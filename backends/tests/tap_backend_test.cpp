// tap_backend_test.cpp - TapBackend against real taps, each test in its own network
// namespace (tap_test_support.h): opening (created / attached / attach-only, one queue
// per pair), frames both ways checked with AF_PACKET sockets, offloads, a tap deleted
// under us, and a host-side ping answered through the backend by a thread that pulls
// and transmits like a datapath worker.
#include "uvhost/backends/tap_backend.h"

#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>

#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tap_test_support.h"

namespace uvhost::backends {
namespace {

using namespace std::chrono_literals;
using testing::Bytes;
using base::UniqueFd;

class TapBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string missing = testing::missing_privileges();
    if (!missing.empty()) GTEST_SKIP() << "tap tests need privileges: " << missing;
    sandbox_.emplace();
    if (!sandbox_->ok()) GTEST_SKIP() << "cannot create a private network namespace: " << sandbox_->error();
  }
  void TearDown() override { sandbox_.reset(); }

  static std::unique_ptr<TapBackend> open(TapBackendOptions options) {
    std::string error;
    auto tap = TapBackend::open(options, error);
    EXPECT_TRUE(tap) << error;
    return tap;
  }

  std::optional<testing::NetnsSandbox> sandbox_;
};

// Pulls from `pair` until a frame matches (others are skipped), waiting on rx_fd.
template <typename Match>
std::optional<Packet> pull_matching(TapBackend& tap, uint32_t pair, Match match, std::chrono::milliseconds timeout = 2s) {
  const auto deadline = testing::Clock::now() + timeout;
  Packet packet;
  while (testing::Clock::now() < deadline) {
    if (!tap.pull(pair, packet)) {
      testing::wait_readable(tap.rx_fd(pair), 20ms);
      continue;
    }
    if (match(packet.frame)) return packet;
  }
  return std::nullopt;
}

// ---- opening ---------------------------------------------------------------------------

TEST_F(TapBackendTest, OpenCreatesATapWithOneQueuePerPair) {
  TapBackendOptions options;
  options.name = "uvtb-mq";
  options.queue_pairs = 3;
  options.mtu = 9000;
  auto tap = open(options);
  ASSERT_TRUE(tap);
  EXPECT_EQ(tap->kind(), "tap");
  EXPECT_EQ(tap->name(), "uvtb-mq");
  EXPECT_TRUE(tap->created());
  EXPECT_EQ(tap->queue_pairs(), 3u);
  EXPECT_EQ(tap->ifindex(), ::if_nametoindex("uvtb-mq"));
  EXPECT_NE(tap->describe().find("uvtb-mq (created, 3 queues, vnet header 12)"), std::string::npos)
      << tap->describe();
  EXPECT_NE(tap->rx_fd(0), tap->rx_fd(1));
  EXPECT_NE(tap->rx_fd(1), tap->rx_fd(2));
  EXPECT_EQ(tap->rx_fd(3), -1);
  const auto link = testing::run({"ip", "link", "show", "dev", "uvtb-mq"});
  EXPECT_NE(link.output.find("mtu 9000"), std::string::npos) << link.output;
  // Gone with the backend (we created it, not persistent).
  tap.reset();
  EXPECT_EQ(::if_nametoindex("uvtb-mq"), 0u);
}

TEST_F(TapBackendTest, KernelPicksTheNameWhenNoneIsGiven) {
  auto tap = open(TapBackendOptions{});
  ASSERT_TRUE(tap);
  EXPECT_EQ(tap->name().rfind("tap", 0), 0u) << tap->name();
}

TEST_F(TapBackendTest, AttachOnlyNeedsAnExistingTapAndLeavesNothingBehind) {
  TapBackendOptions options;
  options.name = "uvtb-att";
  options.create_if_missing = false;
  std::string error;
  EXPECT_FALSE(TapBackend::open(options, error));
  EXPECT_NE(error.find("does not exist"), std::string::npos) << error;
  EXPECT_EQ(::if_nametoindex("uvtb-att"), 0u);

  const auto made = testing::run({"ip", "tuntap", "add", "dev", "uvtb-att", "mode", "tap", "vnet_hdr"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto tap = open(options);
  ASSERT_TRUE(tap);
  EXPECT_FALSE(tap->created());
  EXPECT_NE(tap->describe().find("attached"), std::string::npos);
  tap.reset();
  EXPECT_NE(::if_nametoindex("uvtb-att"), 0u);  // persistent, not ours: still there

  options.name.clear();
  EXPECT_FALSE(TapBackend::open(options, error));
  EXPECT_NE(error.find("needs its name"), std::string::npos) << error;
}

TEST_F(TapBackendTest, BadOptionsFailWithClearErrors) {
  std::string error;
  TapBackendOptions options;
  options.queue_pairs = 0;
  EXPECT_FALSE(TapBackend::open(options, error));
  EXPECT_NE(error.find("queue_pairs"), std::string::npos) << error;
  options.queue_pairs = TapBackend::kMaxQueuePairs + 1;
  EXPECT_FALSE(TapBackend::open(options, error));
  options.queue_pairs = 1;
  options.name = "this-name-is-far-too-long";
  EXPECT_FALSE(TapBackend::open(options, error));
  EXPECT_FALSE(error.empty());
}

// ---- traffic -------------------------------------------------------------------------------

TEST_F(TapBackendTest, FramesGoBothWaysOnEveryPair) {
  TapBackendOptions options;
  options.name = "uvtb-io";
  options.queue_pairs = 2;
  auto tap = open(options);
  ASSERT_TRUE(tap);
  UniqueFd sniff = testing::packet_socket(tap->ifindex());
  UniqueFd inject = testing::packet_socket(tap->ifindex());
  ASSERT_TRUE(sniff.valid() && inject.valid());

  // Guest -> host, on both pairs.
  for (uint32_t pair = 0; pair < 2; ++pair) {
    const Bytes frame = testing::test_frame(200, 20, static_cast<uint16_t>(pair));
    ASSERT_TRUE(tap->transmit(pair, {}, frame));
    const auto seen = testing::packet_receive(sniff.get(), [pair](const Bytes& f) {
      return testing::is_test_frame(f, 20, static_cast<uint16_t>(pair));
    });
    ASSERT_TRUE(seen) << "pair " << pair;
    EXPECT_EQ(*seen, frame);
  }
  EXPECT_EQ(tap->tx_sent(), 2u);

  // Host -> guest: the kernel picks the queue (by flow); every frame comes out of one
  // of the pairs, exactly as sent, with a plain header.
  constexpr uint16_t kFrames = 20;
  for (uint16_t i = 0; i < kFrames; ++i) ASSERT_TRUE(testing::packet_send(inject.get(), tap->ifindex(), testing::test_frame(100 + i, 21, i)));
  int received = 0;
  const auto deadline = testing::Clock::now() + 3s;
  Packet packet;
  while (received < kFrames && testing::Clock::now() < deadline) {
    bool any = false;
    for (uint32_t pair = 0; pair < 2; ++pair) {
      while (tap->pull(pair, packet)) {
        any = true;
        if (!testing::is_test_frame(packet.frame, 21)) continue;
        const uint16_t sequence = testing::get16(packet.frame, testing::kEthHeader + 1);
        EXPECT_EQ(packet.frame, testing::test_frame(100 + sequence, 21, sequence));
        EXPECT_EQ(packet.header, virtio::NetHeader{});
        ++received;
      }
    }
    if (!any) std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(received, kFrames);
  EXPECT_GE(tap->rx_frames(), uint64_t{kFrames});
  const nlohmann::json stats = tap->stats();
  EXPECT_EQ(stats.at("name"), "uvtb-io");
  EXPECT_EQ(stats.at("tx").at("sent"), 2);
  EXPECT_EQ(stats.at("tx").at("bytes"), 400);
  EXPECT_EQ(stats.at("rx").at("truncated"), 0);
  EXPECT_FALSE(stats.at("gone").get<bool>());
}

TEST_F(TapBackendTest, TransmitPassesTheOffloadHeaderToTheKernel) {
  TapBackendOptions options;
  options.name = "uvtb-gso";
  auto tap = open(options);
  ASSERT_TRUE(tap);
  // A TCP GSO super-frame with a partial checksum: the kernel takes it as one packet.
  testing::TcpFrameSpec spec;
  const Bytes frame = testing::tcp_frame(spec);
  virtio::NetHeader header;
  header.flags = virtio::kNetHdrFlagNeedsCsum;
  header.gso_type = virtio::kNetGsoTcpV4;
  header.hdr_len = testing::kEthHeader + testing::kIpHeader + testing::kTcpHeader;
  header.gso_size = 1448;
  header.csum_start = testing::kEthHeader + testing::kIpHeader;
  header.csum_offset = 16;
  header.num_buffers = 7;  // not ours to send: zeroed on the wire
  EXPECT_TRUE(tap->transmit(0, header, frame));
  // A header the kernel refuses (checksum range outside the frame): bad_frame.
  virtio::NetHeader bad;
  bad.flags = virtio::kNetHdrFlagNeedsCsum;
  bad.csum_start = 4000;
  bad.csum_offset = 6;
  EXPECT_FALSE(tap->transmit(0, bad, testing::test_frame(64, 22)));
  EXPECT_EQ(tap->stats().at("tx").at("bad_frame"), 1);
  // Too short for an Ethernet header: refused too.
  EXPECT_FALSE(tap->transmit(0, {}, Bytes(4)));
  EXPECT_EQ(tap->stats().at("tx").at("bad_frame"), 2);
}

TEST_F(TapBackendTest, FeaturesChangedAppliesTheGuestsReceiveOffloads) {
  TapBackendOptions options;
  options.name = "uvtb-off";
  options.queue_pairs = 2;
  auto tap = open(options);
  ASSERT_TRUE(tap);
  EXPECT_EQ(tap->stats().at("offload_flags"), 0);
  const uint64_t features = (uint64_t{1} << net_feature::kGuestCsum) | (uint64_t{1} << net_feature::kGuestTso4);
  tap->features_changed(features);
  EXPECT_EQ(tap->stats().at("offload_flags"), tun_offload::kCsum | tun_offload::kTso4);
  tap->features_changed(0);
  EXPECT_EQ(tap->stats().at("offload_flags"), 0);
}

// ---- offered features, 64 KiB super-frames, MTU ----------------------------------------

constexpr uint64_t mask(unsigned bit) { return net_feature::mask(bit); }

// Is the running kernel at least major.minor?
bool kernel_at_least(int major, int minor) {
  utsname name{};
  int have_major = 0;
  int have_minor = 0;
  if (::uname(&name) != 0 || std::sscanf(name.release, "%d.%d", &have_major, &have_minor) != 2) return false;
  return have_major > major || (have_major == major && have_minor >= minor);
}

int interface_mtu(const std::string& name) {
  UniqueFd control(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ifreq request{};
  std::strncpy(request.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (::ioctl(control.get(), SIOCGIFMTU, &request) != 0) return -1;
  return request.ifr_mtu;
}

// A TCPv4 super-frame of `frame_bytes` (Ethernet header included).
testing::TcpFrameSpec tcp_spec_of(size_t frame_bytes) {
  testing::TcpFrameSpec spec;
  spec.payload = frame_bytes - testing::kEthHeader - testing::kIpHeader - testing::kTcpHeader;
  return spec;
}


TEST_F(TapBackendTest, OffersHostOffloadsAndTheGuestOffloadsTheKernelTakes) {
  TapBackendOptions options;
  options.name = "uvtb-feat";
  auto tap = open(options);
  ASSERT_TRUE(tap);
  using namespace net_feature;
  const uint64_t always = mask(kCsum) | mask(kHostTso4) | mask(kHostTso6) | mask(kHostEcn) | mask(kHostUfo) |
                          mask(kGuestCsum) | mask(kGuestTso4) | mask(kGuestTso6) | mask(kGuestEcn) | mask(kGuestUfo);
  const uint64_t uso = mask(kHostUso) | mask(kGuestUso4) | mask(kGuestUso6);
  // USO came with Linux 6.2 (TUNSETOFFLOAD's TUN_F_USO4|USO6, virtio_net_hdr UDP_L4).
  EXPECT_EQ(tap->offered_features(), always | (kernel_at_least(6, 2) ? uso : 0))
      << fmt::format("{}", fmt::join(names(tap->offered_features()), " "));
  EXPECT_EQ(offload_dependency_violation(tap->offered_features()), "");
  // Nothing else: no transport or device bits (the port's base set is not the backend's).
  EXPECT_EQ(tap->offered_features() & ~(kHostOffloads | kGuestOffloads), 0u);
  // The probe left the tap as the guest would find it: no offloads until it negotiates.
  EXPECT_EQ(tap->stats().at("offload_flags"), 0);
}

TEST_F(TapBackendTest, SixtyFourKibSuperFramesPassBothWaysWhole) {
  TapBackendOptions options;
  options.name = "uvtb-64k";
  auto tap = open(options);
  ASSERT_TRUE(tap);
  UniqueFd peer = testing::packet_socket(tap->ifindex(), /*vnet_hdr=*/true);
  ASSERT_TRUE(peer.valid());
  // The largest a guest can send: IP total length 65535.
  const Bytes frame = testing::tcp_frame(tcp_spec_of(14 + 65535));
  const uint16_t l4 = testing::kEthHeader + testing::kIpHeader;

  // Guest -> host: the guest's header as it is, the kernel takes one packet of it all.
  virtio::NetHeader header;
  header.flags = virtio::kNetHdrFlagNeedsCsum;
  header.gso_type = virtio::kNetGsoTcpV4;
  header.hdr_len = l4 + testing::kTcpHeader;
  header.gso_size = 1448;
  header.csum_start = l4;
  header.csum_offset = 16;
  ASSERT_TRUE(tap->transmit(0, header, frame));
  const auto seen = testing::packet_receive(peer.get(), [](const Bytes& f) {
    return testing::is_ipv4_tcp_to(Bytes(f.begin() + virtio::kNetHeaderSizeLegacy, f.end()));
  });
  ASSERT_TRUE(seen) << "the 64 KiB frame never reached the host";
  EXPECT_EQ(seen->size() - virtio::kNetHeaderSizeLegacy, frame.size());
  EXPECT_EQ(testing::get8(*seen, 1) & ~virtio::kNetGsoEcn, virtio::kNetGsoTcpV4);
  EXPECT_TRUE(std::equal(frame.begin(), frame.end(), seen->begin() + virtio::kNetHeaderSizeLegacy));
  EXPECT_EQ(tap->stats().at("tx").at("bytes"), frame.size());

  // Host -> guest, the guest takes TSO4: the largest super-frame the kernel hands a
  // tap (skb->len below its gso_max_size, 65536: 65535 bytes with the Ethernet header)
  // comes out of pull() whole, with its GSO header.
  tap->features_changed(mask(net_feature::kGuestCsum) | mask(net_feature::kGuestTso4));
  const Bytes largest = testing::tcp_frame(tcp_spec_of(65535));
  Bytes sent = testing::packet_vnet_header(header);
  sent.insert(sent.end(), largest.begin(), largest.end());
  ASSERT_TRUE(testing::packet_send(peer.get(), tap->ifindex(), sent)) << std::strerror(errno);
  const auto pulled = pull_matching(*tap, 0, [](const Bytes& f) { return testing::is_ipv4_tcp_to(f); });
  ASSERT_TRUE(pulled) << "no super-frame came out of pull()";
  EXPECT_EQ(pulled->frame, largest);
  EXPECT_EQ(pulled->header.gso_type, virtio::kNetGsoTcpV4);
  EXPECT_EQ(pulled->header.gso_size, 1448);
  EXPECT_NE(pulled->header.flags & virtio::kNetHdrFlagNeedsCsum, 0);
  EXPECT_EQ(tap->stats().at("rx").at("truncated"), 0);
}

TEST(TapBackendFlags, WithoutGuestCsumTheGuestGetsNoFlags) {
  // The tap marks frames whose checksum the host already checked DATA_VALID (a bridge
  // from a NIC that validated it); a guest without GUEST_CSUM may be told no flag at
  // all (virtio 1.2, 5.1.6.4.1). (No packet a test namespace can make reaches a tap as
  // CHECKSUM_UNNECESSARY, hence the function on its own.)
  EXPECT_EQ(TapBackend::flags_for_guest(virtio::kNetHdrFlagDataValid, true), virtio::kNetHdrFlagDataValid);
  EXPECT_EQ(TapBackend::flags_for_guest(virtio::kNetHdrFlagNeedsCsum, true), virtio::kNetHdrFlagNeedsCsum);
  EXPECT_EQ(TapBackend::flags_for_guest(virtio::kNetHdrFlagDataValid, false), 0);
  EXPECT_EQ(TapBackend::flags_for_guest(virtio::kNetHdrFlagNeedsCsum | virtio::kNetHdrFlagDataValid, false), 0);
}

TEST_F(TapBackendTest, MtuAtOpenAndFromTheFrontendReachTheTap) {
  TapBackendOptions options;
  options.name = "uvtb-mtu";
  options.mtu = 4000;
  options.queue_pairs = 2;
  auto tap = open(options);
  ASSERT_TRUE(tap);
  EXPECT_EQ(interface_mtu("uvtb-mtu"), 4000);
  EXPECT_EQ(tap->stats().at("mtu"), 4000);
  tap->mtu_changed(9000);
  EXPECT_EQ(interface_mtu("uvtb-mtu"), 9000);
  EXPECT_EQ(tap->stats().at("mtu"), 9000);
  // One the kernel refuses (below its 68): logged, counted, the tap keeps its MTU.
  tap->mtu_changed(50);
  EXPECT_EQ(interface_mtu("uvtb-mtu"), 9000);
  EXPECT_EQ(tap->stats().at("mtu"), 9000);
  EXPECT_EQ(tap->stats().at("mtu_errors"), 1);
}

TEST_F(TapBackendTest, WritesToADownLinkAreCountedAsDown) {
  TapBackendOptions options;
  options.name = "uvtb-down";
  auto tap = open(options);
  ASSERT_TRUE(tap);
  ASSERT_EQ(testing::run({"ip", "link", "set", "dev", "uvtb-down", "down"}).exit_code, 0);
  EXPECT_FALSE(tap->transmit(0, {}, testing::test_frame(64, 23)));
  EXPECT_EQ(tap->stats().at("tx").at("down"), 1);
  EXPECT_FALSE(tap->gone());
}

TEST_F(TapBackendTest, TapDeletedUnderUsMarksTheBackendGone) {
  TapBackendOptions options;
  options.name = "uvtb-gone";
  options.queue_pairs = 2;
  auto tap = open(options);
  ASSERT_TRUE(tap);
  ASSERT_TRUE(tap->transmit(0, {}, testing::test_frame(64, 24)));
  const auto deleted = testing::run({"ip", "link", "del", "dev", "uvtb-gone"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.output;

  // The first call that notices logs once and marks the backend gone.
  EXPECT_FALSE(tap->transmit(0, {}, testing::test_frame(64, 25)));
  EXPECT_TRUE(tap->gone());
  // Every later call drops quickly (no system call), on every pair, both directions.
  Packet packet;
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(tap->transmit(1, {}, testing::test_frame(64, 26)));
    EXPECT_FALSE(tap->pull(static_cast<uint32_t>(i % 2), packet));
  }
  EXPECT_EQ(tap->tx_gone(), 101u);
  EXPECT_EQ(tap->rx_gone(), 100u);
  const nlohmann::json stats = tap->stats();
  EXPECT_TRUE(stats.at("gone").get<bool>());
  EXPECT_EQ(stats.at("tx").at("sent"), 1);
  tap->features_changed(uint64_t{1} << net_feature::kGuestCsum);  // a warning, no crash
  tap.reset();                                                      // closing is fine too
}

TEST_F(TapBackendTest, TapDeletedWhileIdleIsNoticedByPull) {
  TapBackendOptions options;
  options.name = "uvtb-gone2";
  auto tap = open(options);
  ASSERT_TRUE(tap);
  ASSERT_EQ(testing::run({"ip", "link", "del", "dev", "uvtb-gone2"}).exit_code, 0);
  Packet packet;
  EXPECT_FALSE(tap->pull(0, packet));
  EXPECT_TRUE(tap->gone());
  EXPECT_FALSE(tap->transmit(0, {}, testing::test_frame(64, 27)));
  EXPECT_EQ(tap->tx_gone(), 1u);
}

// ---- ping through the backend ------------------------------------------------------------

// A "guest" on the other side of the backend: a thread that waits on rx_fd, pulls
// frames and transmits the answers, as a datapath worker would move them through a VM.
class GuestResponder {
 public:
  static constexpr testing::Mac kMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x42};
  static constexpr uint32_t kAddress = 0x0a4e0002;  // 10.78.0.2

  explicit GuestResponder(TapBackend& tap) : tap_(tap), thread_([this] { run(); }) {}
  ~GuestResponder() {
    stop_.store(true);
    thread_.join();
  }
  int arp_replies() const { return arp_replies_.load(); }
  int echo_replies() const { return echo_replies_.load(); }
  int transmit_failures() const { return transmit_failures_.load(); }

 private:
  void run() {
    Packet packet;
    while (!stop_.load()) {
      if (!tap_.pull(0, packet)) {
        testing::wait_readable(tap_.rx_fd(0), 20ms);
        continue;
      }
      testing::Answered what = testing::Answered::kNone;
      const Bytes frame(packet.frame.begin(), packet.frame.end());
      const std::optional<Bytes> reply = testing::answer_arp_or_echo(frame, kMac, kAddress, what);
      if (!reply) continue;
      // Counted before the reply is sent: the pinger may see the reply (and read the
      // counters) before transmit() has even returned here.
      if (what == testing::Answered::kArp) arp_replies_.fetch_add(1);
      if (what == testing::Answered::kEcho) echo_replies_.fetch_add(1);
      if (!tap_.transmit(0, {}, *reply)) transmit_failures_.fetch_add(1);
    }
  }

  TapBackend& tap_;
  std::atomic<bool> stop_{false};
  std::atomic<int> arp_replies_{0};
  std::atomic<int> echo_replies_{0};
  std::atomic<int> transmit_failures_{0};
  std::thread thread_;  // last: starts after the members above exist
};

TEST_F(TapBackendTest, HostPingIsAnsweredThroughTheBackend) {
  TapBackendOptions options;
  options.name = "uvtb-ping";
  auto tap = open(options);
  ASSERT_TRUE(tap);
  const auto address = testing::run({"ip", "addr", "add", "10.78.0.1/24", "dev", "uvtb-ping"});
  ASSERT_EQ(address.exit_code, 0) << address.output;
  GuestResponder guest(*tap);

  // 1. Our own pinger (a raw ICMP socket in this namespace).
  UniqueFd icmp(::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP));
  ASSERT_TRUE(icmp.valid()) << std::strerror(errno);
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_addr.s_addr = htonl(GuestResponder::kAddress);
  const uint16_t id = static_cast<uint16_t>(::getpid());
  for (uint16_t sequence = 1; sequence <= 3; ++sequence) {
    const Bytes request = testing::icmp_echo_request(id, sequence);
    ASSERT_EQ(::sendto(icmp.get(), request.data(), request.size(), 0, reinterpret_cast<const sockaddr*>(&peer),
                       sizeof(peer)),
              static_cast<ssize_t>(request.size()))
        << std::strerror(errno);
    bool answered = false;
    const auto deadline = testing::Clock::now() + 2s;
    while (!answered && testing::Clock::now() < deadline) {
      if (!testing::wait_readable(icmp.get(), 50ms)) continue;
      Bytes reply(2048);
      const ssize_t got = ::recv(icmp.get(), reply.data(), reply.size(), MSG_DONTWAIT);
      if (got <= 0) continue;
      reply.resize(static_cast<size_t>(got));
      answered = testing::is_icmp_echo_reply(reply, id, sequence);
    }
    EXPECT_TRUE(answered) << "echo " << sequence << " unanswered";
  }
  EXPECT_GE(guest.arp_replies(), 1);
  EXPECT_GE(guest.echo_replies(), 3);

  // 2. The system's ping, when installed.
  if (testing::find_program("ping")) {
    const auto ping = testing::run({"ping", "-c", "3", "-W", "1", "10.78.0.2"});
    EXPECT_EQ(ping.exit_code, 0) << ping.output;
    EXPECT_NE(ping.output.find(" 0% packet loss"), std::string::npos) << ping.output;
    EXPECT_GE(guest.echo_replies(), 6);
  } else {
    std::cout << "[ NOTE     ] no ping binary: only the in-process pinger ran\n";
  }
  EXPECT_EQ(guest.transmit_failures(), 0);
  EXPECT_GE(tap->rx_frames(), 4u);
  EXPECT_GE(tap->tx_sent(), 4u);
}

}  // namespace
}  // namespace uvhost::backends
