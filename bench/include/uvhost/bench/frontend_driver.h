// frontend_driver.h - the guest side of a bench run: drives the embedded vhost-user
// frontend (vhost_user::Frontend) through one workload on the calling thread.
//
// Contract
// --------
//  - frontend_options_for(point, queue_pairs): 2048-byte buffers (a larger frame spans
//    several on TX; MRG_RXBUF reassembles it on RX) and rings big enough for the
//    workload: at least 256, and room for 32 frames per ring (stream) or twice the
//    requests in flight per pair (rr) at the frame's size. Throws std::runtime_error
//    for a size outside kMinFrameSize..kMaxFrameSize or one no ring can hold.
//  - drive_frontend(frontend, spec) runs spec.warmup_seconds, then the measured window
//    of spec.seconds, then returns. At the window's start it resets its counters and
//    the histogram, reads its thread's CPU clock and calls spec.on_window_start; at
//    the end the same with on_window_end. Busy-polls; sleeps on a call eventfd (1 ms
//    at most) only after 200 us without progress.
//      stream-tx: keeps each used pair's TX ring full (batches of 32, one kick per
//        batch); packets = TX chains the device completed in the window.
//      stream-rx: counts frames received of exactly spec.point.size bytes; a frame of
//        any other size fails the run (the backend could not produce that size).
//      rr: `sessions` requests outstanding (session s on pair s % queue_pairs), each
//        session's next request sent when its answer (MACs swapped, same session and
//        sequence) comes back; each round trip goes into the histogram. An answer that
//        matches no outstanding request fails the run.
//    Sessions of stream-tx are spread the same way (pairs without one stay idle);
//    stream-rx receives on every pair (the backend decides where frames go).
//    spec.spin_ns: CPU work of that many ns per packet sent or received
//    (injected_work.h; counted in the frontend's CPU: calibration's known slowdown).
//  - Throws std::runtime_error when the frontend breaks, nothing moves for 2 s, a
//    frame is wrong, or the window saw no traffic at all.
#pragma once

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
  uint64_t spin_ns = 0;
  std::function<void()> on_window_start;
  std::function<void()> on_window_end;
};

struct DriveResult {
  double seconds = 0;  // the window's wall time
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t transactions = 0;
  LatencyHistogram latency;  // rr: round trips, ns
  double frontend_cpu_seconds = 0;
};

vhost_user::FrontendOptions frontend_options_for(const Point& point, uint32_t queue_pairs);
DriveResult drive_frontend(vhost_user::Frontend& frontend, const DriveSpec& spec);

}  // namespace uvhost::bench
