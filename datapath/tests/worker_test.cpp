// Worker: a WorkQueue whose idle worker sleeps in epoll_wait on watched fds.
//  - a watched eventfd written from another thread runs on_ready on the worker, which
//    may queue items; unwatch() stops it; edge-triggered watches fire once per edge;
//  - run() executes on the worker and waits; poll_events() dispatches without sleeping;
//  - other_datapath_pending(self) sees only other registered, queued items;
//  - the statistics; destruction with live watches; many fds at once.
#include "uvhost/datapath/worker.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "uvhost/base/unique_fd.h"
#include "uvhost/sync/spin_then_park.h"
#include "uvhost/testing/fds.h"

namespace uvhost::datapath {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using sync::SpinThenParkEvent;
using sync::WorkItem;

constexpr int64_t kTimeoutNs = 3'000'000'000;

template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds timeout = 3000ms) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() > deadline) return pred();
    std::this_thread::sleep_for(100us);
  }
  return true;
}

// An eventfd owned by the test (a Worker never owns what it watches).
class EventFd {
 public:
  EventFd() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  EventFd(const EventFd&) = delete;
  EventFd& operator=(const EventFd&) = delete;
  int get() const { return fd_.get(); }
  void signal(uint64_t value = 1) const { ASSERT_EQ(::eventfd_write(fd_.get(), value), 0); }
  // 0 when nothing was pending.
  uint64_t drain() const {
    eventfd_t value = 0;
    return ::eventfd_read(fd_.get(), &value) == 0 ? value : 0;
  }

 private:
  base::UniqueFd fd_;
};

TEST(WorkerTest, NameAndThread) {
  Worker worker("unit.w0");
  EXPECT_EQ(worker.name(), "unit.w0");
  EXPECT_FALSE(worker.on_worker_thread());
  EXPECT_EQ(worker.work_queue().strategy(), sync::EnqueueStrategy::kLockless);
  Worker locked("unit.w1", sync::EnqueueStrategy::kLockedWake);
  EXPECT_EQ(locked.work_queue().strategy(), sync::EnqueueStrategy::kLockedWake);
}

TEST(WorkerTest, RunExecutesOnTheWorkerAndWaits) {
  Worker worker("run");
  std::thread::id worker_thread;
  bool on_worker = false;
  bool done = false;  // plain: run() returns after fn, and orders it
  worker.run([&] {
    on_worker = worker.on_worker_thread();
    worker_thread = std::this_thread::get_id();
    std::this_thread::sleep_for(20ms);
    done = true;
  });
  EXPECT_TRUE(done) << "run() returned before fn finished";
  EXPECT_TRUE(on_worker);
  EXPECT_NE(worker_thread, std::this_thread::get_id());
  // Later runs are on the same thread.
  std::thread::id again;
  worker.run([&] { again = std::this_thread::get_id(); });
  EXPECT_EQ(again, worker_thread);
  // run() from many threads at once.
  std::atomic<int> runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) worker.run([&] { runs.fetch_add(1, std::memory_order_relaxed); });
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(runs.load(), 200);
}

TEST(WorkerTest, QueuedItemRunsOnTheWorkerAndIsCounted) {
  Worker worker("items");
  const WorkerStats before = worker.stats();
  std::atomic<int> on_worker{0};
  std::vector<std::unique_ptr<WorkItem>> items;
  for (int i = 0; i < 10; ++i) {
    items.push_back(std::make_unique<WorkItem>([&] {
      if (worker.on_worker_thread()) on_worker.fetch_add(1);
    }));
  }
  for (auto& item : items) worker.queue(*item);
  worker.work_queue().flush();
  EXPECT_EQ(on_worker.load(), 10);
  const WorkerStats after = worker.stats();
  EXPECT_EQ(after.queue.items_run - before.queue.items_run, 10u);
  // The worker goes idle after the flush marker at the latest.
  EXPECT_TRUE(wait_until([&] { return worker.stats().epoll_waits > 0; })) << "an idle worker sleeps in epoll_wait";
  EXPECT_GT(worker.stats().queue.parks, 0u);
}

