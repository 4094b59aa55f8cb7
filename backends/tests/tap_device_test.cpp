// tap_device_test.cpp - TapDevice against real taps, each test in its own network
// namespace (tap_test_support.h): opening and attaching, frames both ways checked
// with AF_PACKET sockets, offloads in both directions, truncation, non-blocking
// reads, a link that goes down or away, and ping through a responder in user space.
#include "uvhost/backends/tap_device.h"

#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <iostream>
#include <thread>

#include "tap_test_support.h"
#include "uvhost/virtio/net_header.h"

namespace uvhost::backends {

// Readable statuses in failure messages (found by argument-dependent lookup).
void PrintTo(ReadStatus status, std::ostream* out) { *out << to_string(status); }
void PrintTo(WriteStatus status, std::ostream* out) { *out << to_string(status); }

namespace {

using namespace std::chrono_literals;
using testing::Bytes;
using base::UniqueFd;

constexpr size_t kHdr = virtio::kNetHeaderSizeMrg;

constexpr uint64_t features(std::initializer_list<unsigned> bits) {
  uint64_t value = 0;
  for (unsigned b : bits) value |= uint64_t{1} << b;
  return value;
}

// ---- tun_offload_flags: the pure mapping, no tap needed ------------------------------

TEST(TunOffloadFlags, MapsEachGuestFeatureToItsTunFlag) {
  using namespace net_feature;
  namespace f = tun_offload;
  EXPECT_EQ(tun_offload_flags(0), 0u);
  EXPECT_EQ(tun_offload_flags(features({kGuestCsum})), f::kCsum);
  EXPECT_EQ(tun_offload_flags(features({kGuestCsum, kGuestTso4})), f::kCsum | f::kTso4);
  EXPECT_EQ(tun_offload_flags(features({kGuestCsum, kGuestTso6})), f::kCsum | f::kTso6);
  EXPECT_EQ(tun_offload_flags(features({kGuestCsum, kGuestUfo})), f::kCsum | f::kUfo);
  EXPECT_EQ(tun_offload_flags(features({kGuestCsum, kGuestUso4, kGuestUso6})), f::kCsum | f::kUso4 | f::kUso6);
  EXPECT_EQ(tun_offload_flags(features({kGuestCsum, kGuestTso4, kGuestTso6, kGuestEcn, kGuestUfo})),
            f::kCsum | f::kTso4 | f::kTso6 | f::kTsoEcn | f::kUfo);
  // The values are the kernel's.
  EXPECT_EQ(f::kCsum, unsigned{TUN_F_CSUM});
  EXPECT_EQ(f::kTso4, unsigned{TUN_F_TSO4});
  EXPECT_EQ(f::kTso6, unsigned{TUN_F_TSO6});
  EXPECT_EQ(f::kTsoEcn, unsigned{TUN_F_TSO_ECN});
  EXPECT_EQ(f::kUfo, unsigned{TUN_F_UFO});
  static_assert(tun_offload_flags(features({kGuestCsum, kGuestTso4})) == (f::kCsum | f::kTso4));
}

TEST(TunOffloadFlags, DropsWhatTheSpecForbids) {
  using namespace net_feature;
  namespace f = tun_offload;
  // Segmentation offloads without GUEST_CSUM: nothing.
  EXPECT_EQ(tun_offload_flags(features({kGuestTso4, kGuestTso6, kGuestEcn, kGuestUfo, kGuestUso4, kGuestUso6})), 0u);
  // ECN without TSO4 or TSO6 is dropped; with either it stays.
  EXPECT_EQ(tun_offload_flags(features({kGuestCsum, kGuestEcn})), f::kCsum);
  EXPECT_EQ(tun_offload_flags(features({kGuestCsum, kGuestEcn, kGuestUfo})), f::kCsum | f::kUfo);
  EXPECT_EQ(tun_offload_flags(features({kGuestCsum, kGuestTso6, kGuestEcn})), f::kCsum | f::kTso6 | f::kTsoEcn);
  // Unrelated bits (HOST_TSO4 11, MRG_RXBUF 15, VERSION_1 32, CSUM 0) change nothing.
  EXPECT_EQ(tun_offload_flags(features({0, 11, 15, 32})), 0u);
  EXPECT_EQ(tun_offload_flags(features({kGuestCsum, 0, 11, 15, 32})), f::kCsum);
}

// ---- helpers on a real tap ----------------------------------------------------------------

class TapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string missing = testing::missing_privileges();
    if (!missing.empty()) GTEST_SKIP() << "tap tests need privileges: " << missing;
    sandbox_.emplace();
    if (!sandbox_->ok()) GTEST_SKIP() << "cannot create a private network namespace: " << sandbox_->error();
  }
  void TearDown() override { sandbox_.reset(); }

  static std::unique_ptr<TapDevice> open_tap(TapOptions options) {
    std::string error;
    auto tap = TapDevice::open(options, error);
    EXPECT_TRUE(tap) << error;
    return tap;
  }

  std::optional<testing::NetnsSandbox> sandbox_;
};

