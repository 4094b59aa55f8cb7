// metrics_http.h - the HTTP endpoint of `uvhost serve --metrics ADDR:PORT`: GET
// /metrics answers with the Prometheus text a render function gives. A small, strict
// HTTP/1.1 server with one thread, made to be scraped, not to serve the web.
//
// Contract
// --------
//  Address
//  - parse_metrics_address(): "IPV4:PORT" or "[IPV6]:PORT", numeric only (no names, so
//    nothing depends on the resolver), PORT 0..65535; 0 asks the kernel for a free port
//    (port() then tells which).
//
//  What it answers
//  - One request per connection, then the connection is closed ("Connection: close":
//    our side is shut after the response, and what the client still sends is read and
//    discarded until it closes or its timeout passes, so no reset destroys the response):
//     - GET or HEAD /metrics (a query string is ignored): 200, Content-Type
//       kContentType, the body render() returned (none for HEAD);
//     - GET or HEAD of another path: 404;
//     - another method: 405 with "Allow: GET, HEAD";
//     - a request line that is not METHOD SP /TARGET SP HTTP/1.x: 400;
//     - a request head (up to the blank line) longer than kMaxRequestBytes: 431;
//     - render() throwing: 500.
//    A request body is never read.
//  - Hostile or slow clients cannot block the daemon or each other: every socket is
//    non-blocking, one poll() serves them all, and a client that has not sent its
//    request and taken the whole response within `client_timeout` of connecting is
//    closed. At most kMaxClients at once; a further one is closed on accept.
//
//  Threads
//  - open() binds, listens and starts the server's thread. render() is called on that
//    thread only, one request at a time: it must be safe against the rest of the process
//    (the daemon's stats are) and quick (no other client is served meanwhile).
//  - stop(): from the owner's thread (not from render()); idempotent; the thread exits
//    and every socket is closed. The destructor stops.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "uvhost/base/unique_fd.h"

namespace uvhost::serve {

struct MetricsAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// nullopt (error filled in) unless `text` is IPV4:PORT or [IPV6]:PORT.
std::optional<MetricsAddress> parse_metrics_address(std::string_view text, std::string& error);

class MetricsHttpServer {
 public:
  using Render = std::function<std::string()>;

  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";
  static constexpr size_t kMaxClients = 16;
  static constexpr size_t kMaxRequestBytes = 8 * 1024;
  static constexpr std::chrono::milliseconds kClientTimeout{5000};

  // nullptr (error filled in) for a bad address or a failed bind/listen.
  static std::unique_ptr<MetricsHttpServer> open(const std::string& address, Render render, std::string& error,
                                                 std::chrono::milliseconds client_timeout = kClientTimeout);

  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  void stop() noexcept;

  // The bound address and port ("127.0.0.1:9477", "[::1]:9477"), the port as bound.
  const std::string& address() const noexcept { return bound_; }
  uint16_t port() const noexcept { return port_; }

 private:
  MetricsHttpServer(base::UniqueFd listener, base::UniqueFd stop_fd, Render render,
                    std::chrono::milliseconds client_timeout);

  base::UniqueFd listener_;
  base::UniqueFd stop_fd_;
  Render render_;
  std::chrono::milliseconds client_timeout_;
  std::string bound_;
  uint16_t port_ = 0;
  std::thread thread_;
};

// The whole response to one request head (request line and headers, without the blank
// line), as described above; exposed for tests.
std::string metrics_http_response(std::string_view head, const MetricsHttpServer::Render& render);

}  // namespace uvhost::serve