TEST(WorkerTest, QueueFromAnotherThreadWakesTheEpollSleeper) {
  Worker worker("wake");
  SpinThenParkEvent ran;
  WorkItem item([&] { ran.set(); });
  for (int round = 0; round < 200; ++round) {
    // Let the worker go back to sleep in epoll_wait now and then.
    if (round % 20 == 0) std::this_thread::sleep_for(1ms);
    ran.reset();
    worker.queue(item);
    ASSERT_TRUE(ran.wait_for(kTimeoutNs)) << "round " << round << ": lost wake-up";
  }
  const WorkerStats stats = worker.stats();
  EXPECT_GT(stats.queue.wakeups, 0u);
  EXPECT_GT(stats.epoll_waits, 0u);
  EXPECT_EQ(stats.fd_events, 0u) << "the internal wake eventfd is not a watched fd";
}

TEST(WorkerTest, WatchedEventfdRunsOnReadyOnTheWorkerWhichQueuesAnItem) {
  Worker worker("watch");
  EventFd kick;
  std::atomic<int> ready_calls{0};
  std::atomic<int> ready_off_worker{0};
  std::atomic<int> item_runs{0};
  SpinThenParkEvent ran;
  WorkItem handler([&] {
    if (!worker.on_worker_thread()) ready_off_worker.fetch_add(1);
    item_runs.fetch_add(1);
    ran.set();
  });
  worker.run([&] {
    worker.watch(kick.get(), [&] {
      if (!worker.on_worker_thread()) ready_off_worker.fetch_add(1);
      kick.drain();
      ready_calls.fetch_add(1);
      worker.queue(handler);
    });
  });
  const WorkerStats before = worker.stats();
  constexpr int kKicks = 100;
  for (int i = 0; i < kKicks; ++i) {
    ran.reset();
    std::thread writer([&] { kick.signal(); });
    writer.join();
    ASSERT_TRUE(ran.wait_for(kTimeoutNs)) << "kick " << i << " did not run the handler";
  }
  EXPECT_EQ(ready_calls.load(), kKicks);
  EXPECT_EQ(item_runs.load(), kKicks);
  EXPECT_EQ(ready_off_worker.load(), 0);
  const WorkerStats after = worker.stats();
  EXPECT_EQ(after.fd_events - before.fd_events, static_cast<uint64_t>(kKicks));
  // Each kick is taken by its own sleep in epoll_wait, counted when the sleep begins:
  // the sleep that takes the first kick may already have begun (and been counted) when
  // `before` was read, so one fewer than the kicks is the bound this test can see.
  EXPECT_GE(after.epoll_waits - before.epoll_waits, static_cast<uint64_t>(kKicks - 1));
  // The worker queued the handler itself from inside its wait: no wake-up needed.
  EXPECT_EQ(after.queue.wakeups, before.queue.wakeups);
  worker.work_queue().flush();  // a run is counted after its function returns
  EXPECT_EQ(worker.stats().queue.items_run - before.queue.items_run, static_cast<uint64_t>(kKicks));
  worker.run([&] { worker.unwatch(kick.get()); });
}

