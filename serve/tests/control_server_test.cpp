// control_server_test.cpp - serve::ControlServer (and control_request) over real Unix
// sockets in a temporary directory, with canned handlers: the framing rules (garbage,
// non-objects, over-long lines, half lines, blank lines), the client limit, a handler
// that throws, a client that never reads, stopping with clients attached, socket mode,
// stale and live sockets, fd hygiene.
//
// Waits are bounded and generous (sanitizers, two shared cores); nothing is checked by
// sleeping a fixed time, except where the point is that time passes (the write timeout).
#include "uvhost/serve/control_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/serve/control_client.h"
#include "uvhost/testing/fds.h"
#include "uvhost/base/unique_fd.h"

namespace uvhost::serve {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using testing::count_open_fds;
using base::UniqueFd;

constexpr auto kPatience = 10s;

// ------------------------------------------------------------------ environment

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/uvhost-ctl-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    if (made != nullptr) path_ = made;
  }
  ~TempDir() {
    if (!path_.empty()) (void)std::system(("rm -rf '" + path_ + "'").c_str());
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  bool ok() const { return !path_.empty(); }

 private:
  std::string path_;
};

sockaddr_un address_of(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

// A hand-driven client: raw bytes in, lines out, so tests can misbehave.
class RawClient {
 public:
  explicit RawClient(const std::string& path) : fd_(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    const sockaddr_un address = address_of(path);
    if (::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) fd_.reset();
  }

  bool connected() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  void close() { fd_.reset(); }

  // Everything, blocking; false when the server is gone.
  bool send(std::string_view bytes) {
    for (size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = ::send(fd_.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // One line (without '\n'); nullopt on timeout, EOF or error.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout = kPatience) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      if (const size_t end = buffer_.find('\n'); end != std::string::npos) {
        std::string line = buffer_.substr(0, end);
        buffer_.erase(0, end + 1);
        return line;
      }
      if (!readable_by(deadline)) return std::nullopt;
      char chunk[65536];
      const ssize_t n = ::recv(fd_.get(), chunk, sizeof(chunk), 0);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  std::optional<json> read_reply(std::chrono::milliseconds timeout = kPatience) {
    const auto line = read_line(timeout);
    if (!line) return std::nullopt;
    return json::parse(*line, nullptr, false);
  }

  std::optional<json> request(const json& body) {
    if (!send(body.dump() + "\n")) return std::nullopt;
    return read_reply();
  }

  // Reads (and counts) whatever is left until the server closes; false on timeout.
  // ECONNRESET counts as closed: the server closed with our bytes still unread.
  bool wait_closed(size_t* bytes = nullptr, std::chrono::milliseconds timeout = kPatience) {
    const auto deadline = Clock::now() + timeout;
    size_t total = buffer_.size();
    buffer_.clear();
    for (;;) {
      if (!readable_by(deadline)) return false;
      char chunk[65536];
      const ssize_t n = ::recv(fd_.get(), chunk, sizeof(chunk), 0);
      if (n > 0) {
        total += static_cast<size_t>(n);
        continue;
      }
      if (bytes != nullptr) *bytes = total;
      return n == 0 || errno == ECONNRESET;
    }
  }

  // Whether nothing arrives within `time` (the connection still open, no bytes).
  bool quiet_for(std::chrono::milliseconds time) {
    pollfd entry{fd_.get(), POLLIN, 0};
    return buffer_.empty() && ::poll(&entry, 1, static_cast<int>(time.count())) == 0;
  }

 private:
  bool readable_by(Clock::time_point deadline) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left < 0) return false;
      pollfd entry{fd_.get(), POLLIN, 0};
      const int rc = ::poll(&entry, 1, static_cast<int>(left));
      if (rc > 0) return true;
      if (rc == 0 || errno != EINTR) return false;
    }
  }

  UniqueFd fd_;
  std::string buffer_;
};

json echo(const json& request) { return json{{"ok", true}, {"echo", request}}; }

class ControlServerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.ok()); }

  std::unique_ptr<ControlServer> open_server(ControlServer::Handler handler = echo) {
    std::string error;
    auto server = ControlServer::open(path_, std::move(handler), error);
    EXPECT_NE(server, nullptr) << error;
    return server;
  }

  TempDir dir_;
  std::string path_ = dir_.file("control.sock");
};

