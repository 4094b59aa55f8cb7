// frontend_driver.cpp - the three workloads on the embedded frontend (see
// frontend_driver.h).
#include "uvhost/bench/frontend_driver.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "uvhost/bench/bench_frame.h"
#include "uvhost/bench/cpu_time.h"
#include "uvhost/bench/injected_work.h"

namespace uvhost::bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kBufferSize = 2048;
constexpr uint32_t kNetHeaderBytes = 12;  // the largest virtio-net header (MRG_RXBUF / VERSION_1)
constexpr size_t kBatch = 32;
constexpr auto kIdleBeforeWait = std::chrono::microseconds{200};
constexpr auto kWaitSlice = std::chrono::milliseconds{1};
constexpr auto kStallLimit = std::chrono::seconds{2};

// The calibration's injected cost: `packets` times spin_ns of CPU work of known size
// (injected_work.h: a fixed number of iterations, not a clock-timed wait).
void spin(uint64_t spin_ns, uint64_t packets) noexcept {
  if (spin_ns == 0 || packets == 0) return;
  do_injected_work_ns(spin_ns * packets);
}

// Warm-up, then the measured window; owns the window's wall and CPU clocks.
class Window {
 public:
  explicit Window(const DriveSpec& spec)
      : spec_(spec),
        measure_at_(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(spec.warmup_seconds))) {}

  bool measuring() const noexcept { return phase_ == Phase::kMeasuring; }

  // Called after every step with the current time; `at_start` clears the caller's
  // counters at the window's start, `at_end` reads them at its end. false once the
  // window is over.
  template <typename AtStart, typename AtEnd>
  bool advance(Clock::time_point now, AtStart&& at_start, AtEnd&& at_end) {
    if (phase_ == Phase::kWarmup && now >= measure_at_) {
      at_start();
      if (spec_.on_window_start) spec_.on_window_start();
      cpu_start_ = thread_cpu_ns();
      wall_start_ = Clock::now();
      end_at_ = wall_start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spec_.seconds));
      phase_ = Phase::kMeasuring;
    } else if (phase_ == Phase::kMeasuring && now >= end_at_) {
      wall_end_ = Clock::now();
      cpu_end_ = thread_cpu_ns();
      at_end();
      if (spec_.on_window_end) spec_.on_window_end();
      phase_ = Phase::kDone;
    }
    return phase_ != Phase::kDone;
  }

  void finish(DriveResult& result) const {
    result.seconds = std::chrono::duration<double>(wall_end_ - wall_start_).count();
    result.frontend_cpu_seconds = static_cast<double>(cpu_end_ - cpu_start_) * 1e-9;
  }

 private:
  enum class Phase { kWarmup, kMeasuring, kDone };
  const DriveSpec& spec_;
  Phase phase_ = Phase::kWarmup;
  Clock::time_point measure_at_;
  Clock::time_point end_at_{};
  Clock::time_point wall_start_{}, wall_end_{};
  int64_t cpu_start_ = 0, cpu_end_ = 0;
};

// Fails the run when nothing has moved for kStallLimit; says when to sleep instead of spin.
class Progress {
 public:
  explicit Progress(const char* what) : what_(what), last_(Clock::now()) {}
  void moved(Clock::time_point now) noexcept { last_ = now; }
  bool idle(Clock::time_point now) const noexcept { return now - last_ >= kIdleBeforeWait; }
  void check(Clock::time_point now, vhost_user::Frontend& frontend) const {
    if (frontend.broken()) throw std::runtime_error("frontend broken: " + frontend.error());
    if (now - last_ >= kStallLimit) {
      // What the frontend saw, so a stall can be told apart: a request never completed
      // (TX in flight), or completed but never answered (the answer lost or not signalled).
      const vhost_user::FrontendStats& st = frontend.stats();
      throw std::runtime_error(fmt::format(
          "{}: nothing moved for {} s (backend stuck or frames lost; frontend: tx_packets={} tx_kicks={} "
          "tx_full={} tx_in_flight(pair 0)={} rx_packets={} rx_calls_waited={})",
          what_, std::chrono::duration_cast<std::chrono::seconds>(kStallLimit).count(), st.tx_packets, st.tx_kicks,
          st.tx_full, frontend.tx_in_flight(0), st.rx_packets, st.rx_calls_waited));
    }
  }

