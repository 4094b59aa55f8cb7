// WorkQueue semantics: queueing, coalescing, FIFO order, flush, stop, parking,
// statistics and the misuse checks. Stress and lost-wake-up hunting live in
// work_queue_stress_test.cpp.
#include "uvhost/sync/work_queue.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include "uvhost/sync/misuse.h"
#include "uvhost/sync/spin_then_park.h"

namespace uvhost::sync {
namespace {

using namespace std::chrono_literals;

// Blocks the worker inside a run until release() so tests can pile up work.
class WorkerGate {
 public:
  explicit WorkerGate(WorkQueue& wq) : item_([this] {
      entered_.set();
      released_.wait();
    }) {
    wq.queue(item_);
    entered_.wait();
  }
  void release() { released_.set(); }

 private:
  SpinThenParkEvent entered_;
  SpinThenParkEvent released_;
  WorkItem item_;
};

class WorkQueueStrategyTest : public ::testing::TestWithParam<EnqueueStrategy> {};

TEST_P(WorkQueueStrategyTest, QueuedItemRunsOnTheWorkerThread) {
  WorkQueue wq(GetParam());
  std::atomic<bool> on_worker{false};
  SpinThenParkEvent ran;
  WorkItem item([&] {
    on_worker.store(wq.on_worker_thread());
    ran.set();
  });
  EXPECT_TRUE(wq.queue(item));
  ran.wait();
  EXPECT_TRUE(on_worker.load());
  EXPECT_FALSE(wq.on_worker_thread());
  wq.flush();
}

// The worker thread carries the name it was given (first 15 bytes: the kernel's limit),
// so per-thread CPU accounting can tell the workers of different ports apart.
TEST(WorkQueueTest, WorkerThreadIsNamed) {
  for (const auto& [given, expected] :
       std::vector<std::pair<std::string, std::string>>{{"p0.w1", "p0.w1"},
                                                       {"a-very-long-port.w12", "a-very-long-por"}}) {
    WorkQueue wq(EnqueueStrategy::kLockless, nullptr, given);
    std::string seen;
    SpinThenParkEvent ran;
    WorkItem item([&] {
      char name[16] = {};
      pthread_getname_np(pthread_self(), name, sizeof name);
      seen = name;
      ran.set();
    });
    wq.queue(item);
    ran.wait();
    wq.flush();
    EXPECT_EQ(seen, expected);
  }
}

TEST_P(WorkQueueStrategyTest, AlreadyQueuedItemIsNotQueuedTwice) {
  WorkQueue wq(GetParam());
  int runs = 0;  // written by the worker, read after flush(): flush orders it
  WorkItem item([&] { ++runs; });
  WorkerGate gate(wq);
  EXPECT_TRUE(wq.queue(item));
  EXPECT_TRUE(item.is_queued());
  EXPECT_FALSE(wq.queue(item));
  EXPECT_FALSE(wq.queue(item));
  gate.release();
  wq.flush();
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(item.is_queued());
}

TEST_P(WorkQueueStrategyTest, RunsInQueueOrder) {
  WorkQueue wq(GetParam());
  std::vector<int> order;
  std::vector<std::unique_ptr<WorkItem>> items;
  for (int i = 0; i < 16; ++i) items.push_back(std::make_unique<WorkItem>([&order, i] { order.push_back(i); }));
  WorkerGate gate(wq);
  for (auto& item : items) EXPECT_TRUE(wq.queue(*item));
  gate.release();
  wq.flush();
  ASSERT_EQ(order.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
}

TEST_P(WorkQueueStrategyTest, FlushWaitsForEverythingQueuedBefore) {
  WorkQueue wq(GetParam());
  std::vector<int> done(64, 0);
  std::vector<std::unique_ptr<WorkItem>> items;
  for (std::size_t i = 0; i < done.size(); ++i) {
    items.push_back(std::make_unique<WorkItem>([&done, i] {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      done[i] = 1;
    }));
  }
  for (auto& item : items) wq.queue(*item);
  wq.flush();
  for (int d : done) EXPECT_EQ(d, 1);
}

TEST_P(WorkQueueStrategyTest, ItemQueuedDuringItsRunRunsAgain) {
  WorkQueue wq(GetParam());
  int runs = 0;
  bool requeued = false;
  WorkItem* self = nullptr;
  WorkItem item([&] {
    if (++runs == 1) requeued = wq.queue(*self);  // the bit is clear during the run
  });
  self = &item;
  wq.queue(item);
  wq.flush();  // the re-queue happened before the first flush's markers ran...
  wq.flush();  // ...so this one waits for the second run.
  EXPECT_TRUE(requeued);
  EXPECT_EQ(runs, 2);
}

TEST_P(WorkQueueStrategyTest, StatsCountRunsNotFlushMarkers) {
  WorkQueue wq(GetParam());
  WorkItem item([] {});
  for (int i = 0; i < 10; ++i) {
    wq.queue(item);
    wq.flush();
  }
  EXPECT_EQ(wq.stats().items_run, 10u);
}

TEST_P(WorkQueueStrategyTest, WorkerParksWhenIdleAndUsesNoCpu) {
  WorkQueue wq(GetParam());
  WorkItem item([] {});
  for (int i = 0; i < 20; ++i) {
    wq.queue(item);
    wq.flush();
    std::this_thread::sleep_for(1ms);  // let the worker go idle between rounds
  }
  WorkQueueStats before = wq.stats();
  EXPECT_GE(before.parks, 10u);
  EXPECT_GE(before.wakeups, 10u);
  std::this_thread::sleep_for(200ms);
  WorkQueueStats after = wq.stats();
  EXPECT_EQ(after.parks, before.parks) << "an idle worker stays parked";
  EXPECT_LT(after.worker_cpu_ns - before.worker_cpu_ns, 5'000'000) << "idle worker burned CPU";
}

TEST_P(WorkQueueStrategyTest, StopRunsWhatIsQueued) {
  auto wq = std::make_unique<WorkQueue>(GetParam());
  int runs = 0;
  std::vector<std::unique_ptr<WorkItem>> items;
  for (int i = 0; i < 8; ++i) items.push_back(std::make_unique<WorkItem>([&runs] { ++runs; }));
  {
    WorkerGate gate(*wq);
    for (auto& item : items) wq->queue(*item);
    std::thread releaser([&gate] {
      std::this_thread::sleep_for(5ms);
      gate.release();
    });
    wq->stop();
    releaser.join();
  }
  EXPECT_EQ(runs, 8);
  wq->stop();  // idempotent
  wq->flush();  // after stop: returns at once
  EXPECT_EQ(wq->stats().items_run, 9u);  // 8 items + the gate
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, WorkQueueStrategyTest, ::testing::ValuesIn(kAllEnqueueStrategies),
                         [](const ::testing::TestParamInfo<EnqueueStrategy>& param_info) {
                           return std::string(to_string(param_info.param));
                         });

TEST(WorkQueue, FlushCoversItemsOfEveryStrategy) {
  WorkQueue wq(EnqueueStrategy::kLockedWake);
  std::vector<int> done(9, 0);
  std::vector<std::unique_ptr<WorkItem>> items;
  for (std::size_t i = 0; i < done.size(); ++i) items.push_back(std::make_unique<WorkItem>([&done, i] { done[i] = 1; }));
  WorkerGate gate(wq);
  for (std::size_t i = 0; i < items.size(); ++i) {
    wq.set_strategy(kAllEnqueueStrategies[i % 3]);
    EXPECT_TRUE(wq.queue(*items[i]));
  }
  // Release the gate from another thread while flush() is already waiting.
  std::thread releaser([&gate] {
    std::this_thread::sleep_for(2ms);
    gate.release();
  });
  wq.flush();
  releaser.join();
  for (int d : done) EXPECT_EQ(d, 1);
}

TEST(WorkQueue, ItemQueuedWithOneStrategyIsNotQueuedAgainWithAnother) {
  WorkQueue wq(EnqueueStrategy::kLockless);
  int runs = 0;
  WorkItem item([&] { ++runs; });
  WorkerGate gate(wq);
  EXPECT_TRUE(wq.queue(item));
  for (EnqueueStrategy s : kAllEnqueueStrategies) {
    wq.set_strategy(s);
    EXPECT_FALSE(wq.queue(item));
  }
  gate.release();
  wq.flush();
  EXPECT_EQ(runs, 1);
}

TEST(WorkQueue, StrategyNamesRoundTrip) {
  for (EnqueueStrategy s : kAllEnqueueStrategies) {
    EXPECT_EQ(base::parse_enum<EnqueueStrategy>(to_string(s)), s);
  }
  EXPECT_FALSE(base::parse_enum<EnqueueStrategy>("a").has_value());  // one spelling per strategy
  EXPECT_FALSE(base::parse_enum<EnqueueStrategy>("mutex").has_value());
}

#if UVHOST_MISUSE_CHECKS_ENABLED
class WorkQueueDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(WorkQueueDeathTest, DestroyingAQueuedItemAborts) {
  EXPECT_DEATH(
      {
        WorkQueue wq;
        WorkerGate gate(wq);
        auto item = std::make_unique<WorkItem>([] {});
        wq.queue(*item);
        item.reset();
      },
      "WorkItem destroyed while queued");
}

TEST_F(WorkQueueDeathTest, QueueAfterStopAborts) {
  EXPECT_DEATH(
      {
        WorkQueue wq;
        WorkItem item([] {});
        wq.stop();
        wq.queue(item);
      },
      "queue\\(\\) on a stopped WorkQueue");
}

TEST_F(WorkQueueDeathTest, FlushFromTheWorkerAborts) {
  EXPECT_DEATH(
      {
        WorkQueue wq;
        WorkItem item([&wq] { wq.flush(); });
        wq.queue(item);
        wq.flush();
      },
      "flush\\(\\) called from the worker thread");
}
#endif

}  // namespace
}  // namespace uvhost::sync
