// WorkQueue under stress: many more producer threads than cores (16, 64, 256 on
// a 2-core machine), the enqueue strategy switched live underneath them.
//  - PingPong: every producer queues its own item and waits for its run, so the
//    worker parks and is woken over and over; a lost wake-up shows up as a
//    producer whose item never runs (timeout).
//  - FlushAndCoalesce: producers queue their own and shared items and flush;
//    every flush must cover what its thread queued before, and at the end every
//    successful queue() must be matched by exactly one run.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "uvhost/sync/spin_then_park.h"
#include "uvhost/sync/work_queue.h"

namespace uvhost::sync {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kRunTime = 1500ms;  // per configuration; keeps each binary well under 20 s
constexpr int64_t kLostWakeupTimeoutNs = 5'000'000'000;

// Switches the strategy round-robin until stopped, a few thousand times a second.
class StrategySwitcher {
 public:
  explicit StrategySwitcher(WorkQueue& wq)
      : thread_([this, &wq] {
          for (uint32_t i = 0; !stop_.load(std::memory_order_relaxed); ++i) {
            wq.set_strategy(kAllEnqueueStrategies[i % 3]);
            std::this_thread::sleep_for(std::chrono::microseconds(100 + (i * 37) % 200));
            switches_.fetch_add(1, std::memory_order_relaxed);
          }
        }) {}
  ~StrategySwitcher() { stop(); }
  void stop() {
    stop_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) thread_.join();
  }
  uint64_t switches() const { return switches_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> switches_{0};
  std::thread thread_;
};

class WorkQueueStress : public ::testing::TestWithParam<int> {};

struct PingPongProducer {
  SpinThenParkEvent ran;
  uint64_t payload = 0;  // written before queue(), read by the run: needs the HB edge
  uint64_t seen = 0;
  std::atomic<uint64_t> mismatches{0};
  WorkItem item{[this] {
    if (payload != seen + 1) mismatches.fetch_add(1, std::memory_order_relaxed);
    seen = payload;
    ran.set();
  }};
};

TEST_P(WorkQueueStress, PingPongNeverLosesAWakeup) {
  const int producers = GetParam();
  WorkQueue wq(EnqueueStrategy::kLockedWake);
  std::vector<std::unique_ptr<PingPongProducer>> state;
  for (int i = 0; i < producers; ++i) state.push_back(std::make_unique<PingPongProducer>());
  std::atomic<uint64_t> lost{0};
  std::atomic<uint64_t> cycles{0};
  const auto deadline = Clock::now() + kRunTime;
  StrategySwitcher switcher(wq);
  std::vector<std::thread> threads;
  for (int i = 0; i < producers; ++i) {
    threads.emplace_back([&, p = state[static_cast<std::size_t>(i)].get()] {
      while (Clock::now() < deadline) {
        p->ran.reset();
        ++p->payload;
        if (!wq.queue(p->item)) {
          lost.fetch_add(1, std::memory_order_relaxed);  // only we queue it: must be idle
          return;
        }
        if (!p->ran.wait_for(kLostWakeupTimeoutNs, SpinPolicy{64})) {
          lost.fetch_add(1, std::memory_order_relaxed);
          return;
        }
        cycles.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& t : threads) t.join();
  switcher.stop();
  wq.flush();
  EXPECT_EQ(lost.load(), 0u) << "a queued item did not run within 5 s: lost wake-up";
  uint64_t mismatches = 0;
  for (auto& p : state) mismatches += p->mismatches.load();
  EXPECT_EQ(mismatches, 0u);
  WorkQueueStats stats = wq.stats();
  EXPECT_EQ(stats.items_run, cycles.load());
  EXPECT_GT(stats.parks, 0u);
  EXPECT_GT(switcher.switches(), 3u);
  RecordProperty("cycles", static_cast<int>(cycles.load()));
  std::printf("producers=%d cycles=%llu parks=%llu wakeups=%llu switches=%llu\n", producers,
              static_cast<unsigned long long>(cycles.load()), static_cast<unsigned long long>(stats.parks),
              static_cast<unsigned long long>(stats.wakeups), static_cast<unsigned long long>(switcher.switches()));
}

struct CountedItem {
  std::atomic<uint64_t> runs{0};
  WorkItem item{[this] { runs.fetch_add(1, std::memory_order_relaxed); }};
};

struct FlushingProducer {
  std::atomic<uint64_t> payload{0};  // relaxed: a run may read it while we write it
  uint64_t last_seen = 0;            // written by runs, read by us after flush()
  WorkItem item{[this] { last_seen = payload.load(std::memory_order_relaxed); }};
};

TEST_P(WorkQueueStress, FlushCoversPriorWorkAndEverySuccessfulQueueRunsOnce) {
  const int producers = GetParam();
  WorkQueue wq(EnqueueStrategy::kLockless);
  std::vector<std::unique_ptr<FlushingProducer>> state;
  for (int i = 0; i < producers; ++i) state.push_back(std::make_unique<FlushingProducer>());
  CountedItem shared[2];
  std::atomic<uint64_t> shared_queued{0};
  std::atomic<uint64_t> flush_violations{0};
  const auto deadline = Clock::now() + kRunTime;
  StrategySwitcher switcher(wq);
  std::vector<std::thread> threads;
  for (int i = 0; i < producers; ++i) {
    threads.emplace_back([&, i, p = state[static_cast<std::size_t>(i)].get()] {
      uint64_t queued_here = 0;
      for (uint64_t k = 1; Clock::now() < deadline; ++k) {
        // relaxed: the queue() below carries it to the run (visibility contract).
        p->payload.store(k, std::memory_order_relaxed);
        wq.queue(p->item);
        if (wq.queue(shared[k % 2].item)) ++queued_here;
        if ((k + static_cast<uint64_t>(i)) % 4 == 0) {
          wq.flush();
          if (p->last_seen < k) flush_violations.fetch_add(1, std::memory_order_relaxed);
        }
      }
      shared_queued.fetch_add(queued_here, std::memory_order_relaxed);
    });
  }
  for (auto& t : threads) t.join();
  switcher.stop();
  wq.flush();
  EXPECT_EQ(flush_violations.load(), 0u) << "flush() returned before an earlier queue() ran";
  EXPECT_EQ(shared[0].runs.load() + shared[1].runs.load(), shared_queued.load())
      << "every successful queue() runs exactly once";
}

INSTANTIATE_TEST_SUITE_P(Producers, WorkQueueStress, ::testing::Values(16, 64, 256),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return std::to_string(param_info.param) + "producers";
                         });

}  // namespace
}  // namespace uvhost::sync
