// port.h - one port of `uvhost serve`: a vhost-user socket and the device behind it,
// served by one thread, one frontend at a time, for as long as the daemon runs.
//
// Design
// ------
//  A port owns its backend (backends/port_backend.h: sink, source, loopback, tap, or
//  a member of the daemon's switch) and a DeviceDatapath (datapath/device_datapath.h)
//  whose handlers run on the workers the port's mapping gave it; both outlive
//  connections, so counters add up over every frontend served. Each connection gets a fresh
//  BackendDevice; when the frontend goes away (closes, dies, or breaks the protocol)
//  the device is destroyed, which stops its rings and closes every fd it received, and
//  the port waits for the next frontend:
//   - server mode: the socket is bound when the port is opened (so a bad path fails the
//     daemon's start, not later) and stays bound; a second frontend that connects while
//     one is served is accepted and closed at once, with a warning;
//   - client mode: the port connects to the frontend's socket, retrying with exponential
//     backoff (10 ms doubling to 1 s) until it is there, and again after each
//     disconnection, until the daemon stops; a connection that ended within a second
//     delays the next attempt the same way (a frontend that hangs up on us at once
//     must not make us spin).
//   - a handed-over socket (PortSpec::socket_fd: `--fd`, systemd's LISTEN_FDS): a
//     listening one is served like a socket we bound, except that nothing is unlinked
//     (the path is its creator's); a connected one (a launcher's socketpair end) is
//     that one frontend: once it goes, the port has nothing left to serve and idles
//     until the daemon stops (the launcher ends us with SIGTERM, as QEMU's
//     backend-program conventions have it).
//   open() replaces a socket file only when nobody listens on it
//   (vhost_user::probe_unix_socket): a listener of this network namespace is found in
//   /proc/net/unix without being connected to, so a live daemon on that path sees
//   nothing; only a listener /proc does not show (another namespace) gets a connect().
//  The port's thread is the device's control thread: one poll() over the stop fd, the
//  socket and the listener; each vhost-user message is handled as it arrives, and
//  what it changes reaches the workers through the DatapathHooks (applied on each
//  worker between two handler runs). Packets never pass through this thread.
//
// Contract
// --------
//  - open() then run() on one thread; run() returns when `stop_fd` (an eventfd the
//    daemon writes once and never reads: every port stops) becomes readable, or after
//    request_stop() (this port only: a reload removing it). On return the device is gone
//    (rings stopped after their last burst was completed and published: the guest's
//    rings are consistent), every fd of the connection is closed and, in server mode,
//    the socket is removed when the Port is destroyed.
//  - totals(), snapshot(), set_poll(), set_memory_policy() may be called from any
//    thread at any time (the control socket does). While it runs, the port logs a line
//    per connection and, with a stats interval, its counters periodically.
//  - Features: each connection's device offers the base set plus what the backend
//    honours (PortBackend::offered_features: offered_features() here, before and
//    during connections alike); negotiated_features() is what the frontend's last
//    SET_FEATURES acked on the current connection (0 between connections), guest_mtu()
//    its NET_SET_MTU (0 if none), iotlb() its IOTLB figures (VIRTIO_F_ACCESS_PLATFORM;
//    vhost_user/iotlb.h) as of its last message (all 0 between connections). Any thread.
//  - set_memory_policy() applies from the next connection on (the guard of guest
//    memory is chosen when the device is created).
//  - Nothing a frontend does affects other ports: each port has its own thread, device
//    and memory; a protocol violation ends that connection only.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <atomic>
#include <vector>

#include "uvhost/vhost_user/iotlb.h"
#include "uvhost/backends/port_backend.h"
#include "uvhost/backends/switch_backend.h"
#include "uvhost/datapath/device_datapath.h"
#include "uvhost/datapath/worker_pool.h"
#include "uvhost/serve/port_spec.h"
#include "uvhost/vhost_user/connection.h"
#include "uvhost/base/unique_fd.h"

