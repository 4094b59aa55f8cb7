// backend_device_test.cpp - the backend device over a real socketpair with memfd
// memory and eventfds: negotiation, QEMU's setup sequence, a packet from a guest
// driver queue seen by the backend, GET_VRING_BASE, memory slots, REPLY_ACK, the
// dirty log.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <string_view>

#include "backend_test_support.h"
#include "uvhost/vhost_user/dirty_log.h"

namespace uvhost::vhost_user {
namespace {

using namespace testing;
using Progress = BackendDevice::Progress;

std::span<const std::byte> bytes_of(std::string_view text) { return std::as_bytes(std::span(text)); }

TEST(BackendDeviceTest, NegotiatesFeatures) {
  TestFrontend frontend;
  const uint64_t offered = frontend.get_u64(Request::kGetFeatures);
  EXPECT_NE(offered & feature::kVersion1, 0u);
  EXPECT_NE(offered & feature::kProtocolFeatures, 0u);
  EXPECT_NE(offered & feature::kLogAll, 0u);
  EXPECT_EQ(offered & feature::kNetMq, 0u);  // one queue pair
  EXPECT_EQ(frontend.get_u64(Request::kGetProtocolFeatures), protocol::kImplemented);
  EXPECT_EQ(frontend.send(Request::kSetProtocolFeatures, Payload{protocol::kImplemented}), Progress::kContinue);
  EXPECT_EQ(frontend.send_acked(Request::kSetFeatures, Payload{offered}), std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.device().acked_features(), offered);
  EXPECT_EQ(frontend.sink().features(), offered);
  EXPECT_EQ(frontend.get_u64(Request::kGetQueueNum), 1u);

  // A bit we did not offer: refused with REPLY_ACK, state unchanged.
  EXPECT_EQ(frontend.send_acked(Request::kSetFeatures, Payload{offered | bit(40)}), std::optional<uint64_t>(1));
  EXPECT_EQ(frontend.device().acked_features(), offered);
  EXPECT_TRUE(frontend.device().is_open());
}

TEST(BackendDeviceTest, OffersTheBackendsOffloadsOnTopOfTheBaseSet) {
  namespace nf = virtio::net_feature;
  // A backend without offloads (the default): none offered, and none accepted.
  {
    TestFrontend frontend;
    const uint64_t offered = frontend.get_u64(Request::kGetFeatures);
    EXPECT_EQ(offered, offered_net_features(1));
    EXPECT_EQ(offered & (nf::kHostOffloads | nf::kGuestOffloads), 0u);
    frontend.send(Request::kSetProtocolFeatures, Payload{protocol::kImplemented});
    EXPECT_EQ(frontend.send_acked(Request::kSetFeatures, Payload{offered | nf::mask(nf::kCsum)}),
              std::optional<uint64_t>(1));
  }
  // A backend that honours every offload (and names a bit that is not its to offer:
  // CTRL_VQ, ignored).
  DeviceOptions options;
  options.backend_features = nf::kHostOffloads | nf::kGuestOffloads | nf::mask(nf::kCtrlVq);
  TestFrontend frontend(options);
  const uint64_t offered = frontend.get_u64(Request::kGetFeatures);
  EXPECT_EQ(offered, offered_net_features(1) | nf::kHostOffloads | nf::kGuestOffloads);
  EXPECT_EQ(offered & nf::mask(nf::kCtrlVq), 0u);
  frontend.send(Request::kSetProtocolFeatures, Payload{protocol::kImplemented});
  EXPECT_EQ(frontend.send_acked(Request::kSetFeatures, Payload{offered}), std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.device().acked_features(), offered);
  EXPECT_EQ(frontend.sink().features(), offered);
}

TEST(BackendDeviceTest, SetFeaturesRefusesSetsThatBreakTheOffloadRules) {
  namespace nf = virtio::net_feature;
  DeviceOptions options;
  options.backend_features = nf::kHostOffloads | nf::kGuestOffloads;
  TestFrontend frontend(options);
  const uint64_t base = offered_net_features(1);
  frontend.send(Request::kSetProtocolFeatures, Payload{protocol::kImplemented});
  const uint64_t good = base | nf::mask(nf::kCsum) | nf::mask(nf::kHostTso4) | nf::mask(nf::kGuestCsum);
  ASSERT_EQ(frontend.send_acked(Request::kSetFeatures, Payload{good}), std::optional<uint64_t>(0));
  // Each of these breaks one rule of virtio 1.2, 5.1.3.1: refused, the last good set stays.
  for (const uint64_t broken : {base | nf::mask(nf::kHostTso4),                                  // no CSUM
                                base | nf::mask(nf::kHostTso6) | nf::mask(nf::kGuestCsum),       // no CSUM
                                base | nf::mask(nf::kCsum) | nf::mask(nf::kHostEcn),             // no HOST_TSO*
                                base | nf::mask(nf::kGuestTso4),                                 // no GUEST_CSUM
                                base | nf::mask(nf::kGuestUso6),                                 // no GUEST_CSUM
                                base | nf::mask(nf::kGuestCsum) | nf::mask(nf::kGuestEcn)}) {    // no GUEST_TSO*
    EXPECT_EQ(frontend.send_acked(Request::kSetFeatures, Payload{broken}), std::optional<uint64_t>(1))
        << std::hex << broken;
    EXPECT_EQ(frontend.device().acked_features(), good);
  }
  EXPECT_TRUE(frontend.device().is_open());
}

TEST(BackendDeviceTest, BrokenOffloadRuleWithoutReplyAckClosesWithTheReason) {
  namespace nf = virtio::net_feature;
  DeviceOptions options;
  options.backend_features = nf::kHostOffloads;
  TestFrontend frontend(options);
  EXPECT_EQ(frontend.send(Request::kSetFeatures, Payload{feature::kVersion1 | nf::mask(nf::kHostUso)}),
            Progress::kClosed);
  EXPECT_NE(frontend.device().close_reason().find("HOST_USO requires CSUM"), std::string::npos)
      << frontend.device().close_reason();
}

TEST(BackendDeviceTest, FeatureNamesIncludeVhostUsersOwnBits) {
  EXPECT_EQ(feature_names(feature::kVersion1 | feature::kLogAll | feature::kProtocolFeatures | feature::kNetMrgRxbuf),
            (std::vector<std::string>{"MRG_RXBUF", "VERSION_1", "LOG_ALL", "PROTOCOL_FEATURES"}));
}

TEST(BackendDeviceTest, OffersMqOnlyWithSeveralQueuePairs) {
  DeviceOptions options;
  options.queue_pairs = 4;
  TestFrontend frontend(options);
  EXPECT_NE(frontend.get_u64(Request::kGetFeatures) & feature::kNetMq, 0u);
  frontend.send(Request::kSetProtocolFeatures, Payload{protocol::kMq});
  EXPECT_EQ(frontend.get_u64(Request::kGetQueueNum), 4u);
}

TEST(BackendDeviceTest, QemuSetupThenGuestPacketReachesTheBackend) {
  GuestRam ram(1 << 20);
  TestFrontend frontend;
  frontend.negotiate();
  EXPECT_EQ(frontend.get_u64(Request::kGetMaxMemSlots), 32u);
  ASSERT_EQ(frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()}),
            std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.device().memory_slot_count(), 1u);

