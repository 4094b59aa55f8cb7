// metrics_http_test.cpp - the /metrics listener over real TCP sockets: the answers to
// good, wrong and hostile requests, that no client can hold up another, and the daemon
// serving its stats there (Prometheus text with the process_* and per-queue families).
#include "uvhost/serve/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "serve_test_support.h"
#include "uvhost/serve/daemon.h"
#include "uvhost/base/unique_fd.h"

namespace uvhost::serve {
namespace {

using namespace std::chrono_literals;
using base::UniqueFd;

UniqueFd connect_to(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  return fd;
}

bool send_text(int fd, const std::string& text) {
  return ::send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

// Everything the server sends until it closes (or `limit` passes: then "TIMEOUT").
std::string read_until_closed(int fd, std::chrono::milliseconds limit = 5s) {
  std::string out;
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return out + "TIMEOUT";
    char buffer[4096];
    const ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
    if (got <= 0) return out;  // closed (EOF or reset)
    out.append(buffer, static_cast<size_t>(got));
  }
}

std::string request(uint16_t port, const std::string& text) {
  UniqueFd fd = connect_to(port);
  EXPECT_TRUE(send_text(fd.get(), text));
  return read_until_closed(fd.get());
}

std::string status_line(const std::string& response) { return response.substr(0, response.find("\r\n")); }

constexpr std::string_view kBody = "# HELP up_total x\n# TYPE up_total counter\nup_total 1\n";

std::unique_ptr<MetricsHttpServer> open_server(std::atomic<int>& renders, std::chrono::milliseconds timeout = 5s) {
  std::string error;
  auto server = MetricsHttpServer::open(
      "127.0.0.1:0",
      [&renders] {
        ++renders;
        return std::string(kBody);
      },
      error, timeout);
  EXPECT_NE(server, nullptr) << error;
  return server;
}

TEST(MetricsAddress, AcceptsNumericIpv4AndBracketedIpv6WithAPort) {
  std::string error;
  EXPECT_TRUE(parse_metrics_address("127.0.0.1:9477", error)) << error;
  EXPECT_TRUE(parse_metrics_address("0.0.0.0:0", error)) << error;
  EXPECT_TRUE(parse_metrics_address("[::1]:9477", error)) << error;
  EXPECT_TRUE(parse_metrics_address("[::]:65535", error)) << error;
  for (const char* bad : {"", "9477", ":9477", "localhost:9477", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536",
                          "127.0.0.1:-1", "127.0.0.1:94x", "::1:9477", "[::1]", "[::1:9477", "1.2.3.4.5:1"}) {
    error.clear();
    EXPECT_FALSE(parse_metrics_address(bad, error)) << bad;
    EXPECT_NE(error.find("IPV4:PORT"), std::string::npos) << bad << ": " << error;
  }
}

TEST(MetricsHttp, GetMetricsAnswersThePrometheusTextAndCloses) {
  std::atomic<int> renders{0};
  auto server = open_server(renders);
  ASSERT_NE(server, nullptr);
  ASSERT_NE(server->port(), 0);
  EXPECT_EQ(server->address(), "127.0.0.1:" + std::to_string(server->port()));
  const std::string response = request(server->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
  EXPECT_EQ(status_line(response), "HTTP/1.1 200 OK") << response;
  EXPECT_NE(response.find("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos);
  EXPECT_NE(response.find("\r\nConnection: close\r\n"), std::string::npos);
  EXPECT_NE(response.find("\r\nContent-Length: " + std::to_string(kBody.size()) + "\r\n"), std::string::npos);
  EXPECT_TRUE(response.ends_with("\r\n\r\n" + std::string(kBody))) << response;
  EXPECT_EQ(renders.load(), 1);

  // A query string is ignored; HEAD has the headers only; bare LF line ends do.
  EXPECT_EQ(status_line(request(server->port(), "GET /metrics?name[]=x HTTP/1.0\r\n\r\n")), "HTTP/1.1 200 OK");
  const std::string head = request(server->port(), "HEAD /metrics HTTP/1.1\n\n");
  EXPECT_EQ(status_line(head), "HTTP/1.1 200 OK");
  EXPECT_TRUE(head.ends_with("\r\n\r\n")) << head;
}

TEST(MetricsHttp, OtherPathsAre404OtherMethods405) {
  std::atomic<int> renders{0};
  auto server = open_server(renders);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(status_line(request(server->port(), "GET / HTTP/1.1\r\n\r\n")), "HTTP/1.1 404 Not Found");
  EXPECT_EQ(status_line(request(server->port(), "GET /metrics/x HTTP/1.1\r\n\r\n")), "HTTP/1.1 404 Not Found");
  const std::string post = request(server->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_EQ(status_line(post), "HTTP/1.1 405 Method Not Allowed");
  EXPECT_NE(post.find("\r\nAllow: GET, HEAD\r\n"), std::string::npos) << post;
  EXPECT_EQ(status_line(request(server->port(), "DELETE /metrics HTTP/1.1\r\n\r\n")),
            "HTTP/1.1 405 Method Not Allowed");
  EXPECT_EQ(renders.load(), 0);
}

TEST(MetricsHttp, GarbageAndOversizedRequestsAreClosedAndTheServerGoesOn) {
  std::atomic<int> renders{0};
  auto server = open_server(renders);
  ASSERT_NE(server, nullptr);
  for (const std::string& garbage :
       {std::string("\x01\x02\xff hello\r\n\r\n"), std::string("GET\r\n\r\n"), std::string("GET /metrics\r\n\r\n"),
        std::string("GET /metrics HTTP/2.0\r\n\r\n"), std::string("GET  /metrics HTTP/1.1\r\n\r\n"),
        std::string("get /metrics HTTP/1.1\r\n\r\n"), std::string("GET metrics HTTP/1.1\r\n\r\n"),
        std::string("GET /metrics HTTP/1.1 x\r\n\r\n"), std::string("\r\n\r\n")}) {
    EXPECT_EQ(status_line(request(server->port(), garbage)), "HTTP/1.1 400 Bad Request") << garbage;
  }
  // A head that never ends: closed once it passes the limit (431 if the client reads it
  // before the close resets the connection).
  UniqueFd big = connect_to(server->port());
  const std::string chunk = "X-Filler: " + std::string(1000, 'a') + "\r\n";
  ASSERT_TRUE(send_text(big.get(), "GET /metrics HTTP/1.1\r\n"));
  for (int i = 0; i < 9; ++i) send_text(big.get(), chunk);
  const std::string refused = read_until_closed(big.get());
  EXPECT_EQ(refused.find("TIMEOUT"), std::string::npos);
  EXPECT_TRUE(refused.empty() || status_line(refused) == "HTTP/1.1 431 Request Header Fields Too Large") << refused;
  EXPECT_EQ(renders.load(), 0);
  EXPECT_EQ(status_line(request(server->port(), "GET /metrics HTTP/1.1\r\n\r\n")), "HTTP/1.1 200 OK");
}

TEST(MetricsHttp, ASlowClientBlocksNobodyAndIsClosedAtItsTimeout) {
  std::atomic<int> renders{0};
  auto server = open_server(renders, 500ms);
  ASSERT_NE(server, nullptr);
  UniqueFd slow = connect_to(server->port());
  ASSERT_TRUE(send_text(slow.get(), "GET /metr"));  // and nothing more
  UniqueFd silent = connect_to(server->port());    // nothing at all
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(status_line(request(server->port(), "GET /metrics HTTP/1.1\r\n\r\n")), "HTTP/1.1 200 OK");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 400ms);  // not after the slow ones' timeout
  // Both are closed by the server at their timeout, without a response.
  EXPECT_EQ(read_until_closed(slow.get(), 3s), "");
  EXPECT_EQ(read_until_closed(silent.get(), 3s), "");
  EXPECT_GE(std::chrono::steady_clock::now() - start, 450ms);
  EXPECT_EQ(status_line(request(server->port(), "GET /metrics HTTP/1.1\r\n\r\n")), "HTTP/1.1 200 OK");
}

TEST(MetricsHttp, ClientsBeyondTheLimitAreClosedAndOthersServedAfterwards) {
  std::atomic<int> renders{0};
  auto server = open_server(renders, 500ms);
  ASSERT_NE(server, nullptr);
  std::vector<UniqueFd> idle;
  for (size_t i = 0; i < MetricsHttpServer::kMaxClients; ++i) idle.push_back(connect_to(server->port()));
  std::this_thread::sleep_for(100ms);  // all accepted
  UniqueFd extra = connect_to(server->port());
  EXPECT_EQ(read_until_closed(extra.get(), 2s), "");
  idle.clear();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(status_line(request(server->port(), "GET /metrics HTTP/1.1\r\n\r\n")), "HTTP/1.1 200 OK");
}

TEST(MetricsHttp, RenderThrowingIs500) {
  std::string error;
  auto server = MetricsHttpServer::open(
      "127.0.0.1:0", []() -> std::string { throw std::runtime_error("no stats"); }, error);
  ASSERT_NE(server, nullptr) << error;
  EXPECT_EQ(status_line(request(server->port(), "GET /metrics HTTP/1.1\r\n\r\n")),
            "HTTP/1.1 500 Internal Server Error");
}

TEST(MetricsHttp, AnAddressInUseOrBadIsAnError) {
  std::atomic<int> renders{0};
  auto first = open_server(renders);
  ASSERT_NE(first, nullptr);
  std::string error;
  EXPECT_EQ(MetricsHttpServer::open(first->address(), [] { return std::string(); }, error), nullptr);
  EXPECT_NE(error.find("Address already in use"), std::string::npos) << error;
  EXPECT_EQ(MetricsHttpServer::open("nowhere:1", [] { return std::string(); }, error), nullptr);
  EXPECT_NE(error.find("IPV4:PORT"), std::string::npos) << error;
}

TEST(MetricsHttp, TheDaemonServesItsStatsWithProcessAndQueueFamilies) {
  testing::TempDir dir;
  DaemonOptions options;
  options.metrics_address = "127.0.0.1:0";
  Daemon daemon({testing::port("p0", dir.file("p0.sock"))}, options);
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  ASSERT_NE(daemon.metrics_port(), 0);
  auto frontend = testing::connect(dir.file("p0.sock"), error);
  ASSERT_NE(frontend, nullptr) << error;
  const auto frames = testing::make_frames(10, 1);
  ASSERT_TRUE(testing::send_all(*frontend, frames) && testing::wait_tx_done(*frontend));
  const std::string response = request(daemon.metrics_port(), "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(status_line(response), "HTTP/1.1 200 OK");
  for (const char* wanted :
       {"\n# TYPE process_cpu_seconds_total counter\n", "\nprocess_open_fds ", "\nprocess_start_time_seconds ",
        "\nprocess_resident_memory_bytes ", "\nuvhost_port_connected{port=\"p0\"} 1\n",
        "\nuvhost_queue_packets_total{port=\"p0\",pair=\"0\",queue=\"1\",direction=\"rx\"} 10\n",
        "\nuvhost_queue_packets_total{port=\"p0\",pair=\"0\",queue=\"0\",direction=\"tx\"} 0\n",
        "\nuvhost_port_negotiated_feature_info{port=\"p0\",feature=\"VERSION_1\"} 1\n"}) {
    EXPECT_NE(response.find(wanted), std::string::npos) << wanted << "\n" << response;
  }
  frontend.reset();
  daemon.request_stop();
  daemon.wait();
}

}  // namespace
}  // namespace uvhost::serve