namespace uvhost::serve {

// Counters over the port's life, every connection included.
struct PortTotals {
  uint64_t connections = 0;        // frontends served
  uint64_t rejected = 0;           // frontends turned away (one was being served)
  uint64_t protocol_errors = 0;    // connections we ended: a refused message, a broken stream, a failed reply
  // Per direction (shown as rx = from the guest, tx = to the guest: direction.h).
  uint64_t from_guest_packets = 0;  // guest -> backend (the guest's transmit vrings)
  uint64_t from_guest_bytes = 0;
  uint64_t from_guest_dropped = 0;  // frames the backend refused (or unusable chains)
  uint64_t to_guest_packets = 0;    // backend -> guest (the guest's receive vrings)
  uint64_t to_guest_bytes = 0;
  uint64_t to_guest_dropped = 0;    // frames for the guest that could not be delivered
  uint64_t calls = 0;              // guest notifications sent
  uint64_t broken_queues = 0;      // rings stopped by a guest's spec violation (at last look)
};

// What the daemon lends its ports.
struct PortEnvironment {
  datapath::WorkerPool* workers = nullptr;  // required
  backends::SwitchHub* switch_hub = nullptr;  // required for backend=switch
};

class Port {
 public:
  Port(PortSpec spec, int stop_fd, PortEnvironment environment,
       std::chrono::milliseconds stats_interval = std::chrono::milliseconds{0});
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  // Makes the backend (a tap that cannot be opened fails here) and the datapath, then,
  // in server mode, binds and listens, or takes over spec().socket_fd (refused unless
  // a Unix stream socket, listening or connected; a client port cannot have one; once
  // taken over, the Port closes it). A socket file left behind by a dead process
  // (nobody accepts on it) is replaced; a live one is not. Client mode: only checks that
  // the path can be a socket's (empty or too long fails here, not at every retry).
  bool open(std::string& error);

  // Serves frontends until the stop fd is readable or request_stop() was called.
  void run();
  // Stops this port's run() (now, or as soon as it starts). Any thread; async-signal-safe.
  void request_stop() noexcept;

  const PortSpec& spec() const noexcept { return spec_; }
  PortTotals totals() const;
  bool connected() const noexcept { return connected_.load(std::memory_order_relaxed); }
  uint64_t offered_features() const noexcept;
  uint64_t negotiated_features() const noexcept { return negotiated_.load(std::memory_order_relaxed); }
  uint16_t guest_mtu() const noexcept { return guest_mtu_.load(std::memory_order_relaxed); }
  vhost_user::IotlbStats iotlb() const noexcept;
  std::vector<datapath::QueueSnapshot> snapshot() const;
  const backends::PortBackend* backend() const noexcept { return backend_.get(); }
  datapath::DeviceDatapath* datapath() noexcept { return datapath_.get(); }
  sync::GuardPolicy memory_policy() const noexcept { return memory_policy_.load(std::memory_order_relaxed); }
  void set_memory_policy(sync::GuardPolicy policy) noexcept { memory_policy_.store(policy, std::memory_order_relaxed); }

 private:
  bool adopt_socket(std::string& error);
  std::optional<vhost_user::Connection> accept_frontend();
  std::optional<vhost_user::Connection> connect_to_frontend();
  void serve(vhost_user::Connection connection);
  // cpus=frontend: moves the port's workers to the CPUs of the process at the other
  // end of `connection` (worker_placement.h); logs where they went, or why not.
  void follow_frontends_cpus(const vhost_user::Connection& connection);
  void reject_extra_frontend();
  bool stop_requested() const;
  // Waits for `fd` (or -1: nothing) or the stop fd, up to `timeout` (-1: forever).
  // true when `fd` is readable and no stop was asked.
  bool wait_for(int fd, int timeout_ms) const;
  void log_stats(const char* when) const;
  // With a stats interval: logs the counters when the next tick is due; returns the
  // milliseconds to the tick after (a poll() timeout), -1 without an interval.
  int stats_tick();

  PortSpec spec_;
  base::UniqueFd own_stop_;  // eventfd: request_stop(), this port only
  // An epoll fd over the daemon's stop fd and own_stop_: readable once either is, so
  // the port's loops watch one fd for both ways of stopping.
  base::UniqueFd stop_watch_;
  int stop_fd_;  // stop_watch_
  PortEnvironment environment_;
  std::chrono::milliseconds stats_interval_;
  std::optional<vhost_user::Listener> listener_;
  std::optional<vhost_user::Connection> handed_connection_;  // a connected socket_fd, until served
  std::unique_ptr<backends::PortBackend> backend_;
  std::unique_ptr<datapath::DeviceDatapath> datapath_;  // after backend_: destroyed first
  std::vector<datapath::Worker*> workers_;  // the datapath's, one per queue pair
  // Read by the control socket's thread: relaxed atomics (reporting only).
  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> protocol_errors_{0};
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> negotiated_{0};
  std::atomic<uint16_t> guest_mtu_{0};
  // The connection's BackendDevice::IotlbStats, field by field.
  std::array<std::atomic<uint64_t>, 6> iotlb_{};
  void store_iotlb(const vhost_user::IotlbStats& stats) noexcept;
  std::atomic<sync::GuardPolicy> memory_policy_;
  std::chrono::steady_clock::time_point next_stats_;
};

}  // namespace uvhost::serve