  GuestTxQueue tx(ram, kRingsGpa, 256);
  tx.setup(frontend, 1, 256);
  ASSERT_TRUE(frontend.device().vring(1).started);
  ASSERT_TRUE(frontend.sink().queue(1).enabled);

  tx.transmit(ram, kBuffersGpa, bytes_of("hello, backend"));
  EXPECT_EQ(frontend.sink().poll(), 1u);
  const auto& frame = frontend.sink().last_frame();
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(frame.data()), frame.size()), "hello, backend");
  const auto used = tx.driver->reap();
  ASSERT_TRUE(used.has_value());
  EXPECT_EQ(used->len, 0u);

  // The used ring's call fd was signalled (EVENT_IDX: used_event 0 was crossed).
  eventfd_t calls = 0;
  EXPECT_EQ(::eventfd_read(tx.call.get(), &calls), 0);
  EXPECT_GE(calls, 1u);

  tx.transmit(ram, kBuffersGpa + 0x1000, bytes_of("second"));
  EXPECT_EQ(frontend.sink().poll(), 1u);
  EXPECT_EQ(frontend.sink().queue(1).packets, 2u);

  // GET_VRING_BASE stops the ring and answers the next avail index.
  frontend.send(Request::kGetVringBase, Payload{VringState{1, 0}});
  const auto base = frontend.reply_state(Request::kGetVringBase);
  ASSERT_TRUE(base.has_value());
  EXPECT_EQ(base->index, 1u);
  EXPECT_EQ(base->num, 2u);
  EXPECT_FALSE(frontend.device().vring(1).started);
  EXPECT_FALSE(frontend.sink().queue(1).started);

  // Restart from that base with a new kick: a packet made available meanwhile is seen.
  tx.transmit(ram, kBuffersGpa + 0x2000, bytes_of("after restart"));
  ASSERT_EQ(frontend.send_acked(Request::kSetVringBase, Payload{VringState{1, base->num}}), std::optional<uint64_t>(0));
  ASSERT_EQ(frontend.send_acked(Request::kSetVringKick, Payload{VringFd{1, false}}, {tx.kick.get()}),
            std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.sink().poll(), 1u);
  EXPECT_EQ(frontend.sink().queue(1).packets, 3u);  // counted per vring index, across restarts
}