TEST(WorkerTest, UnwatchStopsTheCallbacks) {
  Worker worker("unwatch");
  EventFd kick;
  std::atomic<int> calls{0};
  worker.run([&] {
    worker.watch(kick.get(), [&] {
      kick.drain();
      calls.fetch_add(1);
    });
  });
  kick.signal();
  ASSERT_TRUE(wait_until([&] { return calls.load() == 1; }));
  worker.run([&] { worker.unwatch(kick.get()); });
  const uint64_t events = worker.stats().fd_events;
  kick.signal();
  std::this_thread::sleep_for(30ms);  // the worker sleeps in epoll_wait meanwhile
  worker.run([] {});                  // and goes through at least one more cycle
  worker.run([&] { worker.poll_events(); });
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(worker.stats().fd_events, events);
  EXPECT_EQ(kick.drain(), 1u) << "nobody read the unwatched fd";
  // Unwatching an fd that is not watched is harmless; watching again works.
  worker.run([&] {
    worker.unwatch(kick.get());
    worker.unwatch(12345);
  });
  worker.run([&] {
    worker.watch(kick.get(), [&] {
      kick.drain();
      calls.fetch_add(1);
    });
  });
  kick.signal();
  EXPECT_TRUE(wait_until([&] { return calls.load() == 2; }));
  worker.run([&] { worker.unwatch(kick.get()); });
}

TEST(WorkerTest, WatchAgainRepointsTheCallback) {
  Worker worker("repoint");
  EventFd kick;
  std::atomic<int> first{0};
  std::atomic<int> second{0};
  worker.run([&] {
    worker.watch(kick.get(), [&] {
      kick.drain();
      first.fetch_add(1);
    });
    worker.watch(kick.get(), [&] {
      kick.drain();
      second.fetch_add(1);
    });
  });
  kick.signal();
  ASSERT_TRUE(wait_until([&] { return second.load() == 1; }));
  worker.run([] {});
  EXPECT_EQ(first.load(), 0);
  worker.run([&] { worker.unwatch(kick.get()); });
}

TEST(WorkerTest, EdgeTriggeredWatchFiresOncePerEdge) {
  Worker worker("edge");
  EventFd fd;
  std::atomic<int> calls{0};
  // The callback does NOT read the fd: level-triggered it would fire in a loop.
  worker.run([&] { worker.watch(fd.get(), [&] { calls.fetch_add(1); }, /*edge=*/true); });
  fd.signal();
  ASSERT_TRUE(wait_until([&] { return calls.load() >= 1; }));
  std::this_thread::sleep_for(30ms);
  worker.run([] {});
  EXPECT_EQ(calls.load(), 1) << "an edge-triggered watch fired again without a new edge";
  // A new write is a new edge, even though the fd stayed readable.
  fd.signal();
  ASSERT_TRUE(wait_until([&] { return calls.load() >= 2; }));
  std::this_thread::sleep_for(20ms);
  worker.run([] {});
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(fd.drain(), 2u);
  worker.run([&] { worker.unwatch(fd.get()); });
}

TEST(WorkerTest, LevelTriggeredWatchFiresUntilDrained) {
  Worker worker("level");
  EventFd fd;
  std::atomic<int> calls{0};
  // Reads only on the third call: level-triggered, the fd keeps reporting until then.
  worker.run([&] {
    worker.watch(fd.get(), [&] {
      if (calls.fetch_add(1) + 1 == 3) fd.drain();
    });
  });
  fd.signal();
  ASSERT_TRUE(wait_until([&] { return calls.load() >= 3; }));
  std::this_thread::sleep_for(20ms);
  worker.run([] {});
  EXPECT_EQ(calls.load(), 3);
  worker.run([&] { worker.unwatch(fd.get()); });
}

