// injected_work.h - a fixed amount of CPU work of a known duration, for calibration.
//
// `uvhost bench calibrate` slows configuration B down by a known amount: the frontend
// does extra work per packet. That work must cost the same every time it is asked for,
// or the "known" slowdown is not known:
//  - Spinning until a clock says N ns have passed reads the clock at least twice per
//    packet; on a VM (kvm-clock) that overhead is as large as the injected work
//    itself at high packet rates, and a spin
//    preempted midway ends early, so its cost depends on the machine's load.
//  - Instead the work is a chain of dependent multiply-adds (each needs the previous
//    result, so the CPU cannot overlap them and the compiler cannot fold them), run a
//    given number of times. How many iterations make one ns is measured once per
//    process (the fastest of several timed batches: the least disturbed), so N ns of
//    work is N * iterations_per_ns iterations, whatever the clock costs.
//  - The chain is fenced on both sides (x86 lfence): otherwise the core runs it in
//    the shadow of the cache misses before it and a few dozen ns of it cost nothing.
// Like any CPU work it takes longer when the core is shared; that is the point: it
// behaves as a packet's processing cost would.
#pragma once

#include <cstdint>

namespace uvhost::bench {

// Runs `iterations` dependent multiply-adds. Never inlined away.
void run_injected_iterations(uint64_t iterations) noexcept;

// Iterations per ns of this CPU, measured on first use (thread-safe; a few timed
// batches, once per process).
double injected_iterations_per_ns() noexcept;

// Does about `ns` nanoseconds of work (0: nothing).
void do_injected_work_ns(uint64_t ns) noexcept;

}  // namespace uvhost::bench
