// service_notifier.h - what `uvhost serve` tells its service manager (systemd's
// Type=notify protocol, sd_notify(3)): ready, reloading, stopping, and a status line.
//
// Contract
// --------
//  - Every message goes to the datagram socket named by $NOTIFY_SOCKET (a path, or
//    an abstract name starting with '@'), as sd_notify(3) sends it. Without
//    NOTIFY_SOCKET every call is a no-op: the daemon runs the same in a terminal.
//    A failed send is logged once (at warning) and otherwise ignored: the manager's
//    trouble never stops the daemon.
//  - ready(): READY=1 with a STATUS line; call it once every port is open (server
//    sockets listening), and again after a reload.
//  - reloading(): RELOADING=1 (with MONOTONIC_USEC, which systemd >= 253 expects from
//    Type=notify-reload services); ready() ends the reload.
//  - stopping(): STOPPING=1; call it when the daemon starts to stop.
//  - status(): STATUS=<text>, sent only when the text differs from the last one sent,
//    so it is cheap to call periodically.
//  - Not thread-safe: one thread (the daemon's main thread) calls it.
#pragma once

#include <cstddef>
#include <string>

namespace uvhost::serve {

// "4 ports, 2 connected": the STATUS line of a daemon with `ports` ports of which
// `connected` have a frontend.
std::string service_status(size_t ports, size_t connected);

class ServiceNotifier {
 public:
  ServiceNotifier() = default;

  // Whether NOTIFY_SOCKET is set (a manager listens for our messages).
  static bool enabled();

  void ready(const std::string& status);
  void reloading(const std::string& status);
  void stopping(const std::string& status);
  void status(const std::string& status);

 private:
  void send(const std::string& message);

  std::string last_status_;
  bool warned_ = false;
};

}  // namespace uvhost::serve
