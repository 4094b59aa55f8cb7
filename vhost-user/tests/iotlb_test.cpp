// iotlb_test.cpp - VIRTIO_F_ACCESS_PLATFORM on the vhost-user side: the IOTLB table, the
// IOTLB messages, the back-end channel's misses, and a transmit ring driven with IOVAs
// through misses, updates and invalidations; the hostile frontend's IOTLB messages.
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <string_view>
#include <vector>

#include "backend_test_support.h"
#include "uvhost/vhost_user/iotlb.h"

namespace uvhost::vhost_user {
namespace {

using namespace testing;
using Progress = BackendDevice::Progress;
using virtio::Access;
using virtio::IovaMapping;

std::span<const std::byte> bytes_of(std::string_view text) { return std::as_bytes(std::span(text)); }

constexpr uint64_t kPage = 4096;
// The guest's IOVAs: its physical addresses moved up, so that no address works both ways.
constexpr uint64_t kIovaBase = 0x100000000;
uint64_t iova_of(uint64_t gpa) { return kIovaBase + gpa; }

// ---- The table ----------------------------------------------------------------------

struct TableFixture {
  GuestRam ram{1 << 20};
  std::unique_ptr<virtio::GuestMemoryMap> table;
  TableFixture() {
    std::vector<std::unique_ptr<virtio::MemoryRegion>> regions;
    regions.push_back(virtio::MemoryRegion::borrow(0, kFrontendBase, std::span(ram.host, ram.size)));
    table = virtio::GuestMemoryMap::create(std::move(regions));
  }
  IovaMapping page(uint64_t iova, uint64_t gpa, uint64_t pages = 1, Access access = Access::kReadWrite) const {
    return IovaMapping{iova, pages * kPage, kFrontendBase + gpa, access};
  }
  // Where `iova` lands in guest RAM through `iotlb`, or nullptr.
  std::byte* lookup(const Iotlb& iotlb, uint64_t iova, Access access = Access::kRead) const {
    return iotlb.view(*table)->translate_contiguous(iova, 1, access);
  }
};

TEST(Iotlb, UpdatesTranslateAndTheNewestOverlapWins) {
  TableFixture f;
  Iotlb iotlb;
  std::string error;
  ASSERT_TRUE(iotlb.update(f.page(0x10000, 0x1000, 4), *f.table, error)) << error;
  EXPECT_EQ(f.lookup(iotlb, 0x10000 + 5), f.ram.host + 0x1000 + 5);
  EXPECT_EQ(f.lookup(iotlb, 0x13fff), f.ram.host + 0x4fff);
  EXPECT_EQ(f.lookup(iotlb, 0x14000), nullptr);
  // The guest remaps the second page elsewhere, read-only: only that page changes.
  ASSERT_TRUE(iotlb.update(f.page(0x11000, 0x8000, 1, Access::kRead), *f.table, error)) << error;
  EXPECT_EQ(iotlb.size(), 3u);
  EXPECT_EQ(f.lookup(iotlb, 0x10000), f.ram.host + 0x1000);
  EXPECT_EQ(f.lookup(iotlb, 0x11010), f.ram.host + 0x8010);
  EXPECT_EQ(f.lookup(iotlb, 0x11010, Access::kWrite), nullptr);
  EXPECT_EQ(f.lookup(iotlb, 0x12010), f.ram.host + 0x3010) << "the tail keeps its own frontend address";
  EXPECT_EQ(iotlb.updates(), 2u);
}

TEST(Iotlb, InvalidationsCutEntriesAndSizeZeroMeansEverything) {
  TableFixture f;
  Iotlb iotlb;
  std::string error;
  ASSERT_TRUE(iotlb.update(f.page(0x10000, 0x1000, 4), *f.table, error));
  ASSERT_TRUE(iotlb.update(f.page(0x40000, 0x9000, 1), *f.table, error));
  iotlb.invalidate(0x11000, kPage);  // the second page of four
  EXPECT_NE(f.lookup(iotlb, 0x10fff), nullptr);
  EXPECT_EQ(f.lookup(iotlb, 0x11000), nullptr);
  EXPECT_EQ(f.lookup(iotlb, 0x11fff), nullptr);
  EXPECT_EQ(f.lookup(iotlb, 0x12000), f.ram.host + 0x3000);
  EXPECT_EQ(iotlb.size(), 3u);
  // An invalidation past 2^64 is clipped, not refused.
  iotlb.invalidate(0x3f000, ~uint64_t{0});
  EXPECT_EQ(f.lookup(iotlb, 0x40000), nullptr);
  EXPECT_NE(f.lookup(iotlb, 0x10000), nullptr);
  // QEMU's global invalidation: addr_mask + 1 overflowed to 0.
  iotlb.invalidate(0, 0);
  EXPECT_EQ(iotlb.size(), 0u);
  EXPECT_EQ(iotlb.invalidations(), 3u);
}

TEST(Iotlb, HostileUpdatesAreRefusedAndChangeNothing) {
  TableFixture f;
  Iotlb iotlb;
  std::string error;
  ASSERT_TRUE(iotlb.update(f.page(0x10000, 0x1000), *f.table, error));
  const IovaMapping refused[] = {
      IovaMapping{0x20000, 0, kFrontendBase, Access::kRead},                         // empty
      IovaMapping{~uint64_t{0} - 100, kPage, kFrontendBase, Access::kRead},          // IOVA wraps
      IovaMapping{0x20000, kPage, ~uint64_t{0} - 100, Access::kRead},                // uaddr wraps
      IovaMapping{0x20000, kPage, kFrontendBase, static_cast<Access>(0)},            // no access
      IovaMapping{0x20000, kPage, kFrontendBase, static_cast<Access>(4)},            // unknown bits
      IovaMapping{0x20000, kPage, kFrontendBase + f.ram.size - 100, Access::kRead},  // runs past memory
      IovaMapping{0x10000, kPage, 0x1000, Access::kRead},                            // not frontend memory
  };
  for (const IovaMapping& mapping : refused) {
    error.clear();
    EXPECT_FALSE(iotlb.update(mapping, *f.table, error)) << mapping.iova << " " << mapping.size;
    EXPECT_FALSE(error.empty());
  }
  EXPECT_EQ(iotlb.size(), 1u);
  EXPECT_EQ(f.lookup(iotlb, 0x10000), f.ram.host + 0x1000) << "the last refusal must not have cut the entry";
  EXPECT_EQ(iotlb.updates(), 1u);
}

TEST(Iotlb, AFullTableEvictsItsOldestEntry) {
  TableFixture f;
  Iotlb iotlb;
  std::string error;
  for (uint64_t i = 0; i < Iotlb::kMaxEntries + 3; ++i) {
    ASSERT_TRUE(iotlb.update(f.page(i * 2 * kPage, 0), *f.table, error)) << error;
  }
  EXPECT_EQ(iotlb.size(), Iotlb::kMaxEntries);
  EXPECT_EQ(iotlb.evictions(), 3u);
  EXPECT_EQ(f.lookup(iotlb, 0), nullptr) << "the oldest went first";
  EXPECT_EQ(f.lookup(iotlb, 2 * 2 * kPage), nullptr);
  EXPECT_NE(f.lookup(iotlb, 3 * 2 * kPage), nullptr);
}

// ---- The wire --------------------------------------------------------------------------

TEST(IotlbMessages, ParseTheFrontendsAndEncodeTheBackendsMiss) {
  IotlbMessage update{0x1000, 0x2000, 0x7f0000003000, 3, static_cast<uint8_t>(IotlbType::kUpdate)};
  RawMessage raw;
  const auto bytes = encode(Request::kIotlbMsg, 0, update);
  ASSERT_EQ(bytes.size(), kHeaderSize + kIotlbSize);
  std::memcpy(&raw.header, bytes.data(), kHeaderSize);
  raw.payload.assign(bytes.begin() + kHeaderSize, bytes.end());
  ParseResult parsed = parse_request(std::move(raw), ParseLimits{});
  ASSERT_TRUE(std::holds_alternative<Message>(parsed));
  const auto& got = std::get<IotlbMessage>(std::get<Message>(parsed).payload);
  EXPECT_EQ(got.iova, 0x1000u);
  EXPECT_EQ(got.size, 0x2000u);
  EXPECT_EQ(got.user_addr, 0x7f0000003000u);
  EXPECT_EQ(got.perm, 3);
  EXPECT_EQ(got.type, 2);

  // struct vhost_iotlb_msg as QEMU reads it: iova at 0, perm at 24, type at 25.
  IotlbMessage miss{0xabc000, 0, 0, kIotlbPermWrite, static_cast<uint8_t>(IotlbType::kMiss)};
  const auto wire = encode(BackendRequest::kIotlbMsg, 0, miss);
  ASSERT_EQ(wire.size(), kHeaderSize + 32);
  uint32_t header[3];
  std::memcpy(header, wire.data(), sizeof(header));
  EXPECT_EQ(header[0], 1u) << "VHOST_USER_BACKEND_IOTLB_MSG";
  EXPECT_EQ(header[1], kVersion1) << "no NEED_REPLY";
  EXPECT_EQ(header[2], 32u);
  uint64_t iova = 0;
  std::memcpy(&iova, wire.data() + kHeaderSize, 8);
  EXPECT_EQ(iova, 0xabc000u);
  EXPECT_EQ(static_cast<uint8_t>(wire[kHeaderSize + 24]), kIotlbPermWrite);
  EXPECT_EQ(static_cast<uint8_t>(wire[kHeaderSize + 25]), 1);
}

// ---- The device ------------------------------------------------------------------------

// A frontend that negotiated ACCESS_PLATFORM, handed over its memory and a back-end
// channel, and drives transmit ring 1 with IOVAs.
struct IommuRig {
  GuestRam ram{1 << 20};
  TestFrontend frontend;
  base::UniqueFd channel;  // the frontend's end of the back-end channel
  GuestTxQueue tx{ram, kRingsGpa, 64};

