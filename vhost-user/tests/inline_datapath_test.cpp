// inline_datapath_test.cpp - InlineDatapath driven through a BackendDevice on one
// thread, with a hand-played guest (DriverQueue on a memfd): kick suppression and its
// re-check, the kick fds it exposes, the poll budget, a disabled receive ring, and
// the dirty log of loopback traffic (live migration).
#include <poll.h>
#include <sys/eventfd.h>

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "backend_test_support.h"
#include "uvhost/vhost_user/dirty_log.h"
#include "uvhost/testing/inline_datapath.h"
#include "uvhost/virtio/net_header.h"

namespace uvhost::vhost_user {
namespace {

using testing::GuestRam;
using testing::kFrontendBase;
using testing::make_eventfd;
using Progress = BackendDevice::Progress;

// The frontend's socket, and the device with an InlineDatapath of the chosen backend
// at the other end, pumped on this thread (one message at a time).
class DeviceRig {
 public:
  explicit DeviceRig(InlineBackend backend) : datapath_(2, backend) {
    auto pair = Connection::pair();
    EXPECT_TRUE(pair.has_value());
    socket_ = std::make_unique<Connection>(std::move(pair->first));
    device_ = std::make_unique<BackendDevice>(std::move(pair->second), datapath_);
  }

  InlineDatapath& datapath() { return datapath_; }
  BackendDevice& device() { return *device_; }

  Progress send(Request request, const Payload& payload = {}, uint32_t flags = 0, std::vector<int> fds = {}) {
    const SendResult sent = socket_->send(encode(request, flags, payload), fds);
    EXPECT_TRUE(sent.ok) << sent.error;
    return device_->handle_one();
  }

  std::optional<uint64_t> reply_u64(Request request) {
    if (!socket_->wait_readable(std::chrono::milliseconds(0))) return std::nullopt;
    ReceiveResult got = socket_->receive();
    if (got.status != ReceiveStatus::kMessage) return std::nullopt;
    ReplyResult reply = parse_reply(std::move(got.message), request, ReplyKind::kU64);
    if (auto* ok = std::get_if<Reply>(&reply)) return std::get<uint64_t>(ok->payload);
    ADD_FAILURE() << std::get<ParseError>(reply).reason;
    return std::nullopt;
  }

  std::optional<uint64_t> send_acked(Request request, const Payload& payload = {}, std::vector<int> fds = {}) {
    send(request, payload, kFlagNeedReply, std::move(fds));
    return reply_u64(request);
  }

  // Owner, every protocol feature, and the offered features less `removed` and less
  // RING_PACKED and ACCESS_PLATFORM (these rigs drive split rings with addresses as QEMU
  // sends them without an IOMMU).
  void negotiate(uint64_t removed = 0) {
    ASSERT_EQ(send(Request::kSetOwner), Progress::kContinue);
    send(Request::kGetFeatures);
    const uint64_t offered = reply_u64(Request::kGetFeatures).value_or(0);
    ASSERT_NE(offered, 0u);
    send(Request::kGetProtocolFeatures);
    const uint64_t protocol = reply_u64(Request::kGetProtocolFeatures).value_or(0);
    ASSERT_EQ(send(Request::kSetProtocolFeatures, Payload{protocol}), Progress::kContinue);
    features_ = offered & ~removed & ~feature::kRingPacked & ~feature::kAccessPlatform;
    ASSERT_EQ(send_acked(Request::kSetFeatures, Payload{features_}), std::optional<uint64_t>(0));
  }
  uint64_t features() const { return features_; }

  void set_memory(const GuestRam& ram) {
    MemoryTable table;
    table.count = 1;
    table.regions[0] = MemoryRegionDesc{0, ram.size, kFrontendBase, 0};
    ASSERT_EQ(send_acked(Request::kSetMemTable, Payload{table}, {ram.fd.get()}), std::optional<uint64_t>(0));
  }

