// poll_mode.cpp - see poll_mode.h.
#include "uvhost/datapath/poll_mode.h"

#include <fmt/format.h>

namespace uvhost::datapath {

std::string_view to_string(PollMode mode) noexcept { return base::name_of(kPollModeNames, mode, "?"); }

std::string_view to_string(ExitPolicy policy) noexcept { return base::name_of(kExitPolicyNames, policy, "?"); }

std::string_view to_string(PollExit exit) noexcept { return base::name_of(kPollExitNames, exit, "?"); }

std::optional<PollMode> parse_poll_mode(std::string_view text) noexcept { return base::parse(kPollModeNames, text); }

std::optional<ExitPolicy> parse_exit_policy(std::string_view text) noexcept {
  return base::parse(kExitPolicyNames, text);
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