// ------------------------------------------------------------------ requests and replies

TEST_F(ControlServerTest, AnswersEachRequestLineWithOneReplyLineInOrder) {
  auto server = open_server();
  ASSERT_NE(server, nullptr);

  std::string error;
  const auto reply = control_request(path_, json{{"cmd", "list"}}, error);
  ASSERT_TRUE(reply.has_value()) << error;
  EXPECT_EQ(*reply, json({{"ok", true}, {"echo", {{"cmd", "list"}}}}));

  // Pipelined, in one write, with CRLF and blank lines mixed in: two requests, two
  // replies, in order; blank lines are not requests.
  RawClient client(path_);
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.send("{\"n\":1}\r\n\n  \n{\"n\":2}\n"));
  const auto first = client.read_reply();
  const auto second = client.read_reply();
  ASSERT_TRUE(first && second);
  EXPECT_EQ((*first)["echo"]["n"], 1);
  EXPECT_EQ((*second)["echo"]["n"], 2);
  EXPECT_TRUE(client.quiet_for(100ms));

  // A request split over several writes is one request.
  ASSERT_TRUE(client.send("{\"n\":"));
  EXPECT_TRUE(client.quiet_for(50ms));
  ASSERT_TRUE(client.send("3}\n"));
  const auto third = client.read_reply();
  ASSERT_TRUE(third);
  EXPECT_EQ((*third)["echo"]["n"], 3);
}

TEST_F(ControlServerTest, RequestThenShutdownOfTheSendingSideStillGetsItsReply) {
  auto server = open_server();
  ASSERT_NE(server, nullptr);
  RawClient client(path_);
  ASSERT_TRUE(client.send("{\"cmd\":\"stats\"}\n"));
  ASSERT_EQ(::shutdown(client.fd(), SHUT_WR), 0);  // what `echo ... | nc -N -U` does
  const auto reply = client.read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["echo"]["cmd"], "stats");
  EXPECT_TRUE(client.wait_closed());
}

TEST_F(ControlServerTest, GarbageGetsAnErrorReplyAndTheClientStays) {
  std::atomic<int> calls{0};
  auto server = open_server([&](const json& request) {
    ++calls;
    return echo(request);
  });
  ASSERT_NE(server, nullptr);
  RawClient client(path_);
  for (const std::string garbage : {"not json", "{\"unterminated\": ", "{\"a\":1} trailing", "\"\xff\xfe\""}) {
    ASSERT_TRUE(client.send(garbage + "\n"));
    const auto reply = client.read_reply();
    ASSERT_TRUE(reply) << garbage;
    EXPECT_EQ((*reply)["ok"], false) << garbage;
    EXPECT_NE((*reply)["error"].get<std::string>().find("invalid JSON"), std::string::npos) << *reply;
  }
  const auto reply = client.request({{"cmd", "list"}});
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["ok"], true);
  EXPECT_EQ(calls.load(), 1);  // garbage never reaches the handler
}

TEST_F(ControlServerTest, JsonThatIsNotAnObjectGetsAnErrorReply) {
  auto server = open_server();
  ASSERT_NE(server, nullptr);
  RawClient client(path_);
  for (const std::string value : {"[1,2]", "42", "\"list\"", "null", "true"}) {
    ASSERT_TRUE(client.send(value + "\n"));
    const auto reply = client.read_reply();
    ASSERT_TRUE(reply) << value;
    EXPECT_EQ((*reply)["ok"], false);
    EXPECT_NE((*reply)["error"].get<std::string>().find("JSON object"), std::string::npos) << *reply;
  }
  // Deep nesting within the line limit: parsed without recursion, refused, no crash.
  const std::string deep = std::string(30000, '[') + std::string(30000, ']');
  ASSERT_TRUE(client.send(deep + "\n"));
  const auto reply = client.read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["ok"], false);
  EXPECT_EQ((*client.request({{"cmd", "list"}}))["ok"], true);
}

