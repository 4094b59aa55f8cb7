// backend_hostile_test.cpp - a hostile frontend: each malformed or invalid request is
// refused with a clear reason (an error reply where REPLY_ACK allows, else the
// connection is closed), and no fd leaks (counted in /proc/self/fd). Fds of the wrong
// kind too: a pipe, memfd or socket where an eventfd belongs, a pipe, socket or
// too-small memfd as guest memory.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>

#include "backend_test_support.h"

namespace uvhost::vhost_user {
namespace {

using namespace testing;
using Progress = BackendDevice::Progress;

// Runs `body` with fresh eventfds/memfds and checks that the process ends with the
// same number of open fds (everything the device received was closed or is owned by
// a device that is destroyed inside `body`).
template <class F>
void expect_no_fd_leak(F&& body) {
  const int before = count_open_fds();
  body();
  EXPECT_EQ(count_open_fds(), before);
}

// Fds of the wrong kind for the hostile tests (each test closes them before it ends).
struct Pipe {
  base::UniqueFd read_end;
  base::UniqueFd write_end;
};
Pipe make_pipe() {
  int ends[2] = {-1, -1};
  EXPECT_EQ(::pipe2(ends, O_CLOEXEC), 0);
  return Pipe{base::UniqueFd(ends[0]), base::UniqueFd(ends[1])};
}
base::UniqueFd make_memfd(size_t bytes) {
  base::UniqueFd fd(::memfd_create("uvhost-test-small", MFD_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(bytes)), 0);
  return fd;
}
base::UniqueFd make_socket() {
  int ends[2] = {-1, -1};
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  ::close(ends[1]);
  return base::UniqueFd(ends[0]);
}

std::vector<std::byte> header_bytes(uint32_t request, uint32_t flags, uint32_t size) {
  std::vector<std::byte> out(kHeaderSize);
  std::memcpy(out.data(), &request, 4);
  std::memcpy(out.data() + 4, &flags, 4);
  std::memcpy(out.data() + 8, &size, 4);
  return out;
}

TEST(BackendHostileTest, TruncatedHeaderClosesTheConnection) {
  expect_no_fd_leak([] {
    TestFrontend frontend;
    const auto header = header_bytes(1, kVersion1, 0);
    ASSERT_TRUE(frontend.socket().send(std::span(header).first(6)).ok);
    ::shutdown(frontend.socket().fd(), SHUT_WR);
    EXPECT_EQ(frontend.device().handle_one(), Progress::kClosed);
    EXPECT_NE(frontend.device().close_reason().find("end of file inside a message"), std::string::npos);
  });
}

TEST(BackendHostileTest, StalledPayloadDoesNotHang) {
  TestFrontend frontend;
  frontend.device().connection().set_continuation_timeout(std::chrono::milliseconds(50));
  const auto header = header_bytes(2, kVersion1, 8);  // SET_FEATURES announcing 8 bytes
  ASSERT_TRUE(frontend.socket().send(header).ok);
  EXPECT_EQ(frontend.device().handle_one(), Progress::kClosed);
  EXPECT_NE(frontend.device().close_reason().find("stalled"), std::string::npos);
}

TEST(BackendHostileTest, HugePayloadAnnouncementIsRefused) {
  TestFrontend frontend;
  const auto header = header_bytes(2, kVersion1, 1u << 30);
  EXPECT_EQ(frontend.send_raw(header), Progress::kClosed);
  EXPECT_NE(frontend.device().close_reason().find("payload"), std::string::npos);
}

TEST(BackendHostileTest, PayloadSizeMismatch) {
  TestFrontend frontend;
  frontend.negotiate();
  // SET_VRING_NUM with 12 bytes: refused with REPLY_ACK, the connection survives.
  auto bytes = header_bytes(8, kVersion1 | kFlagNeedReply, 12);
  bytes.resize(kHeaderSize + 12);
  EXPECT_EQ(frontend.send_raw(bytes), Progress::kContinue);
  EXPECT_EQ(frontend.reply_u64(static_cast<Request>(8)), std::optional<uint64_t>(1));
  // The same without NEED_REPLY closes it.
  bytes = header_bytes(8, kVersion1, 4);
  bytes.resize(kHeaderSize + 4);
  EXPECT_EQ(frontend.send_raw(bytes), Progress::kClosed);
  EXPECT_NE(frontend.device().close_reason().find("payload is 4 bytes, must be 8"), std::string::npos);
}

TEST(BackendHostileTest, TooManyAndTooFewFdsAreClosed) {
  expect_no_fd_leak([] {
    TestFrontend frontend;
    frontend.negotiate();
    std::vector<base::UniqueFd> fds;
    std::vector<int> raw_fds;
    for (int i = 0; i < 3; ++i) {
      fds.push_back(make_eventfd());
      raw_fds.push_back(fds.back().get());
    }
    // Three fds with SET_VRING_CALL (wants one).
    EXPECT_EQ(frontend.send_acked(Request::kSetVringCall, Payload{VringFd{0, false}}, raw_fds),
              std::optional<uint64_t>(1));
    // No fd with SET_VRING_KICK (wants one).
    EXPECT_EQ(frontend.send_acked(Request::kSetVringKick, Payload{VringFd{0, false}}), std::optional<uint64_t>(1));
    // Fds with a request that takes none.
    EXPECT_EQ(frontend.send_acked(Request::kSetVringNum, Payload{VringState{0, 8}}, raw_fds),
              std::optional<uint64_t>(1));
    EXPECT_TRUE(frontend.device().is_open());
  });
}

TEST(BackendHostileTest, MoreFdsThanTheSocketCapIsAnError) {
  expect_no_fd_leak([] {
    TestFrontend frontend;
    std::vector<base::UniqueFd> fds;
    std::vector<int> raw_fds;
    for (int i = 0; i < 12; ++i) {
      fds.push_back(make_eventfd());
      raw_fds.push_back(fds.back().get());
    }
    // Connection::send refuses > 8; use sendmsg by hand through a 12-fd message.
    const auto bytes = encode(Request::kSetOwner, 0, Payload{});
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 12)] = {};
    iovec io{const_cast<std::byte*>(bytes.data()), bytes.size()};
    msghdr header{};
    header.msg_iov = &io;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
    cmsghdr* cmsg = CMSG_FIRSTHDR(&header);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * 12);
    std::memcpy(CMSG_DATA(cmsg), raw_fds.data(), sizeof(int) * 12);
    ASSERT_EQ(::sendmsg(frontend.socket().fd(), &header, MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    EXPECT_EQ(frontend.device().handle_one(), Progress::kClosed);
    EXPECT_NE(frontend.device().close_reason().find("truncated"), std::string::npos);
  });
}

TEST(BackendHostileTest, BadVersionIsNeverAnswered) {
  TestFrontend frontend;
  frontend.negotiate();
  auto bytes = header_bytes(1, 0x2 | kFlagNeedReply, 0);
  EXPECT_EQ(frontend.send_raw(bytes), Progress::kClosed);
  EXPECT_NE(frontend.device().close_reason().find("bad version"), std::string::npos);
}

TEST(BackendHostileTest, VringIndexOutOfRange) {
  TestFrontend frontend;
  frontend.negotiate();
  EXPECT_EQ(frontend.send_acked(Request::kSetVringNum, Payload{VringState{2, 256}}), std::optional<uint64_t>(1));
  EXPECT_EQ(frontend.send_acked(Request::kSetVringKick, Payload{VringFd{200, true}}), std::optional<uint64_t>(1));
  EXPECT_EQ(frontend.send(Request::kGetVringBase, Payload{VringState{7, 0}}), Progress::kClosed);
  EXPECT_NE(frontend.device().close_reason().find("out of range"), std::string::npos);
}

TEST(BackendHostileTest, RingSizeMustBeAPowerOfTwoUpTo32768) {
  TestFrontend frontend;
  frontend.negotiate();
  for (const uint32_t bad : {0u, 3u, 100u, 65536u, 0x80000000u}) {
    EXPECT_EQ(frontend.send_acked(Request::kSetVringNum, Payload{VringState{0, bad}}), std::optional<uint64_t>(1))
        << bad;
  }
  EXPECT_EQ(frontend.send_acked(Request::kSetVringNum, Payload{VringState{0, 32768}}), std::optional<uint64_t>(0));
  EXPECT_EQ(frontend.send(Request::kSetVringNum, Payload{VringState{0, 1000}}), Progress::kClosed);
  EXPECT_NE(frontend.device().close_reason().find("not a power of two"), std::string::npos);
}

TEST(BackendHostileTest, BadMemoryRegionsAreRefusedWithoutLeaks) {
  expect_no_fd_leak([] {
    GuestRam ram(1 << 20);
    TestFrontend frontend;
    frontend.negotiate();
    const auto refused = [&](const MemoryTable& table, std::vector<int> fds) {
      return frontend.send_acked(Request::kSetMemTable, Payload{table}, std::move(fds)) == std::optional<uint64_t>(1);
    };
    MemoryTable table;
    table.count = 2;
    table.regions[0] = {0, 0x10000, kFrontendBase, 0};
    table.regions[1] = {0x8000, 0x10000, kFrontendBase + 0x100000, 0};  // overlaps in guest space
    EXPECT_TRUE(refused(table, {ram.fd.get(), ram.fd.get()}));
    table.regions[1] = {0x100000, 0x10000, kFrontendBase + 0x8000, 0};  // overlaps in frontend space
    EXPECT_TRUE(refused(table, {ram.fd.get(), ram.fd.get()}));
    table.count = 1;
    table.regions[0] = {0, uint64_t{1} << 50, kFrontendBase, 0};  // absurd size
    EXPECT_TRUE(refused(table, {ram.fd.get()}));
    table.regions[0] = {~uint64_t{0} - 0x100, 0x1000, kFrontendBase, 0};  // wraps
    EXPECT_TRUE(refused(table, {ram.fd.get()}));
    table.regions[0] = {0, 0x1000, kFrontendBase, ram.size};  // offset beyond the fd's size
    EXPECT_TRUE(refused(table, {ram.fd.get()}));
    table.regions[0] = {0, ram.size + 0x1000, kFrontendBase, 0};  // longer than the fd
    EXPECT_TRUE(refused(table, {ram.fd.get()}));
    table.regions[0] = {0, 0, kFrontendBase, 0};  // empty
    EXPECT_TRUE(refused(table, {ram.fd.get()}));
    base::UniqueFd not_memory = make_eventfd();
    table.regions[0] = {0, 0x1000, kFrontendBase, 0};
    EXPECT_TRUE(refused(table, {not_memory.get()}));
    EXPECT_EQ(frontend.device().memory_slot_count(), 0u);
    // A good table still works afterwards.
    EXPECT_EQ(frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()}),
              std::optional<uint64_t>(0));
  });
}

