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
//      backend=NAME    where the packets go (default sink):
//                        sink      count and drop
//                        source    count and drop; and generate UDP frames for the
//                                  guest (rate=PPS, 0 = as fast as it takes; size=BYTES)
//                        loopback  reflect into the same pair's receive queue, MACs swapped
//                        tap       a tap device (tap=NAME: created, or attached if it exists)
//                        switch    the daemon's L2 learning switch, shared by every
//                                  port with backend=switch (and the --switch-tap uplink)
//      tap=NAME        backend=tap: the interface name (default: the kernel picks)
//      mtu=N           68..65535. backend=tap: the tap's MTU, set when the port opens
//                      (default: the tap's own). backend=switch: the port's MTU on the
//                      switch (default: none, no limit): longer frames from or to the
//                      port are dropped (switch_backend.h). The guest's MTU is the
//                      frontend's (QEMU's host_mtu=N): its NET_SET_MTU replaces either
//      rate=PPS        backend=source: frames per second for the port (default 0)
//      size=BYTES      backend=source: frame size, 60..65535 (default 64)
//      workers=MAP     queue-to-worker mapping: device (default; one worker for the
//                      port), pair (one per queue pair), pool (the daemon's shared pool)
//      cpus=LIST       workers=device|pair: the CPUs the port's workers run on, as
//                      taskset -c writes them (1, 0-3; a list with commas in brackets:
//                      [0,2-3]); or `frontend`: the CPUs of the process connected to
//                      the socket, read at each connection; default: the daemon's
//                      (datapath/cpu_list.h, worker_placement.h)
//      sched=POLICY    workers=device|pair: their scheduling policy, other (default),
//                      batch or idle (datapath/worker_placement.h)
//      poll=MODE       notify (default), busy, always, adaptive (datapath/poll_mode.h)
//      busy_us=N       busy: the poll timeout; adaptive: its cap (default 50)
//      exit=POLICY     accurate (default) or any: what ends a busy poll early (poll_mode.h)
//      burst=N         packets per burst, 1..1024 (default 64)
//      weight=N        packets per handler turn before yielding, 1..65536 (default 256)
//      weight_bytes=N  bytes per handler turn before yielding, 1..2^30 (default 524288)
//      tx_delivery=D   in_place (default: frames sent from the guest's buffers, used
//                      entries published after) or at_most_once (copied out, published,
//                      then sent: a killed daemon never has a frame sent twice;
//                      datapath/tx_delivery.h)
//      mode=OCTAL      the listening socket's permissions (default 0600), server only
//      name=NAME       the port's name in logs and reports (default port<i>)
//      memory=POLICY   the memory-table guard: rcu (default), mutex, rwsem, pthread-rwlock
//    `path=` is another name for `sock=` (giving both counts as a repeated key).
//    Unknown keys, repeated keys, bad values: nullopt with `error` saying which.
//  - parse_port_json() reads one port of the config file (serve_config.h):
//    {"sock": ..., "client": bool, "queues": n, "backend": ..., "mode": "0660", ...}
//    with the same keys and rules (unknown keys refused); numbers may be JSON numbers,
//    `mode` must be a string (octal digits).
//  - port_to_json() is the inverse: every key that applies to the port's backend, with
//    its value, so that parse_port_json(port_to_json(s)) gives s back.
//  - Keys that only make sense for some backends (tap=; mtu= for tap and switch;
//    rate=, size=) are refused for the others.
//  - finish_ports() names unnamed ports and refuses duplicate names or socket paths.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "uvhost/base/name_table.h"
#include "uvhost/datapath/worker_placement.h"
#include "uvhost/datapath/poll_mode.h"
#include "uvhost/datapath/tx_delivery.h"
#include "uvhost/datapath/worker_pool.h"
#include "uvhost/sync/read_mostly.h"

namespace uvhost::serve {

using base::to_string;

enum class BackendKind { kSink, kSource, kLoopback, kTap, kSwitch };
inline constexpr auto kBackendKindNames = base::name_table<BackendKind>({{BackendKind::kSink, "sink"},
                                                                         {BackendKind::kSource, "source"},
                                                                         {BackendKind::kLoopback, "loopback"},
                                                                         {BackendKind::kTap, "tap"},
                                                                         {BackendKind::kSwitch, "switch"}});
constexpr const auto& enum_names(BackendKind) noexcept { return kBackendKindNames; }

struct PortSpec {
  std::string name;
  std::string socket_path;
  // An already-open socket to serve instead of binding socket_path (--fd, systemd's
  // LISTEN_FDS; see inherited_sockets.h): listening or connected, checked by
  // Port::open(), which takes it over (closes it when the port goes; never unlinks
  // socket_path, which then only names the socket). -1: none. Not a config-file key.
  int socket_fd = -1;
  bool client = false;
  uint32_t queue_pairs = 1;
  BackendKind backend = BackendKind::kSink;
  mode_t socket_mode = 0600;
  sync::GuardPolicy memory_policy = sync::GuardPolicy::kRcu;
  // Backend parameters.
  std::string tap_name;           // tap
  std::optional<uint32_t> mtu;    // tap, switch
  uint64_t source_rate_pps = 0;   // source
  uint32_t source_frame_size = 64;
  // Datapath.
  datapath::WorkerMapping workers = datapath::WorkerMapping::kDevice;
  datapath::WorkerPlacement placement;  // cpus=, sched=
  datapath::PollSettings poll;
  uint32_t burst = 64;
  uint32_t weight_packets = 256;
  uint64_t weight_bytes = 0x80000;
  datapath::TxDelivery tx_delivery = datapath::TxDelivery::kInPlace;

  // Every field equal: a reload keeps such a port untouched (reload_plan.h).
  friend bool operator==(const PortSpec&, const PortSpec&) = default;
};

std::optional<PortSpec> parse_port_spec(std::string_view text, std::string& error);
std::optional<PortSpec> parse_port_json(const nlohmann::json& entry, std::string& error);
nlohmann::json port_to_json(const PortSpec& spec);
bool finish_ports(std::vector<PortSpec>& ports, std::string& error);

// One line describing a port, for logs: "p0 (server /run/a.sock, 2 queue pairs, loopback)".
std::string describe(const PortSpec& spec);

}  // namespace uvhost::serve