TEST_F(ControlServerTest, ALineOverTheLimitGetsAnErrorAndTheClientIsClosed) {
  auto server = open_server();
  ASSERT_NE(server, nullptr);

  // Exactly at the limit: served.
  const std::string prefix = "{\"pad\":\"";
  const std::string suffix = "\"}";
  const std::string at_limit =
      prefix + std::string(ControlServer::kMaxLineBytes - prefix.size() - suffix.size(), 'x') + suffix;
  ASSERT_EQ(at_limit.size(), ControlServer::kMaxLineBytes);
  RawClient fits(path_);
  ASSERT_TRUE(fits.send(at_limit + "\n"));
  const auto echoed = fits.read_reply();
  ASSERT_TRUE(echoed);
  EXPECT_EQ((*echoed)["ok"], true);

  // 100 KiB without a newline: refused before the line ends.
  RawClient big(path_);
  (void)big.send(std::string(100 * 1024, 'x'));  // may fail part-way: the server hung up
  const auto reply = big.read_reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["ok"], false);
  EXPECT_NE((*reply)["error"].get<std::string>().find("longer than"), std::string::npos) << *reply;
  EXPECT_TRUE(big.wait_closed());

  // One byte over, newline included in the same write: refused too.
  RawClient over(path_);
  (void)over.send(at_limit + " \n");
  const auto over_reply = over.read_reply();
  ASSERT_TRUE(over_reply);
  EXPECT_EQ((*over_reply)["ok"], false);
  EXPECT_TRUE(over.wait_closed());

  // The others are unaffected.
  EXPECT_EQ((*fits.request({{"cmd", "list"}}))["ok"], true);
}

TEST_F(ControlServerTest, AClientThatHangsUpMidLineIsClosedAndNothingElseHappens) {
  std::atomic<int> calls{0};
  auto server = open_server([&](const json& request) {
    ++calls;
    return echo(request);
  });
  ASSERT_NE(server, nullptr);
  {
    RawClient client(path_);
    ASSERT_TRUE(client.send("{\"cmd\":\"li"));
  }
  std::string error;
  const auto reply = control_request(path_, json{{"cmd", "list"}}, error);
  ASSERT_TRUE(reply) << error;
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(ControlServerTest, AHandlerThatThrowsBecomesAnErrorReply) {
  auto server = open_server([](const json& request) -> json {
    if (request.value("cmd", "") == "throw") throw std::runtime_error("no such port: p9");
    if (request.value("cmd", "") == "throw-int") throw 42;
    return echo(request);
  });
  ASSERT_NE(server, nullptr);
  RawClient client(path_);
  const auto thrown = client.request({{"cmd", "throw"}});
  ASSERT_TRUE(thrown);
  EXPECT_EQ(*thrown, json({{"ok", false}, {"error", "no such port: p9"}}));
  const auto odd = client.request({{"cmd", "throw-int"}});
  ASSERT_TRUE(odd);
  EXPECT_EQ((*odd)["ok"], false);
  EXPECT_EQ((*client.request({{"cmd", "list"}}))["ok"], true);
}

TEST_F(ControlServerTest, AReplyWithInvalidUtf8IsSentWithReplacementCharacters) {
  auto server = open_server([](const json&) { return json{{"ok", true}, {"name", std::string("p\xff")}}; });
  ASSERT_NE(server, nullptr);
  RawClient client(path_);
  const auto reply = client.request({{"cmd", "list"}});
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["name"], "p\xEF\xBF\xBD");
}

// ------------------------------------------------------------------ many clients, bad clients

TEST_F(ControlServerTest, SixteenClientsAreServedAndTheRestRefused) {
  auto server = open_server();
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 20; ++i) {
    clients.push_back(std::make_unique<RawClient>(path_));
    ASSERT_TRUE(clients.back()->connected()) << i;
  }
  // The server accepts in connect order: the first 16 get a slot.
  for (size_t i = 0; i < clients.size(); ++i) {
    if (i < ControlServer::kMaxClients) {
      const auto reply = clients[i]->request({{"client", i}});
      ASSERT_TRUE(reply) << i;
      EXPECT_EQ((*reply)["echo"]["client"], i);
    } else {
      const auto reply = clients[i]->read_reply();
      ASSERT_TRUE(reply) << i;
      EXPECT_EQ(*reply, json({{"ok", false}, {"error", "too many control clients"}}));
      EXPECT_TRUE(clients[i]->wait_closed());
    }
  }
  // A slot that is given up is free again (once the server noticed the hang-up).
  clients[3]->close();
  const auto deadline = Clock::now() + kPatience;
  bool served = false;
  while (!served && Clock::now() < deadline) {
    RawClient late(path_);
    const auto reply = late.request({{"cmd", "late"}});
    served = reply && (*reply)["ok"] == true;
    if (!served) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(served);
}

