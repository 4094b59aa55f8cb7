// frontend_driver.cpp - the three workloads on the embedded frontend (see
// frontend_driver.h).
#include "uvhost/bench/frontend_driver.h"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
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

// The run's schedule and its clocks: warm-up, then the measured window. With two
// sides the window is cut into `slices` sub-windows per side, ordered A B B A A B ...
// (first_side first), so that a drift over the run weighs on both sides alike. A
// sub-window whose side differs from the one before starts with switch_to(side) and
// settle_seconds of unmeasured traffic, so the switch itself is never measured.
class Window {
 public:
  explicit Window(const DriveSpec& spec)
      : spec_(spec),
        sides_(spec.sides),
        total_slices_(spec.sides == 2 ? 2 * spec.slices : 1),
        slice_(to_duration(spec.sides == 2 ? spec.seconds / spec.slices : spec.seconds)),
        settle_(to_duration(spec.sides == 2 ? spec.settle_seconds : 0)),
        phase_end_(Clock::now() + to_duration(spec.warmup_seconds)) {
    side_ = side_of(0);
    // The backend starts as side 0; warm up as the first sub-window's side.
    if (side_ != 0) spec_.switch_to(side_);
  }

  bool measuring() const noexcept { return phase_ == Phase::kMeasuring; }
  // The side whose traffic flows now (warm-up and settle included).
  uint32_t side() const noexcept { return side_; }
  uint64_t spin_ns() const noexcept { return spec_.spin_ns[side_]; }

  // Called after every step with the current time; at_start(side) lets the caller
  // take its counters' bases at a sub-window's start, at_end(side) add what moved
  // since to that side's totals. false once the last sub-window is over.
  template <typename AtStart, typename AtEnd>
  bool advance(Clock::time_point now, AtStart&& at_start, AtEnd&& at_end) {
    if (now < phase_end_) return phase_ != Phase::kDone;
    switch (phase_) {
      case Phase::kWarmup:
      case Phase::kSettle:
        at_start(side_);
        if (spec_.on_window_start) spec_.on_window_start(side_);
        cpu_start_ = thread_cpu_ns();
        wall_start_ = Clock::now();
        phase_end_ = wall_start_ + slice_;
        phase_ = Phase::kMeasuring;
        break;
      case Phase::kMeasuring: {
        const auto wall_end = Clock::now();
        const int64_t cpu_end = thread_cpu_ns();
        at_end(side_);
        if (spec_.on_window_end) spec_.on_window_end(side_);
        seconds_[side_] += std::chrono::duration<double>(wall_end - wall_start_).count();
        cpu_seconds_[side_] += static_cast<double>(cpu_end - cpu_start_) * 1e-9;
        if (++slice_index_ == total_slices_) {
          phase_ = Phase::kDone;
          break;
        }
        phase_ = Phase::kSettle;
        phase_end_ = now;  // same side: measuring resumes at once
        if (const uint32_t next = side_of(slice_index_); next != side_) {
          side_ = next;
          spec_.switch_to(side_);
          phase_end_ = Clock::now() + settle_;
        }
        break;
      }
      case Phase::kDone:
        break;
    }
    return phase_ != Phase::kDone;
  }

  void finish(std::array<DriveResult, 2>& results) const {
    for (uint32_t s = 0; s < sides_; ++s) {
      results[s].seconds = seconds_[s];
      results[s].frontend_cpu_seconds = cpu_seconds_[s];
    }
  }

 private:
  enum class Phase { kWarmup, kSettle, kMeasuring, kDone };
  static Clock::duration to_duration(double seconds) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  // Slice i's side in A B B A A B B A ... order: pairs (1,2), (3,4), ... share a side.
  uint32_t side_of(uint32_t i) const noexcept {
    if (sides_ == 1) return 0;
    const uint32_t first = spec_.first_side;
    return ((i + 1) / 2) % 2 == 0 ? first : 1 - first;
  }

  const DriveSpec& spec_;
  const uint32_t sides_;
  const uint32_t total_slices_;
  const Clock::duration slice_;
  const Clock::duration settle_;
  Phase phase_ = Phase::kWarmup;
  Clock::time_point phase_end_;
  Clock::time_point wall_start_{};
  int64_t cpu_start_ = 0;
  uint32_t slice_index_ = 0;
  uint32_t side_ = 0;
  std::array<double, 2> seconds_{};
  std::array<double, 2> cpu_seconds_{};
};

