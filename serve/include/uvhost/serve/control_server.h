// control_server.h - the control socket of `uvhost serve`: newline-delimited JSON
// requests in, one JSON reply per request out, answered by a handler the daemon gives.
//
// Contract
// --------
//  What it guarantees
//  - open() binds a Unix stream socket at `path`, mode 0600 (only our user may talk
//    to the daemon). A socket file left by a dead process is replaced; one that a live
//    process still accepts on is refused (open() fails), and a path that is not a
//    socket is never removed. The file is unlinked when the ControlServer is destroyed.
//  - One thread of its own serves every client: one poll() over the listener, an
//    internal stop eventfd and the clients. At most kMaxClients at once; another one is
//    accepted, sent {"ok":false,"error":"too many control clients"} and closed.
//  - Framing: a request is one line (ending in '\n'; a '\r' before it is ignored; an
//    empty line is ignored). Each request gets exactly one reply line, in order.
//     - a line longer than kMaxLineBytes (newline not counted): error reply, then the
//       client is closed (its stream cannot be resynchronized cheaply);
//     - invalid JSON (UTF-8 included) or a JSON value that is not an object: an
//       {"ok":false,"error":"..."} reply, and the client stays;
//     - the handler throwing: {"ok":false,"error":"<what()>"} reply, the client stays;
//     - a client that disconnects with a partial line: closed, the partial line dropped.
//  - Replies are written whole (partial writes continued when the client reads on).
//    While a reply is pending the client's further requests are not read (so a client
//    that pipelines requests but never reads cannot make us buffer without bound); a
//    client that takes no byte of its pending reply for kWriteTimeout is dropped. No
//    client can stall the others: every socket is non-blocking.
//  - stop(): idempotent; the thread exits after the request it is handling, every
//    client fd is closed. The destructor stops, then unlinks the socket file.
//
//  The handler
//  - Is called on the server's thread only, one request at a time, never concurrently
//    with itself: it needs no lock against itself, but must be safe against whatever
//    else in the process it reads (port threads, workers). It should be quick: while
//    it runs no other client is served.
//  - Must not call stop() or destroy the server (that would join its own thread).
//  - Its reply should be an object with "ok"; it is sent as returned. Strings that are
//    not valid UTF-8 are replaced (U+FFFD), never a reason to drop a reply.
//
//  Memory orders / threads
//  - No atomics: clients, buffers and the handler are touched only by the server's
//    thread. stop() talks to it through the eventfd (a syscall, so ordered) and then
//    joins it, which orders everything the thread did before anything after stop().
//
// The protocol (the reference for `uvhost ctl` and the daemon's handler)
// -----------------------------------------------------------------------
//  {"cmd":"list"} ->
//    {"ok":true,"ports":[{"name":"p0","socket":"/run/a.sock","client":false,
//      "backend":"loopback","queue_pairs":1,"workers":"device","connected":true,
//      "features":{"offered":["CSUM","GUEST_CSUM",...],"negotiated":[...],"guest_mtu":0}}]}
//      (feature names as virtio/net_features.h spells them; negotiated: what the current
//      frontend acked, empty between connections; guest_mtu: its NET_SET_MTU, 0 if none)
//  {"cmd":"stats"} ->
//    {"ok":true,"uptime_s":12.5,
//     "ports":[{"name":"p0","backend":"loopback","connected":true,"connections":1,
//       "protocol_errors":0,"memory":"rcu","features":{...as in list...},
//       "backend_stats":{...any object...},
//       "queues":[{"index":1,"direction":"rx","pair":0,"worker":"p0.w0","started":true,
//         "enabled":true,"broken":false,
//         "poll":{"mode":"busy","busy_us":50,"exit":"accurate"},
//         "packets":100,"bytes":6400,"dropped":0,"kicks":3,"calls":2,
//         "calls_suppressed":98,"polls":5,"poll_ns":250000,
//         "poll_exits":{"work":3,"own_kick":0,"other_queue":0,"any_work":0,"timeout":2},
//         "weight_yields":0}]}],
//       (queues to the guest also: "buffer_waits", "inject_dropped": frames refused at inject,
//       the inbound ring full or the queue not running, "inject_stopped": the part of
//       those refused because it was not running, e.g. before the guest's driver
//       started it)
//     "workers":[{"name":"p0.w0","cpu_ns":123456789,"items_run":1000,"wakeups":10,
//       "parks":10,"enqueue":"lockless","queues":["p0/0","p0/1"]}],
//     "process":{"cpu_seconds":1.5,"resident_bytes":9000000,"virtual_bytes":200000000,
//       "open_fds":12,"max_fds":1024,"start_time_seconds":1700000000.25}}
//    "direction": "rx" for what comes from the guest (odd vrings), "tx" for what goes
//    to it (even vrings), as DPDK and OVS name them (direction.h). "process": this
//    daemon's resource use (process_stats.h).
//    Counters are totals since the daemon started (monotonic); a field a datapath does
//    not have is left out, never sent as 0.
//  {"cmd":"set","port":"p0","queue":1,"poll":"busy","busy_us":50,"exit":"accurate"}
//    queue omitted: every queue of the port. Any subset of poll (notify|busy|always|
//    adaptive), busy_us, exit (accurate|any), memory (mutex|rwsem|pthread-rwlock|rcu).
//  {"cmd":"set","enqueue":"lockless","worker":"p0.w0"}
//    enqueue: locked_wake|unlock_wake|lockless; worker omitted: every worker.
//    set -> {"ok":true,"changed":["...", ...]} or {"ok":false,"error":"..."}
//  Anything else -> {"ok":false,"error":"..."} (the handler's business).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "uvhost/vhost_user/connection.h"
#include "uvhost/base/unique_fd.h"
#include "uvhost/sync/thread_annotations.h"

namespace uvhost::serve {

class ControlServer {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json&)>;

  static constexpr size_t kMaxClients = 16;
  static constexpr size_t kMaxLineBytes = 64 * 1024;
  static constexpr std::chrono::milliseconds kWriteTimeout{1000};

  // Binds, listens and starts the thread. nullptr (error filled in) when the path is
  // in use by a live process, not a socket, too long, or a syscall fails.
  static std::unique_ptr<ControlServer> open(const std::string& path, Handler handler, std::string& error);

  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Idempotent; from any thread but the server's own (i.e. not from the handler).
  void stop() noexcept UVHOST_EXCLUDES(stop_mutex_);

  const std::string& path() const noexcept { return listener_.path(); }

 private:
  ControlServer(vhost_user::Listener listener, base::UniqueFd stop_fd, Handler handler);
  void run();

  vhost_user::Listener listener_;
  base::UniqueFd stop_fd_;
  Handler handler_;
  sync::Mutex stop_mutex_;  // two threads calling stop() at once: one joins, one waits
  std::thread thread_ UVHOST_GUARDED_BY(stop_mutex_);
};

}  // namespace uvhost::serve
