// control_server.cpp - the control socket's thread: accept, frame lines, call the
// handler, write replies without ever blocking on one client (see control_server.h).
#include "uvhost/serve/control_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "uvhost/base/errno_text.h"
#include "uvhost/sync/misuse.h"

namespace uvhost::serve {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using base::UniqueFd;

constexpr size_t kReadChunk = 16 * 1024;
// Requests served per client per poll round: one client pipelining many requests must
// not keep the others waiting.
constexpr int kLinesPerRound = 16;
// After accept() fails for lack of fds, leave the listener alone this long (it stays
// readable, so polling it would spin).
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

std::string reply_line(const json& reply) {
  // replace: a handler's string that is not UTF-8 must not cost the client its reply.
  return reply.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

json error_reply(const std::string& message) { return json{{"ok", false}, {"error", message}}; }

// 0 when something accepts connections at `path`, else the errno of connect(). The
// probe is non-blocking: a live server whose backlog is full answers EAGAIN (live),
// it must not hang open().
struct Client {
  explicit Client(UniqueFd socket) : fd(std::move(socket)) {}

  UniqueFd fd;
  std::string in;         // received bytes; in[consumed, ...) not yet served
  size_t consumed = 0;
  std::string out;        // the pending reply; out[written, ...) not yet sent
  size_t written = 0;
  Clock::time_point write_deadline{};  // while a reply is pending: drop after this
  bool eof = false;                    // the client shut down its sending side
  bool close_after_flush = false;      // an unrecoverable request: close once replied
  bool dead = false;

  bool reply_pending() const { return written < out.size(); }
  bool line_ready() const { return in.find('\n', consumed) != std::string::npos; }
  // Whether serve_lines() has something to do without waiting for the socket.
  bool runnable() const { return !dead && !reply_pending() && !close_after_flush && line_ready(); }
  bool wants_input() const { return !dead && !eof && !close_after_flush && !reply_pending() && !line_ready(); }
};

// Everything the server's thread owns: the loop of ControlServer::run().
class Loop {
 public:
  Loop(int listen_fd, int stop_fd, const ControlServer::Handler& handler)
      : listen_fd_(listen_fd), stop_fd_(stop_fd), handler_(handler) {}

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      const auto now = Clock::now();
      const bool accepting = now >= accept_paused_until_;
      fds.clear();
      fds.push_back({stop_fd_, POLLIN, 0});
      fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});  // a negative fd is skipped
      for (const auto& client : clients_) {
        short events = 0;
        if (client.reply_pending()) events = POLLOUT;
        if (client.wants_input()) events = POLLIN;
        fds.push_back({client.fd.get(), events, 0});
      }
      const int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms(now, accepting));
      if (rc < 0) {
        if (errno == EINTR) continue;
        spdlog::error("control socket: {}; no longer serving", base::errno_text("poll"));
        return;
      }
      if (fds[0].revents != 0) return;  // stop(): clients_ are closed as the Loop dies

      for (size_t i = 0; i < clients_.size(); ++i) handle_events(clients_[i], fds[i + 2].revents);
      for (auto& client : clients_) serve_lines(client);
      drop_stalled_writers(Clock::now());
      std::erase_if(clients_, [](const Client& client) { return client.dead; });
      if (fds[1].revents != 0) accept_clients();
    }
  }

 private:
  int poll_timeout_ms(Clock::time_point now, bool accepting) const {
    auto wake = Clock::time_point::max();
    if (!accepting) wake = accept_paused_until_;
    for (const auto& client : clients_) {
      if (client.runnable()) return 0;
      if (client.reply_pending()) wake = std::min(wake, client.write_deadline);
    }
    if (wake == Clock::time_point::max()) return -1;
    if (wake <= now) return 0;
    // Rounded up: waking a little early would only go round the loop for nothing.
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    return static_cast<int>(std::min<decltype(ms)>(ms, 60'000));
  }

  void handle_events(Client& client, short revents) {
    if (revents == 0) return;
    if (client.reply_pending()) {
      flush(client);  // POLLOUT, or POLLERR/POLLHUP: send() tells which
    } else if (client.wants_input()) {
      read_some(client);  // POLLIN or POLLHUP: recv() returns the data or EOF
    } else if ((revents & (POLLERR | POLLNVAL)) != 0) {
      client.dead = true;
    }
  }

  void read_some(Client& client) {
    char buffer[kReadChunk];
    ssize_t n;
    do {
      n = ::recv(client.fd.get(), buffer, sizeof(buffer), MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) client.dead = true;
      return;
    }
    if (n == 0) {
      // Requests already complete are still answered (`echo req | nc -U` works); a
      // partial last line is dropped with the client.
      client.eof = true;
      if (!client.line_ready()) client.dead = true;
      return;
    }
    client.in.append(buffer, static_cast<size_t>(n));
    if (!client.line_ready() && client.in.size() - client.consumed > ControlServer::kMaxLineBytes) reject_long_line(client);
  }

  void reject_long_line(Client& client) {
    queue_reply(client, error_reply(fmt::format("request line longer than {} bytes", ControlServer::kMaxLineBytes)));
    client.in.clear();
    client.consumed = 0;
    client.close_after_flush = true;
    flush(client);
  }

  void serve_lines(Client& client) {
    for (int served = 0; served < kLinesPerRound && client.runnable(); ++served) {
      const size_t end = client.in.find('\n', client.consumed);
      const size_t length = end - client.consumed;
      if (length > ControlServer::kMaxLineBytes) {
        reject_long_line(client);
        return;
      }
      std::string_view line(client.in.data() + client.consumed, length);
      client.consumed = end + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank: no request
      queue_reply(client, respond(line));
      flush(client);
    }
    // Compact what was served, so the buffer holds at most one unfinished line.
    client.in.erase(0, client.consumed);
    client.consumed = 0;
    if (client.eof && !client.reply_pending() && !client.line_ready()) client.dead = true;
  }

  json respond(std::string_view line) {
    json request;
    try {
      request = json::parse(line);
    } catch (const json::exception& e) {
      return error_reply(fmt::format("invalid JSON: {}", e.what()));
    }
    if (!request.is_object()) return error_reply(fmt::format("a request is a JSON object, not {}", request.type_name()));
    try {
      return handler_(request);
    } catch (const std::exception& e) {
      return error_reply(e.what());
    } catch (...) {
      return error_reply("the request failed (unknown exception)");
    }
  }

  static void queue_reply(Client& client, const json& reply) {
    client.out = reply_line(reply);
    client.written = 0;
    client.write_deadline = Clock::now() + ControlServer::kWriteTimeout;
  }

  // Writes as much of the pending reply as the socket takes; never blocks.
  static void flush(Client& client) {
    bool progress = false;
    while (client.reply_pending()) {
      const ssize_t n = ::send(client.fd.get(), client.out.data() + client.written, client.out.size() - client.written,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        client.written += static_cast<size_t>(n);
        progress = true;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        // The timeout is for a client that stopped reading, not for a long reply.
        if (progress) client.write_deadline = Clock::now() + ControlServer::kWriteTimeout;
        return;
      } else {
        client.dead = true;  // EPIPE, ECONNRESET: gone
        return;
      }
    }
    client.out.clear();
    client.written = 0;
    if (client.close_after_flush) client.dead = true;
  }

  void drop_stalled_writers(Clock::time_point now) {
    for (auto& client : clients_) {
      if (!client.dead && client.reply_pending() && now >= client.write_deadline) {
        spdlog::warn("control socket: dropping a client that has not read its reply for {} ms",
                     ControlServer::kWriteTimeout.count());
        client.dead = true;
      }
    }
  }

  void accept_clients() {
    // Bounded: a flood of connects must not starve the clients already here.
    for (int attempt = 0; attempt < 64; ++attempt) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        spdlog::warn("control socket: {}", base::errno_text("accept"));
        accept_paused_until_ = Clock::now() + kAcceptPause;
        return;
      }
      UniqueFd socket(fd);
      if (clients_.size() >= ControlServer::kMaxClients) {
        // A fresh socket's buffer is empty: this one line goes out whole or not at all.
        static const std::string refusal = reply_line(error_reply("too many control clients"));
        (void)::send(socket.get(), refusal.data(), refusal.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        spdlog::warn("control socket: refused a client ({} already connected)", ControlServer::kMaxClients);
        continue;
      }
      clients_.emplace_back(std::move(socket));
    }
  }

  const int listen_fd_;
  const int stop_fd_;
  const ControlServer::Handler& handler_;
  std::vector<Client> clients_;
  Clock::time_point accept_paused_until_{};
};

}  // namespace

