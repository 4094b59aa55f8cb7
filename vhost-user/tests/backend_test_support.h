// backend_test_support.h - a scripted frontend for the backend tests: it plays QEMU over
// a real socketpair, with memfd guest memory and eventfds, and pumps the device on the
// same thread (the socket buffers a request until the device reads it).
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "uvhost/vhost_user/backend_device.h"
#include "uvhost/vhost_user/connection.h"
#include "uvhost/vhost_user/features.h"
#include "uvhost/vhost_user/message.h"
#include "uvhost/testing/fds.h"
#include "uvhost/testing/inline_datapath.h"
#include "uvhost/virtio/packed_queue_driver.h"
#include "uvhost/virtio/split_queue_driver.h"

namespace uvhost::vhost_user::testing {

// The leak check of the hostile tests.
using uvhost::testing::count_open_fds;

// Guest RAM as QEMU shares it: a memfd, mapped here too (the "guest" side).
struct GuestRam {
  base::UniqueFd fd;
  std::byte* host = nullptr;
  size_t size = 0;

  explicit GuestRam(size_t bytes) : fd(::memfd_create("uvhost-test-ram", MFD_CLOEXEC)), size(bytes) {
    EXPECT_TRUE(fd.valid());
    EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(bytes)), 0);
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    EXPECT_NE(p, MAP_FAILED);
    host = static_cast<std::byte*>(p);
  }
  ~GuestRam() {
    if (host != nullptr) ::munmap(host, size);
  }
  GuestRam(const GuestRam&) = delete;
  GuestRam& operator=(const GuestRam&) = delete;
};

inline base::UniqueFd make_eventfd() { return base::UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)); }

// The frontend end of one connection plus the device and a sink datapath at the other.
class TestFrontend {
 public:
  explicit TestFrontend(DeviceOptions options = {}) {
    auto pair = Connection::pair();
    EXPECT_TRUE(pair.has_value());
    frontend_ = std::make_unique<Connection>(std::move(pair->first));
    sink_ = std::make_unique<InlineDatapath>(options.queue_pairs * 2);
    device_ = std::make_unique<BackendDevice>(std::move(pair->second), *sink_, options);
  }

  BackendDevice& device() { return *device_; }
  InlineDatapath& sink() { return *sink_; }
  Connection& socket() { return *frontend_; }

  // Sends one request and lets the device handle it.
  BackendDevice::Progress send(Request request, const Payload& payload = {}, uint32_t flags = 0,
                               std::vector<int> fds = {}) {
    const auto bytes = encode(request, flags, payload);
    return send_raw(bytes, fds);
  }
  BackendDevice::Progress send_raw(std::span<const std::byte> bytes, std::vector<int> fds = {}) {
    const SendResult sent = frontend_->send(bytes, fds);
    EXPECT_TRUE(sent.ok) << sent.error;
    return device_->handle_one();
  }

  // The next reply, if one is waiting (never blocks long).
  std::optional<RawMessage> pending_reply() {
    if (!frontend_->wait_readable(std::chrono::milliseconds(0))) return std::nullopt;
    ReceiveResult got = frontend_->receive();
    if (got.status != ReceiveStatus::kMessage) return std::nullopt;
    return std::move(got.message);
  }

  std::optional<uint64_t> reply_u64(Request request) {
    auto raw = pending_reply();
    if (!raw) return std::nullopt;
    ReplyResult reply = parse_reply(std::move(*raw), request, ReplyKind::kU64);
    if (auto* ok = std::get_if<Reply>(&reply)) return std::get<uint64_t>(ok->payload);
    ADD_FAILURE() << std::get<ParseError>(reply).reason;
    return std::nullopt;
  }

  std::optional<VringState> reply_state(Request request) {
    auto raw = pending_reply();
    if (!raw) return std::nullopt;
    ReplyResult reply = parse_reply(std::move(*raw), request, ReplyKind::kVringState);
    if (auto* ok = std::get_if<Reply>(&reply)) return std::get<VringState>(ok->payload);
    ADD_FAILURE() << std::get<ParseError>(reply).reason;
    return std::nullopt;
  }

  uint64_t get_u64(Request request) {
    EXPECT_EQ(send(request), BackendDevice::Progress::kContinue);
    return reply_u64(request).value_or(~uint64_t{0});
  }

  // Sends with NEED_REPLY and returns the REPLY_ACK value (nullopt: no reply came).
  std::optional<uint64_t> send_acked(Request request, const Payload& payload = {}, std::vector<int> fds = {}) {
    send(request, payload, kFlagNeedReply, std::move(fds));
    return reply_u64(request);
  }

