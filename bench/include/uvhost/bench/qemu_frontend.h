// qemu_frontend.h - `uvhost bench --frontend qemu`: a real Linux guest (its virtio-net
// driver, under QEMU) as the traffic source of one run, instead of our embedded frontend.
//
// Contract
// --------
//  - run_qemu_point(config, point, options) does what run_point does (workload.h) with
//    the guest of scripts/build-guest.sh (options.guest_dir: the folder holding its
//    vmlinux and initramfs.cpio, i.e. dirname of the GUEST_KERNEL it prints, or the
//    cache above it, build/guest, when exactly one guest is there). Only
//    Config::backend == kUvhost and queue_pairs == 1. Throws std::runtime_error with the
//    reason and the relevant log tails (uvhost's, QEMU's, the guest console's).
//  - The run: a fresh network namespace (uvh-bench-<pid>-<n>); `uvhost serve` started in
//    it (pinned to backend_cpu) with one port `backend=tap` on a fresh tap (+ the
//    Config's port keys and daemon flags); the tap's host end gets 10.0.9.1/24; for
//    streams `iperf3 -s` listens there (not pinned: it is the peer, its CPU is not
//    counted); QEMU (pinned to frontend_cpu; the accelerator in guest_dir/accel when
//    tests/qemu's probe left one, else tcg) boots the guest on uvhost's socket with
//    its orders on the kernel command line (scripts/guest-init.sh: bench-tx / bench-rx /
//    bench-rr, uvhost.size/sessions/warmup/secs).
//  - Workloads, as the guest runs them: stream-tx = iperf3 -c (TCP, -P sessions, -l size
//    as the write size, -O warm-up), stream-rx = the same with -R, rr = iputils ping -A
//    (the next request when the reply came) with -l sessions-1 preloaded and ICMP
//    payload size-42 (size = the Ethernet frame of request and reply; >= 58).
//    warmup_seconds and seconds are rounded up to whole seconds (iperf3 takes whole
//    seconds), the warm-up to at least 1.
//  - The result is the guest's own view, from its console's result line: seconds (the
//    window by the guest's /proc/uptime), packets and bytes (eth0's counters in the
//    measured direction at the window's edges: driver packets, GSO super-packets when
//    TSO is negotiated; bytes with the Ethernet header), rr's transactions (replies)
//    and p50/p99/p99.9 of the per-reply times (computed in the guest). CPU: every QEMU
//    thread is side "frontend" (the vCPU thread runs the guest's driver and iperf3 or
//    ping), every uvhost thread side "backend", from /proc schedstat snapshots taken
//    when the console shows `UVHOST-WINDOW: begin` / `end`; those edges are as precise
//    as the console's latency (the serial file is polled every 2 ms; under TCG the
//    guest's write lags by up to a few ms), so CPU shares carry that error.
//  - Every wait is bounded; the namespace (with the tap), the processes and the work
//    folder (unless options.work_dir was given) are removed on success and failure.
//  - Root is needed (network namespace, tap).
//  - run_qemu_side_by_side(a, b, a_first, point, options): A and B as two guests (each
//    as above, on its own uvhost serve with its config), booted one after the other
//    (the first paused during the second's boot) with uvhost.tests=bench-serve and
//    alive together. Each window is one order on the guest's second serial port
//    (`bench-tx N`, `bench-rx N`, `bench-rr N`, N = options.slice_seconds rounded up to
//    whole seconds, after the guest's own warm-up of options.warmup_seconds): the
//    guest's side is resumed (SIGCONT to QEMU, uvhost and iperf3 -s), runs that test
//    as run_qemu_point's guest would, and is paused (SIGSTOP) again once the guest is
//    ready for the next order, so nothing of a paused side runs. One unmeasured window
//    per side first (under TCG a guest's first run translates its code), then
//    round(seconds / N) windows per side, A B B A ... (B A A B ... when !a_first).
//    Returns {A, B}, each summed over its windows (seconds, packets, bytes,
//    transactions; every QEMU and uvhost thread's CPU within the windows), rr's
//    percentiles the median of its windows' own, and `slices` one per window (its
//    throughput, start, length and the machine's steal). Throws like run_qemu_point;
//    everything of both guests is torn down either way.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "uvhost/bench/workload.h"

namespace uvhost::bench {

RunResult run_qemu_point(const Config& config, const Point& point, const RunOptions& options);

std::array<RunResult, 2> run_qemu_side_by_side(const Config& a, const Config& b, bool a_first, const Point& point,
                                               const RunOptions& options);

// The guest's iperf3 and ping take whole seconds: `seconds` rounded up, at least 1.
long guest_seconds(double seconds) noexcept;
// run_qemu_side_by_side's windows per side: seconds / guest_seconds(slice_seconds),
// rounded, at least 1.
uint32_t guest_windows(double seconds, double slice_seconds) noexcept;
// Why a guest cannot run `config` (empty: it can): it needs our own uvhost serve and
// does no injected frontend work.
std::string qemu_config_problem(const Config& config);

// The guest's kernel and initramfs in `guest_dir` (or its one subfolder holding them),
// and the accelerator (`accel` there: tests/qemu's KVM probe; else tcg); throws std::runtime_error telling to
// run scripts/build-guest.sh when they are not there.
struct GuestImage {
  std::string kernel, initrd, accel;
};
GuestImage find_guest(const std::string& guest_dir);

}  // namespace uvhost::bench