std::unique_ptr<ControlServer> ControlServer::open(const std::string& path, Handler handler, std::string& error) {
  vhost_user::Listener::Options options;
  options.mode = 0600;
  options.backlog = static_cast<int>(kMaxClients);  // a burst of `uvhost ctl` runs waits in the queue
  struct stat info {};
  if (::lstat(path.c_str(), &info) == 0) {
    // Only a socket nobody accepts on is ours to replace; anything else stays.
    if (!S_ISSOCK(info.st_mode)) {
      error = fmt::format("control socket {}: the path exists and is not a socket", path);
      return nullptr;
    }
    const int probe = vhost_user::probe_unix_socket(path);
    if (probe != ECONNREFUSED) {
      error = probe == 0 || probe == EAGAIN
                  ? fmt::format("control socket {}: in use by a running process", path)
                  : fmt::format("control socket {}: cannot tell whether it is in use: {}", path, std::strerror(probe));
      return nullptr;
    }
    spdlog::warn("control socket {}: replacing a stale socket", path);
    options.replace_stale = true;
  }
  auto listener = vhost_user::Listener::bind(path, options, error);
  if (!listener) {
    error = fmt::format("control socket {}: {}", path, error);
    return nullptr;
  }
  // accept() after poll() must not block should the client have gone in between.
  const int flags = ::fcntl(listener->fd(), F_GETFL);
  if (flags < 0 || ::fcntl(listener->fd(), F_SETFL, flags | O_NONBLOCK) != 0) {
    error = fmt::format("control socket {}: {}", path, base::errno_text("fcntl"));
    return nullptr;
  }
  UniqueFd stop_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd) {
    error = fmt::format("control socket {}: {}", path, base::errno_text("eventfd"));
    return nullptr;
  }
  std::unique_ptr<ControlServer> server(new ControlServer(std::move(*listener), std::move(stop_fd), std::move(handler)));
  // Started only now: the thread sees every member constructed (std::thread's start
  // synchronizes-with the new thread).
  {
    sync::MutexLock lock(server->stop_mutex_);
    server->thread_ = std::thread([raw = server.get()] { raw->run(); });
  }
  return server;
}

ControlServer::ControlServer(vhost_user::Listener listener, UniqueFd stop_fd, Handler handler)
    : listener_(std::move(listener)), stop_fd_(std::move(stop_fd)), handler_(std::move(handler)) {}

ControlServer::~ControlServer() { stop(); }  // then listener_ unlinks the path

void ControlServer::stop() noexcept {
  sync::MutexLock lock(stop_mutex_);
  if (!thread_.joinable()) return;
  UVHOST_MISUSE_CHECK(thread_.get_id() != std::this_thread::get_id(),
                      "ControlServer::stop() called from its own thread (the handler)");
  (void)::eventfd_write(stop_fd_.get(), 1);
  thread_.join();
}

void ControlServer::run() {
  Loop loop(listener_.fd(), stop_fd_.get(), handler_);
  loop.run();
}

}  // namespace uvhost::serve
