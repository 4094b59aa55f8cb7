// poll_mode.cpp - see poll_mode.h.
#include "uvhost/datapath/poll_mode.h"

#include <fmt/format.h>

namespace uvhost::datapath {

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
