// metrics_http.cpp - the /metrics HTTP listener (see metrics_http.h): one thread, one
// poll() over the listener, a stop eventfd and the clients; every socket non-blocking.
#include "uvhost/serve/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "uvhost/base/errno_text.h"

namespace uvhost::serve {

namespace {

using Clock = std::chrono::steady_clock;
using base::UniqueFd;

constexpr size_t kReadChunk = 4096;
// After accept() fails for lack of fds, leave the listener alone this long (it stays
// readable, so polling it would spin).
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

std::string response(std::string_view status, std::string_view extra_headers, std::string_view content_type,
                     const std::string& body, bool head_only) {
  std::string out = fmt::format("HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
                                status, content_type, body.size(), extra_headers);
  if (!head_only) out += body;
  return out;
}

std::string plain(std::string_view status, std::string_view extra_headers = {}, bool head_only = false) {
  return response(status, extra_headers, "text/plain; charset=utf-8", std::string(status) + "\n", head_only);
}

bool is_token(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

// Where the request head ends (just past its blank line), or npos while incomplete.
size_t head_end(const std::string& in) {
  const size_t crlf = in.find("\r\n\r\n");
  const size_t lf = in.find("\n\n");
  if (crlf == std::string::npos && lf == std::string::npos) return std::string::npos;
  if (lf == std::string::npos || (crlf != std::string::npos && crlf < lf)) return crlf + 4;
  return lf + 2;
}

struct Client {
  explicit Client(UniqueFd socket, Clock::time_point until) : fd(std::move(socket)), deadline(until) {}
  UniqueFd fd;
  Clock::time_point deadline;
  std::string in;
  std::string out;  // the response, once the request is complete
  size_t written = 0;
  bool responding = false;
  bool draining = false;  // response sent and our side shut: discarding input until EOF
  bool dead = false;
};

class Loop {
 public:
  Loop(int listen_fd, int stop_fd, const MetricsHttpServer::Render& render, std::chrono::milliseconds timeout)
      : listen_fd_(listen_fd), stop_fd_(stop_fd), render_(render), timeout_(timeout) {}

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      const auto now = Clock::now();
      const bool listening = now >= accept_paused_until_;
      fds.clear();
      fds.push_back({stop_fd_, POLLIN, 0});
      fds.push_back({listening ? listen_fd_ : -1, POLLIN, 0});
      auto wake = listening ? Clock::time_point::max() : accept_paused_until_;
      for (const Client& client : clients_) {
        const bool writing = client.responding && !client.draining;
        fds.push_back({client.fd.get(), static_cast<short>(writing ? POLLOUT : POLLIN), 0});
        wake = std::min(wake, client.deadline);
      }
      int timeout_ms = -1;
      if (wake != Clock::time_point::max()) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
        timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 60'000));
      }
      if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
        if (errno == EINTR) continue;
        spdlog::error("metrics: {}", base::errno_text("poll"));
        return;
      }
      if (fds[0].revents != 0) return;  // stop
      if (fds[1].revents != 0) accept_all();
      for (size_t i = 0; i + 2 < fds.size() && i < clients_.size(); ++i) {
        Client& client = clients_[i];
        if (fds[i + 2].revents == 0) continue;
        if (client.draining) {
          drain(client);
        } else if (client.responding) {
          send_some(client);
        } else {
          receive(client);
        }
      }
      const auto after = Clock::now();
      for (Client& client : clients_)
        if (after >= client.deadline) client.dead = true;  // slow or silent: closed
      std::erase_if(clients_, [](const Client& client) { return client.dead; });
    }
  }

 private:
  void accept_all() {
    for (;;) {
      UniqueFd fd(::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          spdlog::warn("metrics: {}", base::errno_text("accept"));
          accept_paused_until_ = Clock::now() + kAcceptPause;
        }
        return;  // EAGAIN, or a connection that went away before we took it
      }
      if (clients_.size() >= MetricsHttpServer::kMaxClients) continue;  // closed at once
      clients_.emplace_back(std::move(fd), Clock::now() + timeout_);
    }
  }

  void receive(Client& client) {
    char buffer[kReadChunk];
    const ssize_t got = ::recv(client.fd.get(), buffer, sizeof buffer, 0);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
      client.dead = true;  // gone before asking anything whole
      return;
    }
    if (got < 0) return;
    client.in.append(buffer, static_cast<size_t>(got));
    const size_t end = head_end(client.in);
    if (end == std::string::npos && client.in.size() <= MetricsHttpServer::kMaxRequestBytes) return;
    if (end == std::string::npos || end > MetricsHttpServer::kMaxRequestBytes + 4) {
      client.out = plain("431 Request Header Fields Too Large");
    } else {
      client.out = metrics_http_response(std::string_view(client.in).substr(0, end), render_);
    }
    client.in.clear();
    client.responding = true;
    send_some(client);
  }

  void send_some(Client& client) {
    while (client.written < client.out.size()) {
      const ssize_t sent =
          ::send(client.fd.get(), client.out.data() + client.written, client.out.size() - client.written, MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EAGAIN || errno == EINTR) return;  // poll() says when to go on
        client.dead = true;
        return;
      }
      client.written += static_cast<size_t>(sent);
    }
    // All sent (Connection: close). Closing now, with bytes of the client's still unread
    // (a body, a pipelined request), would reset the connection and could destroy the
    // response before the client reads it: shut our side and discard its input until it
    // closes too (or its deadline passes).
    ::shutdown(client.fd.get(), SHUT_WR);
    client.draining = true;
    drain(client);
  }

  void drain(Client& client) {
    char buffer[kReadChunk];
    for (int i = 0; i < 16; ++i) {  // bounded: a client streaming input yields to the others
      const ssize_t got = ::recv(client.fd.get(), buffer, sizeof buffer, 0);
      if (got > 0) continue;
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
      client.dead = true;  // EOF or an error: done
      return;
    }
  }

  int listen_fd_;
  int stop_fd_;
  const MetricsHttpServer::Render& render_;
  std::chrono::milliseconds timeout_;
  std::vector<Client> clients_;
  Clock::time_point accept_paused_until_{};
};

