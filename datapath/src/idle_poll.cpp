// idle_poll.cpp - a virtqueue handler's turn, and what it does when its ring runs dry:
// the poll modes (vhost-net's busy polling) and the busy poll's exit policy. See
// poll_mode.h and device_datapath.h. Worker thread.
#include <chrono>

#include "uvhost/datapath/device_datapath.h"
#include "uvhost/sync/cpu_relax.h"
#include "vring.h"

namespace uvhost::datapath {

namespace {

uint64_t nanoseconds(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

}  // namespace

void DeviceDatapath::handle(Vring& q) {
  if (faults_moved(q) && check_memory_fault(q)) return;
  if (!q.running()) {
    if (q.started) refresh_view(q);  // broken in a poll check: report it, write the err fd
    if (!q.is_tx) drop_pending_receive(q);
    return;
  }
  q.counters.handler_runs.add();
  // Adaptive mode learns the gap from "found dry" to "work arrived"; arriving here
  // after a sleep is such an arrival (the poll loop records its own).
  if (q.idle_since) {
    q.adaptive.on_gap(nanoseconds(Clock::now() - *q.idle_since));
    q.idle_since.reset();
  }
  // Transmit: no kicks while we drain (vhost_disable_notify); receive: kicks are only
  // wanted while waiting for buffers, and we are not waiting now.
  set_kicks(q, false);

  size_t turn_entries = 0;
  uint64_t turn_bytes = 0;
  for (;;) {
    const Burst burst = q.is_tx ? transmit_burst(q) : receive_burst(q);
    turn_entries += burst.entries;
    turn_bytes += burst.bytes;
    if (faults_moved(q) && check_memory_fault(q)) return;
    if (!q.running()) {
      refresh_view(q);  // broken by the guest: report it, stop taking injects
      return;
    }
    if (burst.blocked) {
      if (q.effective_poll().mode == PollMode::kAlways) {
        // Poll for the buffers instead of asking for a kick.
        switch (spin_always(q, &DeviceDatapath::buffers_arrived)) {
          case AfterIdle::kContinue: continue;
          case AfterIdle::kRequeue: q.worker->queue(q.handler); return;
          case AfterIdle::kQueued:
          case AfterIdle::kSleep: return;
        }
      }
      if (wait_for_buffers(q)) {
        set_kicks(q, false);
        continue;
      }
      return;  // the guest's kick brings us back
    }
    if (burst.entries > 0) {
      if (q.dry_since) {  // an adaptive poll stepped aside and its work came meanwhile
        q.adaptive.on_gap(nanoseconds(Clock::now() - *q.dry_since));
        q.dry_since.reset();
      }
      if (turn_entries >= options_.weight_packets || turn_bytes >= options_.weight_bytes) {
        // Fair share used up with work left: let the worker's other items run first.
        q.counters.weight_yields.add();
        q.worker->queue(q.handler);
        return;
      }
      // A short transmit burst drained the ring: a spinning queue looks for more in
      // its spin (cheaper than another burst that finds nothing).
      const bool drained = q.is_tx && burst.entries < options_.burst;
      if (!drained || q.effective_poll().mode != PollMode::kAlways) continue;
    }
    switch (idle(q)) {
      case AfterIdle::kContinue: continue;
      case AfterIdle::kRequeue: q.worker->queue(q.handler); return;
      case AfterIdle::kQueued:
      case AfterIdle::kSleep: return;
    }
  }
}

bool DeviceDatapath::has_work(Vring& q) {
  if (q.is_tx) {
    return q.memory->read([&](const virtio::GuestMemoryMap& map) { return q.ring->available(map, 1) > 0; });
  }
  // Receive: frames injected. (A pull backend's fd, a kick, and any other reason to
  // run show up as our handler being queued: maybe_poll_events() dispatches them.)
  return !q.inbound->empty() || q.pulled_held || q.held != nullptr;
}

DeviceDatapath::AfterIdle DeviceDatapath::idle(Vring& q) {
  const PollSettings settings = q.effective_poll();
  if (settings.mode == PollMode::kAlways && q.is_tx && q.enabled) return spin_always(q, &DeviceDatapath::has_work);
  const auto start = Clock::now();
  // A receive ring in `always` mode learns of frames from events (inject, the pull
  // fd, a kick when it waits for buffers), never from polling its own ring: nothing
  // to spin on.
  if (settings.mode == PollMode::kNotify || settings.mode == PollMode::kAlways || !q.enabled) {
    return sleep(q, start);
  }
  const uint64_t cap_ns = uint64_t{settings.busy_us} * 1000;
  const bool adaptive = settings.mode == PollMode::kAdaptive;
  const uint64_t timeout_ns = adaptive ? q.adaptive.timeout_ns(cap_ns) : cap_ns;
  if (timeout_ns == 0) return sleep(q, start);
  // Adaptive transmit polls step aside for other queues' work and resume later: one
  // dry spell, one budget, counted from its start.
  const bool resumable = adaptive && q.is_tx;
  if (resumable && !q.dry_since) q.dry_since = start;
  const Clock::time_point spell_start = resumable ? *q.dry_since : start;

  q.counters.polls.add();
  PollExit exit = PollExit::kTimeout;
  Clock::time_point now = start;
  for (;;) {
    now = Clock::now();
    if (has_work(q) || faults_moved(q)) {  // a fault: the next burst's check reports it
      exit = PollExit::kWork;
      break;
    }
    if (q.handler.is_queued()) {
      exit = PollExit::kOwnKick;
      break;
    }
    // Before the other queues' work: a resumed spell that has used its budget must
    // end here, or queues stepping aside for each other would poll forever.
    if (nanoseconds(now - spell_start) >= timeout_ns) break;
    if (settings.exit == ExitPolicy::kAnyWork) {
      if (q.worker->work_queue().has_pending()) {
        exit = PollExit::kAnyWork;
        break;
      }
    } else if (q.worker->other_datapath_pending(&q.handler)) {
      exit = PollExit::kOtherQueue;
      break;
    }
    q.worker->maybe_poll_events(now);
    sync::cpu_relax();
  }
  const uint64_t spent = nanoseconds(now - start);
  q.counters.poll_ns.add(spent);
  q.counters.exits[static_cast<size_t>(exit)].add();
  switch (exit) {
    case PollExit::kWork:
      q.adaptive.on_gap(nanoseconds(now - spell_start));
      q.dry_since.reset();
      return AfterIdle::kContinue;
    case PollExit::kOwnKick:
      // Our handler is queued already (a kick, a ready fd, a control change): return
      // and let that run come - continuing here would leave it queued, and a busy poll
      // that sees it queued would end at once, forever.
      q.adaptive.on_gap(nanoseconds(now - spell_start));
      q.dry_since.reset();
      return AfterIdle::kQueued;
    case PollExit::kAnyWork:
      // vhost before "make busyloop_intr more accurate": any pending work counts as an
      // interruption of this queue's poll, so it re-queues itself with kicks still off.
      return AfterIdle::kRequeue;
    case PollExit::kOtherQueue:
      // Adaptive transmit: the work is not ours, so step aside behind it (it runs
      // first: no turn is taken from it) with kicks still off, and resume this spell's
      // poll after it - a sleep would make the guest pay a kick for work we expect
      // within the budget. Once the spell outlasts the budget, the timeout below ends it.
      if (resumable) return AfterIdle::kRequeue;
      // busy: vhost after that patch: the work is not ours; give the worker up the
      // notify way.
      return sleep(q, now);
    case PollExit::kTimeout:
      if (adaptive) q.adaptive.on_timeout(timeout_ns);
      return sleep(q, now);
  }
  return sleep(q, now);
}

// `always` on a transmit ring: spin on the ring itself, as a PMD does, until work comes
// or another item of this worker wants its turn (then re-queue behind it). The cheap
// check (avail->idx) runs every pass; the worker's queue, the settings word and the
// clock every kCheckEvery passes; the other fds of the worker (epoll) at most every
// Worker::kEventPollInterval.
DeviceDatapath::AfterIdle DeviceDatapath::spin_always(Vring& q, bool (DeviceDatapath::*ready)(Vring&)) {
  constexpr uint32_t kCheckEvery = 32;
  q.counters.polls.add();
  const uint64_t settings_word = q.poll_word.load(std::memory_order_relaxed);
  PollExit exit = PollExit::kWork;
  AfterIdle after = AfterIdle::kContinue;
  // The clock is read only at the first check point and after: a poll that ends in
  // fewer passes (the common case under load) costs no clock read, and is not timed.
  std::optional<Clock::time_point> timed_from;
  for (uint32_t pass = 1;; ++pass) {
    if ((this->*ready)(q)) break;
    if (pass % kCheckEvery != 0) continue;
    if (faults_moved(q) || !q.running()) {
      exit = PollExit::kAnyWork;  // the handler's next run reports the fault / the break
      after = AfterIdle::kRequeue;
      break;
    }
    if (q.handler.is_queued()) {
      exit = PollExit::kOwnKick;  // a kick, a ready fd, a control change: that run comes next
      after = AfterIdle::kQueued;
      break;
    }
    // relaxed: a hint; the set_poll() that changed it also queued our handler.
    if (q.worker->work_queue().has_other_work() ||
        q.poll_word.load(std::memory_order_relaxed) != settings_word) {
      exit = PollExit::kAnyWork;
      after = AfterIdle::kRequeue;
      break;
    }
    const Clock::time_point now = Clock::now();
    if (!timed_from) timed_from = now;
    q.worker->maybe_poll_events(now);
  }
  if (timed_from) q.counters.poll_ns.add(nanoseconds(Clock::now() - *timed_from));
  q.counters.exits[static_cast<size_t>(exit)].add();
  return after;
}

// Receive, waiting in `always` mode: has the guest posted what the held frame needs?
bool DeviceDatapath::buffers_arrived(Vring& q) {
  const uint16_t wanted = q.writer.buffers_wanted();
  return q.memory->read([&](const virtio::GuestMemoryMap& map) { return q.ring->available(map, wanted) >= wanted; });
}

// Go to sleep the `notify` way: transmit re-enables guest kicks and re-checks the
// ring (a buffer made available before the guest could see kicks enabled would
// otherwise wait for the next kick: the lost-wakeup race). Receive needs no kick to
// learn about frames (inject() and the pull fd queue the handler), only a re-check.
DeviceDatapath::AfterIdle DeviceDatapath::sleep(Vring& q, Clock::time_point now) {
  if (q.is_tx) {
    bool work = false;
    q.memory->read([&](const virtio::GuestMemoryMap& map) { work = q.ring->enable_guest_kicks(map); });
    q.log_kick_fields();
    q.kicks_disabled = false;
    if (work) {
      // Something slipped in: take it now, but after the worker's other pending items.
      return AfterIdle::kRequeue;
    }
  } else if (has_work(q)) {
    return AfterIdle::kRequeue;
  }
  q.dry_since.reset();
  q.idle_since = now;
  return AfterIdle::kSleep;
}

}  // namespace uvhost::datapath