std::optional<short> interface_flags(const std::string& name) {
  UniqueFd control(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ifreq request{};
  std::strncpy(request.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (::ioctl(control.get(), SIOCGIFFLAGS, &request) != 0) return std::nullopt;
  return request.ifr_flags;
}

int interface_mtu(const std::string& name) {
  UniqueFd control(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ifreq request{};
  std::strncpy(request.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (::ioctl(control.get(), SIOCGIFMTU, &request) != 0) return -1;
  return request.ifr_mtu;
}

Bytes header_bytes(const virtio::NetHeader& header) {
  Bytes bytes(kHdr);
  virtio::encode_net_header(header, kHdr, bytes);
  return bytes;
}

WriteResult write_whole(TapDevice& tap, const Bytes& header, const Bytes& frame) {
  const iovec pieces[] = {{const_cast<std::byte*>(header.data()), header.size()},
                          {const_cast<std::byte*>(frame.data()), frame.size()}};
  return tap.write_frame(std::span<const iovec>(pieces));
}

struct Received {
  virtio::NetHeader header;
  Bytes frame;
};

// Reads frames until one matches (others are dropped), or nullopt after `timeout`.
template <typename Match>
std::optional<Received> read_matching(TapDevice& tap, Match match, std::chrono::milliseconds timeout = 2s) {
  const auto deadline = testing::Clock::now() + timeout;
  Bytes buffer(tap.max_read_bytes());
  while (testing::Clock::now() < deadline) {
    const iovec piece{buffer.data(), buffer.size()};
    const ReadResult got = tap.read_frame(std::span<const iovec>(&piece, 1));
    if (got.status == ReadStatus::kEmpty) {
      testing::wait_readable(tap.fd(), 20ms);
      continue;
    }
    if (got.status != ReadStatus::kFrame) {
      ADD_FAILURE() << "read_frame: " << to_string(got.status) << " errno " << got.error_number;
      return std::nullopt;
    }
    Received received{virtio::decode_net_header(std::span(buffer).first(kHdr), kHdr),
                      Bytes(buffer.begin() + kHdr, buffer.begin() + static_cast<std::ptrdiff_t>(got.bytes))};
    if (match(received.frame)) return received;
  }
  return std::nullopt;
}

// struct PacketVnetHeader as a packet socket with PACKET_VNET_HDR uses it: 10 bytes,
// host byte order. (<linux/virtio_net.h> does not compile as C++: a member "class".)
struct PacketVnetHeader {
  uint8_t flags;
  uint8_t gso_type;
  uint16_t hdr_len;
  uint16_t gso_size;
  uint16_t csum_start;
  uint16_t csum_offset;
};
static_assert(sizeof(PacketVnetHeader) == virtio::kNetHeaderSizeLegacy);

PacketVnetHeader tcp_gso_header() {
  PacketVnetHeader header{};
  header.flags = virtio::kNetHdrFlagNeedsCsum;
  header.gso_type = virtio::kNetGsoTcpV4;
  header.hdr_len = testing::kEthHeader + testing::kIpHeader + testing::kTcpHeader;
  header.gso_size = 1448;
  header.csum_start = testing::kEthHeader + testing::kIpHeader;
  header.csum_offset = 16;
  return header;
}

virtio::NetHeader tcp_gso_net_header() {
  const PacketVnetHeader h = tcp_gso_header();
  virtio::NetHeader header;
  header.flags = h.flags;
  header.gso_type = h.gso_type;
  header.hdr_len = h.hdr_len;
  header.gso_size = h.gso_size;
  header.csum_start = h.csum_start;
  header.csum_offset = h.csum_offset;
  return header;
}


// ---- opening -------------------------------------------------------------------------

TEST_F(TapTest, OpenCreatesNamedTapThatIsUpWithValidIfindex) {
  TapOptions options;
  options.name = "uvt-open";
  options.mtu = 9000;
  {
    auto tap = open_tap(options);
    ASSERT_TRUE(tap);
    EXPECT_EQ(tap->name(), "uvt-open");
    EXPECT_TRUE(tap->created());
    EXPECT_FALSE(tap->persistent());
    EXPECT_GT(tap->ifindex(), 0u);
    EXPECT_EQ(tap->ifindex(), ::if_nametoindex("uvt-open"));
    const auto flags = interface_flags("uvt-open");
    ASSERT_TRUE(flags);
    EXPECT_NE(*flags & IFF_UP, 0);
    EXPECT_EQ(interface_mtu("uvt-open"), 9000);
    // What the kernel holds for this fd: tap, no PI, vnet header of 12 bytes.
    ifreq current{};
    ASSERT_EQ(::ioctl(tap->fd(), TUNGETIFF, &current), 0);
    const auto tun_flags = static_cast<unsigned short>(current.ifr_flags);
    EXPECT_EQ(tun_flags & (IFF_TAP | IFF_NO_PI | IFF_VNET_HDR), IFF_TAP | IFF_NO_PI | IFF_VNET_HDR);
    int header_size = 0;
    ASSERT_EQ(::ioctl(tap->fd(), TUNGETVNETHDRSZ, &header_size), 0);
    EXPECT_EQ(header_size, 12);
    EXPECT_EQ(tap->vnet_hdr_size(), 12u);
    EXPECT_NE(::fcntl(tap->fd(), F_GETFL) & O_NONBLOCK, 0);
    EXPECT_NE(::fcntl(tap->fd(), F_GETFD) & FD_CLOEXEC, 0);
  }
  // Created by us and not persistent: gone with its fd.
  EXPECT_EQ(::if_nametoindex("uvt-open"), 0u);
}

TEST_F(TapTest, OpenWithoutNameLetsTheKernelPickTapN) {
  auto tap = open_tap(TapOptions{});
  ASSERT_TRUE(tap);
  EXPECT_EQ(tap->name().rfind("tap", 0), 0u) << tap->name();
  EXPECT_TRUE(tap->created());
  EXPECT_EQ(tap->ifindex(), ::if_nametoindex(tap->name().c_str()));
}

TEST_F(TapTest, AttachesToATapCreatedByIpTuntap) {
  const auto made = testing::run({"ip", "tuntap", "add", "dev", "uvt-ip", "mode", "tap", "vnet_hdr"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  TapOptions options;
  options.name = "uvt-ip";
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  EXPECT_FALSE(tap->created());
  EXPECT_TRUE(tap->persistent());
  EXPECT_EQ(tap->ifindex(), ::if_nametoindex("uvt-ip"));
  const auto flags = interface_flags("uvt-ip");
  ASSERT_TRUE(flags);
  EXPECT_NE(*flags & IFF_UP, 0);  // brought up by open()
}

TEST_F(TapTest, PersistentTapOutlivesItsFdAndIsAttachedAgain) {
  TapOptions options;
  options.name = "uvt-keep";
  options.persist = true;
  unsigned first_ifindex = 0;
  {
    auto tap = open_tap(options);
    ASSERT_TRUE(tap);
    EXPECT_TRUE(tap->created());
    EXPECT_TRUE(tap->persistent());
    first_ifindex = tap->ifindex();
  }
  EXPECT_EQ(::if_nametoindex("uvt-keep"), first_ifindex);  // still there
  options.persist = false;
  auto again = open_tap(options);
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->created());
  EXPECT_TRUE(again->persistent());  // attaching does not change persistence
  EXPECT_EQ(again->ifindex(), first_ifindex);
  // The namespace's end deletes it (the sandbox): nothing reaches the host.
}

TEST_F(TapTest, SingleQueueTapTakesOneFdMultiQueueTapTakesMore) {
  TapOptions single;
  single.name = "uvt-sq";
  auto first = open_tap(single);
  ASSERT_TRUE(first);
  std::string error;
  EXPECT_EQ(TapDevice::open(single, error), nullptr);
  EXPECT_NE(error.find("another file descriptor is attached"), std::string::npos) << error;

  TapOptions multi;
  multi.name = "uvt-mq";
  multi.multi_queue = true;
  auto queue0 = open_tap(multi);
  auto queue1 = open_tap(multi);
  ASSERT_TRUE(queue0);
  ASSERT_TRUE(queue1);
  EXPECT_TRUE(queue0->created());
  EXPECT_FALSE(queue1->created());
  EXPECT_EQ(queue0->ifindex(), queue1->ifindex());
  // A single-queue open of a multi-queue tap is refused with the reason.
  TapOptions mismatch;
  mismatch.name = "uvt-mq";
  error.clear();
  EXPECT_EQ(TapDevice::open(mismatch, error), nullptr);
  EXPECT_NE(error.find("IFF_MULTI_QUEUE"), std::string::npos) << error;
}

TEST_F(TapTest, BadNamesAndOptionsFailWithClearErrors) {
  std::string error;
  TapOptions options;
  options.name = "uvt-name-too-long";  // 17 characters; IFNAMSIZ allows 15
  EXPECT_EQ(TapDevice::open(options, error), nullptr);
  EXPECT_NE(error.find("at most 15"), std::string::npos) << error;

  options.name = "uvt/slash";
  error.clear();
  EXPECT_EQ(TapDevice::open(options, error), nullptr);
  EXPECT_NE(error.find("character"), std::string::npos) << error;

  options.name = "lo";  // exists, and is not a tap
  error.clear();
  EXPECT_EQ(TapDevice::open(options, error), nullptr);
  EXPECT_NE(error.find("not a tap"), std::string::npos) << error;

  options.name = "uvt-hdr";
  options.vnet_hdr_size = 11;
  error.clear();
  EXPECT_EQ(TapDevice::open(options, error), nullptr);
  EXPECT_NE(error.find("vnet header size 11"), std::string::npos) << error;

  options.vnet_hdr_size = kHdr;
  options.mtu = 10;  // below the minimum of 68
  error.clear();
  EXPECT_EQ(TapDevice::open(options, error), nullptr);
  EXPECT_NE(error.find("MTU 10"), std::string::npos) << error;
  EXPECT_EQ(::if_nametoindex("uvt-hdr"), 0u);  // the half-made tap was not left behind
}

TEST_F(TapTest, WithoutVnetHeaderOffloadsAreRefused) {
  TapOptions options;
  options.name = "uvt-nohdr";
  options.vnet_hdr = false;
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  EXPECT_FALSE(tap->vnet_hdr());
  EXPECT_EQ(tap->vnet_hdr_size(), 0u);
  ifreq current{};
  ASSERT_EQ(::ioctl(tap->fd(), TUNGETIFF, &current), 0);
  EXPECT_EQ(static_cast<unsigned short>(current.ifr_flags) & IFF_VNET_HDR, 0);
  std::string error;
  EXPECT_FALSE(tap->set_offloads(features({net_feature::kGuestCsum}), error));
  EXPECT_NE(error.find("need the virtio-net header"), std::string::npos) << error;
  EXPECT_TRUE(tap->set_offloads(0, error)) << error;
  // Frames go in and out bare.
  UniqueFd sniff = testing::packet_socket(tap->ifindex());
  ASSERT_TRUE(sniff.valid());
  Bytes frame = testing::test_frame(64, 9);
  const iovec piece{frame.data(), frame.size()};
  EXPECT_EQ(tap->write_frame(std::span<const iovec>(&piece, 1)).status, WriteStatus::kSent);
  const auto seen = testing::packet_receive(sniff.get(), [](const Bytes& f) { return testing::is_test_frame(f, 9); });
  ASSERT_TRUE(seen);
  EXPECT_EQ(*seen, frame);
}

// ---- frames both ways --------------------------------------------------------------------

TEST_F(TapTest, WrittenFrameArrivesInTheKernelWithTheHeaderStripped) {
  TapOptions options;
  options.name = "uvt-tx";
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  UniqueFd sniff = testing::packet_socket(tap->ifindex());
  ASSERT_TRUE(sniff.valid()) << std::strerror(errno);

  const Bytes header = header_bytes(virtio::NetHeader{});
  const Bytes frame = testing::test_frame(300, 1);
  // Scattered as a guest might: the header split, the frame starting mid-piece.
  Bytes joined = header;
  joined.insert(joined.end(), frame.begin(), frame.end());
  std::vector<virtio::IoPiece> pieces = {{joined.data(), 5}, {joined.data() + 5, 27}, {joined.data() + 32, 100},
                                         {joined.data() + 132, joined.size() - 132}};
  const WriteResult wrote = tap->write_frame(std::span<const virtio::IoPiece>(pieces));
  ASSERT_EQ(wrote.status, WriteStatus::kSent) << "errno " << wrote.error_number;
  EXPECT_EQ(wrote.bytes, kHdr + frame.size());

  const auto seen = testing::packet_receive(sniff.get(), [](const Bytes& f) { return testing::is_test_frame(f, 1); });
  ASSERT_TRUE(seen) << "the frame never reached the kernel";
  EXPECT_EQ(*seen, frame);
}

TEST_F(TapTest, FrameSentIntoTheTapIsReadWithAPlainHeader) {
  TapOptions options;
  options.name = "uvt-rx";
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  UniqueFd inject = testing::packet_socket(tap->ifindex());
  ASSERT_TRUE(inject.valid());
  const Bytes frame = testing::test_frame(200, 2);
  ASSERT_TRUE(testing::packet_send(inject.get(), tap->ifindex(), frame));

  ASSERT_TRUE(testing::wait_readable(tap->fd(), 2s));
  Bytes buffer(kHdr + 1500, std::byte{0xaa});
  std::vector<virtio::IoPiece> pieces = {{buffer.data(), 3}, {buffer.data() + 3, 40},
                                         {buffer.data() + 43, buffer.size() - 43}};
  ReadResult got{};
  for (int i = 0; i < 10; ++i) {  // skip anything else the kernel sent (there should be nothing)
    got = tap->read_frame(std::span<const virtio::IoPiece>(pieces));
    ASSERT_EQ(got.status, ReadStatus::kFrame) << to_string(got.status);
    if (testing::is_test_frame(Bytes(buffer.begin() + kHdr, buffer.end()), 2)) break;
  }
  ASSERT_EQ(got.bytes, kHdr + frame.size());
  const virtio::NetHeader header = virtio::decode_net_header(std::span(buffer).first(kHdr), kHdr);
  EXPECT_EQ(header.flags, 0);
  EXPECT_EQ(header.gso_type, virtio::kNetGsoNone);
  EXPECT_EQ(header.gso_size, 0);
  EXPECT_EQ(header.csum_start, 0);
  EXPECT_EQ(header.csum_offset, 0);
  EXPECT_EQ(Bytes(buffer.begin() + kHdr, buffer.begin() + static_cast<std::ptrdiff_t>(got.bytes)), frame);
  // Nothing after the frame was touched.
  EXPECT_EQ(buffer[got.bytes], std::byte{0xaa});
}

TEST_F(TapTest, OversizedFrameIsReportedTruncatedAndAnExactFitIsNot) {
  TapOptions options;
  options.name = "uvt-trunc";
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  UniqueFd inject = testing::packet_socket(tap->ifindex());
  ASSERT_TRUE(inject.valid());

  ASSERT_TRUE(testing::packet_send(inject.get(), tap->ifindex(), testing::test_frame(1000, 3)));
  ASSERT_TRUE(testing::wait_readable(tap->fd(), 2s));
  Bytes small(kHdr + 500);
  iovec piece{small.data(), small.size()};
  ReadResult got = tap->read_frame(std::span<const iovec>(&piece, 1));
  EXPECT_EQ(got.status, ReadStatus::kTruncated);
  EXPECT_EQ(got.bytes, small.size());
  EXPECT_TRUE(testing::is_test_frame(Bytes(small.begin() + kHdr, small.end()), 3));  // its first bytes are there
  // The kernel consumed the whole frame.
  EXPECT_EQ(tap->read_frame(std::span<const iovec>(&piece, 1)).status, ReadStatus::kEmpty);

  // A frame exactly as large as the buffer is a whole frame.
  const Bytes exact = testing::test_frame(small.size() - kHdr, 4);
  ASSERT_TRUE(testing::packet_send(inject.get(), tap->ifindex(), exact));
  ASSERT_TRUE(testing::wait_readable(tap->fd(), 2s));
  got = tap->read_frame(std::span<const iovec>(&piece, 1));
  EXPECT_EQ(got.status, ReadStatus::kFrame);
  EXPECT_EQ(got.bytes, small.size());
  EXPECT_EQ(Bytes(small.begin() + kHdr, small.end()), exact);

  // A buffer that cannot hold the header is refused before the kernel drops a frame.
  ASSERT_TRUE(testing::packet_send(inject.get(), tap->ifindex(), testing::test_frame(100, 5)));
  ASSERT_TRUE(testing::wait_readable(tap->fd(), 2s));
  iovec tiny{small.data(), kHdr - 1};
  got = tap->read_frame(std::span<const iovec>(&tiny, 1));
  EXPECT_EQ(got.status, ReadStatus::kError);
  EXPECT_EQ(got.error_number, EINVAL);
  EXPECT_TRUE(read_matching(*tap, [](const Bytes& f) { return testing::is_test_frame(f, 5); }));
}

TEST_F(TapTest, ReadOnAnEmptyTapReturnsEmptyAtOnce) {
  TapOptions options;
  options.name = "uvt-empty";
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  Bytes buffer(tap->max_read_bytes());
  const iovec piece{buffer.data(), buffer.size()};
  for (int i = 0; i < 3; ++i) {
    const auto start = testing::Clock::now();
    const ReadResult got = tap->read_frame(std::span<const iovec>(&piece, 1));
    const auto took = testing::Clock::now() - start;
    EXPECT_EQ(got.status, ReadStatus::kEmpty) << to_string(got.status);
    EXPECT_EQ(got.bytes, 0u);
    EXPECT_LT(took, 100ms);
  }
}

// ---- offloads ----------------------------------------------------------------------------

TEST_F(TapTest, GsoFrameWrittenWithOffloadsIsAcceptedAsOneGsoPacket) {
  TapOptions options;
  options.name = "uvt-gso";
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  std::string error;
  ASSERT_TRUE(tap->set_offloads(features({net_feature::kGuestCsum, net_feature::kGuestTso4}), error)) << error;
  EXPECT_EQ(tap->offload_flags(), tun_offload::kCsum | tun_offload::kTso4);
  UniqueFd sniff = testing::packet_socket(tap->ifindex(), /*vnet_hdr=*/true);
  ASSERT_TRUE(sniff.valid());

  const Bytes frame = testing::tcp_frame({});
  ASSERT_GT(frame.size(), 4000u);
  const WriteResult wrote = write_whole(*tap, header_bytes(tcp_gso_net_header()), frame);
  ASSERT_EQ(wrote.status, WriteStatus::kSent) << "errno " << wrote.error_number;

  // The stack got one GSO packet of the whole size (segmented later, where needed).
  const auto seen = testing::packet_receive(sniff.get(), [](const Bytes& f) {
    return testing::is_ipv4_tcp_to(Bytes(f.begin() + sizeof(PacketVnetHeader), f.end()));
  });
  ASSERT_TRUE(seen);
  PacketVnetHeader got{};
  std::memcpy(&got, seen->data(), sizeof(got));
  EXPECT_EQ(got.gso_type & ~virtio::kNetGsoEcn, virtio::kNetGsoTcpV4);
  EXPECT_EQ(got.gso_size, 1448);
  EXPECT_EQ(seen->size() - sizeof(PacketVnetHeader), frame.size());
}

TEST_F(TapTest, OffloadsDoNotGateWritesButMalformedHeadersAreBadFrames) {
  TapOptions options;
  options.name = "uvt-bad";
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  ASSERT_EQ(tap->offload_flags(), 0u);
  UniqueFd sniff = testing::packet_socket(tap->ifindex());
  ASSERT_TRUE(sniff.valid());
  const Bytes frame = testing::tcp_frame({});

  // TUNSETOFFLOAD is about what the tap hands us; the guest's GSO frames are taken
  // (and segmented by the kernel) whatever it says.
  EXPECT_EQ(write_whole(*tap, header_bytes(tcp_gso_net_header()), frame).status, WriteStatus::kSent);

  // Headers the kernel cannot use: refused, reported, nothing breaks.
  virtio::NetHeader unknown_type = tcp_gso_net_header();
  unknown_type.gso_type = 2;  // not a VIRTIO_NET_HDR_GSO_* value
  WriteResult wrote = write_whole(*tap, header_bytes(unknown_type), frame);
  EXPECT_EQ(wrote.status, WriteStatus::kBadFrame);
  EXPECT_EQ(wrote.error_number, EINVAL);

  virtio::NetHeader checksum_outside{};
  checksum_outside.flags = virtio::kNetHdrFlagNeedsCsum;
  checksum_outside.csum_start = 5000;  // past the end of the frame
  checksum_outside.csum_offset = 16;
  EXPECT_EQ(write_whole(*tap, header_bytes(checksum_outside), frame).status, WriteStatus::kBadFrame);

  const Bytes runt(5);  // shorter than an ethernet header
  EXPECT_EQ(write_whole(*tap, header_bytes({}), runt).status, WriteStatus::kBadFrame);
  const Bytes header_only(kHdr - 2);
  const iovec piece{const_cast<std::byte*>(header_only.data()), header_only.size()};
  EXPECT_EQ(tap->write_frame(std::span<const iovec>(&piece, 1)).status, WriteStatus::kBadFrame);

  // The tap still works.
  const Bytes plain = testing::test_frame(80, 6);
  EXPECT_EQ(write_whole(*tap, header_bytes({}), plain).status, WriteStatus::kSent);
  EXPECT_TRUE(testing::packet_receive(sniff.get(), [](const Bytes& f) { return testing::is_test_frame(f, 6); }));
}

TEST_F(TapTest, OffloadsDecideWhetherTheTapHandsUsGsoOrSegments) {
  TapOptions options;
  options.name = "uvt-off";
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  UniqueFd inject = testing::packet_socket(tap->ifindex(), /*vnet_hdr=*/true);
  ASSERT_TRUE(inject.valid());
  const Bytes frame = testing::tcp_frame({});
  Bytes gso_packet = testing::packet_vnet_header(tcp_gso_net_header());
  gso_packet.insert(gso_packet.end(), frame.begin(), frame.end());
  const size_t payload_offset = testing::kEthHeader + testing::kIpHeader + testing::kTcpHeader;

  // The guest accepts checksum offload and TSO4: one GSO frame, checksum left to it.
  std::string error;
  ASSERT_TRUE(tap->set_offloads(features({net_feature::kGuestCsum, net_feature::kGuestTso4}), error)) << error;
  ASSERT_TRUE(testing::packet_send(inject.get(), tap->ifindex(), gso_packet)) << std::strerror(errno);
  const auto whole = read_matching(*tap, [](const Bytes& f) { return testing::is_ipv4_tcp_to(f); });
  ASSERT_TRUE(whole) << "no GSO frame came out of the tap";
  EXPECT_EQ(whole->header.gso_type, virtio::kNetGsoTcpV4);
  EXPECT_EQ(whole->header.gso_size, 1448);
  EXPECT_NE(whole->header.flags & virtio::kNetHdrFlagNeedsCsum, 0);
  EXPECT_EQ(whole->header.csum_start, testing::kEthHeader + testing::kIpHeader);
  EXPECT_EQ(whole->header.csum_offset, 16);
  EXPECT_EQ(whole->frame, frame);

  // The guest accepts none: the kernel segments and checksums before handing them over.
  ASSERT_TRUE(tap->set_offloads(features({net_feature::kGuestTso4}), error)) << error;  // TSO4 alone is dropped
  EXPECT_EQ(tap->offload_flags(), 0u);
  ASSERT_TRUE(testing::packet_send(inject.get(), tap->ifindex(), gso_packet));
  Bytes payload;
  for (int segment = 0; segment < 3; ++segment) {
    const auto got = read_matching(*tap, [](const Bytes& f) { return testing::is_ipv4_tcp_to(f); });
    ASSERT_TRUE(got) << "segment " << segment << " missing";
    EXPECT_EQ(got->header.gso_type, virtio::kNetGsoNone);
    EXPECT_EQ(got->header.flags & virtio::kNetHdrFlagNeedsCsum, 0);
    EXPECT_EQ(got->frame.size(), payload_offset + 1448);
    EXPECT_TRUE(testing::ipv4_tcp_checksums_valid(got->frame)) << "segment " << segment;
    EXPECT_EQ(testing::get32(got->frame, testing::kEthHeader + testing::kIpHeader + 4), 1000u + 1448u * static_cast<unsigned>(segment));
    payload.insert(payload.end(), got->frame.begin() + static_cast<std::ptrdiff_t>(payload_offset), got->frame.end());
  }
  EXPECT_EQ(payload, Bytes(frame.begin() + static_cast<std::ptrdiff_t>(payload_offset), frame.end()));
}

TEST_F(TapTest, SetOffloadsAppliesEveryGuestOffload) {
  TapOptions options;
  options.name = "uvt-all";
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  using namespace net_feature;
  std::string error;
  ASSERT_TRUE(tap->set_offloads(
      features({kGuestCsum, kGuestTso4, kGuestTso6, kGuestEcn, kGuestUfo, kGuestUso4, kGuestUso6}), error))
      << error;
  const unsigned without_uso = tun_offload::kCsum | tun_offload::kTso4 | tun_offload::kTso6 | tun_offload::kTsoEcn |
                               tun_offload::kUfo;
  // USO only where the kernel has it (6.2 and later).
  EXPECT_TRUE(tap->offload_flags() == without_uso ||
              tap->offload_flags() == (without_uso | tun_offload::kUso4 | tun_offload::kUso6))
      << std::hex << tap->offload_flags();
  ASSERT_TRUE(tap->set_offloads(0, error)) << error;
  EXPECT_EQ(tap->offload_flags(), 0u);
}

// ---- a link that goes down or away ------------------------------------------------------

TEST_F(TapTest, WritesToADownLinkReportDown) {
  TapOptions options;
  options.name = "uvt-down";
  options.up = false;
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  const auto flags = interface_flags("uvt-down");
  ASSERT_TRUE(flags);
  EXPECT_EQ(*flags & IFF_UP, 0);
  const Bytes frame = testing::test_frame(64, 7);
  const WriteResult wrote = write_whole(*tap, header_bytes({}), frame);
  EXPECT_EQ(wrote.status, WriteStatus::kDown);
  EXPECT_EQ(wrote.error_number, EIO);
  Bytes buffer(tap->max_read_bytes());
  const iovec piece{buffer.data(), buffer.size()};
  EXPECT_EQ(tap->read_frame(std::span<const iovec>(&piece, 1)).status, ReadStatus::kEmpty);

  const auto up = testing::run({"ip", "link", "set", "dev", "uvt-down", "up"});
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_EQ(write_whole(*tap, header_bytes({}), frame).status, WriteStatus::kSent);
}

void expect_gone_after_delete(TapDevice& tap) {
  UniqueFd sniff = testing::packet_socket(tap.ifindex());
  ASSERT_TRUE(sniff.valid());
  const Bytes frame = testing::test_frame(64, 8);
  ASSERT_EQ(write_whole(tap, header_bytes({}), frame).status, WriteStatus::kSent);

  const auto deleted = testing::run({"ip", "link", "del", "dev", tap.name()});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.output;
  EXPECT_EQ(::if_nametoindex(tap.name().c_str()), 0u);

  // An event loop learns it from poll (POLLERR), then read/write say kGone.
  pollfd entry{tap.fd(), POLLIN | POLLOUT, 0};
  ASSERT_EQ(::poll(&entry, 1, 1000), 1);
  EXPECT_NE(entry.revents & POLLERR, 0);
  Bytes buffer(tap.max_read_bytes());
  const iovec piece{buffer.data(), buffer.size()};
  const ReadResult read = tap.read_frame(std::span<const iovec>(&piece, 1));
  EXPECT_EQ(read.status, ReadStatus::kGone) << to_string(read.status) << " errno " << read.error_number;
  const WriteResult wrote = write_whole(tap, header_bytes({}), frame);
  EXPECT_EQ(wrote.status, WriteStatus::kGone) << to_string(wrote.status) << " errno " << wrote.error_number;
  EXPECT_EQ(wrote.error_number, EBADFD);
}

TEST_F(TapTest, DeletedPersistentTapReportsGone) {
  const auto made = testing::run({"ip", "tuntap", "add", "dev", "uvt-gone", "mode", "tap", "vnet_hdr"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  TapOptions options;
  options.name = "uvt-gone";
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  ASSERT_FALSE(tap->created());
  expect_gone_after_delete(*tap);
}

TEST_F(TapTest, DeletedTapOfOurOwnReportsGone) {
  TapOptions options;
  options.name = "uvt-gone2";
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  ASSERT_TRUE(tap->created());
  expect_gone_after_delete(*tap);
}

// ---- threads -----------------------------------------------------------------------------

TEST_F(TapTest, OneReaderThreadAndOneWriterThreadAtOnce) {
  TapOptions options;
  options.name = "uvt-mt";
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  UniqueFd sniff = testing::packet_socket(tap->ifindex());
  UniqueFd inject = testing::packet_socket(tap->ifindex());
  ASSERT_TRUE(sniff.valid() && inject.valid());
  constexpr uint16_t kFrames = 200;

  std::atomic<int> written{0};
  std::atomic<int> seen_by_kernel{0};
  std::thread writer([&] {
    Bytes buffer(kHdr + 128);
    for (uint16_t i = 0; i < kFrames; ++i) {
      const Bytes frame = testing::test_frame(128, 10, i);
      std::copy(frame.begin(), frame.end(), buffer.begin() + kHdr);
      const virtio::IoPiece piece{buffer.data(), buffer.size()};
      if (tap->write_frame(std::span<const virtio::IoPiece>(&piece, 1)).status != WriteStatus::kSent) continue;
      written.fetch_add(1);
      if (testing::packet_receive(sniff.get(), [i](const Bytes& f) { return testing::is_test_frame(f, 10, i); })) {
        seen_by_kernel.fetch_add(1);
      }
    }
  });
  int read_back = 0;
  for (uint16_t i = 0; i < kFrames; ++i) {
    if (!testing::packet_send(inject.get(), tap->ifindex(), testing::test_frame(100, 11, i))) continue;
    if (read_matching(*tap, [i](const Bytes& f) { return testing::is_test_frame(f, 11, i); })) ++read_back;
  }
  writer.join();
  EXPECT_EQ(written.load(), kFrames);
  EXPECT_EQ(seen_by_kernel.load(), kFrames);
  EXPECT_EQ(read_back, kFrames);
}

// ---- ping through the tap ------------------------------------------------------------------

// Answers ARP and ICMP echo for one address, reading and writing through the tap: the
// other end of the wire, in user space.
class Responder {
 public:
  static constexpr testing::Mac kMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
  static constexpr uint32_t kAddress = 0x0a4d0002;  // 10.77.0.2

  explicit Responder(TapDevice& tap) : tap_(tap), buffer_(tap.max_read_bytes()) {}

  // Handles every frame queued now. false when the tap failed.
  bool serve() {
    for (;;) {
      const iovec piece{buffer_.data(), buffer_.size()};
      const ReadResult got = tap_.read_frame(std::span<const iovec>(&piece, 1));
      if (got.status == ReadStatus::kEmpty) return true;
      if (got.status != ReadStatus::kFrame) {
        error_ = std::string("read_frame: ") + std::string(to_string(got.status));
        return false;
      }
      const Bytes frame(buffer_.begin() + kHdr, buffer_.begin() + static_cast<std::ptrdiff_t>(got.bytes));
      std::optional<Bytes> reply = answer(frame);
      if (!reply) continue;
      const WriteResult wrote = write_whole(tap_, header_bytes({}), *reply);
      if (wrote.status != WriteStatus::kSent) {
        error_ = std::string("write_frame: ") + std::string(to_string(wrote.status));
        return false;
      }
    }
  }

  int arp_replies() const { return arp_replies_; }
  int echo_replies() const { return echo_replies_; }
  const std::string& error() const { return error_; }

 private:
  std::optional<Bytes> answer(const Bytes& frame) {
    testing::Answered what = testing::Answered::kNone;
    std::optional<Bytes> reply = testing::answer_arp_or_echo(frame, kMac, kAddress, what);
    if (what == testing::Answered::kArp) ++arp_replies_;
    if (what == testing::Answered::kEcho) ++echo_replies_;
    return reply;
  }

  TapDevice& tap_;
  Bytes buffer_;
  int arp_replies_ = 0;
  int echo_replies_ = 0;
  std::string error_;
};

TEST_F(TapTest, PingThroughTheTapIsAnsweredFromUserSpace) {
  TapOptions options;
  options.name = "uvt-ping";
  auto tap = open_tap(options);
  ASSERT_TRUE(tap);
  const auto address = testing::run({"ip", "addr", "add", "10.77.0.1/24", "dev", "uvt-ping"});
  ASSERT_EQ(address.exit_code, 0) << address.output;
  Responder responder(*tap);

  // 1. Our own pinger (a raw ICMP socket in this namespace): three echoes, one second each.
  UniqueFd icmp(::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP));
  ASSERT_TRUE(icmp.valid()) << std::strerror(errno);
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_addr.s_addr = htonl(Responder::kAddress);
  const uint16_t id = static_cast<uint16_t>(::getpid());
  for (uint16_t sequence = 1; sequence <= 3; ++sequence) {
    const Bytes request = testing::icmp_echo_request(id, sequence);
    ASSERT_EQ(::sendto(icmp.get(), request.data(), request.size(), 0, reinterpret_cast<const sockaddr*>(&peer),
                       sizeof(peer)),
              static_cast<ssize_t>(request.size()))
        << std::strerror(errno);
    bool answered = false;
    const auto deadline = testing::Clock::now() + 1s;
    while (!answered && testing::Clock::now() < deadline) {
      pollfd entries[] = {{tap->fd(), POLLIN, 0}, {icmp.get(), POLLIN, 0}};
      ::poll(entries, 2, 20);
      ASSERT_TRUE(responder.serve()) << responder.error();
      Bytes reply(2048);
      const ssize_t got = ::recv(icmp.get(), reply.data(), reply.size(), MSG_DONTWAIT);
      if (got <= 0) continue;
      reply.resize(static_cast<size_t>(got));
      answered = testing::is_icmp_echo_reply(reply, id, sequence);
    }
    EXPECT_TRUE(answered) << "echo " << sequence << " unanswered";
  }
  EXPECT_GE(responder.arp_replies(), 1);
  EXPECT_GE(responder.echo_replies(), 3);

  // 2. The system's ping, when installed (iputils-ping).
  if (!testing::find_program("ping")) {
    std::cout << "[ NOTE     ] no ping binary: only the in-process pinger ran\n";
    return;
  }
  std::string error;
  auto ping = testing::Child::spawn({"ping", "-c", "3", "-W", "1", "10.77.0.2"}, error);
  ASSERT_TRUE(ping) << error;
  std::optional<int> exit_code;
  const auto deadline = testing::Clock::now() + 15s;
  while (!exit_code && testing::Clock::now() < deadline) {
    testing::wait_readable(tap->fd(), 20ms);
    ASSERT_TRUE(responder.serve()) << responder.error();
    exit_code = ping->poll_exit();
  }
  ASSERT_TRUE(exit_code) << "ping did not finish";
  EXPECT_EQ(*exit_code, 0) << ping->output();
  EXPECT_NE(ping->output().find(" 0% packet loss"), std::string::npos) << ping->output();
  EXPECT_GE(responder.echo_replies(), 6);
}

}  // namespace
}  // namespace uvhost::backends