std::string format_bound(const sockaddr_storage& address, uint16_t& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
    port = ntohs(in6.sin6_port);
    return fmt::format("[{}]:{}", text, port);
  }
  const auto& in4 = reinterpret_cast<const sockaddr_in&>(address);
  ::inet_ntop(AF_INET, &in4.sin_addr, text, sizeof text);
  port = ntohs(in4.sin_port);
  return fmt::format("{}:{}", text, port);
}

}  // namespace

std::optional<MetricsAddress> parse_metrics_address(std::string_view text, std::string& error) {
  const auto bad = [&](std::string_view why) {
    error = fmt::format("metrics address '{}': {} (want IPV4:PORT or [IPV6]:PORT, e.g. 127.0.0.1:9477)", text, why);
    return std::nullopt;
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("no :PORT");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535)
    return bad("the port must be a number in 0..65535");
  MetricsAddress address;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    const std::string literal(host.substr(1, host.size() - 2));
    auto& in6 = reinterpret_cast<sockaddr_in6&>(address.storage);
    if (::inet_pton(AF_INET6, literal.c_str(), &in6.sin6_addr) != 1) return bad("not an IPv6 address in [ ]");
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(static_cast<uint16_t>(port));
    address.length = sizeof in6;
    return address;
  }
  const std::string literal(host);
  auto& in4 = reinterpret_cast<sockaddr_in&>(address.storage);
  if (::inet_pton(AF_INET, literal.c_str(), &in4.sin_addr) != 1) return bad("not an IPv4 address");
  in4.sin_family = AF_INET;
  in4.sin_port = htons(static_cast<uint16_t>(port));
  address.length = sizeof in4;
  return address;
}

std::string metrics_http_response(std::string_view head, const MetricsHttpServer::Render& render) {
  const size_t line_end = head.find('\n');
  std::string_view line = head.substr(0, line_end);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const size_t first = line.find(' ');
  const size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
  if (second == std::string_view::npos || line.find(' ', second + 1) != std::string_view::npos)
    return plain("400 Bad Request");
  const std::string_view method = line.substr(0, first);
  const std::string_view target = line.substr(first + 1, second - first - 1);
  const std::string_view version = line.substr(second + 1);
  if (!is_token(method) || target.empty() || target.front() != '/' || !version.starts_with("HTTP/1.") ||
      version.size() != 8 || version[7] < '0' || version[7] > '9')
    return plain("400 Bad Request");
  const bool head_only = method == "HEAD";
  if (method != "GET" && !head_only) return plain("405 Method Not Allowed", "Allow: GET, HEAD\r\n");
  if (target.substr(0, target.find('?')) != "/metrics") return plain("404 Not Found", {}, head_only);
  try {
    return response("200 OK", {}, MetricsHttpServer::kContentType, render(), head_only);
  } catch (const std::exception& e) {
    spdlog::warn("metrics: rendering failed: {}", e.what());
    return plain("500 Internal Server Error", {}, head_only);
  }
}

std::unique_ptr<MetricsHttpServer> MetricsHttpServer::open(const std::string& address, Render render,
                                                           std::string& error,
                                                           std::chrono::milliseconds client_timeout) {
  const auto parsed = parse_metrics_address(address, error);
  if (!parsed) return nullptr;
  UniqueFd listener(::socket(parsed->storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener.valid()) {
    error = base::errno_text("socket");
    return nullptr;
  }
  const int one = 1;
  (void)::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // restart while in TIME_WAIT
  if (parsed->storage.ss_family == AF_INET6)
    (void)::setsockopt(listener.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);  // [::] means IPv6 only
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&parsed->storage), parsed->length) != 0) {
    const int error_number = errno;  // before formatting, which may change it
    error = base::errno_text(fmt::format("bind {}", address), error_number);
    return nullptr;
  }
  if (::listen(listener.get(), 64) != 0) {
    error = base::errno_text("listen");
    return nullptr;
  }
  UniqueFd stop_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd.valid()) {
    error = base::errno_text("eventfd");
    return nullptr;
  }
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(std::move(listener), std::move(stop_fd), std::move(render), client_timeout));
}

MetricsHttpServer::MetricsHttpServer(UniqueFd listener, UniqueFd stop_fd, Render render,
                                     std::chrono::milliseconds client_timeout)
    : listener_(std::move(listener)),
      stop_fd_(std::move(stop_fd)),
      render_(std::move(render)),
      client_timeout_(client_timeout) {
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  if (::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&bound), &length) == 0) bound_ = format_bound(bound, port_);
  thread_ = std::thread([this] { Loop(listener_.get(), stop_fd_.get(), render_, client_timeout_).run(); });
}

MetricsHttpServer::~MetricsHttpServer() { stop(); }

void MetricsHttpServer::stop() noexcept {
  (void)::eventfd_write(stop_fd_.get(), 1);  // stays readable: the loop sees it whenever it looks
  if (thread_.joinable()) thread_.join();
}

}  // namespace uvhost::serve
