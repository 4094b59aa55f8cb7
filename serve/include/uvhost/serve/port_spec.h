// port_spec.h - what one port of `uvhost serve` is: its socket, who listens, how many
// queue pairs, and which backend moves its packets. Parsed from the command line
// (`--port sock=PATH,client,queues=2,backend=loopback`) or from a JSON config file.
//
// Contract
// --------
//  - parse_port_spec() accepts comma-separated key[=value] items, in any order:
//      sock=PATH       the Unix socket (required; a path cannot contain a comma)
//      client[=0|1]    connect to a frontend that listens at PATH (reconnecting with
//                      backoff when it goes away) instead of listening ourselves
//      queues=N        queue pairs, 1..128 (default 1)
//      backend=NAME    sink (count and drop, default) or loopback (reflect, MACs swapped)
//      mode=OCTAL      the listening socket's permissions (default 0600), server only
//      name=NAME       the port's name in logs and reports (default port<i>)
//      memory=POLICY   the memory-table guard: rcu (default), mutex, rwsem, pthread_rwlock
//                      (also spelled pthread-rwlock, the sync layer's name)
//    `path=` is another name for `sock=` (giving both counts as a repeated key).
//    Unknown keys, repeated keys, bad values: nullopt with `error` saying which.
//  - parse_config() reads {"ports": [{"sock": ..., "client": bool, "queues": n,
//    "backend": ..., "mode": "0660", "name": ..., "memory": ...}, ...]} with the same
//    rules (unknown keys refused).
//  - finish_ports() names unnamed ports and refuses duplicate names or socket paths.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "uvhost/sync/read_mostly.h"
#include "uvhost/vhost_user/inline_datapath.h"

namespace uvhost::serve {

struct PortSpec {
  std::string name;
  std::string socket_path;
  bool client = false;
  uint32_t queue_pairs = 1;
  vhost_user::InlineBackend backend = vhost_user::InlineBackend::kSink;
  mode_t socket_mode = 0600;
  sync::GuardPolicy memory_policy = sync::GuardPolicy::kRcu;
};

std::optional<PortSpec> parse_port_spec(std::string_view text, std::string& error);
std::optional<std::vector<PortSpec>> parse_config(const nlohmann::json& config, std::string& error);
// Reads and parses a JSON config file.
std::optional<std::vector<PortSpec>> load_config_file(const std::string& path, std::string& error);
bool finish_ports(std::vector<PortSpec>& ports, std::string& error);

// One line describing a port, for logs: "p0 (server /run/a.sock, 2 queue pairs, loopback)".
std::string describe(const PortSpec& spec);

}  // namespace uvhost::serve