TEST(WorkerTest, PollEventsDispatchesWithoutSleeping) {
  Worker worker("poll");
  EventFd fd;
  int calls = 0;  // worker only; read through run()
  worker.run([&] {
    worker.watch(fd.get(), [&] {
      fd.drain();
      ++calls;
    });
  });
  const uint64_t polls_before = worker.stats().event_polls;
  int calls_after_poll = -1;
  int calls_before_poll = -1;
  Clock::duration empty_poll{};
  worker.run([&] {
    // Inside an item the worker is busy: only poll_events() can dispatch.
    fd.signal();
    calls_before_poll = calls;
    worker.poll_events();
    calls_after_poll = calls;
    const auto start = Clock::now();
    worker.poll_events();  // nothing ready: returns at once
    empty_poll = Clock::now() - start;
  });
  EXPECT_EQ(calls_before_poll, 0);
  EXPECT_EQ(calls_after_poll, 1);
  EXPECT_LT(empty_poll, 100ms) << "poll_events() slept";
  EXPECT_EQ(worker.stats().event_polls - polls_before, 2u);
  // maybe_poll_events(): at most once per interval; the interval doubles with each
  // poll that finds nothing, up to the maximum, and is back at the minimum once a
  // poll dispatches an fd.
  uint64_t polls_mid = 0;
  std::vector<Clock::duration> intervals;
  worker.run([&] {
    auto now = Clock::now();
    const uint64_t base = worker.stats().event_polls;
    worker.maybe_poll_events(now);
    intervals.push_back(worker.event_poll_interval());
    worker.maybe_poll_events(now);                                 // same instant: skipped
    worker.maybe_poll_events(now + Worker::kEventPollInterval / 2);  // too soon: skipped
    polls_mid = worker.stats().event_polls - base;
    for (int i = 0; i < 8; ++i) {  // each poll due exactly when the interval says
      now += worker.event_poll_interval();
      worker.maybe_poll_events(now);
      intervals.push_back(worker.event_poll_interval());
    }
    worker.maybe_poll_events(now + Worker::kEventPollIntervalMax - 1us);  // too soon at the maximum
    intervals.push_back(worker.event_poll_interval());
    fd.signal();
    worker.maybe_poll_events(now + Worker::kEventPollIntervalMax);
    intervals.push_back(worker.event_poll_interval());
  });
  EXPECT_EQ(polls_mid, 1u);
  // (The empty poll above left it at 4 us.)
  const std::vector<Clock::duration> expected{8us, 16us, 32us, 32us, 32us, 32us, 32us, 32us, 32us, 32us, 2us};
  EXPECT_EQ(intervals, expected);
  static_assert(Worker::kEventPollInterval == 2us && Worker::kEventPollIntervalMax == 32us,
                "the expected intervals above assume these");
  int calls_end = 0;
  worker.run([&] { calls_end = calls; });
  EXPECT_EQ(calls_end, 2);
  worker.run([&] { worker.unwatch(fd.get()); });
}

TEST(WorkerTest, PollEventsFromAnItemSeesOtherKicksAndQueuesFromTheWorker) {
  // A busy-polling handler calls poll_events(); another fd's on_ready queues an item
  // from the worker thread, which runs after the handler.
  Worker worker("busy");
  EventFd other;
  std::atomic<int> other_runs{0};
  WorkItem other_handler([&] { other_runs.fetch_add(1); });
  worker.run([&] {
    worker.watch(other.get(), [&] {
      other.drain();
      worker.queue(other_handler);
    });
  });
  bool saw_pending = false;
  worker.run([&] {
    other.signal();
    worker.poll_events();
    saw_pending = other_handler.is_queued() && worker.work_queue().has_pending();
  });
  EXPECT_TRUE(saw_pending);
  worker.work_queue().flush();
  EXPECT_EQ(other_runs.load(), 1);
  worker.run([&] { worker.unwatch(other.get()); });
}