// VIRTIO_F_RING_PACKED as QEMU drives it: a ring size that is not a power of two, the
// base as position | wrap << 15 with the used side in the upper half, and
// GET_VRING_BASE answering both halves for the restart.
TEST(BackendDeviceTest, PackedRingsStartStopAndRestartFromTheirBase) {
  GuestRam ram(1 << 20);
  TestFrontend frontend;
  EXPECT_NE(frontend.get_u64(Request::kGetFeatures) & feature::kRingPacked, 0u);
  frontend.negotiate(~feature::kAccessPlatform);
  ASSERT_EQ(frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()}),
            std::optional<uint64_t>(0));
  PackedGuestTxQueue tx(ram, kRingsGpa, 100, true);  // IN_ORDER was acked: two chains, one used descriptor
  tx.setup(frontend, 1, 100, 0x80008000u);  // QEMU's fresh ring: position 0, wrap 1, both sides
  ASSERT_TRUE(frontend.device().vring(1).started);

  tx.transmit(ram, kBuffersGpa, bytes_of("packed one"));
  tx.transmit(ram, kBuffersGpa + 0x1000, bytes_of("packed two"));
  EXPECT_EQ(frontend.sink().poll(), 2u);
  const auto& frame = frontend.sink().last_frame();
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(frame.data()), frame.size()), "packed two");
  ASSERT_TRUE(tx.driver->reap().has_value());
  ASSERT_TRUE(tx.driver->reap().has_value());
  EXPECT_FALSE(tx.driver->device_misbehaved());

  frontend.send(Request::kGetVringBase, Payload{VringState{1, 0}});
  const auto base = frontend.reply_state(Request::kGetVringBase);
  ASSERT_TRUE(base.has_value());
  EXPECT_EQ(base->num, (0x8002u << 16) | 0x8002u) << "position 2, wrap 1, for avail and used";
  EXPECT_FALSE(frontend.device().vring(1).started);

  tx.transmit(ram, kBuffersGpa + 0x2000, bytes_of("after restart"));
  ASSERT_EQ(frontend.send_acked(Request::kSetVringBase, Payload{VringState{1, base->num}}), std::optional<uint64_t>(0));
  ASSERT_EQ(frontend.send_acked(Request::kSetVringKick, Payload{VringFd{1, false}}, {tx.kick.get()}),
            std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.sink().poll(), 1u);
  EXPECT_EQ(frontend.sink().queue(1).packets, 3u);
  ASSERT_TRUE(tx.driver->reap().has_value());
}