TEST_F(ControlServerTest, AClientThatDoesNotReadIsDroppedAndOthersAreServedMeanwhile) {
  const std::string big(1 << 20, 'x');  // far more than a socket buffer holds
  auto server = open_server([&](const json& request) {
    if (request.value("cmd", "") == "big") return json{{"ok", true}, {"data", big}};
    return echo(request);
  });
  ASSERT_NE(server, nullptr);

  RawClient stalled(path_);
  ASSERT_TRUE(stalled.send("{\"cmd\":\"big\"}\n{\"cmd\":\"second\"}\n"));
  // The reply has started (its first bytes wait, unread): the write timeout runs.
  pollfd started{stalled.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&started, 1, static_cast<int>(std::chrono::milliseconds(kPatience).count())), 1);
  const auto start = Clock::now();

  // Served while the other's reply is stuck.
  RawClient other(path_);
  for (int i = 0; i < 5; ++i) {
    const auto reply = other.request({{"n", i}});
    ASSERT_TRUE(reply);
    EXPECT_EQ((*reply)["echo"]["n"], i);
  }
  EXPECT_LT(Clock::now() - start, ControlServer::kWriteTimeout);

  // The stalled client is dropped after the timeout: the connection ends before its
  // reply was whole, and the second request was never answered.
  std::this_thread::sleep_for(ControlServer::kWriteTimeout + 500ms);
  size_t received = 0;
  EXPECT_TRUE(stalled.wait_closed(&received));
  EXPECT_LT(received, big.size());
  EXPECT_EQ((*other.request({{"cmd", "after"}}))["ok"], true);
}

TEST_F(ControlServerTest, ALongReplyToAClientThatReadsIsWrittenWhole) {
  const std::string big(4 << 20, 'y');
  auto server = open_server([&](const json&) { return json{{"ok", true}, {"data", big}}; });
  ASSERT_NE(server, nullptr);
  std::string error;
  const auto reply = control_request(path_, json{{"cmd", "big"}}, error);
  ASSERT_TRUE(reply) << error;
  EXPECT_EQ((*reply)["data"].get<std::string>().size(), big.size());
}

// ------------------------------------------------------------------ lifecycle

TEST_F(ControlServerTest, StopClosesEveryClientAndIsIdempotent) {
  const int fds_before = count_open_fds();
  auto server = open_server([](const json& request) {
    if (request.value("cmd", "") == "big") return json{{"ok", true}, {"data", std::string(4 << 20, 'z')}};
    return echo(request);
  });
  ASSERT_NE(server, nullptr);
  RawClient idle(path_);
  RawClient mid_line(path_);
  RawClient pending(path_);
  ASSERT_TRUE(mid_line.send("{\"cmd\":"));
  ASSERT_TRUE(pending.send("{\"cmd\":\"big\"}\n"));
  ASSERT_TRUE(idle.request({{"cmd", "hello"}}));  // the server has them all by now

  // stop() must not wait for the unread reply's write timeout (1 s) or the half line.
  // Sanitized builds on a loaded 2-core machine can take seconds just to build the
  // 4 MiB reply the server may be busy with; the release build keeps the tight bound.
#if defined(UVHOST_SANITIZER_THREAD) || defined(UVHOST_SANITIZER_ADDRESS)
  constexpr auto kStopBound = 15s;
#else
  constexpr auto kStopBound = 2s;
#endif
  const auto start = Clock::now();
  server->stop();
  EXPECT_LT(Clock::now() - start, kStopBound);
  server->stop();
  EXPECT_TRUE(idle.wait_closed());
  EXPECT_TRUE(mid_line.wait_closed());
  EXPECT_TRUE(pending.wait_closed());

  // The socket file stays until the server is destroyed.
  struct stat info {};
  EXPECT_EQ(::lstat(path_.c_str(), &info), 0);
  server.reset();
  EXPECT_NE(::lstat(path_.c_str(), &info), 0);
  idle.close();
  mid_line.close();
  pending.close();
  EXPECT_EQ(count_open_fds(), fds_before);
}