  explicit IommuRig(bool with_channel = true) {
    frontend.negotiate(~feature::kRingPacked);
    EXPECT_NE(frontend.device().acked_features() & feature::kAccessPlatform, 0u);
    EXPECT_EQ(frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()}),
              std::optional<uint64_t>(0));
    if (with_channel) {
      int fds[2];
      EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
      channel = base::UniqueFd(fds[0]);
      base::UniqueFd ours(fds[1]);
      EXPECT_EQ(frontend.send_acked(Request::kSetBackendReqFd, {}, {ours.get()}), std::optional<uint64_t>(0));
    }
  }

  // The ring's setup as QEMU sends it with an IOMMU: ring addresses are IOVAs.
  void setup_ring() {
    const virtio::QueueConfig config = tx.driver->device_config();
    ASSERT_EQ(frontend.send_acked(Request::kSetVringNum, Payload{VringState{1, 64}}), std::optional<uint64_t>(0));
    ASSERT_EQ(frontend.send_acked(Request::kSetVringBase, Payload{VringState{1, 0}}), std::optional<uint64_t>(0));
    VringAddress address{1, 0, iova_of(config.desc_addr), iova_of(config.used_addr), iova_of(config.avail_addr),
                         config.used_addr};
    ASSERT_EQ(frontend.send_acked(Request::kSetVringAddr, Payload{address}), std::optional<uint64_t>(0));
    ASSERT_EQ(frontend.send_acked(Request::kSetVringKick, Payload{VringFd{1, false}}, {tx.kick.get()}),
              std::optional<uint64_t>(0));
    ASSERT_EQ(frontend.send_acked(Request::kSetVringEnable, Payload{VringState{1, 1}}), std::optional<uint64_t>(0));
  }

