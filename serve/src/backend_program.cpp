// backend_program.cpp - the vhost-user backend-program conventions' port and
// capabilities (see backend_program.h).
#include "uvhost/serve/backend_program.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "uvhost/vhost_user/socket_inspection.h"

namespace uvhost::serve {

std::string capabilities_json() { return nlohmann::json{{"type", "net"}}.dump(); }

std::optional<PortSpec> backend_program_port(std::string_view keys, const std::string& socket_path, int fd,
                                             std::string& error) {
  if (socket_path.empty() == (fd < 0)) {
    error = "give exactly one of --socket-path and --fd";
    return std::nullopt;
  }
  // The socket comes from --socket-path / --fd; a sock= in the keys would be a second one.
  for (size_t start = 0; start <= keys.size();) {
    const size_t comma = std::min(keys.find(',', start), keys.size());
    const std::string_view item = keys.substr(start, comma - start);
    const std::string_view key = item.substr(0, item.find('='));
    if (key == "sock" || key == "path") {
      error = fmt::format("--port {}: with --socket-path or --fd, the port's keys come without {}=", keys, key);
      return std::nullopt;
    }
    start = comma + 1;
  }
  std::string path = socket_path;
  if (fd >= 0) {
    auto handed = vhost_user::inspect_handed_socket(fd, error);
    if (!handed) return std::nullopt;
    path = handed->bound_path;
  }
  // parse_port_spec wants a sock= (and its errors quote it): the path (unless a comma in
  // it would split the list: any path is fine here), or the fd.
  const std::string sock = path.empty()                          ? fmt::format("sock=<fd {}>", fd)
                           : path.find(',') == std::string::npos ? "sock=" + path
                                                                 : std::string("sock=<--socket-path>");
  const std::string text = keys.empty() ? sock : fmt::format("{},{}", sock, keys);
  auto spec = parse_port_spec(text, error);
  if (!spec) return std::nullopt;
  spec->socket_path = path;
  if (fd >= 0) {
    if (spec->client) {
      error = fmt::format("--fd {}: a handed-over socket is served: the client key does not apply", fd);
      return std::nullopt;
    }
    spec->socket_fd = fd;
  }
  return spec;
}

}  // namespace uvhost::serve