 private:
  const char* what_;
  Clock::time_point last_;
};

// Session s lives on pair s % queue_pairs.
std::vector<std::vector<uint32_t>> sessions_by_pair(uint32_t sessions, uint32_t queue_pairs) {
  std::vector<std::vector<uint32_t>> out(queue_pairs);
  for (uint32_t s = 0; s < sessions; ++s) out[s % queue_pairs].push_back(s);
  return out;
}

// TX chains the device has completed so far (reaped first, so none is left unseen).
uint64_t completed_tx(vhost_user::Frontend& frontend, uint32_t queue_pairs) {
  uint64_t in_flight = 0;
  for (uint32_t p = 0; p < queue_pairs; ++p) {
    (void)frontend.reap_tx(p);
    in_flight += frontend.tx_in_flight(p);
  }
  return frontend.stats().tx_packets - in_flight;
}

DriveResult run_stream_tx(vhost_user::Frontend& frontend, const DriveSpec& spec) {
  DriveResult result;
  const auto by_pair = sessions_by_pair(spec.point.sessions, spec.queue_pairs);
  std::vector<uint64_t> sequence(spec.point.sessions, 0);
  std::vector<size_t> next_session(spec.queue_pairs, 0);
  std::vector<std::byte> frame(spec.point.size);
  build_bench_frame(frame);

  Window window(spec);
  Progress progress("stream-tx");
  uint64_t completed_base = 0;
  uint32_t wait_pair = 0;
  for (;;) {
    uint64_t queued_total = 0;
    for (uint32_t p = 0; p < spec.queue_pairs; ++p) {
      const auto& mine = by_pair[p];
      if (mine.empty()) continue;
      size_t queued = 0;
      const uint64_t now_ns = static_cast<uint64_t>(monotonic_ns());
      while (queued < kBatch) {
        const uint32_t s = mine[next_session[p]];
        stamp_bench_frame(frame, BenchStamp{s, sequence[s], now_ns});
        if (!frontend.enqueue_tx(frame, p)) break;
        ++sequence[s];
        next_session[p] = (next_session[p] + 1) % mine.size();
        ++queued;
      }
      frontend.flush_tx(p);
      queued_total += queued;
    }
    spin(spec.spin_ns, queued_total);
    const auto now = Clock::now();
    if (queued_total > 0) {
      progress.moved(now);
    } else {
      progress.check(now, frontend);
      if (progress.idle(now)) {
        // Rings full for a while: sleep until the device completes something.
        do wait_pair = (wait_pair + 1) % spec.queue_pairs; while (by_pair[wait_pair].empty());
        (void)frontend.wait_tx_space(kWaitSlice, wait_pair, spec.point.size);
      }
    }
    const bool more = window.advance(
        now, [&] { completed_base = completed_tx(frontend, spec.queue_pairs); },
        [&] { result.packets = completed_tx(frontend, spec.queue_pairs) - completed_base; });
    if (!more) break;
  }
  result.bytes = result.packets * spec.point.size;
  window.finish(result);
  return result;
}

