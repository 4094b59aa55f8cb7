// port.h - one port of `uvhost serve`: a vhost-user socket and the device behind it,
// served by one thread, one frontend at a time, for as long as the daemon runs.
//
// Design
// ------
//  A port owns an InlineDatapath (sink or loopback) that outlives connections, so its
//  counters add up over every frontend it served. Each connection gets a fresh
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
//   The stale-socket probe of open() is a real connect(): a live daemon on that path
//   sees a frontend come and go (and refuses to give the path up).
//  The serving loop (one poll() over the stop fd, the socket, the listener and the
//  transmit rings' kick eventfds) alternates control messages and datapath work: a
//  message is handled as soon as it arrives, between bounded bursts of packets. While
//  the rings have work it polls without sleeping and with guest kicks disabled; when a
//  pass finds nothing it re-enables kicks, re-checks the rings (InlineDatapath::
//  enable_kicks, the lost-wakeup race), and only then sleeps.
//
// Contract
// --------
//  - open() then run() on one thread; run() returns when `stop_fd` (an eventfd the
//    daemon writes once and never reads) becomes readable. On return the device is gone
//    (rings stopped after their last burst was completed and published: the guest's
//    rings are consistent), every fd of the connection is closed and, in server mode,
//    the socket is removed when the Port is destroyed.
//  - totals() may be read after run() returned. While it runs, the port logs a line
//    per connection and, with a stats interval, its counters periodically.
//  - Nothing a frontend does affects other ports: each port has its own thread, device
//    and memory; a protocol violation ends that connection only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "uvhost/serve/port_spec.h"
#include "uvhost/vhost_user/connection.h"
#include "uvhost/vhost_user/inline_datapath.h"

namespace uvhost::serve {

// Counters over the port's life, every connection included.
struct PortTotals {
  uint64_t connections = 0;        // frontends served
  uint64_t rejected = 0;           // frontends turned away (one was being served)
  uint64_t protocol_errors = 0;    // connections we ended: a refused message, a broken stream, a failed reply
  uint64_t tx_packets = 0;         // guest -> backend (all transmit vrings)
  uint64_t tx_bytes = 0;
  uint64_t rx_packets = 0;         // backend -> guest (loopback)
  uint64_t rx_bytes = 0;
  uint64_t rx_dropped = 0;         // reflected frames the guest had no room for
  uint64_t calls = 0;              // guest notifications sent
  uint64_t broken_queues = 0;      // rings stopped by a guest's spec violation (at last look)
};

class Port {
 public:
  Port(PortSpec spec, int stop_fd, std::chrono::milliseconds stats_interval = std::chrono::milliseconds{0});
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  // Server mode: binds and listens now. A socket file left behind by a dead process
  // (nobody accepts on it) is replaced; a live one is not. Client mode: only checks that
  // the path can be a socket's (empty or too long fails here, not at every retry).
  bool open(std::string& error);

  // Serves frontends until the stop fd is readable.
  void run();

  const PortSpec& spec() const noexcept { return spec_; }
  PortTotals totals() const;

 private:
  std::optional<vhost_user::Connection> accept_frontend();
  std::optional<vhost_user::Connection> connect_to_frontend();
  void serve(vhost_user::Connection connection);
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
  int stop_fd_;
  std::chrono::milliseconds stats_interval_;
  std::optional<vhost_user::Listener> listener_;
  vhost_user::InlineDatapath datapath_;
  uint64_t connections_ = 0;
  uint64_t rejected_ = 0;
  uint64_t protocol_errors_ = 0;
  std::chrono::steady_clock::time_point next_stats_;
};

}  // namespace uvhost::serve