TEST(BackendHostileTest, UnknownRequest) {
  TestFrontend frontend;
  frontend.negotiate();
  // With NEED_REPLY and REPLY_ACK: an error reply, connection kept.
  auto bytes = header_bytes(1000, kVersion1 | kFlagNeedReply, 0);
  EXPECT_EQ(frontend.send_raw(bytes), Progress::kContinue);
  EXPECT_EQ(frontend.reply_u64(static_cast<Request>(1000)), std::optional<uint64_t>(1));
  // A known but unimplemented request without NEED_REPLY: closed, named in the reason.
  EXPECT_EQ(frontend.send(Request::kGetInflightFd), Progress::kClosed);
  EXPECT_NE(frontend.device().close_reason().find("VHOST_USER_GET_INFLIGHT_FD"), std::string::npos);
}

TEST(BackendHostileTest, RequestsNeedTheirProtocolFeature) {
  TestFrontend frontend;  // nothing negotiated: no REPLY_ACK either, so each closes
  EXPECT_EQ(frontend.send(Request::kGetQueueNum), Progress::kClosed);
  EXPECT_NE(frontend.device().close_reason().find("MQ not negotiated"), std::string::npos);
}

TEST(BackendHostileTest, RingsOutsideMemoryAreRefused) {
  expect_no_fd_leak([] {
    GuestRam ram(1 << 20);
    TestFrontend frontend;
    frontend.negotiate();
    frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()});
    frontend.send_acked(Request::kSetVringNum, Payload{VringState{1, 256}});
    frontend.send_acked(Request::kSetVringAddr, Payload{VringAddress{1, 0, 0x1000, 0x2000, 0x3000, 0}});
    base::UniqueFd kick = make_eventfd();
    EXPECT_EQ(frontend.send_acked(Request::kSetVringKick, Payload{VringFd{1, false}}, {kick.get()}),
              std::optional<uint64_t>(1));
    EXPECT_FALSE(frontend.device().vring(1).started);
    // Kick before size/addresses.
    EXPECT_EQ(frontend.send_acked(Request::kSetVringKick, Payload{VringFd{0, false}}, {kick.get()}),
              std::optional<uint64_t>(1));
  });
}

