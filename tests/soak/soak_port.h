// soak_port.h - one vhost-user port of the soak: our embedded frontend on it, frames
// sent and their echoes checked (backend=loopback on the daemon's side).
//
// Contract
// --------
//  - connect() starts a new connection (its number is one more than the last) and
//    retries for up to `timeout` (a socket not there yet, a start that failed); each
//    retry is counted in reconnect_retries.
//  - pump() never blocks: it sends the frames that are due (at most `window` frames
//    unanswered, paced at `pps` frames per second), takes what came back and checks
//    each frame against the next expected one (port, connection, sequence, length,
//    payload, MACs). It returns true if anything moved.
//  - drain() waits until every frame sent on this connection came back (or `timeout`);
//    fewer is an error: it is the connection's exact-count check.
//  - disconnect(): kGraceful sends the frontend's stop messages (GET_VRING_BASE), kAbrupt
//    just closes everything, as a crashed guest would; neither checks the count, so a
//    close with frames in flight is one without drain() first.
//  - Errors (a bad frame, a lost or extra frame, a broken frontend) are counted and
//    the first few kept as text; a port with errors fails the soak.
//  - One thread at a time (the frontend's own rule).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "soak_frame.h"
#include "uvhost/vhost_user/frontend.h"

namespace uvhost::soak {

enum class Disconnect { kGraceful, kAbrupt };

struct PortTraffic {
  uint64_t sent = 0;         // frames sent, every connection
  uint64_t received = 0;     // frames that came back and matched
  uint64_t connections = 0;  // connections started
  uint64_t reconnect_retries = 0;
  uint64_t errors = 0;
};

class SoakPort {
 public:
  SoakPort(uint16_t index, std::string socket_path, uint32_t window, uint32_t pps);
  ~SoakPort();

  bool connect(std::chrono::milliseconds timeout);
  bool pump(std::chrono::steady_clock::time_point now);
  bool drain(std::chrono::milliseconds timeout);
  void disconnect(Disconnect how);

  bool connected() const noexcept { return frontend_ != nullptr; }
  // Frames of the current connection that came back.
  uint64_t connection_received() const noexcept { return next_.seq; }
  uint64_t connection_sent() const noexcept { return connection_sent_; }
  uint32_t connection_number() const noexcept { return connection_; }
  uint16_t index() const noexcept { return index_; }
  const std::string& socket_path() const noexcept { return socket_path_; }
  const PortTraffic& traffic() const noexcept { return traffic_; }
  const std::vector<std::string>& error_texts() const noexcept { return error_texts_; }

 private:
  void error(const std::string& what);
  size_t take_echoes();

  uint16_t index_;
  std::string socket_path_;
  uint32_t window_;
  uint32_t pps_;
  std::unique_ptr<vhost_user::Frontend> frontend_;
  uint32_t connection_ = 0;
  uint64_t connection_sent_ = 0;  // frames sent on the current connection
  FrameId next_;  // the echo expected next
  std::chrono::steady_clock::time_point connection_start_{};
  PortTraffic traffic_;
  std::vector<std::string> error_texts_;
};

}  // namespace uvhost::soak