using Sides = std::array<DriveResult, 2>;

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

Sides run_stream_tx(vhost_user::Frontend& frontend, const DriveSpec& spec) {
  Sides result;
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
    spin(window.spin_ns(), queued_total);
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
        now, [&](uint32_t) { completed_base = completed_tx(frontend, spec.queue_pairs); },
        [&](uint32_t side) { result[side].packets += completed_tx(frontend, spec.queue_pairs) - completed_base; });
    if (!more) break;
  }
  for (DriveResult& r : result) r.bytes = r.packets * spec.point.size;
  window.finish(result);
  return result;
}

Sides run_stream_rx(vhost_user::Frontend& frontend, const DriveSpec& spec) {
  Sides result;
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
    spin(window.spin_ns(), got_step);
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
    const bool more = window.advance(
        now, [&](uint32_t) { base = packets; }, [&](uint32_t side) { result[side].packets += packets - base; });
    if (!more) break;
  }
  for (DriveResult& r : result) r.bytes = r.packets * spec.point.size;
  window.finish(result);
  return result;
}

// When an open-loop rr's requests arrive: `rate` per second from `start_ns`, with
// exponential gaps (Poisson; a fixed seed, so every run offers the same sequence) or
// equal ones. Kept in double nanoseconds so equal gaps do not drift by rounding.
class ArrivalSchedule {
 public:
  ArrivalSchedule(uint64_t rate, Arrivals arrivals, uint64_t start_ns)
      : mean_gap_ns_(1e9 / static_cast<double>(rate)),
        poisson_(arrivals == Arrivals::kPoisson),
        next_ns_(static_cast<double>(start_ns) + gap()) {}
  uint64_t next_ns() const noexcept { return static_cast<uint64_t>(next_ns_); }
  void advance() { next_ns_ += gap(); }

 private:
  double gap() { return poisson_ ? mean_gap_ns_ * exponential_(random_) : mean_gap_ns_; }

  const double mean_gap_ns_;
  const bool poisson_;
  std::mt19937_64 random_{0x75766862};  // "uvhb"
  std::exponential_distribution<double> exponential_{1.0};
  double next_ns_;
};

