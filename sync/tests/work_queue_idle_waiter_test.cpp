// WorkQueue with an IdleWaiter: the idle worker sleeps in the waiter (here an eventfd
// + poll(), the shape of the datapath's epoll worker) instead of on its futex.
//  - no lost wake-ups: producers queue coalescing items while the worker parks in the
//    waiter over and over; every producer waits (without flush(), whose own wake-up
//    would hide a lost one) for its item to run, so a lost wake-up is a timeout;
//  - wait_idle() may queue items itself (a ready fd's handler) and no wake() is made
//    for them (the worker is the one "sleeping");
//  - stats().wakeups counts the wake() calls; stop() and the destructor end a sleep
//    in the waiter; on_worker_thread() holds inside wait_idle() from the first call.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "uvhost/base/unique_fd.h"
#include "uvhost/sync/cpu_relax.h"
#include "uvhost/sync/spin_then_park.h"
#include "uvhost/sync/work_queue.h"
#include "sanitized_build.h"

namespace uvhost::sync {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

using testing_support::kSanitized;

constexpr int64_t kLostWakeupTimeoutNs = 3'000'000'000;

// Polls pred() (yielding) until it holds or `timeout` passes; returns pred().
template <class Pred>
bool wait_until(Pred pred, std::chrono::nanoseconds timeout = std::chrono::nanoseconds(kLostWakeupTimeoutNs)) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() > deadline) return pred();
    std::this_thread::yield();
  }
  return true;
}

// The test waiter: poll() on a wake eventfd and a "device" eventfd. When the device
// fd is readable, wait_idle() reads it and queues `on_ready` on the WorkQueue (from
// the worker thread, inside wait_idle: a ready fd's handler).
class PollWaiter final : public IdleWaiter {
 public:
  // timeout_ms: poll()'s timeout; -1 sleeps until an fd is ready, 0 makes every
  // wait_idle() a spurious return.
  explicit PollWaiter(int timeout_ms = -1)
      : wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
        device_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
        timeout_ms_(timeout_ms) {}
  ~PollWaiter() override = default;
  PollWaiter(const PollWaiter&) = delete;
  PollWaiter& operator=(const PollWaiter&) = delete;

  // Before the WorkQueue exists (its storage) or after; read by the worker.
  void attach(const WorkQueue* wq) { queue_.store(wq, std::memory_order_release); }
  void set_on_ready(WorkQueue* wq, WorkItem* item) {
    ready_queue_.store(wq, std::memory_order_relaxed);
    on_ready_.store(item, std::memory_order_release);
  }

  // Any thread: makes the device fd readable ("a kick").
  void signal_device() { ASSERT_EQ(::eventfd_write(device_fd_.get(), 1), 0); }

