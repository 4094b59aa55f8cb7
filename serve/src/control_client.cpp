// control_client.cpp - one request/reply over a control socket (see control_client.h).
#include "uvhost/serve/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "uvhost/base/unique_fd.h"

namespace uvhost::serve {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<decltype(left)>(left, 0, 60'000));
}

// Waits for `events` on fd until the deadline. false on timeout (errno = ETIMEDOUT) or error.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd entry{fd, events, 0};
    const int rc = ::poll(&entry, 1, remaining_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) {
      if (Clock::now() < deadline) continue;  // woke a rounding error early
      errno = ETIMEDOUT;
      return false;
    }
    if (errno != EINTR) return false;
  }
}

bool connect_until(int fd, const std::string& path, Clock::time_point deadline, std::string& error) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    error = fmt::format("control socket path '{}' is empty or longer than {} bytes", path, sizeof(address.sun_path) - 1);
    return false;
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  for (;;) {
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) return true;
    // EAGAIN: the server's backlog is full (it is alive, just busy): try again shortly.
    if (errno == EINTR || (errno == EAGAIN && Clock::now() < deadline)) {
      if (errno == EAGAIN) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    error = fmt::format("cannot connect to {}: {}", path, std::strerror(errno));
    return false;
  }
}

}  // namespace

std::optional<json> control_request(const std::string& path, const json& request, std::string& error,
                                    std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  base::UniqueFd socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!socket) {
    error = fmt::format("socket: {}", std::strerror(errno));
    return std::nullopt;
  }
  if (!connect_until(socket.get(), path, deadline, error)) return std::nullopt;

  const std::string line = request.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  for (size_t sent = 0; sent < line.size();) {
    const ssize_t n = ::send(socket.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN && wait_for(socket.get(), POLLOUT, deadline)) {
      continue;
    } else {
      error = fmt::format("{}: sending the request: {}", path, std::strerror(errno));
      return std::nullopt;
    }
  }

  std::string reply;
  size_t scanned = 0;
  for (;;) {
    const size_t end = reply.find('\n', scanned);
    if (end != std::string::npos) {
      reply.resize(end);
      break;
    }
    scanned = reply.size();
    if (reply.size() > kMaxControlReplyBytes) {
      error = fmt::format("{}: reply longer than {} bytes", path, kMaxControlReplyBytes);
      return std::nullopt;
    }
    char buffer[16 * 1024];
    const ssize_t n = ::recv(socket.get(), buffer, sizeof(buffer), 0);
    if (n > 0) {
      reply.append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      error = reply.empty() ? fmt::format("{}: the server closed the connection without a reply", path)
                            : fmt::format("{}: the server closed the connection in the middle of a reply", path);
      return std::nullopt;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN && wait_for(socket.get(), POLLIN, deadline)) {
      continue;
    } else {
      error = errno == ETIMEDOUT
                  ? fmt::format("{}: no reply within {} ms", path, timeout.count())
                  : fmt::format("{}: reading the reply: {}", path, std::strerror(errno));
      return std::nullopt;
    }
  }
  try {
    return json::parse(reply);
  } catch (const json::exception& e) {
    error = fmt::format("{}: the reply is not JSON: {}", path, e.what());
    return std::nullopt;
  }
}

}  // namespace uvhost::serve
