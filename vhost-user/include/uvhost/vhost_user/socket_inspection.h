// socket_inspection.h - what a file descriptor someone handed us is, before we serve
// vhost-user on it: a launcher's `--fd N` (QEMU's backend-program conventions) or a
// socket systemd passed with LISTEN_FDS.
//
// Contract
// --------
//  - inspect_handed_socket(fd) accepts an open AF_UNIX SOCK_STREAM socket that either
//    listens (SO_ACCEPTCONN: frontends connect to it, we accept) or is connected (one
//    end of a socketpair, or a connection a launcher accepted: that one frontend).
//    Anything else is refused with an error that names the fd and what it is instead:
//    not open, not a socket, not AF_UNIX, not SOCK_STREAM, neither listening nor
//    connected.
//  - bound_path is the socket's filesystem address (getsockname), empty when it has
//    none (unbound, a socketpair end, or an abstract address). For a connected socket
//    it is our end's address, which accept()ed sockets share with their listener.
//  - On success the fd is also made close-on-exec (we never hand it to a child) and,
//    when connected, blocking (Connection reads whole messages with blocking reads).
//  - Never closes or takes ownership of `fd`.
#pragma once

#include <optional>
#include <string>

namespace uvhost::vhost_user {

struct HandedSocket {
  bool listening = false;  // else connected
  std::string bound_path;
};

std::optional<HandedSocket> inspect_handed_socket(int fd, std::string& error);

}  // namespace uvhost::vhost_user