  void wait_idle() noexcept override {
    waits_.fetch_add(1, std::memory_order_relaxed);
    if (const WorkQueue* wq = queue_.load(std::memory_order_acquire)) {
      if (!wq->on_worker_thread()) wait_off_worker_.fetch_add(1, std::memory_order_relaxed);
    }
    in_wait_.store(true, std::memory_order_seq_cst);
    pollfd fds[2] = {{wake_fd_.get(), POLLIN, 0}, {device_fd_.get(), POLLIN, 0}};
    const int ready = ::poll(fds, 2, timeout_ms_);
    in_wait_.store(false, std::memory_order_seq_cst);
    if (ready <= 0) return;  // timeout (spurious return) or EINTR
    eventfd_t value = 0;
    if ((fds[0].revents & POLLIN) != 0 && ::eventfd_read(wake_fd_.get(), &value) == 0) {
      woken_.fetch_add(1, std::memory_order_relaxed);
    }
    if ((fds[1].revents & POLLIN) != 0 && ::eventfd_read(device_fd_.get(), &value) == 0) {
      device_events_.fetch_add(value, std::memory_order_relaxed);
      WorkItem* item = on_ready_.load(std::memory_order_acquire);
      WorkQueue* wq = ready_queue_.load(std::memory_order_relaxed);
      if (item != nullptr && wq != nullptr) {
        if (wq->queue(*item)) queued_from_wait_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  void wake() noexcept override {
    wake_calls_.fetch_add(1, std::memory_order_relaxed);
    if (const WorkQueue* wq = queue_.load(std::memory_order_acquire)) {
      if (wq->on_worker_thread()) wake_on_worker_.fetch_add(1, std::memory_order_relaxed);
    }
    (void)::eventfd_write(wake_fd_.get(), 1);
  }

  bool in_wait() const { return in_wait_.load(std::memory_order_seq_cst); }
  uint64_t waits() const { return waits_.load(std::memory_order_relaxed); }
  uint64_t wake_calls() const { return wake_calls_.load(std::memory_order_relaxed); }
  uint64_t wake_on_worker() const { return wake_on_worker_.load(std::memory_order_relaxed); }
  uint64_t wait_off_worker() const { return wait_off_worker_.load(std::memory_order_relaxed); }
  uint64_t device_events() const { return device_events_.load(std::memory_order_relaxed); }
  uint64_t queued_from_wait() const { return queued_from_wait_.load(std::memory_order_relaxed); }
  uint64_t woken() const { return woken_.load(std::memory_order_relaxed); }

 private:
  const base::UniqueFd wake_fd_;
  const base::UniqueFd device_fd_;
  const int timeout_ms_;
  std::atomic<const WorkQueue*> queue_{nullptr};
  std::atomic<WorkQueue*> ready_queue_{nullptr};
  std::atomic<WorkItem*> on_ready_{nullptr};
  std::atomic<bool> in_wait_{false};
  std::atomic<uint64_t> waits_{0};
  std::atomic<uint64_t> wake_calls_{0};
  std::atomic<uint64_t> wake_on_worker_{0};
  std::atomic<uint64_t> wait_off_worker_{0};
  std::atomic<uint64_t> device_events_{0};
  std::atomic<uint64_t> queued_from_wait_{0};
  std::atomic<uint64_t> woken_{0};
};

// Waits until the worker sleeps in the waiter. Once in_wait() is seen, the worker
// stored kParked before calling wait_idle(), so the next queue() must wake it.
bool wait_for_sleep(const PollWaiter& waiter) {
  return wait_until([&] { return waiter.in_wait(); });
}

class IdleWaiterStrategyTest : public ::testing::TestWithParam<EnqueueStrategy> {};

// ---- no lost wake-ups ------------------------------------------------------------

struct CoalescingProducer {
  std::atomic<uint64_t> payload{0};  // relaxed: queue() carries it to the run
  std::atomic<uint64_t> seen{0};     // last payload a run saw
  uint64_t runs = 0;                 // worker only; read after flush()
  uint64_t queued = 0;               // successful queue() calls; producer only
  uint64_t generations = 0;          // rounds the producer waited for a new value
  WorkItem item{[this] {
    ++runs;
    seen.store(payload.load(std::memory_order_relaxed), std::memory_order_release);
  }};
};

struct SharedItem {
  std::atomic<uint64_t> runs{0};
  WorkItem item{[this] { runs.fetch_add(1, std::memory_order_relaxed); }};
};

TEST_P(IdleWaiterStrategyTest, NoLostWakeupsEightProducersCoalescing) {
  constexpr int kProducers = 8;
  constexpr uint64_t kIterations = kSanitized ? 25'000 : 100'000;
  constexpr uint64_t kSyncEvery = 500;     // wait (no flush) for our run: the worker parks
  constexpr uint64_t kFlushEvery = 10'007;  // flush() must cover what we queued
  PollWaiter waiter;
  WorkQueue wq(GetParam(), &waiter);
  waiter.attach(&wq);
  std::vector<std::unique_ptr<CoalescingProducer>> producers;
  for (int i = 0; i < kProducers; ++i) producers.push_back(std::make_unique<CoalescingProducer>());
  SharedItem shared[2];
  std::atomic<uint64_t> shared_queued{0};
  std::atomic<uint64_t> lost{0};
  std::atomic<uint64_t> flush_violations{0};
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int t = 0; t < kProducers; ++t) {
    threads.emplace_back([&, t, p = producers[static_cast<size_t>(t)].get()] {
      uint64_t shared_here = 0;
      for (uint64_t k = 1; k <= kIterations; ++k) {
        p->payload.store(k, std::memory_order_relaxed);
        if (wq.queue(p->item)) ++p->queued;
        if (wq.queue(shared[(k + static_cast<uint64_t>(t)) % 2].item)) ++shared_here;
        if (k % kSyncEvery == 0) {
          // No flush(): its markers would wake the worker and hide a lost wake-up.
          if (!wait_until([&] { return p->seen.load(std::memory_order_acquire) >= k; })) {
            lost.fetch_add(1, std::memory_order_relaxed);
            break;
          }
          ++p->generations;
        }
        if ((k + static_cast<uint64_t>(t) * 1000) % kFlushEvery == 0) {
          wq.flush();
          if (p->seen.load(std::memory_order_acquire) < k) flush_violations.fetch_add(1, std::memory_order_relaxed);
        }
      }
      shared_queued.fetch_add(shared_here, std::memory_order_relaxed);
    });
  }
  for (auto& th : threads) th.join();
  wq.flush();
  const auto elapsed = Clock::now() - start;
  EXPECT_EQ(lost.load(), 0u) << "a queued item did not run within 3 s: lost wake-up";
  EXPECT_EQ(flush_violations.load(), 0u) << "flush() returned before an earlier queue() ran";
  uint64_t total_runs = 0;
  for (auto& p : producers) {
    EXPECT_EQ(p->seen.load(), kIterations) << "the last queue() was not followed by a run that saw its payload";
    EXPECT_EQ(p->runs, p->queued) << "every successful queue() runs exactly once";
    EXPECT_GE(p->runs, p->generations) << "each generation needs a run of its own";
    EXPECT_EQ(p->generations, kIterations / kSyncEvery);
    total_runs += p->runs;
  }
  EXPECT_EQ(shared[0].runs.load() + shared[1].runs.load(), shared_queued.load());
  total_runs += shared_queued.load();
  waiter.attach(nullptr);
  const WorkQueueStats stats = wq.stats();
  EXPECT_EQ(stats.items_run, total_runs);
  EXPECT_GT(stats.parks, 0u) << "the worker never slept in the waiter";
  EXPECT_EQ(stats.wakeups, waiter.wake_calls()) << "wakeups counts the wake() calls";
  EXPECT_EQ(waiter.wake_on_worker(), 0u);
  EXPECT_EQ(waiter.wait_off_worker(), 0u);
  std::printf("strategy=%s runs=%llu parks=%llu waits=%llu wakeups=%llu elapsed=%lldms\n",
              std::string(to_string(GetParam())).c_str(), static_cast<unsigned long long>(total_runs),
              static_cast<unsigned long long>(stats.parks), static_cast<unsigned long long>(waiter.waits()),
              static_cast<unsigned long long>(stats.wakeups),
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()));
}

struct PingPongProducer {
  SpinThenParkEvent ran;
  uint64_t payload = 0;  // plain: written before queue(), read by the run
  uint64_t expected = 1;
  std::atomic<uint64_t> mismatches{0};
  WorkItem item{[this] {
    if (payload != expected) mismatches.fetch_add(1, std::memory_order_relaxed);
    ++expected;
    ran.set();
  }};
};

// Every queue() waits for its run: the worker parks in the waiter between most of
// them, so each cycle goes through the park / wake() hand-off.
void ping_pong(WorkQueue& wq, PollWaiter& waiter, int producers, uint64_t cycles_each, bool let_it_sleep) {
  std::vector<std::unique_ptr<PingPongProducer>> state;
  for (int i = 0; i < producers; ++i) state.push_back(std::make_unique<PingPongProducer>());
  std::atomic<uint64_t> lost{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < producers; ++i) {
    threads.emplace_back([&, p = state[static_cast<size_t>(i)].get()] {
      for (uint64_t c = 0; c < cycles_each; ++c) {
        // Every other cycle, give the worker the chance to fall asleep first (a hint,
        // not a condition: another producer may keep it busy).
        if (let_it_sleep && c % 2 == 0) (void)wait_until([&] { return waiter.in_wait(); }, 1ms);
        p->ran.reset();
        ++p->payload;
        if (!wq.queue(p->item) || !p->ran.wait_for(kLostWakeupTimeoutNs, SpinPolicy{16})) {
          lost.fetch_add(1, std::memory_order_relaxed);
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(lost.load(), 0u) << "an item did not run within 3 s: lost wake-up";
  for (auto& p : state) EXPECT_EQ(p->mismatches.load(), 0u);
  // A run is counted after its function returns: flush so the last ones are in.
  wq.flush();
  const WorkQueueStats stats = wq.stats();
  EXPECT_EQ(stats.items_run, static_cast<uint64_t>(producers) * cycles_each);
  EXPECT_EQ(stats.wakeups, waiter.wake_calls());
  EXPECT_EQ(waiter.wake_on_worker(), 0u);
}

TEST_P(IdleWaiterStrategyTest, PingPongThroughTheWaiter) {
  PollWaiter waiter;
  WorkQueue wq(GetParam(), &waiter);
  waiter.attach(&wq);
  ping_pong(wq, waiter, 4, kSanitized ? 500 : 1500, /*let_it_sleep=*/true);
  EXPECT_GT(wq.stats().parks, 50u);
  EXPECT_GT(waiter.wake_calls(), 50u);
  waiter.attach(nullptr);
}

TEST_P(IdleWaiterStrategyTest, SingleProducerPingPong) {
  // One producer that re-queues the moment its run has signalled, so its queue()
  // lands while the worker finishes the run, drains and parks. With no other
  // producer to wake the worker by accident, a lost wake-up hangs (we give up after
  // 3 s). A varying delay before each queue() sweeps it over the worker's way to
  // the park.
  PollWaiter waiter;
  WorkQueue wq(GetParam(), &waiter);
  waiter.attach(&wq);
  std::atomic<bool> ran{false};
  WorkItem item([&] { ran.store(true, std::memory_order_release); });
  const uint64_t cycles = kSanitized ? 1'000 : 5'000;
  uint64_t lost_at = 0;
  for (uint64_t c = 1; c <= cycles; ++c) {
    ran.store(false, std::memory_order_relaxed);
    for (uint64_t i = 0; i < (c * 7) % 64; ++i) cpu_relax();
    ASSERT_TRUE(wq.queue(item)) << "only we queue it, and its last run is over";
    // Spin first (to come back as fast as the worker finishes), then yield (on a
    // loaded 2-core machine the worker may need our CPU).
    const auto deadline = Clock::now() + std::chrono::nanoseconds(kLostWakeupTimeoutNs);
    uint32_t spins = 0;
    while (!ran.load(std::memory_order_acquire)) {
      if (++spins < 2000) {
        cpu_relax();
        continue;
      }
      std::this_thread::yield();
      if (Clock::now() > deadline) break;
    }
    if (!ran.load(std::memory_order_acquire)) {
      lost_at = c;
      break;
    }
  }
  EXPECT_EQ(lost_at, 0u) << "cycle " << lost_at << ": the item did not run within 3 s (lost wake-up)";
  wq.flush();
  const WorkQueueStats stats = wq.stats();
  EXPECT_EQ(stats.items_run, lost_at == 0 ? cycles : stats.items_run);
  EXPECT_EQ(stats.wakeups, waiter.wake_calls());
  EXPECT_EQ(waiter.wake_on_worker(), 0u);
  waiter.attach(nullptr);
}

TEST_P(IdleWaiterStrategyTest, SpuriousReturnsFromTheWaiterLoseNothing) {
  // poll() with a zero timeout: wait_idle() returns at once, mostly with nothing.
  PollWaiter waiter(/*timeout_ms=*/0);
  WorkQueue wq(GetParam(), &waiter);
  waiter.attach(&wq);
  ping_pong(wq, waiter, 2, kSanitized ? 500 : 2000, /*let_it_sleep=*/false);
  waiter.attach(nullptr);
}

// ---- wake() and the statistics ---------------------------------------------------

TEST_P(IdleWaiterStrategyTest, EachQueueToASleepingWorkerCallsWakeOnce) {
  PollWaiter waiter;
  WorkQueue wq(GetParam(), &waiter);
  waiter.attach(&wq);
  SpinThenParkEvent ran;
  std::atomic<bool> on_worker{false};
  WorkItem item([&] {
    on_worker.store(wq.on_worker_thread());
    ran.set();
  });
  for (uint64_t round = 1; round <= 5; ++round) {
    ASSERT_TRUE(wait_for_sleep(waiter));
    ran.reset();
    EXPECT_TRUE(wq.queue(item));
    ASSERT_TRUE(ran.wait_for(kLostWakeupTimeoutNs));
    EXPECT_TRUE(on_worker.load());
    EXPECT_EQ(waiter.wake_calls(), round);
    EXPECT_EQ(wq.stats().wakeups, round);
    EXPECT_GE(wq.stats().parks, round);
  }
  // A queue() while the worker runs (not parked) makes no wake().
  SpinThenParkEvent entered;
  SpinThenParkEvent release;
  WorkItem gate([&] {
    entered.set();
    release.wait();
  });
  ASSERT_TRUE(wait_for_sleep(waiter));
  wq.queue(gate);
  entered.wait();
  const uint64_t before = waiter.wake_calls();
  ran.reset();
  EXPECT_TRUE(wq.queue(item));
  EXPECT_FALSE(wq.queue(item));
  EXPECT_EQ(waiter.wake_calls(), before);
  release.set();
  ASSERT_TRUE(ran.wait_for(kLostWakeupTimeoutNs));
  wq.flush();
  EXPECT_EQ(wq.stats().wakeups, waiter.wake_calls());
  EXPECT_EQ(waiter.wake_on_worker(), 0u);
  waiter.attach(nullptr);
}

TEST_P(IdleWaiterStrategyTest, WaitIdleQueuesItemsWithoutWake) {
  PollWaiter waiter;
  WorkQueue wq(GetParam(), &waiter);
  waiter.attach(&wq);
  std::atomic<uint64_t> runs{0};
  std::atomic<uint64_t> runs_on_worker{0};
  SpinThenParkEvent ran;
  WorkItem handler([&] {
    if (wq.on_worker_thread()) runs_on_worker.fetch_add(1, std::memory_order_relaxed);
    runs.fetch_add(1, std::memory_order_relaxed);
    ran.set();
  });
  waiter.set_on_ready(&wq, &handler);
  constexpr uint64_t kKicks = kSanitized ? 300 : 2000;
  for (uint64_t i = 1; i <= kKicks; ++i) {
    ASSERT_TRUE(wait_for_sleep(waiter));
    ran.reset();
    waiter.signal_device();  // from this thread; the worker queues the handler itself
    ASSERT_TRUE(ran.wait_for(kLostWakeupTimeoutNs)) << "kick " << i << ": the handler queued inside wait_idle() never ran";
  }
  EXPECT_EQ(runs.load(), kKicks);
  EXPECT_EQ(runs_on_worker.load(), kKicks);
  EXPECT_EQ(waiter.device_events(), kKicks);
  EXPECT_EQ(waiter.queued_from_wait(), kKicks);
  // Nobody but the worker queued anything: no wake() at all, and the counter agrees.
  EXPECT_EQ(waiter.wake_calls(), 0u);
  EXPECT_EQ(wq.stats().wakeups, 0u);
  EXPECT_EQ(waiter.wake_on_worker(), 0u);
  EXPECT_GE(wq.stats().parks, kKicks);
  waiter.set_on_ready(nullptr, nullptr);
  wq.flush();  // (a run is counted after its function returns)
  EXPECT_EQ(wq.stats().items_run, kKicks);
  waiter.attach(nullptr);
}

TEST_P(IdleWaiterStrategyTest, ReadyFdAndProducersTogether) {
  // Kicks through the waiter and queue()s from other threads, concurrently: the
  // handler and the producers' items all keep running; wake() is never made from
  // the worker thread.
  PollWaiter waiter;
  WorkQueue wq(GetParam(), &waiter);
  waiter.attach(&wq);
  std::atomic<uint64_t> handler_runs{0};
  WorkItem handler([&] { handler_runs.fetch_add(1, std::memory_order_relaxed); });
  waiter.set_on_ready(&wq, &handler);
  constexpr uint64_t kRounds = kSanitized ? 2000 : 20000;
  std::atomic<uint64_t> lost{0};
  std::thread kicker([&] {
    for (uint64_t i = 0; i < kRounds; ++i) {
      waiter.signal_device();
      if (i % 64 == 0) std::this_thread::yield();
    }
  });
  std::vector<std::thread> producers;
  for (int t = 0; t < 2; ++t) {
    producers.emplace_back([&] {
      SpinThenParkEvent ran;
      WorkItem mine([&] { ran.set(); });
      for (uint64_t i = 0; i < kRounds / 10; ++i) {
        ran.reset();
        wq.queue(mine);
        if (!ran.wait_for(kLostWakeupTimeoutNs, SpinPolicy{16})) {
          lost.fetch_add(1, std::memory_order_relaxed);
          break;
        }
      }
      wq.flush();
    });
  }
  kicker.join();
  for (auto& th : producers) th.join();
  // Every kick is read eventually (the device fd stays readable until read).
  EXPECT_TRUE(wait_until([&] { return waiter.device_events() == kRounds; }));
  wq.flush();
  EXPECT_EQ(lost.load(), 0u);
  EXPECT_GE(handler_runs.load(), 1u);
  EXPECT_EQ(handler_runs.load(), waiter.queued_from_wait());
  EXPECT_EQ(waiter.wake_on_worker(), 0u);
  EXPECT_EQ(waiter.wait_off_worker(), 0u);
  EXPECT_EQ(wq.stats().wakeups, waiter.wake_calls());
  waiter.set_on_ready(nullptr, nullptr);
  wq.flush();
  wq.flush();
  waiter.attach(nullptr);
}

// ---- on_worker_thread() inside wait_idle(), stop(), the destructor ----------------

TEST(IdleWaiterTest, OnWorkerThreadHoldsFromTheFirstWaitIdle) {
  // The waiter knows the WorkQueue's address before it is constructed, so even a
  // wait_idle() that runs while the constructor is still going asks
  // on_worker_thread() (which must not read the half-built std::thread).
  for (int round = 0; round < 50; ++round) {
    PollWaiter waiter;
    alignas(WorkQueue) unsigned char storage[sizeof(WorkQueue)];
    auto* wq = reinterpret_cast<WorkQueue*>(storage);
    waiter.attach(wq);
    ::new (storage) WorkQueue(EnqueueStrategy::kLockless, &waiter);
    EXPECT_FALSE(wq->on_worker_thread());
    ASSERT_TRUE(wait_for_sleep(waiter));
    SpinThenParkEvent ran;
    WorkItem item([&] { ran.set(); });
    wq->queue(item);
    ASSERT_TRUE(ran.wait_for(kLostWakeupTimeoutNs));
    wq->~WorkQueue();
    waiter.attach(nullptr);
    EXPECT_GE(waiter.waits(), 1u);
    EXPECT_EQ(waiter.wait_off_worker(), 0u) << "on_worker_thread() false inside wait_idle()";
  }
}

TEST(IdleWaiterTest, TwoQueuesOnWorkerThreadIsPerQueue) {
  PollWaiter waiter_a;
  PollWaiter waiter_b;
  WorkQueue a(EnqueueStrategy::kLockless, &waiter_a);
  WorkQueue b(EnqueueStrategy::kLockless, &waiter_b);
  waiter_a.attach(&a);
  waiter_b.attach(&b);
  std::atomic<int> a_on_a{-1};
  std::atomic<int> a_on_b{-1};
  SpinThenParkEvent b_ran;
  WorkItem in_b([&] { b_ran.set(); });
  // An item of `a` queues on `b`: a different queue, so b's waiter must be woken.
  WorkItem in_a([&] {
    a_on_a.store(a.on_worker_thread() ? 1 : 0);
    a_on_b.store(b.on_worker_thread() ? 1 : 0);
    b.queue(in_b);
  });
  ASSERT_TRUE(wait_for_sleep(waiter_b));
  a.queue(in_a);
  ASSERT_TRUE(b_ran.wait_for(kLostWakeupTimeoutNs)) << "queue() from another queue's worker lost b's wake-up";
  a.flush();
  b.flush();
  EXPECT_EQ(a_on_a.load(), 1);
  EXPECT_EQ(a_on_b.load(), 0);
  EXPECT_GE(waiter_b.wake_calls(), 1u);
  EXPECT_EQ(waiter_a.wake_on_worker(), 0u);
  EXPECT_EQ(waiter_b.wake_on_worker(), 0u);
  waiter_a.attach(nullptr);
  waiter_b.attach(nullptr);
}

TEST_P(IdleWaiterStrategyTest, StopEndsASleepInTheWaiter) {
  PollWaiter waiter;
  auto wq = std::make_unique<WorkQueue>(GetParam(), &waiter);
  ASSERT_TRUE(wait_for_sleep(waiter));
  const auto start = Clock::now();
  wq->stop();
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(waiter.wake_calls(), 1u);
  EXPECT_EQ(wq->stats().wakeups, 1u);
  wq->stop();  // idempotent
  EXPECT_EQ(waiter.wake_calls(), 1u);
  wq.reset();
  EXPECT_FALSE(waiter.in_wait());
}

TEST_P(IdleWaiterStrategyTest, StopRunsWhatIsQueuedThenJoins) {
  PollWaiter waiter;
  WorkQueue wq(GetParam(), &waiter);
  waiter.attach(&wq);
  SpinThenParkEvent entered;
  SpinThenParkEvent release;
  WorkItem gate([&] {
    entered.set();
    release.wait();
  });
  std::atomic<int> runs{0};
  std::vector<std::unique_ptr<WorkItem>> items;
  for (int i = 0; i < 32; ++i) items.push_back(std::make_unique<WorkItem>([&] { runs.fetch_add(1); }));
  ASSERT_TRUE(wait_for_sleep(waiter));
  wq.queue(gate);
  entered.wait();
  for (auto& item : items) EXPECT_TRUE(wq.queue(*item));
  std::thread releaser([&] {
    std::this_thread::sleep_for(10ms);
    release.set();
  });
  wq.stop();
  releaser.join();
  EXPECT_EQ(runs.load(), 32);
  EXPECT_EQ(wq.stats().items_run, 33u);
  waiter.attach(nullptr);
}

TEST(IdleWaiterTest, DestructorWithASleepingWorkerAndPendingKick) {
  // The device fd is readable but nobody handles it (no on_ready item): wait_idle()
  // keeps returning; destruction must still end the worker.
  for (int round = 0; round < 20; ++round) {
    PollWaiter waiter;
    {
      WorkQueue wq(EnqueueStrategy::kLockless, &waiter);
      if (round % 2 == 0) {
        ASSERT_TRUE(wait_for_sleep(waiter));
      }
      waiter.signal_device();
    }
    EXPECT_FALSE(waiter.in_wait());
  }
}

TEST_P(IdleWaiterStrategyTest, FlushWhileTheWorkerSleeps) {
  PollWaiter waiter;
  WorkQueue wq(GetParam(), &waiter);
  waiter.attach(&wq);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(wait_for_sleep(waiter));
    wq.flush();  // its markers wake the worker; returns once they ran
  }
  EXPECT_EQ(wq.stats().items_run, 0u) << "flush markers are not counted";
  EXPECT_EQ(wq.stats().wakeups, waiter.wake_calls());
  EXPECT_GE(waiter.wake_calls(), 20u);
  waiter.attach(nullptr);
}

INSTANTIATE_TEST_SUITE_P(Strategies, IdleWaiterStrategyTest, ::testing::ValuesIn(kAllEnqueueStrategies),
                         [](const ::testing::TestParamInfo<EnqueueStrategy>& param_info) {
                           return std::string(to_string(param_info.param));
                         });

}  // namespace
}  // namespace uvhost::sync
