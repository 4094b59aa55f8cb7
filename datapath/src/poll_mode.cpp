// poll_mode.cpp - see poll_mode.h.
#include "uvhost/datapath/poll_mode.h"

#include <fmt/format.h>

namespace uvhost::datapath {

std::string_view to_string(PollMode mode) noexcept {
  switch (mode) {
    case PollMode::kNotify: return "notify";
    case PollMode::kBusy: return "busy";
    case PollMode::kAlways: return "always";
    case PollMode::kAdaptive: return "adaptive";
  }
  return "?";
}

std::string_view to_string(ExitPolicy policy) noexcept {
  return policy == ExitPolicy::kAccurate ? "accurate" : "any";
}

std::string_view to_string(PollExit exit) noexcept {
  switch (exit) {
    case PollExit::kWork: return "work";
    case PollExit::kOwnKick: return "own_kick";
    case PollExit::kOtherQueue: return "other_queue";
    case PollExit::kAnyWork: return "any_work";
    case PollExit::kTimeout: return "timeout";
  }
  return "?";
}

std::optional<PollMode> parse_poll_mode(std::string_view text) noexcept {
  for (PollMode mode : {PollMode::kNotify, PollMode::kBusy, PollMode::kAlways, PollMode::kAdaptive}) {
    if (text == to_string(mode)) return mode;
  }
  return std::nullopt;
}

std::optional<ExitPolicy> parse_exit_policy(std::string_view text) noexcept {
  if (text == "accurate") return ExitPolicy::kAccurate;
  if (text == "any" || text == "any_work") return ExitPolicy::kAnyWork;
  return std::nullopt;
}

std::string describe(const PollSettings& settings) {
  switch (settings.mode) {
    case PollMode::kNotify:
    case PollMode::kAlways: return std::string(to_string(settings.mode));
    case PollMode::kBusy: return fmt::format("busy({}us,{})", settings.busy_us, to_string(settings.exit));
    case PollMode::kAdaptive: return fmt::format("adaptive(<={}us,{})", settings.busy_us, to_string(settings.exit));
  }
  return "?";
}

uint64_t pack(const PollSettings& settings) noexcept {
  return uint64_t{static_cast<uint8_t>(settings.mode)} | (uint64_t{static_cast<uint8_t>(settings.exit)} << 8) |
         (uint64_t{settings.busy_us} << 32);
}

PollSettings unpack(uint64_t word) noexcept {
  PollSettings settings;
  settings.mode = static_cast<PollMode>(word & 0xff);
  settings.exit = static_cast<ExitPolicy>((word >> 8) & 0xff);
  settings.busy_us = static_cast<uint32_t>(word >> 32);
  return settings;
}

}  // namespace uvhost::datapath