DriveResult run_stream_rx(vhost_user::Frontend& frontend, const DriveSpec& spec) {
  DriveResult result;
  uint64_t wrong_size = 0, last_wrong = 0;
  uint64_t got_step = 0;
  auto on_packet = [&](const vhost_user::RxPacket& packet) {
    ++got_step;
    if (packet.frame.size() != spec.point.size) {
      ++wrong_size;
      last_wrong = packet.frame.size();
    }
  };
  const std::function<void(const vhost_user::RxPacket&)> handler = on_packet;  // built once, not per poll
  Window window(spec);
  Progress progress("stream-rx");
  uint64_t packets = 0, base = 0, wait_pair = 0;
  for (;;) {
    got_step = 0;
    for (uint32_t p = 0; p < spec.queue_pairs; ++p) (void)frontend.poll_rx(handler, SIZE_MAX, p);
    if (wrong_size > 0) {
      throw std::runtime_error(fmt::format("stream-rx: the backend sent a {}-byte frame, {} bytes were asked for "
                                           "(it cannot produce that size?)",
                                           last_wrong, spec.point.size));
    }
    packets += got_step;
    spin(spec.spin_ns, got_step);
    const auto now = Clock::now();
    if (got_step > 0) {
      progress.moved(now);
    } else {
      progress.check(now, frontend);
      if (progress.idle(now)) {
        wait_pair = (wait_pair + 1) % spec.queue_pairs;
        (void)frontend.wait_rx(kWaitSlice, static_cast<uint32_t>(wait_pair));
      }
    }
    const bool more = window.advance(now, [&] { base = packets; }, [&] { result.packets = packets - base; });
    if (!more) break;
  }
  result.bytes = result.packets * spec.point.size;
  window.finish(result);
  return result;
}

DriveResult run_rr(vhost_user::Frontend& frontend, const DriveSpec& spec) {
  DriveResult result;
  const uint32_t sessions = spec.point.sessions;
  struct Session {
    uint32_t pair = 0;
    uint64_t sequence = 0;
    uint64_t sent_ns = 0;
    bool outstanding = false;
  };
  std::vector<Session> state(sessions);
  for (uint32_t s = 0; s < sessions; ++s) state[s].pair = s % spec.queue_pairs;
  std::vector<std::byte> frame(spec.point.size);
  build_bench_frame(frame);
  // Sessions whose next request is due on each pair (answered, or refused by a full ring).
  std::vector<std::vector<uint32_t>> due = sessions_by_pair(sessions, spec.queue_pairs);

  Window window(spec);
  Progress progress("rr");
  uint64_t unmatched = 0, wrong_size = 0, moved_step = 0;
  uint32_t current_pair = 0, wait_pair = 0;
  auto on_packet = [&](const vhost_user::RxPacket& packet) {
    const uint64_t now_ns = static_cast<uint64_t>(monotonic_ns());
    ++moved_step;
    if (packet.frame.size() != spec.point.size) {
      ++wrong_size;
      return;
    }
    const std::optional<BenchStamp> stamp = parse_bench_frame(packet.frame, /*swapped=*/true);
    if (!stamp || stamp->session >= sessions) {
      ++unmatched;
      return;
    }
    Session& session = state[stamp->session];
    if (!session.outstanding || stamp->sequence != session.sequence || session.pair != current_pair) {
      ++unmatched;
      return;
    }
    session.outstanding = false;
    ++session.sequence;
    if (window.measuring()) {
      result.latency.record(now_ns - session.sent_ns);
      ++result.transactions;
    }
    due[current_pair].push_back(stamp->session);
  };

  const std::function<void(const vhost_user::RxPacket&)> handler = on_packet;  // built once, not per poll
  for (;;) {
    moved_step = 0;
    for (uint32_t p = 0; p < spec.queue_pairs; ++p) {
      current_pair = p;
      (void)frontend.poll_rx(handler, SIZE_MAX, p);
      auto& ready = due[p];
      // The injected work (calibration) sits on the critical path: between an answer
      // and the next request, one spin for the answer and one for the request. Spun
      // after sending instead, it would overlap the backend's turn and cost nothing.
      spin(spec.spin_ns, 2 * ready.size());
      size_t sent = 0;
      for (; sent < ready.size(); ++sent) {
        Session& session = state[ready[sent]];
        session.sent_ns = static_cast<uint64_t>(monotonic_ns());
        stamp_bench_frame(frame, BenchStamp{ready[sent], session.sequence, session.sent_ns});
        if (!frontend.enqueue_tx(frame, p)) break;  // ring full: the rest stay due
        session.outstanding = true;
      }
      ready.erase(ready.begin(), ready.begin() + static_cast<std::ptrdiff_t>(sent));
      if (sent > 0) frontend.flush_tx(p);
      moved_step += sent;
    }
    if (unmatched > 0 || wrong_size > 0) {
      throw std::runtime_error(fmt::format("rr: {} answers matched no outstanding request, {} had the wrong size",
                                           unmatched, wrong_size));
    }
    const auto now = Clock::now();
    if (moved_step > 0) {
      progress.moved(now);
    } else {
      progress.check(now, frontend);
      if (progress.idle(now)) {
        wait_pair = (wait_pair + 1) % spec.queue_pairs;
        (void)frontend.wait_rx(kWaitSlice, wait_pair);
      }
    }
    if (!window.advance(now, [&] { result.latency.reset(); result.transactions = 0; }, [] {})) break;
  }
  result.packets = result.transactions;
  result.bytes = result.packets * spec.point.size;
  window.finish(result);
  return result;
}

}  // namespace

