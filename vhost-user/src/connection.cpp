// connection.cpp - Unix socket framing with SCM_RIGHTS (see connection.h).
#include "uvhost/vhost_user/connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "uvhost/base/errno_text.h"

namespace uvhost::vhost_user {

namespace {

bool fill_address(const std::string& path, sockaddr_un& address, std::string& error) {
  std::memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  // sun_path needs room for the terminating NUL.
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    error = fmt::format("socket path '{}' is empty or longer than {} bytes", path, sizeof(address.sun_path) - 1);
    return false;
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return true;
}

// A new Unix stream socket (close-on-exec) and `path` as its address; none, with
// `error` filled in, when the path does not fit or socket() fails.
base::UniqueFd stream_socket_for(const std::string& path, sockaddr_un& address, std::string& error) {
  if (!fill_address(path, address, error)) return {};
  base::UniqueFd socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!socket) error = base::errno_text("socket");
  return socket;
}

const sockaddr* as_sockaddr(const sockaddr_un& address) {
  // The sockets API takes the generic type; this cast is how it is meant to be used.
  return reinterpret_cast<const sockaddr*>(&address);
}

int poll_one(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd entry{fd, events, 0};
  for (;;) {
    const int ready = ::poll(&entry, 1, static_cast<int>(timeout.count()));
    if (ready < 0 && errno == EINTR) continue;  // a signal is no reason to give up
    return ready;
  }
}

}  // namespace

std::optional<std::pair<Connection, Connection>> Connection::pair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return std::nullopt;
  return std::pair<Connection, Connection>(Connection(base::UniqueFd(fds[0])), Connection(base::UniqueFd(fds[1])));
}

bool Connection::wait_readable(std::chrono::milliseconds timeout) const {
  return poll_one(socket_.get(), POLLIN, timeout) > 0;
}

long Connection::read_some(std::byte* buffer, size_t len, std::vector<base::UniqueFd>& fds, bool accept_fds,
                           std::string& error) {
  // Room for exactly kMaxFds descriptors: more is truncated by the kernel (MSG_CTRUNC),
  // which we refuse. alignas: CMSG_* walk this buffer as struct cmsghdr.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  iovec io{buffer, len};
  msghdr header{};
  header.msg_iov = &io;
  header.msg_iovlen = 1;
  header.msg_control = control;
  header.msg_controllen = sizeof(control);
  ssize_t got;
  do {
    got = ::recvmsg(socket_.get(), &header, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    error = base::errno_text("recvmsg");
    return -1;
  }
  // Take ownership of every fd that arrived before judging anything, so that each
  // error path below closes them.
  bool foreign_control = false;
  size_t received = 0;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&header); cmsg != nullptr; cmsg = CMSG_NXTHDR(&header, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) {
      foreign_control = true;
      continue;
    }
    const size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const auto* data = CMSG_DATA(cmsg);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, data + i * sizeof(int), sizeof(int));
      fds.emplace_back(fd);
      ++received;
    }
  }
  if ((header.msg_flags & MSG_CTRUNC) != 0) {
    error = fmt::format("control data truncated (more than {} fds?)", kMaxFds);
    return -1;
  }
  if (foreign_control) {
    error = "control message other than SCM_RIGHTS";
    return -1;
  }
  if (received > 0 && !accept_fds) {
    error = "fds arrived in the middle of a message";
    return -1;
  }
  if (fds.size() > kMaxFds) {
    error = fmt::format("{} fds with one message (at most {})", fds.size(), kMaxFds);
    return -1;
  }
  return static_cast<long>(got);
}

bool Connection::read_exact(std::byte* buffer, size_t len, std::vector<base::UniqueFd>& fds, bool first_part,
                            bool& clean_eof, std::string& error) {
  size_t done = 0;
  while (done < len) {
    const bool at_message_start = first_part && done == 0;
    // Once a message has begun, its rest must follow promptly; the first byte may wait
    // as long as the caller likes (it blocks, or polled before calling).
    if (!at_message_start && poll_one(socket_.get(), POLLIN, continuation_timeout_) <= 0) {
      error = fmt::format("message stalled: {} of {} bytes after {} ms", done, len, continuation_timeout_.count());
      return false;
    }
    const long got = read_some(buffer + done, len - done, fds, at_message_start, error);
    if (got < 0) return false;
    if (got == 0) {
      clean_eof = at_message_start;
      if (!clean_eof) error = fmt::format("end of file inside a message ({} of {} bytes)", done, len);
      return false;
    }
    done += static_cast<size_t>(got);
  }
  return true;
}

