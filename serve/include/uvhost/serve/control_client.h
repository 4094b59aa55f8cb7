// control_client.h - one request to a daemon's control socket (control_server.h has
// the protocol), for `uvhost ctl` and tests.
//
// Contract
// --------
//  - Connects to `path`, writes `request` as one line, reads one reply line, closes.
//    Blocks for at most `timeout` in all (connecting included: a live server whose
//    backlog is full is retried until then).
//  - nullopt with `error` filled in, naming the path (and the errno text where there
//    is one), when the socket cannot be reached, the server hangs up or does not answer
//    in time, or the reply is not JSON. A reply with "ok": false is a reply: the caller
//    judges it.
//  - No signal: a server that goes away is an error, never SIGPIPE.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace uvhost::serve {

// Longest reply line accepted (a stats reply of many ports and queues stays far below).
inline constexpr size_t kMaxControlReplyBytes = 64 * 1024 * 1024;

std::optional<nlohmann::json> control_request(const std::string& path, const nlohmann::json& request,
                                              std::string& error,
                                              std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace uvhost::serve