Sides run_rr(vhost_user::Frontend& frontend, const DriveSpec& spec) {
  Sides result;
  const uint32_t sessions = spec.point.sessions;
  struct Session {
    uint32_t pair = 0;
    uint64_t sequence = 0;
    uint64_t sent_ns = 0;  // open loop: the scheduled arrival
    bool outstanding = false;
  };
  std::vector<Session> state(sessions);
  for (uint32_t s = 0; s < sessions; ++s) state[s].pair = s % spec.queue_pairs;
  std::vector<std::byte> frame(spec.point.size);
  build_bench_frame(frame);
  // Sessions whose next request is due on each pair (answered, or refused by a full
  // ring); in open loop, the sessions free to take an arrival.
  std::vector<std::vector<uint32_t>> due = sessions_by_pair(sessions, spec.queue_pairs);
  std::optional<ArrivalSchedule> schedule;
  if (spec.point.rate != 0) {
    schedule.emplace(spec.point.rate, spec.point.arrivals, static_cast<uint64_t>(monotonic_ns()));
  }
  std::vector<bool> to_flush(spec.queue_pairs, false);
  uint32_t next_pair = 0;
  uint64_t in_flight = 0;

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
    --in_flight;
    ++session.sequence;
    if (window.measuring()) {
      DriveResult& side = result[window.side()];
      side.latency.record(now_ns - session.sent_ns);
      ++side.transactions;
    }
    due[current_pair].push_back(stamp->session);
  };
  // Sends session `s`'s next request on `pair`, stamped `sent_ns`; false: ring full.
  auto send = [&](uint32_t s, uint32_t pair, uint64_t sent_ns) {
    Session& session = state[s];
    session.sent_ns = sent_ns;
    stamp_bench_frame(frame, BenchStamp{s, session.sequence, sent_ns});
    if (!frontend.enqueue_tx(frame, pair)) return false;
    session.outstanding = true;
    ++in_flight;
    return true;
  };
  // Open loop: every arrival that is due takes a free session, the pairs in turn; an
  // arrival that finds none (or a full ring) stays due with its scheduled time.
  auto send_due_arrivals = [&] {
    const uint64_t now_ns = static_cast<uint64_t>(monotonic_ns());
    size_t sent = 0;
    while (schedule->next_ns() <= now_ns) {
      uint32_t pair = next_pair, tried = 0;
      while (due[pair].empty() && ++tried < spec.queue_pairs) pair = (pair + 1) % spec.queue_pairs;
      if (due[pair].empty() || !send(due[pair].back(), pair, schedule->next_ns())) break;
      due[pair].pop_back();
      to_flush[pair] = true;
      next_pair = (pair + 1) % spec.queue_pairs;
      schedule->advance();
      ++sent;
    }
    for (uint32_t p = 0; p < spec.queue_pairs; ++p) {
      if (to_flush[p]) frontend.flush_tx(p);
      to_flush[p] = false;
    }
    // The injected work (calibration) per request and per answer.
    spin(window.spin_ns(), 2 * sent);
    return sent;
  };

  const std::function<void(const vhost_user::RxPacket&)> handler = on_packet;  // built once, not per poll
  auto check_answers = [&] {
    if (unmatched > 0 || wrong_size > 0) {
      throw std::runtime_error(fmt::format("rr: {} answers matched no outstanding request, {} had the wrong size",
                                           unmatched, wrong_size));
    }
  };
  for (;;) {
    moved_step = 0;
    for (uint32_t p = 0; p < spec.queue_pairs; ++p) {
      current_pair = p;
      (void)frontend.poll_rx(handler, SIZE_MAX, p);
      if (schedule) continue;
      auto& ready = due[p];
      // The injected work (calibration) sits on the critical path: between an answer
      // and the next request, one spin for the answer and one for the request. Spun
      // after sending instead, it would overlap the backend's turn and cost nothing.
      spin(window.spin_ns(), 2 * ready.size());
      size_t sent = 0;
      for (; sent < ready.size(); ++sent) {
        // Each request is stamped as it goes out.
        if (!send(ready[sent], p, static_cast<uint64_t>(monotonic_ns()))) break;  // ring full: the rest stay due
      }
      ready.erase(ready.begin(), ready.begin() + static_cast<std::ptrdiff_t>(sent));
      if (sent > 0) frontend.flush_tx(p);
      moved_step += sent;
    }
    if (schedule) moved_step += send_due_arrivals();
    check_answers();
    const auto now = Clock::now();
    if (moved_step > 0 || (schedule && in_flight == 0)) {
      progress.moved(now);  // (open loop: waiting for the next arrival is no stall)
    } else {
      progress.check(now, frontend);
      if (!schedule && progress.idle(now)) {
        wait_pair = (wait_pair + 1) % spec.queue_pairs;
        (void)frontend.wait_rx(kWaitSlice, wait_pair);
      }
    }
    // Answers count only while measuring (on_packet), so the sub-windows need no bases.
    if (!window.advance(now, [](uint32_t) {}, [](uint32_t) {})) break;
  }
  if (spec.drain) {
    Progress draining("rr (reading the last answers)");
    while (in_flight > 0) {
      moved_step = 0;
      for (uint32_t p = 0; p < spec.queue_pairs; ++p) {
        current_pair = p;
        (void)frontend.poll_rx(handler, SIZE_MAX, p);
      }
      check_answers();
      const auto now = Clock::now();
      if (moved_step > 0) {
        draining.moved(now);
      } else {
        draining.check(now, frontend);
        if (draining.idle(now)) {
          wait_pair = (wait_pair + 1) % spec.queue_pairs;
          (void)frontend.wait_rx(kWaitSlice, wait_pair);
        }
      }
    }
  }
  for (DriveResult& r : result) {
    r.packets = r.transactions;
    r.bytes = r.packets * spec.point.size;
  }
  window.finish(result);
  return result;
}

