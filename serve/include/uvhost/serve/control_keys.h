// control_keys.h - the control protocol's vocabulary: the keys of a `set` request, their
// limits and their choices, shared by the daemon (daemon_control.cpp), the port spec
// (port_spec.cpp), `uvhost ctl set` (cli/ctl.cpp) and the bench's live A/B switch
// (bench/src/live_switch.cpp), so each key is spelled once.
//
// Contract:
//  - The choices of poll, exit, memory and enqueue are the name tables of the layers
//    that own the enums (datapath, sync): printing, parsing and the lists of accepted
//    names come from those tables.
//  - kLivePortKeys are the port keys a running port takes (`set` with a port);
//    kDaemonLiveKeys the daemon-wide ones (`set` without one).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "uvhost/datapath/poll_mode.h"
#include "uvhost/sync/read_mostly.h"
#include "uvhost/sync/work_queue.h"

namespace uvhost::serve::control {

// Request keys.
inline constexpr std::string_view kCmd = "cmd";
inline constexpr std::string_view kPort = "port";
inline constexpr std::string_view kQueue = "queue";
inline constexpr std::string_view kPoll = "poll";
inline constexpr std::string_view kBusyUs = "busy_us";
inline constexpr std::string_view kExit = "exit";
inline constexpr std::string_view kMemory = "memory";
inline constexpr std::string_view kEnqueue = "enqueue";
inline constexpr std::string_view kWorker = "worker";

// Every key a `set` request may carry.
inline constexpr std::array kSetKeys = {kCmd, kPort, kQueue, kPoll, kBusyUs, kExit, kMemory, kEnqueue, kWorker};
// The port keys a running port takes, and the daemon-wide one.
inline constexpr std::array kLivePortKeys = {kPoll, kBusyUs, kExit, kMemory};
inline constexpr std::string_view kDaemonLiveKey = kEnqueue;

// Limits.
inline constexpr uint32_t kMaxBusyUs = 1'000'000;  // busy_us is 0..kMaxBusyUs microseconds

// Choices (the owning layers' name tables).
inline constexpr const auto& kPollChoices = datapath::kPollModeNames;
inline constexpr const auto& kExitChoices = datapath::kExitPolicyNames;
inline constexpr const auto& kMemoryChoices = sync::kGuardPolicyNames;
inline constexpr const auto& kEnqueueChoices = sync::kEnqueueStrategyNames;

constexpr bool is_live_port_key(std::string_view key) noexcept {
  for (std::string_view live : kLivePortKeys) {
    if (live == key) return true;
  }
  return false;
}

}  // namespace uvhost::serve::control