 private:
  InlineDatapath datapath_;  // outlives the device, which calls its hooks until destroyed
  std::unique_ptr<Connection> socket_;
  std::unique_ptr<BackendDevice> device_;
  uint64_t features_ = 0;
};

bool readable(int fd) {
  pollfd entry{fd, POLLIN, 0};
  return ::poll(&entry, 1, 0) == 1;
}

bool consume(int fd) {
  eventfd_t value = 0;
  return ::eventfd_read(fd, &value) == 0 && value > 0;
}

// One vring as the guest drives it: a DriverQueue on guest RAM, its kick and call fds.
struct GuestQueue {
  base::UniqueFd kick = make_eventfd();
  base::UniqueFd call = make_eventfd();
  std::unique_ptr<virtio::DriverQueue> driver;

  GuestQueue(GuestRam& ram, uint64_t ring_gpa, uint16_t size, bool event_idx) {
    virtio::DriverOptions options;
    options.size = size;
    options.event_idx = event_idx;
    const virtio::DriverRingArea area{ram.host + ring_gpa, ring_gpa, virtio::DriverQueue::required_bytes(options)};
    driver = std::make_unique<virtio::DriverQueue>(options, area, virtio::eventfd_kick(kick.get()));
  }

  virtio::QueueConfig config() const { return driver->device_config(); }

  // QEMU's sequence for one ring; with `log`, used-ring writes are logged at the used
  // ring's guest address.
  void setup(DeviceRig& rig, uint32_t index, uint16_t size, bool enable = true, bool log = false) {
    const virtio::QueueConfig c = config();
    ASSERT_EQ(rig.send_acked(Request::kSetVringNum, Payload{VringState{index, size}}), std::optional<uint64_t>(0));
    ASSERT_EQ(rig.send_acked(Request::kSetVringBase, Payload{VringState{index, 0}}), std::optional<uint64_t>(0));
    const VringAddress address{index, log ? kVringFlagLog : 0u, kFrontendBase + c.desc_addr,
                               kFrontendBase + c.used_addr, kFrontendBase + c.avail_addr, c.used_addr};
    ASSERT_EQ(rig.send_acked(Request::kSetVringAddr, Payload{address}), std::optional<uint64_t>(0));
    ASSERT_EQ(rig.send_acked(Request::kSetVringCall, Payload{VringFd{index, false}}, {call.get()}),
              std::optional<uint64_t>(0));
    ASSERT_EQ(rig.send_acked(Request::kSetVringKick, Payload{VringFd{index, false}}, {kick.get()}),
              std::optional<uint64_t>(0));
    if (enable) {
      ASSERT_EQ(rig.send_acked(Request::kSetVringEnable, Payload{VringState{index, 1}}), std::optional<uint64_t>(0));
    }
  }

  // TX: header (zeroed) + frame at `gpa`, one descriptor, published (kicks if asked).
  void transmit(GuestRam& ram, uint64_t gpa, std::span<const std::byte> frame, size_t header_size = 12) {
    std::memset(ram.host + gpa, 0, header_size);
    std::memcpy(ram.host + gpa + header_size, frame.data(), frame.size());
    const virtio::DriverQueue::Buffer buffer{gpa, static_cast<uint32_t>(header_size + frame.size()), false};
    ASSERT_TRUE(driver->add_chain(std::span(&buffer, 1)).has_value());
    (void)driver->publish();
  }