TEST_F(ControlServerTest, LeavesNoFdBehind) {
  const int fds_before = count_open_fds();
  {
    auto server = open_server([](const json& request) -> json {
      if (request.value("cmd", "") == "throw") throw std::runtime_error("x");
      return echo(request);
    });
    ASSERT_NE(server, nullptr);
    for (int round = 0; round < 3; ++round) {
      std::vector<std::unique_ptr<RawClient>> clients;
      for (int i = 0; i < 18; ++i) clients.push_back(std::make_unique<RawClient>(path_));
      for (int i = 0; i < 16; ++i) {
        ASSERT_TRUE(clients[static_cast<size_t>(i)]->send(i % 3 == 0 ? "garbage\n" : "{\"cmd\":\"throw\"}\n"));
        ASSERT_TRUE(clients[static_cast<size_t>(i)]->read_reply());
      }
      (void)clients[5]->send("{\"half");
      for (auto& client : clients) client->close();
      std::string error;
      // The server may still hold closed clients for a moment; it frees them before
      // this request is served only if it saw the hang-ups first, so retry.
      const auto deadline = Clock::now() + kPatience;
      std::optional<json> reply;
      while (Clock::now() < deadline && !(reply && (*reply)["ok"] == true)) {
        reply = control_request(path_, json{{"cmd", "x"}}, error);
      }
      ASSERT_TRUE(reply && (*reply)["ok"] == true) << error;
    }
  }
  EXPECT_EQ(count_open_fds(), fds_before);
}

TEST_F(ControlServerTest, TheSocketIsMode0600AndRemovedWithTheServer) {
  auto server = open_server();
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->path(), path_);
  struct stat info {};
  ASSERT_EQ(::lstat(path_.c_str(), &info), 0);
  EXPECT_TRUE(S_ISSOCK(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  server.reset();
  EXPECT_NE(::lstat(path_.c_str(), &info), 0);
}

TEST_F(ControlServerTest, AStaleSocketIsReplaced) {
  {
    // A socket file whose owner is gone: bound, then closed without unlinking.
    UniqueFd dead(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const sockaddr_un address = address_of(path_);
    ASSERT_EQ(::bind(dead.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  }
  struct stat info {};
  ASSERT_EQ(::lstat(path_.c_str(), &info), 0);
  auto server = open_server();
  ASSERT_NE(server, nullptr);
  std::string error;
  EXPECT_TRUE(control_request(path_, json{{"cmd", "list"}}, error)) << error;
}

TEST_F(ControlServerTest, ALiveSocketOrAnotherFileIsRefusedAndLeftAlone) {
  auto first = open_server();
  ASSERT_NE(first, nullptr);
  std::string error;
  EXPECT_EQ(ControlServer::open(path_, echo, error), nullptr);
  EXPECT_NE(error.find("in use"), std::string::npos) << error;
  EXPECT_TRUE(control_request(path_, json{{"cmd", "list"}}, error)) << error;  // the first still serves

  const std::string file = dir_.file("not-a-socket");
  std::ofstream(file) << "keep me";
  error.clear();
  EXPECT_EQ(ControlServer::open(file, echo, error), nullptr);
  EXPECT_NE(error.find("not a socket"), std::string::npos) << error;
  std::ifstream kept(file);
  std::string content;
  std::getline(kept, content);
  EXPECT_EQ(content, "keep me");
}

// ------------------------------------------------------------------ control_request errors

TEST_F(ControlServerTest, ControlRequestNamesThePathAndTheErrno) {
  std::string error;
  EXPECT_FALSE(control_request(path_, json{{"cmd", "list"}}, error));
  EXPECT_NE(error.find(path_), std::string::npos) << error;
  EXPECT_NE(error.find(std::strerror(ENOENT)), std::string::npos) << error;
}

TEST_F(ControlServerTest, ControlRequestGivesUpAfterItsTimeout) {
  std::atomic<bool> release{false};
  auto server = open_server([&](const json& request) {
    const auto deadline = Clock::now() + kPatience;
    while (!release.load() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
    return echo(request);
  });
  ASSERT_NE(server, nullptr);
  std::string error;
  const auto start = Clock::now();
  EXPECT_FALSE(control_request(path_, json{{"cmd", "slow"}}, error, 100ms));
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_NE(error.find("no reply within 100 ms"), std::string::npos) << error;
  release = true;
}

}  // namespace
}  // namespace uvhost::serve