  // One frame (zeroed 12-byte header) at guest physical `gpa`, made available by its IOVA.
  void transmit(uint64_t gpa, std::span<const std::byte> frame) {
    std::memset(ram.host + gpa, 0, 12);
    std::memcpy(ram.host + gpa + 12, frame.data(), frame.size());
    const virtio::DriverQueue::Buffer buffer{iova_of(gpa), static_cast<uint32_t>(12 + frame.size()), false};
    ASSERT_TRUE(tx.driver->add_chain(std::span(&buffer, 1)).has_value());
    tx.driver->publish();
  }

  std::optional<uint64_t> update(uint64_t gpa, uint64_t size, uint8_t perm = 3) {
    return frontend.send_acked(Request::kIotlbMsg, Payload{IotlbMessage{iova_of(gpa), size, kFrontendBase + gpa, perm,
                                                                        static_cast<uint8_t>(IotlbType::kUpdate)}});
  }
  std::optional<uint64_t> invalidate(uint64_t gpa, uint64_t size) {
    return frontend.send_acked(Request::kIotlbMsg, Payload{IotlbMessage{iova_of(gpa), size, 0, 0,
                                                                        static_cast<uint8_t>(IotlbType::kInvalidate)}});
  }

  // Every miss waiting on the channel, as (iova, perm).
  std::vector<std::pair<uint64_t, uint8_t>> misses() {
    std::vector<std::pair<uint64_t, uint8_t>> out;
    std::byte message[kHeaderSize + kIotlbSize];
    while (::recv(channel.get(), message, sizeof(message), MSG_DONTWAIT | MSG_WAITALL) ==
           static_cast<ssize_t>(sizeof(message))) {
      uint32_t header[3];
      std::memcpy(header, message, sizeof(header));
      EXPECT_EQ(header[0], 1u);
      EXPECT_EQ(header[2], kIotlbSize);
      EXPECT_EQ(static_cast<uint8_t>(message[kHeaderSize + 25]), 1) << "type: miss";
      uint64_t iova = 0;
      std::memcpy(&iova, message + kHeaderSize, 8);
      out.emplace_back(iova, static_cast<uint8_t>(message[kHeaderSize + 24]));
    }
    return out;
  }
};