ReceiveResult Connection::receive() {
  ReceiveResult result;
  if (!socket_.valid()) {
    result.error = "connection is closed";
    return result;
  }
  std::byte header_bytes[kHeaderSize];
  bool clean_eof = false;
  RawMessage& message = result.message;
  if (!read_exact(header_bytes, kHeaderSize, message.fds, true, clean_eof, result.error)) {
    result.status = clean_eof ? ReceiveStatus::kClosed : ReceiveStatus::kError;
    message.fds.clear();  // closes whatever arrived
    return result;
  }
  std::memcpy(&message.header.request, header_bytes, 4);
  std::memcpy(&message.header.flags, header_bytes + 4, 4);
  std::memcpy(&message.header.size, header_bytes + 8, 4);
  if (message.header.size > kMaxPayloadSize) {
    result.error = fmt::format("{} announces a {}-byte payload (at most {})",
                               to_string(static_cast<Request>(message.header.request)), message.header.size,
                               kMaxPayloadSize);
    message.fds.clear();
    return result;
  }
  message.payload.resize(message.header.size);
  if (message.header.size > 0 &&
      !read_exact(message.payload.data(), message.payload.size(), message.fds, false, clean_eof, result.error)) {
    message.fds.clear();
    return result;
  }
  result.status = ReceiveStatus::kMessage;
  return result;
}