TEST(WorkerTest, OtherDatapathPendingOnlyForOtherRegisteredQueuedItems) {
  Worker worker("pending");
  WorkItem a([] {});
  WorkItem b([] {});
  WorkItem control([] {});  // not a datapath item
  worker.run([&] {
    worker.register_datapath_item(&a);
    worker.register_datapath_item(&b);
  });
  struct Answers {
    bool nothing_a, nothing_b;
    bool a_self, a_from_b, a_from_null;
    bool control_only;
    bool both_a, both_b;
    bool after_unregister_b;
  } r{};
  worker.run([&] {
    // The worker is busy inside this item: what we queue stays queued until we return.
    r.nothing_a = worker.other_datapath_pending(&a);
    r.nothing_b = worker.other_datapath_pending(&b);
    worker.queue(control);
    r.control_only = worker.other_datapath_pending(&a) || worker.other_datapath_pending(&b);
    worker.queue(a);
    r.a_self = worker.other_datapath_pending(&a);
    r.a_from_b = worker.other_datapath_pending(&b);
    r.a_from_null = worker.other_datapath_pending(nullptr);
    worker.queue(b);
    r.both_a = worker.other_datapath_pending(&a);
    r.both_b = worker.other_datapath_pending(&b);
    worker.unregister_datapath_item(&b);
    r.after_unregister_b = worker.other_datapath_pending(&a);
  });
  EXPECT_FALSE(r.nothing_a);
  EXPECT_FALSE(r.nothing_b);
  EXPECT_FALSE(r.control_only) << "a control item is not another virtqueue's work";
  EXPECT_FALSE(r.a_self) << "our own pending run is not 'other'";
  EXPECT_TRUE(r.a_from_b);
  EXPECT_TRUE(r.a_from_null);
  EXPECT_TRUE(r.both_a);
  EXPECT_TRUE(r.both_b);
  EXPECT_FALSE(r.after_unregister_b) << "an unregistered item still counted";
  worker.work_queue().flush();
  bool after_runs = true;
  worker.run([&] { after_runs = worker.other_datapath_pending(&b) || worker.other_datapath_pending(nullptr); });
  EXPECT_FALSE(after_runs) << "items that already ran are not pending";
  // Seen from inside a registered item's own run: its queued bit is already clear.
  bool inside_self = true;
  bool inside_other = true;
  WorkItem probe([&] {
    inside_self = worker.other_datapath_pending(nullptr);
    inside_other = worker.other_datapath_pending(&a);
  });
  worker.run([&] { worker.register_datapath_item(&probe); });
  worker.queue(probe);
  worker.work_queue().flush();
  EXPECT_FALSE(inside_self);
  EXPECT_FALSE(inside_other);
  worker.run([&] {
    worker.unregister_datapath_item(&a);
    worker.unregister_datapath_item(&probe);
    worker.unregister_datapath_item(&probe);  // twice: harmless
  });
}

TEST(WorkerTest, StatsCountEpollWaitsFdEventsAndItems) {
  Worker worker("stats");
  EventFd fd;
  std::atomic<int> calls{0};
  worker.run([&] {
    worker.watch(fd.get(), [&] {
      fd.drain();
      calls.fetch_add(1);
    });
  });
  const WorkerStats before = worker.stats();
  for (int i = 1; i <= 20; ++i) {
    fd.signal();
    ASSERT_TRUE(wait_until([&] { return calls.load() == i; }));
  }
  std::vector<std::unique_ptr<WorkItem>> items;
  for (int i = 0; i < 7; ++i) items.push_back(std::make_unique<WorkItem>([] {}));
  for (auto& item : items) worker.queue(*item);
  worker.work_queue().flush();
  const WorkerStats after = worker.stats();
  EXPECT_EQ(after.fd_events - before.fd_events, 20u);
  EXPECT_GE(after.epoll_waits - before.epoll_waits, 20u) << "each kick was taken in an epoll_wait";
  EXPECT_EQ(after.queue.items_run - before.queue.items_run, 7u);
  EXPECT_EQ(after.event_polls, before.event_polls) << "no poll_events() was called";
  EXPECT_GT(after.queue.worker_cpu_ns, 0);
  worker.run([&] { worker.unwatch(fd.get()); });
}

