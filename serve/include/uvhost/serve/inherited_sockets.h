// inherited_sockets.h - ports on sockets opened for us before we started: systemd's
// socket activation (LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES), by a .socket unit or by
// `systemd-socket-activate -l PATH`. The ports then adopt those sockets instead of
// binding their own (PortSpec::socket_fd), so a socket exists, and frontends may
// connect, before uvhost runs, and it survives uvhost's restarts.
//
// Contract
// --------
//  - inherited_sockets(): the sockets passed to this process (libsystemd's
//    sd_listen_fds_with_names; the variables are unset so no child sees them). Empty
//    when none were passed, or they were meant for another process (LISTEN_PID). Each
//    must be a Unix stream socket (vhost_user::inspect_handed_socket); anything else
//    is an error naming the fd. `name` is its FileDescriptorName= ("unknown" when
//    systemd was given none).
//  - claim_inherited_sockets(): gives each socket to the port that claims it, setting
//    PortSpec::socket_fd: the port whose name= equals the socket's name, else the one
//    whose sock= equals the socket's bound path. An error (nothing changed): a socket
//    no port claims, a port claimed twice, a client port. Ports no socket matches bind
//    their own sockets as usual.
//  - A port on an inherited socket never unlinks it (see port.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "uvhost/serve/port_spec.h"

namespace uvhost::serve {

struct InheritedSocket {
  int fd = -1;
  std::string name;        // FileDescriptorName=, "unknown" when none was given
  std::string bound_path;  // getsockname(), empty when none
  bool listening = false;
};

std::optional<std::vector<InheritedSocket>> inherited_sockets(std::string& error);

bool claim_inherited_sockets(std::vector<PortSpec>& ports, const std::vector<InheritedSocket>& sockets,
                             std::string& error);

}  // namespace uvhost::serve
