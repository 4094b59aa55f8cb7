// frontend_driver.h - the guest side of a bench run: drives the embedded vhost-user
// frontend (vhost_user::Frontend) through one workload on the calling thread.
//
// Contract
// --------
//  - frontend_options_for(point, queue_pairs): 2048-byte buffers (a larger frame spans
//    several on TX; MRG_RXBUF reassembles it on RX) and rings big enough for the
//    workload: at least 256, and room for 32 frames per ring (stream) or twice the
//    requests in flight per pair (rr) at the frame's size. Throws std::runtime_error
//    for a size outside kMinFrameSize..kMaxFrameSize or one no ring can hold. The
//    frontend asks for VIRTIO_F_IN_ORDER unless `in_order` is false, and for
//    VIRTIO_F_RING_PACKED when `ring` is packed.
//  - drive_frontend(frontend, spec) runs spec.warmup_seconds, then the measured window
//    of spec.seconds, then returns. At the window's start it resets its counters and
//    the histogram, reads its thread's CPU clock and calls spec.on_window_start(0); at
//    the end the same with on_window_end(0). Busy-polls; sleeps on a call eventfd (1 ms
//    at most) only after 200 us without progress.
//      stream-tx: keeps each used pair's TX ring full (batches of 32, one kick per
//        batch); packets = TX chains the device completed in the window.
//      stream-rx: counts frames received of exactly spec.point.size bytes; a frame of
//        any other size fails the run (the backend could not produce that size).
//      rr: `sessions` requests outstanding (session s on pair s % queue_pairs), each
//        session's next request sent when its answer (MACs swapped, same session and
//        sequence) comes back; each round trip goes into the histogram. An answer that
//        matches no outstanding request fails the run.
//      rr with point.rate > 0 (open loop, workload.h): arrivals on the schedule (Poisson
//        from a fixed seed, or evenly spaced) from the run's start; each due arrival
//        takes a session with nothing outstanding (pairs in turn) and is sent at once;
//        one that finds none waits, keeping its scheduled time. Latency = answer time
//        - scheduled time. The frontend spins between arrivals (never sleeps: a sleep
//        would delay the next one).
//    Sessions of stream-tx are spread the same way (pairs without one stay idle);
//    stream-rx receives on every pair (the backend decides where frames go).
//    spec.spin_ns[side]: CPU work of that many ns per packet sent or received
//    (injected_work.h; counted in the frontend's CPU: calibration's known slowdown).
//    spec.idle_window: the warm-up runs the workload (rr or stream-tx), then the frontend
//      sends nothing through the measured window of spec.seconds (sleeping; answers
//      still in flight are left unread): the result counts no traffic, and the window
//      callbacks bracket the backend's idle time. One side only.
//    spec.drain (rr): after the window, keep reading answers (unmeasured) until none
//      is outstanding, so the connection holds nothing in flight when the call
//      returns: the next call on it (run_point_side_by_side drives each side in
//      slices, one call per slice) starts clean, and a backend paused in between
//      owes no answer. Stream workloads need no drain (their counters take a base at
//      the window's start).
//  - drive_frontend_interleaved(frontend, spec), spec.sides = 2: one connection, two
//    configurations ("sides" A = 0 and B = 1) measured in turn. After the warm-up the
//    window of spec.seconds PER SIDE is cut into spec.slices sub-windows per side in
//    A B B A A B ... order (spec.first_side first; a drift over the run then weighs on
//    both sides alike). Whenever the side changes, spec.switch_to(side) is called on
//    this thread (it changes whatever differs between the sides, e.g. a poll mode
//    through the backend's control socket; spin_ns follows by itself) and
//    spec.settle_seconds pass unmeasured. The backend is taken to start as side 0: if
//    the first side is 1, switch_to(1) is called before the warm-up. Each sub-window
//    calls on_window_start(side) / on_window_end(side); counters, histogram, wall and
//    CPU time add up per side. Both sides must see traffic.
//  - Throws std::runtime_error when the frontend breaks, nothing moves for 2 s, a
//    frame is wrong, or the window saw no traffic at all.
#pragma once

#include <array>
#include <cstdint>
#include <functional>

#include "uvhost/bench/latency_histogram.h"
#include "uvhost/bench/workload.h"
#include "uvhost/vhost_user/frontend.h"

namespace uvhost::bench {

struct DriveSpec {
  Point point;
  uint32_t queue_pairs = 1;
  double warmup_seconds = 0.3;
  double seconds = 1.0;
  std::array<uint64_t, 2> spin_ns{};  // per side
  bool idle_window = false;
  bool drain = false;  // rr: read every outstanding answer before returning
  std::function<void(uint32_t side)> on_window_start;
  std::function<void(uint32_t side)> on_window_end;
  // Interleaving (drive_frontend_interleaved): two sides, `slices` sub-windows each.
  uint32_t sides = 1;
  uint32_t slices = 1;
  uint32_t first_side = 0;
  double settle_seconds = 0;
  std::function<void(uint32_t side)> switch_to;
};

struct DriveResult {
  double seconds = 0;  // the window's wall time
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t transactions = 0;
  LatencyHistogram latency;  // rr: round trips, ns
  double frontend_cpu_seconds = 0;
};

vhost_user::FrontendOptions frontend_options_for(const Point& point, uint32_t queue_pairs, bool in_order = true,
                                                 RingFormat ring = RingFormat::kSplit);
DriveResult drive_frontend(vhost_user::Frontend& frontend, const DriveSpec& spec);
std::array<DriveResult, 2> drive_frontend_interleaved(vhost_user::Frontend& frontend, const DriveSpec& spec);

}  // namespace uvhost::bench