TEST(BackendDeviceTest, SplitRingsKeepTheirSizeAndBaseRules) {
  TestFrontend frontend;
  frontend.negotiate();
  EXPECT_EQ(frontend.send_acked(Request::kSetVringNum, Payload{VringState{0, 100}}), std::optional<uint64_t>(1))
      << "not a power of two";
  EXPECT_EQ(frontend.send_acked(Request::kSetVringBase, Payload{VringState{0, 0x10000}}), std::optional<uint64_t>(1))
      << "more than 16 bits";
}

TEST(BackendDeviceTest, PackedRingBaseBeyondTheSizeIsRefusedAtStart) {
  GuestRam ram(1 << 20);
  TestFrontend frontend;
  frontend.negotiate(~feature::kAccessPlatform);
  ASSERT_EQ(frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()}),
            std::optional<uint64_t>(0));
  PackedGuestTxQueue tx(ram, kRingsGpa, 8);
  const virtio::QueueConfig config = tx.driver->device_config();
  ASSERT_EQ(frontend.send_acked(Request::kSetVringNum, Payload{VringState{1, 8}}), std::optional<uint64_t>(0));
  ASSERT_EQ(frontend.send_acked(Request::kSetVringBase, Payload{VringState{1, 0x8000u | 9}}), std::optional<uint64_t>(0));
  VringAddress address{1, 0, kFrontendBase + config.desc_addr, kFrontendBase + config.used_addr,
                       kFrontendBase + config.avail_addr, config.used_addr};
  ASSERT_EQ(frontend.send_acked(Request::kSetVringAddr, Payload{address}), std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.send_acked(Request::kSetVringKick, Payload{VringFd{1, false}}, {tx.kick.get()}),
            std::optional<uint64_t>(1));
  EXPECT_FALSE(frontend.device().vring(1).started);
}

TEST(BackendDeviceTest, RingWithoutProtocolFeaturesStartsEnabled) {
  GuestRam ram(1 << 20);
  TestFrontend frontend;
  ASSERT_EQ(frontend.send(Request::kSetFeatures, Payload{feature::kVersion1}), Progress::kContinue);
  ASSERT_EQ(frontend.send(Request::kSetMemTable, Payload{one_region_table(ram)}, 0, {ram.fd.get()}),
            Progress::kContinue);
  GuestTxQueue tx(ram, kRingsGpa, 64);
  const auto config = tx.driver->device_config();
  frontend.send(Request::kSetVringNum, Payload{VringState{1, 64}});
  frontend.send(Request::kSetVringAddr, Payload{VringAddress{1, 0, kFrontendBase + config.desc_addr,
                                                             kFrontendBase + config.used_addr,
                                                             kFrontendBase + config.avail_addr, 0}});
  ASSERT_EQ(frontend.send(Request::kSetVringKick, Payload{VringFd{1, true}}), Progress::kContinue);
  EXPECT_TRUE(frontend.sink().queue(1).started);
  EXPECT_TRUE(frontend.sink().queue(1).enabled);
  EXPECT_FALSE(frontend.pending_reply().has_value());  // no REPLY_ACK: no reply
}

TEST(BackendDeviceTest, WithProtocolFeaturesRingStartsDisabledUntilEnabled) {
  GuestRam ram(1 << 20);
  TestFrontend frontend;
  frontend.negotiate();
  frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()});
  GuestTxQueue tx(ram, kRingsGpa, 64);
  const auto config = tx.driver->device_config();
  frontend.send_acked(Request::kSetVringNum, Payload{VringState{1, 64}});
  frontend.send_acked(Request::kSetVringAddr, Payload{VringAddress{1, 0, kFrontendBase + config.desc_addr,
                                                                   kFrontendBase + config.used_addr,
                                                                   kFrontendBase + config.avail_addr, 0}});
  ASSERT_EQ(frontend.send_acked(Request::kSetVringKick, Payload{VringFd{1, false}}, {tx.kick.get()}),
            std::optional<uint64_t>(0));
  EXPECT_TRUE(frontend.sink().queue(1).started);
  EXPECT_FALSE(frontend.sink().queue(1).enabled);
  // Disabled: transmit is processed and discarded.
  tx.transmit(ram, kBuffersGpa, bytes_of("dropped"));
  EXPECT_EQ(frontend.sink().poll(), 1u);
  EXPECT_EQ(frontend.sink().queue(1).packets, 0u);
  frontend.send_acked(Request::kSetVringEnable, Payload{VringState{1, 1}});
  EXPECT_TRUE(frontend.sink().queue(1).enabled);
  tx.transmit(ram, kBuffersGpa, bytes_of("counted"));
  EXPECT_EQ(frontend.sink().poll(), 1u);
  EXPECT_EQ(frontend.sink().queue(1).packets, 1u);
}