  // RX: posts device-writable buffers of `len` bytes at `gpa(i)` for i in [0, count).
  template <typename GpaOf>
  void post(size_t count, uint32_t len, GpaOf gpa) {
    for (size_t i = 0; i < count; ++i) {
      const virtio::DriverQueue::Buffer buffer{gpa(i), len, true};
      ASSERT_TRUE(driver->add_chain(std::span(&buffer, 1)).has_value());
    }
    (void)driver->publish();
  }
};

std::vector<std::byte> frame_of(size_t size, uint8_t seed) {
  std::vector<std::byte> frame(size);
  for (size_t i = 0; i < size; ++i) frame[i] = static_cast<std::byte>((seed + i * 13) & 0xff);
  return frame;
}

// ------------------------------------------------------------------ kicks

class InlineDatapathKickTest : public ::testing::TestWithParam<bool> {};  // EVENT_IDX or the flags

TEST_P(InlineDatapathKickTest, ReenablingRechecksWorkThatArrivedWhileDisabled) {
  const bool event_idx = GetParam();
  GuestRam ram(1 << 20);
  DeviceRig rig(InlineBackend::kSink);
  rig.negotiate(event_idx ? 0 : feature::kRingEventIdx);
  rig.set_memory(ram);
  GuestQueue tx(ram, 0x0, 64, event_idx);
  tx.setup(rig, 1, 64);
  InlineDatapath& datapath = rig.datapath();

  EXPECT_FALSE(datapath.enable_kicks());  // nothing there
  const auto a = frame_of(100, 1), b = frame_of(200, 2), c = frame_of(300, 3);

  // Kicks on: publishing kicks.
  tx.transmit(ram, 0x10000, a);
  EXPECT_EQ(tx.driver->kicks(), 1u);
  EXPECT_TRUE(consume(tx.kick.get()));
  EXPECT_EQ(datapath.poll(), 1u);

  // Kicks off (the loop is polling): the guest does not kick for b...
  datapath.disable_kicks();
  tx.transmit(ram, 0x11000, b);
  EXPECT_EQ(tx.driver->kicks(), 1u);
  EXPECT_FALSE(readable(tx.kick.get()));
  // ...so before sleeping the loop re-enables and must be told b is there.
  EXPECT_TRUE(datapath.enable_kicks());
  EXPECT_EQ(datapath.poll(), 1u);
  EXPECT_EQ(datapath.last_frame(), b);
  EXPECT_FALSE(datapath.enable_kicks());  // drained: now it may sleep

  // Kicks back on: the next publish kicks again.
  tx.transmit(ram, 0x12000, c);
  EXPECT_EQ(tx.driver->kicks(), 2u);
  EXPECT_TRUE(consume(tx.kick.get()));
  EXPECT_EQ(datapath.poll(), 1u);
  EXPECT_EQ(datapath.last_frame(), c);
  EXPECT_EQ(datapath.queue(1).packets, 3u);
}

INSTANTIATE_TEST_SUITE_P(Suppression, InlineDatapathKickTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "EventIdx" : "Flags";
                         });

TEST(InlineDatapathTest, KickFdsAreTheRunningTransmitRingsOnly) {
  GuestRam ram(1 << 20);
  DeviceRig rig(InlineBackend::kLoopback);
  rig.negotiate();
  rig.set_memory(ram);
  GuestQueue rx(ram, 0x0, 64, true);
  GuestQueue tx(ram, 0x4000, 64, true);
  std::vector<int> fds;
  rig.datapath().kick_fds(fds);
  EXPECT_TRUE(fds.empty());
  rx.setup(rig, 0, 64);
  tx.setup(rig, 1, 64);
  fds.clear();
  rig.datapath().kick_fds(fds);
  ASSERT_EQ(fds.size(), 1u);
  // The device's copy of the guest's TX kick eventfd.
  EXPECT_FALSE(readable(fds[0]));
  virtio::eventfd_kick(tx.kick.get())();
  EXPECT_TRUE(readable(fds[0]));

  // Stopped (GET_VRING_BASE): no longer waited on.
  rig.send(Request::kGetVringBase, Payload{VringState{1, 0}});
  fds.clear();
  rig.datapath().kick_fds(fds);
  EXPECT_TRUE(fds.empty());
}

TEST(InlineDatapathTest, PollTakesABoundedBudgetPerQueue) {
  GuestRam ram(4 << 20);
  DeviceRig rig(InlineBackend::kSink);
  rig.negotiate();
  rig.set_memory(ram);
  GuestQueue tx(ram, 0x0, 512, true);
  tx.setup(rig, 1, 512);
  const auto frame = frame_of(60, 7);
  for (uint64_t i = 0; i < 400; ++i) {
    std::memset(ram.host + 0x10000 + i * 0x100, 0, 12);
    std::memcpy(ram.host + 0x10000 + i * 0x100 + 12, frame.data(), frame.size());
    const virtio::DriverQueue::Buffer buffer{0x10000 + i * 0x100, 72, false};
    ASSERT_TRUE(tx.driver->add_chain(std::span(&buffer, 1)).has_value());
  }
  (void)tx.driver->publish();
  const size_t first = rig.datapath().poll();
  EXPECT_GT(first, 0u);
  EXPECT_LT(first, 400u);  // one busy queue cannot keep the caller forever
  size_t total = first;
  for (int i = 0; i < 10 && total < 400; ++i) total += rig.datapath().poll();
  EXPECT_EQ(total, 400u);
  EXPECT_EQ(rig.datapath().poll(), 0u);
  EXPECT_EQ(rig.datapath().queue(1).packets, 400u);
}

TEST(InlineDatapathTest, LoopbackIntoADisabledRxRingDrops) {
  GuestRam ram(1 << 20);
  DeviceRig rig(InlineBackend::kLoopback);
  rig.negotiate();
  rig.set_memory(ram);
  GuestQueue rx(ram, 0x0, 64, true);
  GuestQueue tx(ram, 0x4000, 64, true);
  rx.post(8, 2048, [](size_t i) { return 0x20000 + i * 0x1000; });
  rx.setup(rig, 0, 64, /*enable=*/false);
  tx.setup(rig, 1, 64);
  const auto frame = frame_of(100, 3);
  tx.transmit(ram, 0x10000, frame);
  EXPECT_EQ(rig.datapath().poll(), 1u);
  EXPECT_EQ(rig.datapath().queue(0).dropped, 1u);
  EXPECT_EQ(rig.datapath().queue(0).packets, 0u);
  EXPECT_FALSE(rx.driver->reap().has_value());

  ASSERT_EQ(rig.send_acked(Request::kSetVringEnable, Payload{VringState{0, 1}}), std::optional<uint64_t>(0));
  tx.transmit(ram, 0x11000, frame);
  EXPECT_EQ(rig.datapath().poll(), 1u);
  EXPECT_EQ(rig.datapath().queue(0).packets, 1u);
  const auto used = rx.driver->reap();
  ASSERT_TRUE(used.has_value());
  EXPECT_EQ(used->len, 12 + frame.size());
}

// ------------------------------------------------------------------ dirty log

TEST(InlineDatapathTest, LoopbackDirtyLogMarksWrittenRxBuffersAndUsedRings) {
  // Layout (guest physical): RX ring at 0 (descriptors on page 0, used ring on page 1),
  // TX ring at 0x10000 (pages 0x10, 0x11), RX buffers of 256 bytes one per page from
  // 0x100000, TX buffers one per page from 0x200000.
  constexpr uint64_t kRxRing = 0x0, kTxRing = 0x10000;
  constexpr uint64_t kRxBuffers = 0x100000, kTxBuffers = 0x200000;
  constexpr uint32_t kRxBufferSize = 256;
  constexpr size_t kPosted = 64;
  GuestRam ram(4 << 20);
  GuestRam log_ram(4096);  // 32768 pages: 128 MiB of guest memory
  DeviceRig rig(InlineBackend::kLoopback);
  rig.negotiate(feature::kLogAll);  // not migrating yet
  ASSERT_NE(rig.features() & feature::kNetMrgRxbuf, 0u);
  rig.set_memory(ram);
  rig.send(Request::kSetLogBase, Payload{LogArea{4096, 0}}, 0, {log_ram.fd.get()});
  ASSERT_EQ(rig.reply_u64(Request::kSetLogBase), std::optional<uint64_t>(0));

  GuestQueue rx(ram, kRxRing, 256, true);
  GuestQueue tx(ram, kTxRing, 256, true);
  auto rx_buffer = [&](size_t i) { return kRxBuffers + i * DirtyLog::kPageSize; };
  rx.post(kPosted, kRxBufferSize, rx_buffer);
  rx.setup(rig, 0, 256, true, /*log=*/true);
  tx.setup(rig, 1, 256, true, /*log=*/true);
  ASSERT_EQ(rx.config().used_addr / DirtyLog::kPageSize, 1u);
  ASSERT_EQ(tx.config().used_addr / DirtyLog::kPageSize, 0x11u);

  const std::byte* bitmap = log_ram.host;
  auto dirty = [bitmap](uint64_t gpa) {
    const uint64_t page = gpa / DirtyLog::kPageSize;
    return ((std::to_integer<unsigned>(bitmap[page / 8]) >> (page % 8)) & 1u) != 0;
  };
  auto dirty_pages = [&] {
    size_t count = 0;
    for (size_t i = 0; i < log_ram.size; ++i) count += static_cast<size_t>(std::popcount(std::to_integer<uint8_t>(bitmap[i])));
    return count;
  };
  // Reaps one merged packet from RX: its num_buffers and the frame reassembled.
  auto receive = [&](uint16_t& buffers) {
    std::vector<std::byte> frame;
    buffers = 0;
    uint16_t expected = 1;
    while (buffers < expected) {
      const auto used = rx.driver->reap();
      if (!used) break;
      const std::byte* data = ram.host + rx_buffer(used->id);  // heads were handed out as 0, 1, 2...
      size_t offset = 0;
      if (buffers == 0) {
        expected = virtio::decode_net_header({data, 12}, 12).num_buffers;
        offset = 12;
      }
      frame.insert(frame.end(), data + offset, data + used->len);
      ++buffers;
    }
    return frame;
  };
  auto reflected = [](std::vector<std::byte> frame) {
    std::swap_ranges(frame.begin(), frame.begin() + 6, frame.begin() + 6);
    return frame;
  };

  // Before VHOST_F_LOG_ALL: traffic flows, nothing is logged.
  const auto before = frame_of(1000, 1);  // 12 + 1000 bytes: 4 buffers of 256
  tx.transmit(ram, kTxBuffers, before);
  ASSERT_EQ(rig.datapath().poll(), 1u);
  uint16_t buffers = 0;
  EXPECT_EQ(receive(buffers), reflected(before));
  EXPECT_EQ(buffers, 4u);
  EXPECT_EQ(dirty_pages(), 0u);
  ASSERT_TRUE(tx.driver->reap().has_value());

  // Migration starts.
  ASSERT_EQ(rig.send_acked(Request::kSetFeatures, Payload{rig.features() | feature::kLogAll}),
            std::optional<uint64_t>(0));
  const auto during = frame_of(1000, 2);
  tx.transmit(ram, kTxBuffers + DirtyLog::kPageSize, during);
  ASSERT_EQ(rig.datapath().poll(), 1u);
  EXPECT_EQ(receive(buffers), reflected(during));
  EXPECT_EQ(buffers, 4u);

  // The four RX buffers written (heads 4..7), both used rings: nothing else.
  for (size_t i = 0; i < kPosted; ++i) EXPECT_EQ(dirty(rx_buffer(i)), i >= 4 && i < 8) << "RX buffer " << i;
  EXPECT_TRUE(dirty(rx.config().used_addr));
  EXPECT_TRUE(dirty(tx.config().used_addr));
  EXPECT_FALSE(dirty(rx.config().desc_addr));  // the device never writes descriptors
  EXPECT_FALSE(dirty(tx.config().desc_addr));
  EXPECT_FALSE(dirty(kTxBuffers + DirtyLog::kPageSize));  // transmit only reads
  EXPECT_EQ(dirty_pages(), 6u);
  EXPECT_EQ(rig.device().dirty_log()->out_of_range_pages(), 0u);
  EXPECT_EQ(rig.datapath().queue(0).packets, 2u);
  EXPECT_EQ(rig.datapath().queue(0).dropped, 0u);
}

}  // namespace
}  // namespace uvhost::vhost_user