TEST(BackendHostileTest, VringFdsMustBeEventfds) {
  expect_no_fd_leak([] {
    GuestRam ram(1 << 20);
    GuestTxQueue tx(ram, kRingsGpa, 8);
    TestFrontend frontend;
    frontend.negotiate();
    ASSERT_EQ(frontend.send_acked(Request::kSetMemTable, Payload{one_region_table(ram)}, {ram.fd.get()}),
              std::optional<uint64_t>(0));
    const virtio::QueueConfig config = tx.driver->device_config();
    ASSERT_EQ(frontend.send_acked(Request::kSetVringNum, Payload{VringState{1, 8}}), std::optional<uint64_t>(0));
    ASSERT_EQ(frontend.send_acked(Request::kSetVringAddr,
                                  Payload{VringAddress{1, 0, kFrontendBase + config.desc_addr,
                                                       kFrontendBase + config.used_addr,
                                                       kFrontendBase + config.avail_addr, config.used_addr}}),
              std::optional<uint64_t>(0));

    Pipe pipe = make_pipe();
    base::UniqueFd memfd = make_memfd(4096);
    base::UniqueFd socket = make_socket();
    const std::array<int, 4> wrong = {pipe.read_end.get(), pipe.write_end.get(), memfd.get(), socket.get()};
    for (const Request request : {Request::kSetVringKick, Request::kSetVringCall, Request::kSetVringErr}) {
      for (const int fd : wrong) {
        EXPECT_EQ(frontend.send_acked(request, Payload{VringFd{1, false}}, {fd}), std::optional<uint64_t>(1))
            << to_string(request) << " fd " << fd;
      }
    }
    for (const int fd : wrong) {
      EXPECT_EQ(frontend.send_acked(Request::kSetLogFd, Payload{}, {fd}), std::optional<uint64_t>(1)) << fd;
    }
    EXPECT_FALSE(frontend.device().vring(1).started);
    EXPECT_FALSE(frontend.device().vring(1).call.valid());
    EXPECT_FALSE(frontend.device().vring(1).err.valid());

    // Eventfds are taken; a running ring offered a bad kick keeps running on its old one.
    base::UniqueFd err = make_eventfd();
    EXPECT_EQ(frontend.send_acked(Request::kSetVringCall, Payload{VringFd{1, false}}, {tx.call.get()}),
              std::optional<uint64_t>(0));
    EXPECT_EQ(frontend.send_acked(Request::kSetVringErr, Payload{VringFd{1, false}}, {err.get()}),
              std::optional<uint64_t>(0));
    EXPECT_EQ(frontend.send_acked(Request::kSetVringKick, Payload{VringFd{1, false}}, {tx.kick.get()}),
              std::optional<uint64_t>(0));
    ASSERT_TRUE(frontend.device().vring(1).started);
    EXPECT_EQ(frontend.send_acked(Request::kSetVringKick, Payload{VringFd{1, false}}, {pipe.read_end.get()}),
              std::optional<uint64_t>(1));
    EXPECT_TRUE(frontend.device().vring(1).started);
    EXPECT_TRUE(frontend.device().vring(1).kick.valid());
    EXPECT_EQ(frontend.send_acked(Request::kSetLogFd, Payload{}, {err.get()}), std::optional<uint64_t>(0));

    // Without NEED_REPLY a refusal closes the connection, saying why.
    EXPECT_EQ(frontend.send(Request::kSetVringCall, Payload{VringFd{0, false}}, 0, {socket.get()}),
              Progress::kClosed);
    EXPECT_NE(frontend.device().close_reason().find("VHOST_USER_SET_VRING_CALL: ring 0: fd is \"socket:["),
              std::string::npos)
        << frontend.device().close_reason();
    EXPECT_NE(frontend.device().close_reason().find("not an eventfd"), std::string::npos);
  });
}