TEST(BackendDeviceTest, AddAndRemoveMemoryRegions) {
  GuestRam low(1 << 20);
  GuestRam high(1 << 16);
  TestFrontend frontend;
  frontend.negotiate();
  ASSERT_EQ(frontend.send_acked(Request::kAddMemReg, Payload{SingleRegion{{0, low.size, kFrontendBase, 0}}},
                                {low.fd.get()}),
            std::optional<uint64_t>(0));
  const SingleRegion high_region{{0x100000000, high.size, kFrontendBase + 0x100000000, 0}};
  ASSERT_EQ(frontend.send_acked(Request::kAddMemReg, Payload{high_region}, {high.fd.get()}), std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.device().memory_slot_count(), 2u);
  EXPECT_EQ(frontend.sink().memory_changes(), 2u);
  // The new region is reachable through the published map.
  std::memcpy(high.host + 0x10, "high", 4);
  const bool sees = frontend.device().memory().read([](const virtio::GuestMemoryMap& map) {
    const std::byte* p = map.translate_contiguous(0x100000010, 4);
    return p != nullptr && std::memcmp(p, "high", 4) == 0;
  });
  EXPECT_TRUE(sees);
  // Overlapping the first one: refused.
  EXPECT_EQ(frontend.send_acked(Request::kAddMemReg, Payload{SingleRegion{{0x1000, 0x1000, 0x1000, 0}}},
                                {high.fd.get()}),
            std::optional<uint64_t>(1));
  // Remove (mmap offset ignored), and removing it again fails.
  SingleRegion remove = high_region;
  remove.region.mmap_offset = 0x999;
  EXPECT_EQ(frontend.send_acked(Request::kRemMemReg, Payload{remove}), std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.device().memory_slot_count(), 1u);
  EXPECT_EQ(frontend.send_acked(Request::kRemMemReg, Payload{remove}), std::optional<uint64_t>(1));
  const bool gone = frontend.device().memory().read(
      [](const virtio::GuestMemoryMap& map) { return map.translate_contiguous(0x100000010, 4) == nullptr; });
  EXPECT_TRUE(gone);
}

TEST(BackendDeviceTest, TheSameRegionAddedOncePerQueuePairIsCountedNotRefused) {
  // QEMU 7.2 with queues=2 sends every ADD_MEM_REG once per queue pair's vhost device,
  // and each of them its REM_MEM_REG later.
  GuestRam ram(1 << 20);
  GuestRam other(1 << 20);
  TestFrontend frontend;
  frontend.negotiate();
  const SingleRegion region{{0, ram.size, kFrontendBase, 0}};
  ASSERT_EQ(frontend.send_acked(Request::kAddMemReg, Payload{region}, {ram.fd.get()}), std::optional<uint64_t>(0));
  const int dup = ::dup(ram.fd.get());  // another fd of the same memfd, as a second message carries
  ASSERT_EQ(frontend.send_acked(Request::kAddMemReg, Payload{region}, {dup}), std::optional<uint64_t>(0));
  ::close(dup);
  EXPECT_EQ(frontend.device().memory_slot_count(), 1u);
  EXPECT_EQ(frontend.sink().memory_changes(), 1u);  // nothing new to publish
  // The same numbers on another file is a different region overlapping the first: refused.
  EXPECT_EQ(frontend.send_acked(Request::kAddMemReg, Payload{region}, {other.fd.get()}), std::optional<uint64_t>(1));
  // The first REM_MEM_REG leaves it mapped for the other vhost device; the second removes it.
  EXPECT_EQ(frontend.send_acked(Request::kRemMemReg, Payload{region}), std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.device().memory_slot_count(), 1u);
  const bool mapped = frontend.device().memory().read(
      [](const virtio::GuestMemoryMap& map) { return map.translate_contiguous(0x10, 4) != nullptr; });
  EXPECT_TRUE(mapped);
  EXPECT_EQ(frontend.send_acked(Request::kRemMemReg, Payload{region}), std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.device().memory_slot_count(), 0u);
  EXPECT_EQ(frontend.send_acked(Request::kRemMemReg, Payload{region}), std::optional<uint64_t>(1));
}

