// inherited_sockets.cpp - socket activation: find and match the sockets systemd passed
// (see inherited_sockets.h).
#include "uvhost/serve/inherited_sockets.h"

#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "uvhost/vhost_user/socket_inspection.h"

namespace uvhost::serve {

namespace {

// sd_listen_fds_with_names' names, copied and freed at once (its array is malloc'ed).
std::vector<std::string> take_names(char** names, int count) {
  std::vector<std::string> taken;
  for (int i = 0; i < count; ++i) {
    taken.emplace_back(names != nullptr && names[i] != nullptr ? names[i] : "unknown");
    if (names != nullptr) std::free(names[i]);
  }
  std::free(static_cast<void*>(names));
  return taken;
}

}  // namespace

std::optional<std::vector<InheritedSocket>> inherited_sockets(std::string& error) {
  char** names = nullptr;
  const int count = ::sd_listen_fds_with_names(1, &names);
  if (count < 0) {
    error = fmt::format("socket activation: LISTEN_FDS: {}", std::strerror(-count));
    return std::nullopt;
  }
  const std::vector<std::string> taken = take_names(names, count);
  std::vector<InheritedSocket> sockets;
  for (int i = 0; i < count; ++i) {
    InheritedSocket socket;
    socket.fd = SD_LISTEN_FDS_START + i;
    socket.name = taken[static_cast<size_t>(i)];
    auto handed = vhost_user::inspect_handed_socket(socket.fd, error);
    if (!handed) {
      error = fmt::format("socket activation: inherited socket '{}': {}", socket.name, error);
      return std::nullopt;
    }
    socket.bound_path = handed->bound_path;
    socket.listening = handed->listening;
    sockets.push_back(std::move(socket));
  }
  return sockets;
}

bool claim_inherited_sockets(std::vector<PortSpec>& ports, const std::vector<InheritedSocket>& sockets,
                             std::string& error) {
  std::vector<int> claimed(ports.size(), -1);  // per port: the fd it gets
  for (const InheritedSocket& socket : sockets) {
    size_t match = ports.size();
    for (size_t i = 0; i < ports.size() && match == ports.size(); ++i) {
      if (ports[i].name == socket.name) match = i;
    }
    for (size_t i = 0; i < ports.size() && match == ports.size(); ++i) {
      if (!socket.bound_path.empty() && ports[i].socket_path == socket.bound_path) match = i;
    }
    if (match == ports.size()) {
      error = fmt::format(
          "socket activation: no port claims the inherited socket fd {} (name '{}', path '{}'): give the port "
          "that name (name=) or that socket path (sock=)",
          socket.fd, socket.name, socket.bound_path);
      return false;
    }
    const PortSpec& port = ports[match];
    if (port.client) {
      error = fmt::format("socket activation: port {} is a client port, but the inherited socket fd {} is for it",
                          port.name, socket.fd);
      return false;
    }
    if (claimed[match] >= 0) {
      error = fmt::format("socket activation: port {} is claimed by two inherited sockets (fd {} and fd {})",
                          port.name, claimed[match], socket.fd);
      return false;
    }
    claimed[match] = socket.fd;
  }
  for (size_t i = 0; i < ports.size(); ++i) {
    if (claimed[i] >= 0) ports[i].socket_fd = claimed[i];
  }
  return true;
}

}  // namespace uvhost::serve
