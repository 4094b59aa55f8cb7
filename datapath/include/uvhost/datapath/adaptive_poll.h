// adaptive_poll.h - the `adaptive` poll mode's timeout: how long to keep polling a dry
// ring, learned from how long this queue usually stays dry.
//
// Design note
// -----------
// A fixed busy_us (vhost-net's busyloop_timeout) is right for one traffic pattern
// only: with requests arriving every 20 us, 50 us of polling catches every one
// (latency like `always`); with one arrival per millisecond the same 50 us are pure
// waste (CPU like `always`, latency like `notify`). The vhost thread left the choice to
// the administrator, per VM. Here the queue measures the gap it actually sees - from
// the moment it found its ring empty to the moment work arrived, whether that happened
// while polling or after sleeping - and keeps an exponentially weighted moving average
// (weight 1/8, in nanoseconds, integer arithmetic) of it, and decides only *whether*
// to poll:
//   - average at or below the cap (busy_us): poll, for the whole cap. Going to sleep
//     costs a guest kick and a wake-up (tens of microseconds on a VM); a poll that
//     gives up earlier than that turns every gap a little longer than usual - jitter,
//     an interrupt on the guest's CPU - into that full cost. (A timeout of twice the
//     average gap did exactly that under load: with 2 us gaps, polls of 4 us timed out
//     on 2% of the gaps, and each such gap paid a full sleep and wake-up.) Polling up
//     to the cap is the ski-rental rule: spend on waiting what a sleep would cost, then
//     sleep.
//   - average above the cap: polling would mostly time out: timeout 0 (sleep at once).
//     A later run of short gaps (measured after sleeping; they include the wake-up
//     latency, which is what a poll would have saved) pulls the average down and
//     polling resumes.
//   - A poll that timed out counts as a gap of twice the timeout (the real gap is
//     longer than the timeout, by how much is unknown): the average can only grow
//     from it, so a queue that went quiet stops polling after a few empty polls
//     instead of polling forever at the cap. (Counting only the timeout itself is not
//     enough: an average of samples that are all <= the cap never rises above the cap.)
// Cost when idle: a few polls of busy_us after the traffic stops, then none.
// Single-threaded: one per queue, used by its worker only.
#pragma once

#include <algorithm>
#include <cstdint>

namespace uvhost::datapath {

class AdaptivePollTimeout {
 public:
  // The timeout for the next poll: the cap, or 0 (do not poll).
  uint64_t timeout_ns(uint64_t cap_ns) const noexcept {
    // Samples are clamped to kMaxSampleNs (below): a cap at or above that could never
    // be exceeded by the average, and polling would never stop. Adaptive polls last
    // at most half of it.
    cap_ns = std::min(cap_ns, kMaxSampleNs / 2);
    if (primed_ && average_ns_ > cap_ns) return 0;  // no history yet: behave like `busy`
    return cap_ns;
  }

  // Work arrived `gap_ns` after the ring was found empty.
  void on_gap(uint64_t gap_ns) noexcept { add(gap_ns); }
  // A poll of `timeout_ns` ended with nothing: the gap is longer than that; counted as
  // twice the timeout, so that timeouts at the cap lift the average above the cap.
  void on_timeout(uint64_t timeout_ns) noexcept { add(std::max(2 * timeout_ns, average_ns_)); }

  uint64_t average_ns() const noexcept { return average_ns_; }

 private:
  static constexpr uint64_t kMaxSampleNs = 10'000'000;  // 10 ms

  void add(uint64_t sample_ns) noexcept {
    // Clamp: one long sleep (seconds) must not need hundreds of samples to forget.
    sample_ns = std::min<uint64_t>(sample_ns, kMaxSampleNs);
    if (!primed_) {
      average_ns_ = sample_ns;
      primed_ = true;
      return;
    }
    // average += (sample - average) / 8, in signed arithmetic.
    const int64_t delta = static_cast<int64_t>(sample_ns) - static_cast<int64_t>(average_ns_);
    average_ns_ = static_cast<uint64_t>(static_cast<int64_t>(average_ns_) + delta / 8);
  }

  uint64_t average_ns_ = 0;
  bool primed_ = false;
};

}  // namespace uvhost::datapath