TEST(WorkerTest, DestroyingAWorkerWithWatchesAndPendingWork) {
  const int fds_before = testing::count_open_fds();
  for (int round = 0; round < 10; ++round) {
    std::vector<std::unique_ptr<EventFd>> fds;
    for (int i = 0; i < 4; ++i) fds.push_back(std::make_unique<EventFd>());
    std::atomic<int> item_runs{0};
    WorkItem item([&] { item_runs.fetch_add(1); });
    std::atomic<int> calls{0};
    {
      Worker worker("dying");
      worker.run([&] {
        for (auto& fd : fds) {
          // Level-triggered and never read: keeps firing while the worker is idle.
          worker.watch(fd->get(), [&] { calls.fetch_add(1); }, /*edge=*/round % 2 == 1);
        }
      });
      fds[0]->signal();
      fds[2]->signal();
      if (round % 3 == 0) {
        ASSERT_TRUE(wait_until([&] { return calls.load() > 0; }));
      }
      worker.queue(item);  // the destructor runs what is queued
    }
    EXPECT_EQ(item_runs.load(), 1);
    const int calls_at_death = calls.load();
    fds[1]->signal();
    std::this_thread::sleep_for(2ms);
    EXPECT_EQ(calls.load(), calls_at_death) << "a callback ran after the Worker was destroyed";
    // The Worker does not own the fds it watched.
    for (auto& fd : fds) EXPECT_EQ(::fcntl(fd->get(), F_GETFD), FD_CLOEXEC);
  }
  EXPECT_EQ(testing::count_open_fds(), fds_before) << "the Worker leaked its epoll or wake fd";
}

void many_fds(int count, int rounds) {
  Worker worker("many");
  std::vector<std::unique_ptr<EventFd>> fds;
  for (int i = 0; i < count; ++i) fds.push_back(std::make_unique<EventFd>());
  std::vector<std::atomic<uint64_t>> received(static_cast<size_t>(count));
  std::atomic<uint64_t> total{0};
  std::atomic<int> off_worker{0};
  std::vector<std::unique_ptr<WorkItem>> handlers;
  std::vector<std::atomic<uint64_t>> handler_runs(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    handlers.push_back(std::make_unique<WorkItem>([&, i] {
      handler_runs[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
    }));
  }
  worker.run([&] {
    for (int i = 0; i < count; ++i) {
      worker.watch(fds[static_cast<size_t>(i)]->get(), [&, i] {
        if (!worker.on_worker_thread()) off_worker.fetch_add(1);
        const uint64_t value = fds[static_cast<size_t>(i)]->drain();
        received[static_cast<size_t>(i)].fetch_add(value, std::memory_order_relaxed);
        total.fetch_add(value, std::memory_order_relaxed);
        worker.queue(*handlers[static_cast<size_t>(i)]);
      });
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      for (int r = 0; r < rounds; ++r) {
        for (int i = w; i < count; i += 2) fds[static_cast<size_t>(i)]->signal();
        if (r % 8 == 0) std::this_thread::sleep_for(50us);  // let the worker sleep sometimes
      }
    });
  }
  for (auto& th : writers) th.join();
  const uint64_t expected = static_cast<uint64_t>(count) * static_cast<uint64_t>(rounds);
  EXPECT_TRUE(wait_until([&] { return total.load() == expected; }))
      << "received " << total.load() << " of " << expected << " eventfd counts";
  worker.work_queue().flush();
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ(received[static_cast<size_t>(i)].load(), static_cast<uint64_t>(rounds)) << "fd #" << i;
    EXPECT_GE(handler_runs[static_cast<size_t>(i)].load(), 1u) << "fd #" << i;
  }
  EXPECT_EQ(off_worker.load(), 0);
  EXPECT_GE(worker.stats().fd_events, static_cast<uint64_t>(count));
  worker.run([&] {
    for (auto& fd : fds) worker.unwatch(fd->get());
  });
}

TEST(WorkerTest, ThirtyTwoEventfds) { many_fds(32, 200); }

TEST(WorkerTest, MoreReadyFdsThanOneEpollWaitReturns) { many_fds(100, 50); }

}  // namespace
}  // namespace uvhost::datapath
