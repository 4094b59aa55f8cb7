// socket_handover_test.cpp - ports on sockets someone else opened: a launcher's `--fd`
// (listening or connected), systemd's LISTEN_FDS, and the checks that refuse anything
// that is not a Unix stream socket. Real sockets, the daemon in process, our embedded
// frontend as the guest.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve_test_support.h"
#include "uvhost/serve/backend_program.h"
#include "uvhost/serve/inherited_sockets.h"
#include "uvhost/vhost_user/socket_inspection.h"

namespace uvhost::serve::testing {
namespace {

using base::UniqueFd;

// A Unix stream socket bound to `path` and listening, as a launcher or systemd makes it.
UniqueFd listening_socket(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0) << std::strerror(errno);
  EXPECT_EQ(::listen(fd.get(), 4), 0) << std::strerror(errno);
  return fd;
}

bool fd_is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

// Sends `count` frames through `frontend` and stops it cleanly.
void send_and_stop(Frontend& frontend, const std::vector<std::vector<std::byte>>& frames) {
  ASSERT_TRUE(send_all(frontend, frames)) << frontend.error();
  ASSERT_TRUE(wait_tx_done(frontend)) << frontend.error();
  ASSERT_TRUE(frontend.stop()) << frontend.error();
}

// Waits until the daemon's only port has counted `packets` frames from the guest and
// no frontend is connected (the last one's end was seen: the next one is not a second
// frontend turned away).
bool wait_for_tx_packets(Daemon& daemon, uint64_t packets) {
  const auto deadline = Clock::now() + kPatience;
  while (Clock::now() < deadline) {
    const auto reports = daemon.reports();
    const bool connected = daemon.control({{"cmd", "list"}}).at("ports").at(0).at("connected").get<bool>();
    if (!reports.empty() && reports[0].totals.from_guest_packets >= packets && !connected) return true;
    ::usleep(10000);
  }
  return false;
}

// ------------------------------------------------------------------ adopting sockets

TEST(SocketHandoverTest, AListeningSocketIsServedAndItsPathLeftToItsCreator) {
  TempDir dir;
  const std::string path = dir.file("handed.sock");
  UniqueFd socket = listening_socket(path);
  const int fd = socket.release();  // the port takes it over
  PortSpec spec = port("handed", path);
  spec.socket_fd = fd;
  const auto frames = make_frames(300, 0);
  {
    Daemon daemon({spec});
    std::string error;
    ASSERT_TRUE(daemon.start(error)) << error;
    // Two frontends one after the other: the adopted socket keeps accepting.
    for (size_t round = 0; round < 2; ++round) {
      auto frontend = connect(path, error);
      ASSERT_NE(frontend, nullptr) << error;
      send_and_stop(*frontend, frames);
      ASSERT_TRUE(wait_for_tx_packets(daemon, (round + 1) * frames.size()));
    }
    const auto reports = stop_and_report(daemon);
    ASSERT_EQ(reports.size(), 1u);
    EXPECT_EQ(reports[0].totals.connections, 2u);
    EXPECT_EQ(reports[0].totals.from_guest_packets, 2 * frames.size());
    EXPECT_EQ(reports[0].totals.from_guest_bytes, 2 * total_bytes(frames));
  }
  EXPECT_TRUE(exists(path)) << "the port unlinked a socket it did not create";
  EXPECT_FALSE(fd_is_open(fd)) << "the port left the adopted socket open";
}

TEST(SocketHandoverTest, AConnectedSocketIsThatOneFrontend) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  PortSpec spec = port("paired", "");
  spec.socket_fd = pair[0];
  Daemon daemon({spec});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  auto frontend = Frontend::start(Connection(UniqueFd(pair[1])), FrontendOptions{}, error);
  ASSERT_NE(frontend, nullptr) << error;
  const auto frames = make_frames(500, 7);
  send_and_stop(*frontend, frames);
  ASSERT_TRUE(wait_for_tx_packets(daemon, frames.size()));
  const auto reports = stop_and_report(daemon);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].totals.connections, 1u);
  EXPECT_EQ(reports[0].totals.from_guest_packets, frames.size());
  EXPECT_EQ(reports[0].totals.from_guest_bytes, total_bytes(frames));
  EXPECT_EQ(reports[0].totals.protocol_errors, 0u);
}

TEST(SocketHandoverTest, AHandedOverSocketCannotBeAClientPort) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd ours(pair[0]), theirs(pair[1]);
  PortSpec spec = client_port("c", "/tmp/unused.sock");
  spec.socket_fd = ours.get();
  Daemon daemon({spec});
  std::string error;
  EXPECT_FALSE(daemon.start(error));
  EXPECT_NE(error.find("client mode"), std::string::npos) << error;
}

// ------------------------------------------------------------------ what is refused