TEST(BackendDeviceTest, ReplyAckSuccessAndFailure) {
  TestFrontend frontend;
  frontend.negotiate();
  EXPECT_EQ(frontend.send_acked(Request::kSetVringNum, Payload{VringState{0, 256}}), std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.send_acked(Request::kSetVringNum, Payload{VringState{0, 100}}), std::optional<uint64_t>(1));
  EXPECT_EQ(frontend.send_acked(Request::kNetSetMtu, Payload{uint64_t{1500}}), std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.device().mtu(), 1500);
  EXPECT_EQ(frontend.send_acked(Request::kNetSetMtu, Payload{uint64_t{20}}), std::optional<uint64_t>(1));
  EXPECT_EQ(frontend.send_acked(Request::kSetStatus, Payload{uint64_t{0xf}}), std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.get_u64(Request::kGetStatus), 0xfu);
  // Without NEED_REPLY a success sends nothing.
  EXPECT_EQ(frontend.send(Request::kSetVringNum, Payload{VringState{0, 512}}), Progress::kContinue);
  EXPECT_FALSE(frontend.pending_reply().has_value());
  // SEND_RARP: recorded for the datapath.
  const uint64_t mac = 0x0000'5544'3322'1100;
  EXPECT_EQ(frontend.send_acked(Request::kSendRarp, Payload{mac}), std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.device().rarp_count(), 1u);
  EXPECT_EQ(frontend.sink().rarp_requests(), 1u);
  EXPECT_EQ(frontend.device().last_rarp_mac()[0], 0x00);
  EXPECT_EQ(frontend.device().last_rarp_mac()[5], 0x55);
  EXPECT_TRUE(frontend.device().is_open());
}

TEST(BackendDeviceTest, DirtyLogMarksUsedRingWrites) {
  GuestRam ram(1 << 20);
  GuestRam log_ram(4096);  // bitmap: 32768 pages = 128 MiB of guest memory
  TestFrontend frontend;
  frontend.negotiate();
  frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()});
  // SET_LOG_BASE has a reply of its own (u64 0) under LOG_SHMFD.
  frontend.send(Request::kSetLogBase, Payload{LogArea{1024, 2048}}, 0, {log_ram.fd.get()});
  EXPECT_EQ(frontend.reply_u64(Request::kSetLogBase), std::optional<uint64_t>(0));
  ASSERT_NE(frontend.device().dirty_log(), nullptr);

  GuestTxQueue tx(ram, kRingsGpa, 256);
  tx.setup(frontend, 1, 256);
  // Migration starts: LOG_ALL, and the ring logs used writes at its log address.
  const uint64_t features = frontend.device().acked_features() | feature::kLogAll;
  ASSERT_EQ(frontend.send_acked(Request::kSetFeatures, Payload{features}), std::optional<uint64_t>(0));
  const auto config = tx.driver->device_config();
  VringAddress address{1, kVringFlagLog, kFrontendBase + config.desc_addr, kFrontendBase + config.used_addr,
                       kFrontendBase + config.avail_addr, config.used_addr};
  ASSERT_EQ(frontend.send_acked(Request::kSetVringAddr, Payload{address}), std::optional<uint64_t>(0));

  const std::byte* bitmap = log_ram.host + 2048;
  const auto page_bit = [bitmap](uint64_t gpa) {
    const uint64_t page = gpa / DirtyLog::kPageSize;
    return (std::to_integer<unsigned>(bitmap[page / 8]) >> (page % 8)) & 1u;
  };
  EXPECT_EQ(page_bit(config.used_addr), 0u);
  tx.transmit(ram, kBuffersGpa, bytes_of("logged"));
  EXPECT_EQ(frontend.sink().poll(), 1u);
  EXPECT_EQ(page_bit(config.used_addr), 1u);
  EXPECT_EQ(page_bit(kBuffersGpa), 0u);  // transmit only reads the buffer

  // DirtyLog directly: a range over two pages, and clipping at the end of the bitmap.
  DirtyLog& log = *frontend.device().dirty_log();
  log.mark(0x5ff0, 0x20);
  EXPECT_TRUE(log.is_dirty(0x5000));
  EXPECT_TRUE(log.is_dirty(0x6000));
  EXPECT_FALSE(log.is_dirty(0x7000));
  log.mark(~uint64_t{0} - 10, 100);  // wraps, far beyond the bitmap
  EXPECT_GT(log.out_of_range_pages(), 0u);
}