TEST(BackendIommu, OffersAccessPlatformWithTheBackendChannel) {
  TestFrontend frontend;
  EXPECT_NE(frontend.get_u64(Request::kGetFeatures) & feature::kAccessPlatform, 0u);
  const uint64_t protocol = frontend.get_u64(Request::kGetProtocolFeatures);
  EXPECT_NE(protocol & protocol::kBackendReq, 0u);
  EXPECT_NE(protocol & protocol::kReplyAck, 0u) << "QEMU asks for both with an IOMMU";
}

TEST(BackendIommu, RingsAndBuffersMissThenRunThroughUpdatesAndInvalidations) {
  IommuRig rig;
  rig.setup_ring();
  ASSERT_TRUE(rig.frontend.device().vring(1).started) << "a ring whose IOVAs do not translate yet still starts";
  const virtio::QueueConfig config = rig.tx.driver->device_config();
  rig.transmit(kBuffersGpa, bytes_of("through the iommu"));
  EXPECT_EQ(rig.frontend.sink().poll(), 0u);
  // The avail ring shares the descriptor table's page and access: one miss for both.
  const std::vector<std::pair<uint64_t, uint8_t>> ring_misses = {{iova_of(config.desc_addr), 1},
                                                                 {iova_of(config.used_addr), 2}};
  EXPECT_EQ(rig.misses(), ring_misses);
  EXPECT_EQ(rig.frontend.sink().poll(), 0u);
  EXPECT_TRUE(rig.misses().empty()) << "the same misses are not sent again before the translations change";

  // QEMU answers page by page (the ring fits in its first pages).
  for (uint64_t page = 0; page < 3; ++page) ASSERT_EQ(rig.update(page * kPage, kPage), std::optional<uint64_t>(0));
  EXPECT_EQ(rig.frontend.sink().poll(), 0u);
  EXPECT_EQ(rig.misses(), (std::vector<std::pair<uint64_t, uint8_t>>{{iova_of(kBuffersGpa), 1}}));
  ASSERT_EQ(rig.update(kBuffersGpa, kPage, kIotlbPermRead), std::optional<uint64_t>(0));
  EXPECT_EQ(rig.frontend.sink().poll(), 1u);
  const auto& frame = rig.frontend.sink().last_frame();
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(frame.data()), frame.size()), "through the iommu");
  ASSERT_TRUE(rig.tx.driver->reap().has_value());

  // The guest unmaps the buffer and uses it again: a miss, then the frame.
  ASSERT_EQ(rig.invalidate(kBuffersGpa, kPage), std::optional<uint64_t>(0));
  rig.transmit(kBuffersGpa, bytes_of("again"));
  EXPECT_EQ(rig.frontend.sink().poll(), 0u);
  EXPECT_EQ(rig.misses(), (std::vector<std::pair<uint64_t, uint8_t>>{{iova_of(kBuffersGpa), 1}}));
  ASSERT_EQ(rig.update(kBuffersGpa, kPage, kIotlbPermRead), std::optional<uint64_t>(0));
  EXPECT_EQ(rig.frontend.sink().poll(), 1u);
  EXPECT_FALSE(rig.frontend.sink().queue(1).broken);

  const IotlbStats stats = rig.frontend.device().iotlb_stats();
  EXPECT_EQ(stats.updates, 5u);
  EXPECT_EQ(stats.invalidations, 1u);
  EXPECT_EQ(stats.entries, 4u);
  EXPECT_EQ(stats.misses, 4u);
  EXPECT_EQ(stats.misses_unreported, 0u);
}