SendResult Connection::send(std::span<const std::byte> bytes, std::span<const int> fds) {
  SendResult result;
  if (fds.size() > kMaxFds) {
    result.error = fmt::format("cannot send {} fds (at most {})", fds.size(), kMaxFds);
    return result;
  }
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  size_t done = 0;
  while (done < bytes.size() || (bytes.empty() && done == 0 && !fds.empty())) {
    // The const_cast is the iovec API: sendmsg does not write through iov_base.
    iovec io{const_cast<std::byte*>(bytes.data() + done), bytes.size() - done};
    msghdr header{};
    header.msg_iov = &io;
    header.msg_iovlen = 1;
    if (done == 0 && !fds.empty()) {
      // The fds ride with the first byte, where the receiver looks for them.
      std::memset(control, 0, sizeof(control));
      header.msg_control = control;
      header.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* cmsg = CMSG_FIRSTHDR(&header);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t sent = ::sendmsg(socket_.get(), &header, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      result.error = base::errno_text("sendmsg");
      return result;
    }
    if (bytes.empty()) break;
    done += static_cast<size_t>(sent);
  }
  result.ok = true;
  return result;
}

// ---- Listener ----

std::optional<Listener> Listener::bind(const std::string& path, const Options& options, std::string& error) {
  sockaddr_un address;
  base::UniqueFd socket = stream_socket_for(path, address, error);
  if (!socket) return std::nullopt;
  if (options.replace_stale) {
    struct stat info {};
    // Only ever remove a socket file: a typo in the path must not delete a user's file.
    if (::lstat(path.c_str(), &info) == 0 && S_ISSOCK(info.st_mode)) (void)::unlink(path.c_str());
  }
  if (::bind(socket.get(), as_sockaddr(address), sizeof(address)) != 0) {
    const int error_number = errno;  // before formatting, which may change it
    error = base::errno_text(fmt::format("bind {}", path), error_number);
    return std::nullopt;
  }
  // From here on the path is ours: the Listener unlinks it, also on the error paths.
  Listener listener(std::move(socket), path);
  if (::chmod(path.c_str(), options.mode) != 0) {
    error = base::errno_text("chmod");
    return std::nullopt;
  }
  if (::listen(listener.fd(), options.backlog) != 0) {
    error = base::errno_text("listen");
    return std::nullopt;
  }
  return listener;
}

Listener::Listener(Listener&& other) noexcept
    : socket_(std::move(other.socket_)),
      path_(std::exchange(other.path_, std::string())),
      owns_path_(other.owns_path_) {}

Listener& Listener::operator=(Listener&& other) noexcept {
  if (this != &other) {
    close_and_unlink();
    socket_ = std::move(other.socket_);
    path_ = std::exchange(other.path_, std::string());
    owns_path_ = other.owns_path_;
  }
  return *this;
}

Listener::~Listener() { close_and_unlink(); }

void Listener::close_and_unlink() noexcept {
  if (owns_path_ && !path_.empty()) (void)::unlink(path_.c_str());
  path_.clear();
  socket_.reset();
}

std::optional<Connection> Listener::accept(std::chrono::milliseconds timeout, std::string& error) {
  const int ready = poll_one(socket_.get(), POLLIN, timeout);
  if (ready <= 0) {
    error = ready == 0 ? "no frontend connected in time" : base::errno_text("poll");
    return std::nullopt;
  }
  int fd;
  do {
    fd = ::accept4(socket_.get(), nullptr, nullptr, SOCK_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    error = base::errno_text("accept4");
    return std::nullopt;
  }
  return Connection(base::UniqueFd(fd));
}

// ---- client mode ----

std::optional<Connection> connect_unix(const std::string& path, std::string& error) {
  sockaddr_un address;
  base::UniqueFd socket = stream_socket_for(path, address, error);
  if (!socket) return std::nullopt;
  int rc;
  do {
    rc = ::connect(socket.get(), as_sockaddr(address), sizeof(address));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int error_number = errno;  // before formatting, which may change it
    error = base::errno_text(fmt::format("connect {}", path), error_number);
    return std::nullopt;
  }
  return Connection(std::move(socket));
}

std::optional<Connection> connect_with_backoff(const std::string& path, const Backoff& backoff, std::string& error,
                                               const std::function<bool()>& should_stop) {
  const auto deadline = std::chrono::steady_clock::now() + backoff.total;
  auto delay = backoff.initial;
  for (;;) {
    if (should_stop && should_stop()) {
      error = "stopped while connecting";
      return std::nullopt;
    }
    if (auto connection = connect_unix(path, error)) return connection;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return std::nullopt;  // error holds the last attempt's reason
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    std::this_thread::sleep_for(std::min(delay, left));
    delay = std::min(delay * 2, backoff.max);
  }
}

bool listed_as_listening(const std::string& path) noexcept {
  try {
    std::ifstream table("/proc/net/unix");
    if (!table) return false;
    char resolved_path[PATH_MAX];
    const bool resolvable = ::realpath(path.c_str(), resolved_path) != nullptr;
    std::string line;
    std::getline(table, line);  // "Num RefCount Protocol Flags Type St Inode Path"
    while (std::getline(table, line)) {
      std::istringstream fields(line);
      std::string slot, refcount, protocol, flags, type, state, inode, bound;
      if (!(fields >> slot >> refcount >> protocol >> flags >> type >> state >> inode >> bound)) continue;
      constexpr unsigned long kAcceptingConnections = 0x10000;  // __SO_ACCEPTCON: listen() was called
      if (type != "0001" || (std::stoul(flags, nullptr, 16) & kAcceptingConnections) == 0) continue;
      if (bound == path) return true;
      char resolved_bound[PATH_MAX];
      if (resolvable && ::realpath(bound.c_str(), resolved_bound) != nullptr &&
          std::strcmp(resolved_bound, resolved_path) == 0) {
        return true;
      }
    }
  } catch (const std::exception&) {
    // A line we cannot read: not listed, the connect() probe decides.
  }
  return false;
}

int probe_unix_socket(const std::string& path) noexcept {
  if (listed_as_listening(path)) return 0;
  base::UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!probe.valid()) return errno;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) return ENAMETOOLONG;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  // Non-blocking: a live listener whose backlog is full fails with EAGAIN instead of
  // making us wait until its owner accepts.
  const int rc = ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  return rc == 0 ? 0 : errno;
}

}  // namespace uvhost::vhost_user