TEST(BackendHostileTest, MemoryRegionFdMustBeAFileCoveringTheRegion) {
  expect_no_fd_leak([] {
    TestFrontend frontend;
    frontend.negotiate();
    base::UniqueFd small = make_memfd(0x1000);
    Pipe pipe = make_pipe();
    base::UniqueFd socket = make_socket();
    base::UniqueFd eventfd = make_eventfd();
    const MemoryRegionDesc region{0, 0x10000, kFrontendBase, 0};
    MemoryTable table;
    table.count = 1;
    table.regions[0] = region;
    // Mapping a file past its end succeeds; the access would SIGBUS. Refused instead.
    for (const int fd : {small.get(), pipe.read_end.get(), socket.get(), eventfd.get()}) {
      EXPECT_EQ(frontend.send_acked(Request::kSetMemTable, Payload{table}, {fd}), std::optional<uint64_t>(1)) << fd;
      EXPECT_EQ(frontend.send_acked(Request::kAddMemReg, Payload{SingleRegion{region}}, {fd}),
                std::optional<uint64_t>(1))
          << fd;
    }
    EXPECT_EQ(frontend.device().memory_slot_count(), 0u);

    // The offset counts: offset + size must fit, and exactly fitting is fine.
    base::UniqueFd exact = make_memfd(0x11000);
    table.regions[0] = {0, 0x10000, kFrontendBase, 0x1001};
    EXPECT_EQ(frontend.send_acked(Request::kSetMemTable, Payload{table}, {exact.get()}), std::optional<uint64_t>(1));
    table.regions[0] = {0, 0x10000, kFrontendBase, 0x1000};
    EXPECT_EQ(frontend.send_acked(Request::kSetMemTable, Payload{table}, {exact.get()}), std::optional<uint64_t>(0));
    EXPECT_EQ(frontend.device().memory_slot_count(), 1u);
    // A too-small second region leaves the first in place.
    const SingleRegion second{{0x100000, 0x2000, kFrontendBase + 0x100000, 0}};
    EXPECT_EQ(frontend.send_acked(Request::kAddMemReg, Payload{second}, {small.get()}), std::optional<uint64_t>(1));
    EXPECT_EQ(frontend.device().memory_slot_count(), 1u);

    // Without NEED_REPLY: closed, with the reason.
    table.regions[0] = region;
    EXPECT_EQ(frontend.send(Request::kSetMemTable, Payload{table}, 0, {small.get()}), Progress::kClosed);
    EXPECT_NE(frontend.device().close_reason().find("reaches past the end of its fd (0x1000 bytes)"), std::string::npos)
        << frontend.device().close_reason();
  });
}

}  // namespace
}  // namespace uvhost::vhost_user
