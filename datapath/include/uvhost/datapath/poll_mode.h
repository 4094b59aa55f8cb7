// poll_mode.h - how a virtqueue's handler waits when its ring runs dry (vhost-net's
// busy polling and when it ends), chosen per queue and changeable while traffic runs.
//
//   notify    sleep at once: re-enable guest kicks (with the re-check) and let the
//             worker sleep until the next kick (vhost-net without busyloop_timeout).
//   busy      keep polling the ring, kicks disabled, for up to busy_us microseconds
//             before going to sleep as `notify` does (vhost-net's busyloop_timeout,
//             from the Linux series "basic busy polling support for vhost_net").
//   always    never sleep: poll as long as the queue runs, like a DPDK PMD. A
//             transmit ring spins on its own ring and steps aside (re-queues
//             itself) as soon as another item of the worker is pending, so other
//             queues on the same worker still get their turns. A receive ring has
//             nothing to poll (its frames come as events) and waits for them.
//   adaptive  `busy` that decides from the gaps observed between arrivals on this
//             queue whether to poll (AdaptivePollTimeout): gaps shorter than busy_us
//             on average -> poll up to busy_us; longer -> sleep at once. A transmit
//             poll that meets another queue's work (exit `accurate`) steps aside
//             behind it with kicks still disabled, as `always` does, and resumes
//             the same dry spell after it; the spell's budget is busy_us in all.
//
// When a busy poll ends before its timeout (ExitPolicy; the Linux patch "vhost: make
// busyloop_intr more accurate" changed it from `any` to `accurate`):
//   any       any item pending on the worker ends the poll, and the handler then
//             re-queues itself with kicks still disabled (vhost's busyloop_intr set
//             on any vhost_has_work(): the pre-2018 behaviour);
//   accurate  only pending work of this queue, or of another virtqueue on the same
//             worker, ends the poll; this queue re-queues itself only when the work
//             is its own, and otherwise goes to sleep the `notify` way (vhost's
//             vhost_has_work_pending(), from that patch; `adaptive` transmit steps
//             aside instead, see above). Control items do not interrupt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "uvhost/base/name_table.h"

namespace uvhost::datapath {

using base::to_string;

enum class PollMode : uint8_t { kNotify, kBusy, kAlways, kAdaptive };
enum class ExitPolicy : uint8_t { kAccurate, kAnyWork };

// The one spelling of each mode and exit policy: printing, parsing and choice lists.
inline constexpr auto kPollModeNames = base::name_table<PollMode>(
    {{PollMode::kNotify, "notify"}, {PollMode::kBusy, "busy"}, {PollMode::kAlways, "always"}, {PollMode::kAdaptive, "adaptive"}});
inline constexpr auto kExitPolicyNames =
    base::name_table<ExitPolicy>({{ExitPolicy::kAccurate, "accurate"}, {ExitPolicy::kAnyWork, "any"}});
constexpr const auto& enum_names(PollMode) noexcept { return kPollModeNames; }
constexpr const auto& enum_names(ExitPolicy) noexcept { return kExitPolicyNames; }

struct PollSettings {
  PollMode mode = PollMode::kNotify;
  uint32_t busy_us = 50;  // busy: the timeout; adaptive: the largest timeout
  ExitPolicy exit = ExitPolicy::kAccurate;

  friend bool operator==(const PollSettings&, const PollSettings&) = default;
};

// Why a busy poll (or a pass of `always`) ended. Counted per queue.
enum class PollExit : uint8_t {
  kWork,        // this ring got work
  kOwnKick,     // this queue's handler was queued (a kick, a ready fd, an injected frame)
  kOtherQueue,  // another virtqueue on this worker is pending
  kAnyWork,     // (policy any) some item is pending on the worker
  kTimeout,     // nothing came within the timeout
};
inline constexpr auto kPollExitNames = base::name_table<PollExit>({{PollExit::kWork, "work"},
                                                                   {PollExit::kOwnKick, "own_kick"},
                                                                   {PollExit::kOtherQueue, "other_queue"},
                                                                   {PollExit::kAnyWork, "any_work"},
                                                                   {PollExit::kTimeout, "timeout"}});
inline constexpr size_t kPollExitCount = kPollExitNames.size();
constexpr const auto& enum_names(PollExit) noexcept { return kPollExitNames; }

// "busy(50us,accurate)", "notify", "always", "adaptive(<=50us,accurate)".
std::string describe(const PollSettings& settings);

// Packs settings into one word so a queue's settings can be replaced atomically while
// its worker reads them (a relaxed load per idle phase).
uint64_t pack(const PollSettings& settings) noexcept;
PollSettings unpack(uint64_t word) noexcept;

}  // namespace uvhost::datapath
