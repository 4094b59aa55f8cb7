// connection_test.cpp - framing over real Unix sockets: fds with messages, payloads
// arriving in pieces, the listener's permissions and cleanup, client reconnects.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "backend_test_support.h"
#include "uvhost/vhost_user/connection.h"

namespace uvhost::vhost_user {
namespace {

using testing::count_open_fds;
using testing::make_eventfd;

std::string socket_path(const char* tag) {
  return fmt::format("/tmp/uvhost-vu-{}-{}.sock", tag, ::getpid());
}

TEST(ConnectionTest, MessageWithFdsRoundTrips) {
  const int before = count_open_fds();
  {
    auto pair = Connection::pair();
    ASSERT_TRUE(pair);
    base::UniqueFd a = make_eventfd();
    base::UniqueFd b = make_eventfd();
    const int fds[] = {a.get(), b.get()};
    const auto bytes = encode(Request::kSetVringKick, 0, Payload{VringFd{1, false}});
    ASSERT_TRUE(pair->first.send(bytes, fds).ok);
    ReceiveResult got = pair->second.receive();
    ASSERT_EQ(got.status, ReceiveStatus::kMessage) << got.error;
    EXPECT_EQ(got.message.header.request, 12u);
    EXPECT_EQ(got.message.payload.size(), 8u);
    ASSERT_EQ(got.message.fds.size(), 2u);
    // The received fd is a working copy of the eventfd.
    ASSERT_EQ(::eventfd_write(got.message.fds[0].get(), 5), 0);
    eventfd_t value = 0;
    ASSERT_EQ(::eventfd_read(a.get(), &value), 0);
    EXPECT_EQ(value, 5u);
    // Close-on-exec was set on receipt.
    EXPECT_NE(::fcntl(got.message.fds[1].get(), F_GETFD) & FD_CLOEXEC, 0);
  }
  EXPECT_EQ(count_open_fds(), before);
}

TEST(ConnectionTest, PayloadInPiecesIsReassembled) {
  auto pair = Connection::pair();
  ASSERT_TRUE(pair);
  MemoryTable table;
  table.count = 3;
  const auto bytes = encode(Request::kSetMemTable, 0, Payload{table});
  std::thread writer([&] {
    // Header, then the payload in two late pieces.
    ASSERT_TRUE(pair->first.send(std::span(bytes).first(kHeaderSize + 3)).ok);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(pair->first.send(std::span(bytes).subspan(kHeaderSize + 3, 40)).ok);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(pair->first.send(std::span(bytes).subspan(kHeaderSize + 43)).ok);
  });
  ReceiveResult got = pair->second.receive();
  writer.join();
  ASSERT_EQ(got.status, ReceiveStatus::kMessage) << got.error;
  EXPECT_EQ(got.message.payload.size(), bytes.size() - kHeaderSize);
  EXPECT_EQ(std::memcmp(got.message.payload.data(), bytes.data() + kHeaderSize, got.message.payload.size()), 0);
}

TEST(ConnectionTest, CleanCloseBetweenMessages) {
  auto pair = Connection::pair();
  ASSERT_TRUE(pair);
  pair->first.close();
  EXPECT_EQ(pair->second.receive().status, ReceiveStatus::kClosed);
}

TEST(ConnectionTest, ListenerIsPrivateAndUnlinksItsPath) {
  const std::string path = socket_path("listen");
  {
    std::string error;
    auto listener = Listener::bind(path, error);
    ASSERT_TRUE(listener) << error;
    struct stat info {};
    ASSERT_EQ(::stat(path.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0600u);
    // A second bind on the same path fails while the first lives.
    std::string second_error;
    EXPECT_FALSE(Listener::bind(path, second_error));
    auto client = connect_unix(path, error);
    ASSERT_TRUE(client) << error;
    auto server = listener->accept(std::chrono::milliseconds(1000), error);
    ASSERT_TRUE(server) << error;
    ASSERT_TRUE(client->send(encode(Request::kGetFeatures, 0, Payload{})).ok);
    EXPECT_EQ(server->receive().message.header.request, 1u);
    EXPECT_FALSE(listener->accept(std::chrono::milliseconds(10), error));
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0);  // unlinked
}

// A socket someone else bound (a launcher, systemd), taken over: it accepts the same
// way, also after being moved, and its path stays when the Listener goes.
TEST(ConnectionTest, AnAdoptedListenerAcceptsAndNeverUnlinks) {
  const std::string path = socket_path("adopt");
  std::string error;
  auto bound = Listener::bind(path, error);
  ASSERT_TRUE(bound) << error;
  const int fd = ::dup(bound->fd());  // the "launcher's" socket: same file, other fd
  ASSERT_GE(fd, 0);
  {
    Listener adopted = Listener::adopt(base::UniqueFd(fd), path);
    EXPECT_FALSE(adopted.owns_path());
    Listener moved = std::move(adopted);
    auto client = connect_unix(path, error);
    ASSERT_TRUE(client) << error;
    auto server = moved.accept(std::chrono::milliseconds(1000), error);
    ASSERT_TRUE(server) << error;
    ASSERT_TRUE(client->send(encode(Request::kGetFeatures, 0, Payload{})).ok);
    EXPECT_EQ(server->receive().message.header.request, 1u);
  }
  EXPECT_EQ(::access(path.c_str(), F_OK), 0) << "an adopted Listener unlinked its path";
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the adopted fd was not closed";
  EXPECT_TRUE(bound->owns_path());
}

TEST(ConnectionTest, ReplaceStaleRemovesOnlySockets) {
  const std::string path = socket_path("stale");
  // A socket file left behind by a crashed process: bound, never unlinked.
  {
    base::UniqueFd raw(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    ASSERT_EQ(::bind(raw.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  }
  std::string error;
  EXPECT_FALSE(Listener::bind(path, error));
  Listener::Options options;
  options.replace_stale = true;
  {
    auto listener = Listener::bind(path, options, error);
    EXPECT_TRUE(listener) << error;
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  // A regular file is never removed, even with replace_stale.
  std::ofstream(path) << "precious";
  EXPECT_FALSE(Listener::bind(path, options, error));
  EXPECT_EQ(::access(path.c_str(), F_OK), 0);
  ::unlink(path.c_str());
}

TEST(ConnectionTest, ConnectWithBackoffWaitsForTheServer) {
  const std::string path = socket_path("backoff");
  std::optional<Listener> listener;
  std::thread server([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    std::string error;
    listener = Listener::bind(path, error);
  });
  std::string error;
  auto client = connect_with_backoff(path, Backoff{std::chrono::milliseconds(5), std::chrono::milliseconds(20),
                                                   std::chrono::milliseconds(3000)},
                                     error);
  server.join();
  EXPECT_TRUE(client) << error;
  // Gives up after the total time, and honours should_stop.
  auto none = connect_with_backoff("/tmp/uvhost-vu-nobody-here.sock",
                                   Backoff{std::chrono::milliseconds(1), std::chrono::milliseconds(2),
                                           std::chrono::milliseconds(20)},
                                   error);
  EXPECT_FALSE(none);
  auto stopped = connect_with_backoff(path + ".x", Backoff{}, error, [] { return true; });
  EXPECT_FALSE(stopped);
  EXPECT_NE(error.find("stopped"), std::string::npos);
}

}  // namespace
}  // namespace uvhost::vhost_user
