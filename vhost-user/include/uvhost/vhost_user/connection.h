// connection.h - one vhost-user Unix socket: framing of messages with their fds, and
// how the socket comes to be (server: Listener, client: connect / connect_with_backoff).
//
// Contract
// --------
//  What it guarantees
//  - receive() returns one whole message: the 12-byte header, then exactly
//    header.size payload bytes (a payload that arrives in pieces is reassembled), and
//    every fd that came with it as a UniqueFd. Fds are received with
//    MSG_CMSG_CLOEXEC. It refuses (kError, fds closed): a header.size above
//    kMaxPayloadSize, truncated control data (more than kMaxFds fds, or MSG_CTRUNC for
//    any reason), control messages other than SCM_RIGHTS, fds arriving after the first
//    byte of a message, end of file in the middle of a message, and a message whose
//    remainder does not arrive within the continuation timeout (a stalled frontend
//    must not hang us).
//  - kClosed: the peer closed the socket cleanly between messages.
//  - send() writes all bytes (retrying partial writes and EINTR) with the fds attached
//    to the first byte; MSG_NOSIGNAL, so a dead peer is an error, not SIGPIPE.
//  - After any kError the stream is out of sync: the caller must close the connection.
//  - Listener: binds a path, chmods it (0600 by default: only our user may connect),
//    listens, accepts with SOCK_CLOEXEC, and unlinks the path when destroyed.
//    Listener::adopt() takes a socket someone else bound and listens on (a launcher's
//    --fd, systemd's socket activation): it accepts the same way and never unlinks
//    anything (the path belongs to whoever created it).
//
//  What it trusts and what not
//  - Trusts nothing the peer sends. Does not judge message contents (message.h does).
//  - One thread receives and one sends at a time; a Connection is not thread-safe.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "uvhost/vhost_user/message.h"
#include "uvhost/base/unique_fd.h"

namespace uvhost::vhost_user {

enum class ReceiveStatus { kMessage, kClosed, kError };

struct ReceiveResult {
  ReceiveStatus status = ReceiveStatus::kError;
  RawMessage message;  // valid for kMessage
  std::string error;   // why, for kError
};

struct SendResult {
  bool ok = false;
  std::string error;
};

class Connection {
 public:
  // How long the rest of a message may take once its first byte arrived.
  static constexpr std::chrono::milliseconds kDefaultContinuationTimeout{1000};

  explicit Connection(base::UniqueFd socket) noexcept : socket_(std::move(socket)) {}

  // A connected AF_UNIX stream pair (tests, embedded frontends).
  static std::optional<std::pair<Connection, Connection>> pair();

  // Blocks until a whole message, a clean close, or an error. Use wait_readable()
  // first to avoid blocking on an idle peer.
  ReceiveResult receive();

  // Waits until the socket is readable (a message or EOF). false on timeout.
  bool wait_readable(std::chrono::milliseconds timeout) const;

  SendResult send(std::span<const std::byte> bytes, std::span<const int> fds = {});

  void set_continuation_timeout(std::chrono::milliseconds timeout) noexcept { continuation_timeout_ = timeout; }

  int fd() const noexcept { return socket_.get(); }
  bool is_open() const noexcept { return socket_.valid(); }
  void close() noexcept { socket_.reset(); }

 private:
  // recvmsg into [buffer, buffer + len), collecting fds into `fds` when allowed.
  // Returns bytes read (0 = EOF), or -1 with `error` set.
  long read_some(std::byte* buffer, size_t len, std::vector<base::UniqueFd>& fds, bool accept_fds, std::string& error);
  bool read_exact(std::byte* buffer, size_t len, std::vector<base::UniqueFd>& fds, bool first_part, bool& clean_eof,
                  std::string& error);

  base::UniqueFd socket_;
  std::chrono::milliseconds continuation_timeout_ = kDefaultContinuationTimeout;
};

class Listener {
 public:
  struct Options {
    mode_t mode = 0600;          // who may connect: only our user by default
    bool replace_stale = false;  // unlink an existing socket file at the path first
    int backlog = 4;
  };

  // nullopt (error filled in) when the path is taken, too long, or bind/listen fail.
  static std::optional<Listener> bind(const std::string& path, const Options& options, std::string& error);
  static std::optional<Listener> bind(const std::string& path, std::string& error) {
    return bind(path, Options{}, error);
  }

  // Takes over `socket`, which must already listen (socket_inspection.h checks that).
  // `path` names it in logs (its bound path, or empty); it is never unlinked.
  static Listener adopt(base::UniqueFd socket, std::string path) noexcept {
    Listener listener(std::move(socket), std::move(path));
    listener.owns_path_ = false;
    return listener;
  }

  Listener(Listener&& other) noexcept;
  Listener& operator=(Listener&& other) noexcept;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener();  // closes the socket and unlinks the path (bind() only, not adopt())

  // Waits up to `timeout` for a frontend; nullopt on timeout or error (error filled).
  std::optional<Connection> accept(std::chrono::milliseconds timeout, std::string& error);

  const std::string& path() const noexcept { return path_; }
  int fd() const noexcept { return socket_.get(); }
  bool owns_path() const noexcept { return owns_path_; }

 private:
  Listener(base::UniqueFd socket, std::string path) noexcept : socket_(std::move(socket)), path_(std::move(path)) {}
  void close_and_unlink() noexcept;

  base::UniqueFd socket_;
  std::string path_;
  bool owns_path_ = true;  // bound by us: unlinked on close
};

// Is someone accepting on the Unix socket at `path`? 0 = yes, ECONNREFUSED = a socket
// file nobody listens on (left by a dead process: safe to replace), EAGAIN = a live
// listener with a full backlog, any other errno = cannot tell (missing, not a socket).
// A listener of this network namespace is found in /proc/net/unix without touching it;
// only when none is listed there (one in another namespace may still hold the file)
// does one non-blocking connect() ask, which such a listener sees as a client that
// comes and goes.
int probe_unix_socket(const std::string& path) noexcept;

// Does /proc/net/unix list a listening stream socket bound to `path` (the same string,
// or the same file once both are resolved)? False when it cannot be read.
bool listed_as_listening(const std::string& path) noexcept;

// Client mode: one attempt.
std::optional<Connection> connect_unix(const std::string& path, std::string& error);

struct Backoff {
  std::chrono::milliseconds initial{10};
  std::chrono::milliseconds max{1000};  // the delay doubles up to this
  std::chrono::milliseconds total{10000};  // give up after this long
};

// Client mode with retries: tries, sleeps, doubles the delay (capped), until connected,
// `total` elapsed, or should_stop() returns true (checked before each attempt).
std::optional<Connection> connect_with_backoff(const std::string& path, const Backoff& backoff, std::string& error,
                                               const std::function<bool()>& should_stop = {});

}  // namespace uvhost::vhost_user