TEST(BackendIommu, WithoutABackendChannelMissesAreCountedAndTheRingWaits) {
  IommuRig rig(/*with_channel=*/false);
  rig.setup_ring();
  rig.transmit(kBuffersGpa, bytes_of("nobody hears the miss"));
  EXPECT_EQ(rig.frontend.sink().poll(), 0u);
  EXPECT_GE(rig.frontend.device().iotlb_stats().misses_unreported, 3u);
  EXPECT_FALSE(rig.frontend.sink().queue(1).broken);
  // A frontend may still send the translations on its own.
  ASSERT_EQ(rig.update(0, 16 * kPage), std::optional<uint64_t>(0));
  ASSERT_EQ(rig.update(kBuffersGpa, kPage), std::optional<uint64_t>(0));
  EXPECT_EQ(rig.frontend.sink().poll(), 1u);
}

TEST(BackendIommu, AClosedBackendChannelIsDroppedWithoutHarm) {
  IommuRig rig;
  rig.channel.reset();  // the frontend went away from its end
  rig.setup_ring();
  rig.transmit(kBuffersGpa, bytes_of("x"));
  EXPECT_EQ(rig.frontend.sink().poll(), 0u);  // no SIGPIPE, no crash
  EXPECT_GE(rig.frontend.device().iotlb_stats().misses_unreported, 1u);
  EXPECT_TRUE(rig.frontend.device().is_open());
}

TEST(BackendIommu, HostileIotlbMessagesAreRefusedAndTheConnectionGoesOn) {
  IommuRig rig;
  auto send = [&](IotlbMessage message) { return rig.frontend.send_acked(Request::kIotlbMsg, Payload{message}); };
  const uint8_t update = static_cast<uint8_t>(IotlbType::kUpdate);
  EXPECT_EQ(send({0x1000, kPage, kFrontendBase + rig.ram.size, 3, update}), std::optional<uint64_t>(1))
      << "outside the memory table";
  EXPECT_EQ(send({0x1000, kPage, kFrontendBase, 0, update}), std::optional<uint64_t>(1)) << "no access";
  EXPECT_EQ(send({0x1000, 0, kFrontendBase, 3, update}), std::optional<uint64_t>(1)) << "empty";
  EXPECT_EQ(send({~uint64_t{0}, 2, kFrontendBase, 3, update}), std::optional<uint64_t>(1)) << "wraps";
  EXPECT_EQ(send({0x1000, kPage, kFrontendBase, 3, static_cast<uint8_t>(IotlbType::kMiss)}), std::optional<uint64_t>(1))
      << "a miss is the backend's to send";
  EXPECT_EQ(send({0x1000, kPage, kFrontendBase, 3, 9}), std::optional<uint64_t>(1)) << "unknown type";
  // A payload of the wrong size is a parse error: refused, answered, the connection goes on.
  const std::vector<std::byte> short_payload(24);
  auto bytes = encode(Request::kIotlbMsg, kFlagNeedReply, std::monostate{});
  uint32_t size = 24;
  std::memcpy(bytes.data() + 8, &size, 4);
  bytes.insert(bytes.end(), short_payload.begin(), short_payload.end());
  EXPECT_EQ(rig.frontend.send_raw(bytes), Progress::kContinue);
  EXPECT_EQ(rig.frontend.reply_u64(Request::kIotlbMsg), std::optional<uint64_t>(1));
  EXPECT_EQ(rig.frontend.device().iotlb_stats().updates, 0u);
  EXPECT_TRUE(rig.frontend.device().is_open());
  EXPECT_EQ(send({0x1000, kPage, kFrontendBase, 3, update}), std::optional<uint64_t>(0)) << "a good one still works";
}