// The workload through the warm-up, then a silent window: what the backend spends
// while its guest is connected and quiet.
Sides run_idle_window(vhost_user::Frontend& frontend, const DriveSpec& spec,
                      Sides (*workload)(vhost_user::Frontend&, const DriveSpec&)) {
  DriveSpec warmup = spec;
  warmup.idle_window = false;
  warmup.seconds = 0.01;  // the workload's own window, unused: the warm-up is what counts
  warmup.on_window_start = nullptr;
  warmup.on_window_end = nullptr;
  (void)workload(frontend, warmup);
  Sides result;
  if (spec.on_window_start) spec.on_window_start(0);
  const int64_t cpu_start = thread_cpu_ns();
  const auto wall_start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(spec.seconds));
  result[0].seconds = std::chrono::duration<double>(Clock::now() - wall_start).count();
  result[0].frontend_cpu_seconds = static_cast<double>(thread_cpu_ns() - cpu_start) * 1e-9;
  if (spec.on_window_end) spec.on_window_end(0);
  return result;
}

}  // namespace

vhost_user::FrontendOptions frontend_options_for(const Point& point, uint32_t queue_pairs, bool in_order,
                                                 RingFormat ring) {
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
  if (!in_order) options.features &= ~vhost_user::feature::kInOrder;
  if (ring == RingFormat::kPacked) options.features |= vhost_user::feature::kRingPacked;
  return options;
}

namespace {

Sides drive(vhost_user::Frontend& frontend, const DriveSpec& spec) {
  if (spec.point.sessions == 0) throw std::runtime_error("sessions must be at least 1");
  if (spec.queue_pairs == 0 || spec.queue_pairs > frontend.queue_pairs()) {
    throw std::runtime_error(fmt::format("{} queue pairs asked, the frontend has {}", spec.queue_pairs,
                                         frontend.queue_pairs()));
  }
  if (spec.point.size < kMinFrameSize || spec.point.size > kMaxFrameSize) {
    throw std::runtime_error(fmt::format("frame size {} outside {}..{}", spec.point.size, kMinFrameSize, kMaxFrameSize));
  }
  if (spec.sides != 1 && spec.sides != 2) throw std::runtime_error("a run drives one side or two");
  if (spec.sides == 2) {
    if (spec.slices == 0) throw std::runtime_error("interleaving needs at least one slice per side");
    if (!spec.switch_to) throw std::runtime_error("interleaving needs a switch_to");
    if (!(spec.settle_seconds >= 0)) throw std::runtime_error("the settle time cannot be negative");
  }
  // Size the injected work before the clock starts (it measures the CPU once).
  if (spec.spin_ns[0] != 0 || spec.spin_ns[1] != 0) (void)injected_iterations_per_ns();
  if (spec.point.rate != 0 && spec.point.workload != Workload::kRr) {
    throw std::runtime_error("an offered rate (open loop) is for rr only");
  }
  if (spec.idle_window && (spec.sides != 1 || spec.point.workload == Workload::kStreamRx)) {
    throw std::runtime_error("an idle window drives one side of rr or stream-tx (stream-rx's backend never idles)");
  }
  Sides (*workload)(vhost_user::Frontend&, const DriveSpec&) = nullptr;
  switch (spec.point.workload) {
    case Workload::kStreamTx: workload = run_stream_tx; break;
    case Workload::kStreamRx: workload = run_stream_rx; break;
    case Workload::kRr: workload = run_rr; break;
  }
  Sides result = spec.idle_window ? run_idle_window(frontend, spec, workload) : workload(frontend, spec);
  if (frontend.broken()) throw std::runtime_error("frontend broken: " + frontend.error());
  for (uint32_t s = 0; s < spec.sides && !spec.idle_window; ++s) {
    if (result[s].packets == 0) {
      throw std::runtime_error(fmt::format("{}: no traffic in the {:.2f} s window{}", to_string(spec.point.workload),
                                           result[s].seconds, spec.sides == 2 ? (s == 0 ? " of side A" : " of side B") : ""));
    }
  }
  return result;
}

}  // namespace

DriveResult drive_frontend(vhost_user::Frontend& frontend, const DriveSpec& spec) {
  if (spec.sides != 1) throw std::runtime_error("drive_frontend drives one side; use drive_frontend_interleaved");
  return std::move(drive(frontend, spec)[0]);
}

std::array<DriveResult, 2> drive_frontend_interleaved(vhost_user::Frontend& frontend, const DriveSpec& spec) {
  if (spec.sides != 2) throw std::runtime_error("drive_frontend_interleaved drives two sides (sides = 2)");
  return drive(frontend, spec);
}

}  // namespace uvhost::bench