TEST(SocketHandoverTest, OnlyUnixStreamSocketsThatListenOrAreConnectedAreAccepted) {
  std::string error;
  UniqueFd file(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  EXPECT_FALSE(vhost_user::inspect_handed_socket(file.get(), error));
  EXPECT_NE(error.find("is not a socket"), std::string::npos) << error;

  UniqueFd udp(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  EXPECT_FALSE(vhost_user::inspect_handed_socket(udp.get(), error));
  EXPECT_NE(error.find("not a Unix socket"), std::string::npos) << error;

  UniqueFd datagram(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  EXPECT_FALSE(vhost_user::inspect_handed_socket(datagram.get(), error));
  EXPECT_NE(error.find("not a stream socket"), std::string::npos) << error;

  UniqueFd idle(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_FALSE(vhost_user::inspect_handed_socket(idle.get(), error));
  EXPECT_NE(error.find("neither listens nor is connected"), std::string::npos) << error;

  const int closed = ::dup(idle.get());
  ::close(closed);
  EXPECT_FALSE(vhost_user::inspect_handed_socket(closed, error));
  EXPECT_NE(error.find("fd " + std::to_string(closed) + " is not open"), std::string::npos) << error;
  EXPECT_FALSE(vhost_user::inspect_handed_socket(-1, error));

  // What is accepted, and what is learned about it.
  TempDir dir;
  UniqueFd listening = listening_socket(dir.file("l.sock"));
  auto handed = vhost_user::inspect_handed_socket(listening.get(), error);
  ASSERT_TRUE(handed) << error;
  EXPECT_TRUE(handed->listening);
  EXPECT_EQ(handed->bound_path, dir.file("l.sock"));
  EXPECT_TRUE(::fcntl(listening.get(), F_GETFD) & FD_CLOEXEC);

  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair), 0);
  UniqueFd a(pair[0]), b(pair[1]);
  handed = vhost_user::inspect_handed_socket(a.get(), error);
  ASSERT_TRUE(handed) << error;
  EXPECT_FALSE(handed->listening);
  EXPECT_EQ(handed->bound_path, "");
  EXPECT_TRUE(::fcntl(a.get(), F_GETFD) & FD_CLOEXEC);
  EXPECT_FALSE(::fcntl(a.get(), F_GETFL) & O_NONBLOCK) << "a connected socket is made blocking";
}

TEST(SocketHandoverTest, TheDaemonRefusesAHandedOverFdThatIsNoSocket) {
  UniqueFd file(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  PortSpec spec = port("bad", "");
  spec.socket_fd = file.get();
  Daemon daemon({spec});
  std::string error;
  EXPECT_FALSE(daemon.start(error));
  EXPECT_NE(error.find("is not a socket"), std::string::npos) << error;
  EXPECT_TRUE(fd_is_open(file.get())) << "an fd that was refused is not ours to close";
}

// ------------------------------------------------------------------ the conventions

TEST(BackendProgramTest, CapabilitiesAreTheSchemasNetType) {
  EXPECT_EQ(nlohmann::json::parse(capabilities_json()), nlohmann::json({{"type", "net"}}));
}

TEST(BackendProgramTest, SocketPathGivesOnePortWithTheOtherKeys) {
  std::string error;
  auto spec = backend_program_port("backend=loopback,queues=2", "/run/x.sock", -1, error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->socket_path, "/run/x.sock");
  EXPECT_EQ(spec->backend, BackendKind::kLoopback);
  EXPECT_EQ(spec->queue_pairs, 2u);
  EXPECT_EQ(spec->socket_fd, -1);

  spec = backend_program_port("backend=loopback", "/run/a,b.sock", -1, error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->socket_path, "/run/a,b.sock") << "a comma in --socket-path is part of the path";

  spec = backend_program_port("", "/run/x.sock", -1, error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->backend, BackendKind::kSink);

  EXPECT_FALSE(backend_program_port("sock=/a,queues=2", "/run/x.sock", -1, error));
  EXPECT_NE(error.find("without sock="), std::string::npos) << error;
  EXPECT_FALSE(backend_program_port("queues=2,path=/a", "/run/x.sock", -1, error));
  EXPECT_NE(error.find("without path="), std::string::npos) << error;
  EXPECT_FALSE(backend_program_port("queues=0", "/run/x.sock", -1, error));
  EXPECT_NE(error.find("sock=/run/x.sock,queues=0"), std::string::npos) << error;
  EXPECT_FALSE(backend_program_port("", "", -1, error));
  EXPECT_NE(error.find("exactly one"), std::string::npos) << error;
}

TEST(BackendProgramTest, FdIsCheckedAndItsPathFound) {
  TempDir dir;
  UniqueFd listening = listening_socket(dir.file("fd.sock"));
  std::string error;
  auto spec = backend_program_port("backend=sink", "", listening.get(), error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->socket_fd, listening.get());
  EXPECT_EQ(spec->socket_path, dir.file("fd.sock"));

  EXPECT_FALSE(backend_program_port("", dir.file("fd.sock"), listening.get(), error));
  EXPECT_NE(error.find("exactly one"), std::string::npos) << error;
  EXPECT_FALSE(backend_program_port("client", "", listening.get(), error));
  EXPECT_NE(error.find("client"), std::string::npos) << error;
  UniqueFd file(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  EXPECT_FALSE(backend_program_port("", "", file.get(), error));
  EXPECT_NE(error.find("is not a socket"), std::string::npos) << error;
}

// ------------------------------------------------------------------ socket activation

TEST(InheritedSocketsTest, EachSocketGoesToThePortOfItsNameElseOfItsPath) {
  std::vector<PortSpec> ports = {port("a", "/run/a.sock"), port("b", "/run/b.sock"), port("c", "/run/c.sock")};
  const std::vector<InheritedSocket> sockets = {
      {3, "c", "/elsewhere.sock", true},     // by name, whatever its path
      {4, "unknown", "/run/a.sock", true},  // by path
  };
  std::string error;
  ASSERT_TRUE(claim_inherited_sockets(ports, sockets, error)) << error;
  EXPECT_EQ(ports[0].socket_fd, 4);
  EXPECT_EQ(ports[1].socket_fd, -1) << "a port no socket matches binds its own";
  EXPECT_EQ(ports[2].socket_fd, 3);
}

TEST(InheritedSocketsTest, UnclaimedDoublyClaimedAndClientPortsAreErrors) {
  std::vector<PortSpec> ports = {port("a", "/run/a.sock"), client_port("k", "/run/k.sock")};
  std::string error;
  EXPECT_FALSE(claim_inherited_sockets(ports, {{3, "unknown", "/run/z.sock", true}}, error));
  EXPECT_NE(error.find("no port claims the inherited socket fd 3"), std::string::npos) << error;
  EXPECT_FALSE(claim_inherited_sockets(ports, {{3, "a", "", true}, {4, "x", "/run/a.sock", true}}, error));
  EXPECT_NE(error.find("claimed by two"), std::string::npos) << error;
  EXPECT_FALSE(claim_inherited_sockets(ports, {{3, "k", "", true}}, error));
  EXPECT_NE(error.find("client port"), std::string::npos) << error;
  for (const PortSpec& spec : ports) EXPECT_EQ(spec.socket_fd, -1) << "an error changes nothing";
  EXPECT_TRUE(claim_inherited_sockets(ports, {}, error));
}

// LISTEN_FDS is read from this process's environment and fds from 3 on: run it in a
// child that sets them up as systemd would. The child's exit code says what went wrong.
int run_in_child(const std::function<int()>& body) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(body());
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

void set_listen_env(int count, const char* names) {
  ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
  ::setenv("LISTEN_FDS", std::to_string(count).c_str(), 1);
  ::setenv("LISTEN_FDNAMES", names, 1);
}

TEST(InheritedSocketsTest, SocketsPassedAsSystemdDoesAreFoundWithTheirNamesAndPaths) {
  TempDir dir;
  const std::string path = dir.file("act.sock");
  const int rc = run_in_child([&] {
    UniqueFd a = listening_socket(path);
    if (::dup2(a.get(), 3) != 3) return 10;
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0 || ::dup2(pair[0], 4) != 4) return 11;
    set_listen_env(2, "p0:peer");
    std::string error;
    auto sockets = inherited_sockets(error);
    if (!sockets || sockets->size() != 2) return 12;
    const InheritedSocket& first = (*sockets)[0];
    const InheritedSocket& second = (*sockets)[1];
    if (first.fd != 3 || first.name != "p0" || first.bound_path != path || !first.listening) return 13;
    if (second.fd != 4 || second.name != "peer" || second.listening) return 14;
    if (std::getenv("LISTEN_FDS") != nullptr) return 15;  // unset: no child of ours sees them
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST(InheritedSocketsTest, NoneForAnotherProcessAndAnErrorForANonUnixSocket) {
  const int rc = run_in_child([] {
    set_listen_env(1, "x");
    ::setenv("LISTEN_PID", "1", 1);  // meant for another process
    std::string error;
    auto sockets = inherited_sockets(error);
    if (!sockets || !sockets->empty()) return 20;
    UniqueFd udp(::socket(AF_INET, SOCK_DGRAM, 0));
    if (::dup2(udp.get(), 3) != 3) return 21;
    set_listen_env(1, "udp");
    sockets = inherited_sockets(error);
    if (sockets) return 22;
    if (error.find("'udp'") == std::string::npos || error.find("not a Unix socket") == std::string::npos) return 23;
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace uvhost::serve::testing