TEST(BackendIommu, IotlbAndBackendChannelNeedTheirFeatures) {
  GuestRam ram(1 << 20);
  TestFrontend frontend;
  frontend.negotiate();  // no ACCESS_PLATFORM
  ASSERT_EQ(frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()}),
            std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.send_acked(Request::kIotlbMsg, Payload{IotlbMessage{0, kPage, kFrontendBase, 3, 2}}),
            std::optional<uint64_t>(1));

  TestFrontend no_backend_req;
  ASSERT_EQ(no_backend_req.send(Request::kSetOwner), Progress::kContinue);
  const uint64_t offered = no_backend_req.get_u64(Request::kGetProtocolFeatures);
  ASSERT_EQ(no_backend_req.send(Request::kSetProtocolFeatures, Payload{offered & ~protocol::kBackendReq}),
            Progress::kContinue);
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  base::UniqueFd a(fds[0]), b(fds[1]);
  EXPECT_EQ(no_backend_req.send_acked(Request::kSetBackendReqFd, {}, {b.get()}), std::optional<uint64_t>(1));
}

TEST(BackendIommu, FdsOfRefusedOrReplacedChannelsAreClosed) {
  const auto before = count_open_fds();
  {
    IommuRig rig;
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    base::UniqueFd a(fds[0]), b(fds[1]);
    EXPECT_EQ(rig.frontend.send_acked(Request::kSetBackendReqFd, {}, {b.get()}), std::optional<uint64_t>(0));
    // Not a connected socket: refused, the channel kept as it was.
    base::UniqueFd event = make_eventfd();
    EXPECT_EQ(rig.frontend.send_acked(Request::kSetBackendReqFd, {}, {event.get()}), std::optional<uint64_t>(1));
    base::UniqueFd unconnected(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(rig.frontend.send_acked(Request::kSetBackendReqFd, {}, {unconnected.get()}), std::optional<uint64_t>(1));
    EXPECT_TRUE(rig.frontend.device().is_open());
  }
  EXPECT_EQ(count_open_fds(), before);
}

}  // namespace
}  // namespace uvhost::vhost_user

namespace uvhost::vhost_user {
namespace {

// The back-end channel as the datapath uses it: misses from several worker threads at
// once while the control thread answers (translation_arrived), replaces and drops the
// channel. Every message that arrives is a whole, well-formed miss; nothing crashes
// (run under TSan in CI: the channel's state is behind its mutex).
TEST(BackendChannelThreads, ConcurrentMissesWhileTheChannelChanges) {
  BackendChannel channel("threads");
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  base::UniqueFd reader_end(fds[0]);
  channel.set(base::UniqueFd(fds[1]));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> received{0}, malformed{0};
  std::thread reader([&] {
    std::byte message[kHeaderSize + kIotlbSize];
    for (;;) {  // until stopped and drained
      const ssize_t n = ::recv(reader_end.get(), message, sizeof(message), MSG_WAITALL | MSG_DONTWAIT);
      if (n == static_cast<ssize_t>(sizeof(message))) {
        uint32_t header[3];
        std::memcpy(header, message, sizeof(header));
        const bool ok = header[0] == 1 && header[2] == kIotlbSize && static_cast<uint8_t>(message[kHeaderSize + 25]) == 1;
        (ok ? received : malformed).fetch_add(1);
      } else if (n > 0) {
        malformed.fetch_add(1);
      } else if (stop.load()) {
        break;
      } else {
        std::this_thread::yield();
      }
    }
  });
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      for (uint64_t i = 0; i < 2000; ++i) {
        channel.translation_missed((uint64_t(w) << 32) + (i % 97) * kPage, i % 2 ? Access::kRead : Access::kWrite);
      }
    });
  }
  // The frontend answers everything while the misses go on, and goes away only once
  // some have been sent (the workers may not even have started before that).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
  while (channel.misses_sent() == 0 && std::chrono::steady_clock::now() < deadline) {
    channel.translation_arrived(0, 0);
    std::this_thread::yield();
  }
  for (uint64_t i = 0; i < 200; ++i) {
    channel.translation_arrived(0, 0);  // everything answered
    if (i == 150) channel.reset();     // the frontend went away
  }
  for (auto& t : workers) t.join();
  stop.store(true);
  reader.join();
  EXPECT_EQ(malformed.load(), 0u);
  EXPECT_GT(received.load(), 0u);
  EXPECT_EQ(channel.misses_sent(), received.load()) << "every miss sent was received whole";
}

}  // namespace
}  // namespace uvhost::vhost_user
