// backend_program.h - QEMU's vhost-user "backend program conventions"
// (docs/interop/vhost-user.rst; the descriptor and capabilities schema is
// docs/interop/vhost-user.json), which libvirt and other launchers rely on: the
// backend takes `--socket-path PATH` or `--fd N` (exclusive) and answers
// `--print-capabilities`.
//
// Contract
// --------
//  - capabilities_json(): what `--print-capabilities` prints: the schema's
//    VHostUserBackendCapabilities for our type, {"type": "net"} (the schema defines no
//    feature list for net, so there is none).
//  - backend_program_port(): the one port of `--socket-path PATH` or `--fd N`
//    (exactly one of them: `socket_path` non-empty or `fd` >= 0). `keys` are
//    `--port` keys without sock= (e.g. "backend=tap,queues=2"; empty: the defaults);
//    sock=/path= among them is an error (the socket is given already). With `--fd`
//    the fd is checked at once (vhost_user::inspect_handed_socket: a Unix stream
//    socket, listening or connected, else an error naming the fd) and the port's
//    socket_path is the socket's bound path (empty if none); client mode is refused.
//  - kBackendProgramName: the name the uvhost binary is installed under
//    (libexec/uvhost-vhost-user-net, a symlink) to follow the conventions: run under
//    it, argv is `uvhost serve`'s (cli/main.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "uvhost/serve/port_spec.h"

namespace uvhost::serve {

inline constexpr std::string_view kBackendProgramName = "uvhost-vhost-user-net";

std::string capabilities_json();

std::optional<PortSpec> backend_program_port(std::string_view keys, const std::string& socket_path, int fd,
                                             std::string& error);

}  // namespace uvhost::serve