  // QEMU's start-up handshake: owner, features, protocol features (all we offer, but
  // RING_PACKED and ACCESS_PLATFORM unless the mask asks for them: QEMU's defaults are
  // packed=off and iommu_platform=off).
  void negotiate(uint64_t features_mask = ~(feature::kRingPacked | feature::kAccessPlatform)) {
    ASSERT_EQ(send(Request::kSetOwner), BackendDevice::Progress::kContinue);
    const uint64_t features = get_u64(Request::kGetFeatures);
    const uint64_t protocol = get_u64(Request::kGetProtocolFeatures);
    ASSERT_EQ(send(Request::kSetProtocolFeatures, Payload{protocol}), BackendDevice::Progress::kContinue);
    ASSERT_EQ(send_acked(Request::kSetFeatures, Payload{features & features_mask}), std::optional<uint64_t>(0));
  }

 private:
  std::unique_ptr<Connection> frontend_;
  std::unique_ptr<InlineDatapath> sink_;
  std::unique_ptr<BackendDevice> device_;
};

// Guest physical layout used by the datapath tests.
inline constexpr uint64_t kFrontendBase = 0x7f1200000000;  // "QEMU's" virtual address of guest RAM
inline constexpr uint64_t kRingsGpa = 0x0;
inline constexpr uint64_t kBuffersGpa = 0x20000;

// A transmit queue of the "guest": a split (virtio::DriverQueue) or packed
// (virtio::PackedDriverQueue) driver on the shared memfd, and its setup messages (num,
// base, addr, kick, call, enable) sent to the device.
template <class Driver>
struct GuestTxQueueOf {
  base::UniqueFd kick = make_eventfd();
  base::UniqueFd call = make_eventfd();
  std::unique_ptr<Driver> driver;

  // `in_order`: the driver takes the device's batched used updates (a frontend that
  // acks VIRTIO_F_IN_ORDER must).
  GuestTxQueueOf(GuestRam& ram, uint64_t ring_gpa, uint16_t size, bool in_order = false) {
    virtio::DriverOptions options;
    options.size = size;
    options.event_idx = true;
    options.in_order = in_order;
    virtio::DriverRingArea area{ram.host + ring_gpa, ring_gpa, Driver::required_bytes(options)};
    driver = std::make_unique<Driver>(options, area, virtio::eventfd_kick(kick.get()));
  }

  // `base`: SET_VRING_BASE's num (a packed ring's as QEMU sends it: avail | used << 16).
  void setup(TestFrontend& frontend, uint32_t index, uint16_t size, uint32_t base = 0) {
    const virtio::QueueConfig config = driver->device_config();
    ASSERT_EQ(frontend.send_acked(Request::kSetVringNum, Payload{VringState{index, size}}), std::optional<uint64_t>(0));
    ASSERT_EQ(frontend.send_acked(Request::kSetVringBase, Payload{VringState{index, base}}), std::optional<uint64_t>(0));
    VringAddress address{index, 0, kFrontendBase + config.desc_addr, kFrontendBase + config.used_addr,
                         kFrontendBase + config.avail_addr, config.used_addr};
    ASSERT_EQ(frontend.send_acked(Request::kSetVringAddr, Payload{address}), std::optional<uint64_t>(0));
    ASSERT_EQ(frontend.send_acked(Request::kSetVringKick, Payload{VringFd{index, false}}, {kick.get()}),
              std::optional<uint64_t>(0));
    ASSERT_EQ(frontend.send_acked(Request::kSetVringCall, Payload{VringFd{index, false}}, {call.get()}),
              std::optional<uint64_t>(0));
    ASSERT_EQ(frontend.send_acked(Request::kSetVringEnable, Payload{VringState{index, 1}}), std::optional<uint64_t>(0));
  }

  // Places one frame (with a zeroed 12-byte virtio-net header) at `gpa` and publishes it.
  void transmit(GuestRam& ram, uint64_t gpa, std::span<const std::byte> frame) {
    std::memset(ram.host + gpa, 0, 12);
    std::memcpy(ram.host + gpa + 12, frame.data(), frame.size());
    const typename Driver::Buffer buffer{gpa, static_cast<uint32_t>(12 + frame.size()), false};
    ASSERT_TRUE(driver->add_chain(std::span(&buffer, 1)).has_value());
    driver->publish();
  }
};
using GuestTxQueue = GuestTxQueueOf<virtio::DriverQueue>;
using PackedGuestTxQueue = GuestTxQueueOf<virtio::PackedDriverQueue>;

inline MemoryTable one_region_table(const GuestRam& ram) {
  MemoryTable table;
  table.count = 1;
  table.regions[0] = MemoryRegionDesc{0, ram.size, kFrontendBase, 0};
  return table;
}

}  // namespace uvhost::vhost_user::testing