vhost_user::FrontendOptions frontend_options_for(const Point& point, uint32_t queue_pairs) {
  if (point.size < kMinFrameSize || point.size > kMaxFrameSize) {
    throw std::runtime_error(fmt::format("frame size {} outside {}..{}", point.size, kMinFrameSize, kMaxFrameSize));
  }
  if (queue_pairs == 0) throw std::runtime_error("queue pairs must be at least 1");
  const uint64_t buffers_per_frame = (point.size + kNetHeaderBytes + kBufferSize - 1) / kBufferSize;
  const uint64_t per_pair = (point.sessions + queue_pairs - 1) / queue_pairs;
  const uint64_t frames = point.workload == Workload::kRr ? std::max<uint64_t>(32, 2 * per_pair) : 32;
  const uint64_t wanted = std::max<uint64_t>(256, std::bit_ceil(buffers_per_frame * frames));
  if (wanted > 32768) {
    throw std::runtime_error(fmt::format("{} sessions of {}-byte frames per queue pair need more than a 32768-entry "
                                         "ring; use more --queues or fewer sessions",
                                         per_pair, point.size));
  }
  vhost_user::FrontendOptions options;
  options.queue_size = static_cast<uint16_t>(wanted);
  options.queue_pairs = queue_pairs;
  options.buffer_size = kBufferSize;
  return options;
}

DriveResult drive_frontend(vhost_user::Frontend& frontend, const DriveSpec& spec) {
  if (spec.point.sessions == 0) throw std::runtime_error("sessions must be at least 1");
  if (spec.queue_pairs == 0 || spec.queue_pairs > frontend.queue_pairs()) {
    throw std::runtime_error(fmt::format("{} queue pairs asked, the frontend has {}", spec.queue_pairs,
                                         frontend.queue_pairs()));
  }
  if (spec.point.size < kMinFrameSize || spec.point.size > kMaxFrameSize) {
    throw std::runtime_error(fmt::format("frame size {} outside {}..{}", spec.point.size, kMinFrameSize, kMaxFrameSize));
  }
  // Size the injected work before the clock starts (it measures the CPU once).
  if (spec.spin_ns != 0) (void)injected_iterations_per_ns();
  DriveResult result;
  switch (spec.point.workload) {
    case Workload::kStreamTx: result = run_stream_tx(frontend, spec); break;
    case Workload::kStreamRx: result = run_stream_rx(frontend, spec); break;
    case Workload::kRr: result = run_rr(frontend, spec); break;
  }
  if (frontend.broken()) throw std::runtime_error("frontend broken: " + frontend.error());
  if (result.packets == 0) {
    throw std::runtime_error(fmt::format("{}: no traffic in the {:.2f} s window", to_string(spec.point.workload),
                                         result.seconds));
  }
  return result;
}

}  // namespace uvhost::bench