TEST(BackendDeviceTest, SecondDeviceIsUnaffectedByAHostileOne) {
  GuestRam ram(1 << 20);
  TestFrontend good;
  TestFrontend bad;
  good.negotiate();
  bad.negotiate();
  good.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()});
  GuestTxQueue tx(ram, kRingsGpa, 64);
  tx.setup(good, 1, 64);

  // The hostile frontend sends garbage without NEED_REPLY: its connection is closed.
  const std::byte junk[kHeaderSize] = {std::byte{0x7f}, {}, {}, {}, std::byte{0x1}, {}, {}, {}, {}, {}, {}, {}};
  EXPECT_EQ(bad.send_raw(junk), Progress::kClosed);
  EXPECT_FALSE(bad.device().is_open());
  EXPECT_NE(bad.device().close_reason().find("unsupported request"), std::string::npos);

  tx.transmit(ram, kBuffersGpa, bytes_of("still here"));
  EXPECT_EQ(good.sink().poll(), 1u);
  EXPECT_TRUE(good.device().is_open());
}

TEST(BackendDeviceTest, MemoryPolicyIsSelectable) {
  for (const auto policy : sync::kAllGuardPolicies) {
    GuestRam ram(1 << 20);
    DeviceOptions options;
    options.memory_policy = policy;
    TestFrontend frontend(options);
    frontend.negotiate();
    EXPECT_EQ(frontend.device().memory().policy(), policy);
    frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()});
    GuestTxQueue tx(ram, kRingsGpa, 64);
    tx.setup(frontend, 1, 64);
    tx.transmit(ram, kBuffersGpa, bytes_of("policy"));
    EXPECT_EQ(frontend.sink().poll(), 1u);
    // A new table while the ring runs: the queue follows it.
    EXPECT_EQ(frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()}),
              std::optional<uint64_t>(0));
    tx.transmit(ram, kBuffersGpa, bytes_of("policy"));
    EXPECT_EQ(frontend.sink().poll(), 1u);
  }
}

TEST(BackendDeviceTest, MemoryTableSwapsDoNotStopReaders) {
  GuestRam ram(1 << 20);
  std::memcpy(ram.host + 0x100, "mark", 4);
  TestFrontend frontend;
  frontend.negotiate();
  frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()});
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> misses{0};
  virtio::GuardedGuestMemory& memory = frontend.device().memory();
  // A datapath thread translating through the guard while the control thread swaps maps.
  std::thread reader([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const bool ok = memory.read([](const virtio::GuestMemoryMap& map) {
        const std::byte* p = map.translate_contiguous(0x100, 4);
        return p != nullptr && std::memcmp(p, "mark", 4) == 0;
      });
      if (!ok) misses.fetch_add(1, std::memory_order_relaxed);
      reads.fetch_add(1, std::memory_order_relaxed);
    }
  });
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()}),
              std::optional<uint64_t>(0));
  }
  while (reads.load() < 1000) std::this_thread::yield();
  stop = true;
  reader.join();
  EXPECT_EQ(misses.load(), 0u);  // every read saw a whole map holding the page
}

}  // namespace
}  // namespace uvhost::vhost_user
