// socket_inspection.cpp - checks a handed-over socket (see socket_inspection.h).
#include "uvhost/vhost_user/socket_inspection.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

namespace uvhost::vhost_user {

namespace {

bool int_option(int fd, int option, int& value) {
  socklen_t length = sizeof(value);
  return ::getsockopt(fd, SOL_SOCKET, option, &value, &length) == 0;
}

// The socket's filesystem address, or "" (none, or abstract).
std::string bound_path_of(int fd) {
  sockaddr_un address{};
  socklen_t length = sizeof(address);
  // getsockname() may report less than sizeof(address) and need not NUL-terminate.
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return {};
  const size_t header = offsetof(sockaddr_un, sun_path);
  if (length <= header || address.sun_path[0] == '\0') return {};
  const size_t max = std::min<size_t>(length - header, sizeof(address.sun_path));
  return std::string(address.sun_path, strnlen(address.sun_path, max));
}

}  // namespace

std::optional<HandedSocket> inspect_handed_socket(int fd, std::string& error) {
  struct stat info {};
  if (fd < 0 || ::fstat(fd, &info) != 0) {
    error = fmt::format("fd {} is not open", fd);
    return std::nullopt;
  }
  if (!S_ISSOCK(info.st_mode)) {
    error = fmt::format("fd {} is not a socket", fd);
    return std::nullopt;
  }
  int domain = -1;
  int type = -1;
  if (!int_option(fd, SO_DOMAIN, domain) || domain != AF_UNIX) {
    error = fmt::format("fd {} is not a Unix socket (address family {})", fd, domain);
    return std::nullopt;
  }
  if (!int_option(fd, SO_TYPE, type) || type != SOCK_STREAM) {
    error = fmt::format("fd {} is not a stream socket (vhost-user needs SOCK_STREAM)", fd);
    return std::nullopt;
  }
  HandedSocket socket;
  int accepting = 0;
  socket.listening = int_option(fd, SO_ACCEPTCONN, accepting) && accepting != 0;
  if (!socket.listening) {
    sockaddr_un peer{};
    socklen_t length = sizeof(peer);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) {
      error = fmt::format("fd {} is a Unix stream socket that neither listens nor is connected", fd);
      return std::nullopt;
    }
  }
  socket.bound_path = bound_path_of(fd);
  const int fd_flags = ::fcntl(fd, F_GETFD);
  if (fd_flags < 0 || ::fcntl(fd, F_SETFD, fd_flags | FD_CLOEXEC) != 0) {
    error = fmt::format("fd {}: fcntl: {}", fd, std::strerror(errno));
    return std::nullopt;
  }
  if (!socket.listening) {
    const int status = ::fcntl(fd, F_GETFL);
    if (status < 0 || ::fcntl(fd, F_SETFL, status & ~O_NONBLOCK) != 0) {
      error = fmt::format("fd {}: fcntl: {}", fd, std::strerror(errno));
      return std::nullopt;
    }
  }
  return socket;
}

}  // namespace uvhost::vhost_user
