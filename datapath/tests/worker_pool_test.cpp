// WorkerPool: the queue-pair-to-worker mappings (device, pair, pool), worker names,
// lookup, release of a port's own workers, and switching the enqueue strategy live
// (all workers or one by name), pinning a port's own workers to CPUs.
#include "uvhost/datapath/worker_pool.h"

#include <sched.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "uvhost/sync/spin_then_park.h"

namespace uvhost::datapath {
namespace {

using sync::EnqueueStrategy;

std::vector<std::string> names(const std::vector<Worker*>& workers) {
  std::vector<std::string> out;
  for (Worker* w : workers) out.push_back(w == nullptr ? "<null>" : w->name());
  return out;
}

using Names = std::vector<std::string>;

TEST(WorkerPoolTest, MappingNames) {
  EXPECT_EQ(to_string(WorkerMapping::kDevice), "device");
  EXPECT_EQ(to_string(WorkerMapping::kQueuePair), "pair");
  EXPECT_EQ(to_string(WorkerMapping::kPool), "pool");
  for (WorkerMapping m : {WorkerMapping::kDevice, WorkerMapping::kQueuePair, WorkerMapping::kPool}) {
    EXPECT_EQ(base::parse_enum<WorkerMapping>(to_string(m)), m);
  }
  for (const char* text : {"", "Device", "queue_pair", "pools", "shared"}) {
    EXPECT_FALSE(base::parse_enum<WorkerMapping>(text).has_value()) << '"' << text << '"';
  }
}

TEST(WorkerPoolTest, DeviceMappingOneWorkerForEveryPair) {
  WorkerPool pool;
  const auto workers = pool.assign("vm1", WorkerMapping::kDevice, 4);
  ASSERT_EQ(workers.size(), 4u);
  for (Worker* w : workers) EXPECT_EQ(w, workers[0]);
  EXPECT_EQ(workers[0]->name(), "vm1.w0");
  ASSERT_EQ(pool.workers().size(), 1u);
  EXPECT_EQ(pool.workers()[0].get(), workers[0]);
  // A second port gets its own worker.
  const auto second = pool.assign("vm2", WorkerMapping::kDevice, 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0], workers[0]);
  EXPECT_EQ(second[0]->name(), "vm2.w0");
  EXPECT_EQ(pool.workers().size(), 2u);
}

TEST(WorkerPoolTest, PairMappingOneWorkerPerPair) {
  WorkerPool pool;
  const auto workers = pool.assign("vm1", WorkerMapping::kQueuePair, 3);
  EXPECT_EQ(names(workers), (Names{"vm1.w0", "vm1.w1", "vm1.w2"}));
  EXPECT_EQ(std::set<Worker*>(workers.begin(), workers.end()).size(), 3u);
  EXPECT_EQ(pool.workers().size(), 3u);
  // Each is its own thread.
  std::set<std::thread::id> threads;
  for (Worker* w : workers) {
    std::thread::id id;
    w->run([&] { id = std::this_thread::get_id(); });
    threads.insert(id);
  }
  EXPECT_EQ(threads.size(), 3u);
}

TEST(WorkerPoolTest, ReleaseEndsOnlyThatPortsOwnWorkers) {
  WorkerPool pool(2);
  (void)pool.assign("a", WorkerMapping::kQueuePair, 2);
  const auto b = pool.assign("b", WorkerMapping::kDevice, 1);
  const auto shared = pool.assign("a", WorkerMapping::kPool, 1);
  ASSERT_EQ(pool.workers().size(), 5u);  // a.w0, a.w1, b.w0, pool.w0, pool.w1
  pool.release("a");
  std::vector<std::string> left;
  for (const auto& w : pool.workers()) left.push_back(w->name());
  EXPECT_EQ(left, (Names{"b.w0", "pool.w0", "pool.w1"}));
  // What is left still runs; the name may be assigned again.
  int ran = 0;
  b[0]->run([&] { ++ran; });
  shared[0]->run([&] { ++ran; });
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(names(pool.assign("a", WorkerMapping::kDevice, 1)), Names{"a.w0"});
  pool.release("nobody");  // no such port: nothing happens
  EXPECT_EQ(pool.workers().size(), 4u);
}

// place() sets the affinity and policy of that port's own workers, each on its own
// thread; the shared pool is no one port's to place.
TEST(WorkerPoolTest, PlaceSetsOnlyThatPortsOwnWorkers) {
  auto affinity = [](Worker* worker) {
    cpu_set_t set;
    CPU_ZERO(&set);
    worker->run([&] { (void)::sched_getaffinity(0, sizeof(set), &set); });
    std::vector<uint32_t> cpus;
    for (uint32_t cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
    return cpus;
  };
  WorkerPool pool(1);
  const auto a = pool.assign("a", WorkerMapping::kQueuePair, 2);
  const auto b = pool.assign("b", WorkerMapping::kDevice, 1);
  const auto shared = pool.assign("c", WorkerMapping::kPool, 1);
  const std::vector<uint32_t> everywhere = affinity(b[0]);
  ASSERT_FALSE(everywhere.empty());
  const uint32_t target = everywhere.back();
  std::string error;
  auto policy = [](Worker* worker) {
    int value = -1;
    worker->run([&] { value = ::sched_getscheduler(0); });
    return value;
  };
  const WorkerPlacement placement{*parse_cpu_list(std::to_string(target), error), WorkerScheduler::kBatch};
  ASSERT_TRUE(pool.place("a", placement, error)) << error;
  EXPECT_EQ(affinity(a[0]), (std::vector<uint32_t>{target}));
  EXPECT_EQ(affinity(a[1]), (std::vector<uint32_t>{target}));
  EXPECT_EQ(policy(a[0]), SCHED_BATCH);
  EXPECT_EQ(policy(a[1]), SCHED_BATCH);
  EXPECT_EQ(affinity(b[0]), everywhere);
  EXPECT_EQ(policy(b[0]), SCHED_OTHER);
  EXPECT_EQ(affinity(shared[0]), everywhere);
  EXPECT_FALSE(pool.place("c", placement, error));
  EXPECT_NE(error.find("port c has no workers of its own to place"), std::string::npos) << error;
  EXPECT_EQ(affinity(shared[0]), everywhere);
  EXPECT_EQ(policy(shared[0]), SCHED_OTHER);
  // Back to the defaults: the affinity stays (an empty list leaves it), the policy goes.
  ASSERT_TRUE(pool.place("a", WorkerPlacement{}, error)) << error;
  EXPECT_EQ(policy(a[0]), SCHED_OTHER);
  ASSERT_TRUE(pool.place("b", WorkerPlacement{CpuList{}, WorkerScheduler::kIdle}, error)) << error;
  EXPECT_EQ(policy(b[0]), SCHED_IDLE);
}

TEST(WorkerPoolTest, PoolMappingRoundRobinAcrossPorts) {
  WorkerPool pool(3);
  EXPECT_TRUE(pool.workers().empty()) << "the shared pool is made on first use";
  const auto a = pool.assign("a", WorkerMapping::kPool, 2);
  EXPECT_EQ(names(a), (Names{"pool.w0", "pool.w1"}));
  EXPECT_EQ(pool.workers().size(), 3u) << "the whole pool is made at once";
  // The next port continues where the previous one stopped.
  const auto b = pool.assign("b", WorkerMapping::kPool, 2);
  EXPECT_EQ(names(b), (Names{"pool.w2", "pool.w0"}));
  const auto c = pool.assign("c", WorkerMapping::kPool, 4);
  EXPECT_EQ(names(c), (Names{"pool.w1", "pool.w2", "pool.w0", "pool.w1"}));
  EXPECT_EQ(c[0], a[1]);
  EXPECT_EQ(c[2], a[0]);
  EXPECT_EQ(c[3], c[0]);
  EXPECT_EQ(pool.workers().size(), 3u) << "no worker made beyond the pool";
  // Other mappings do not disturb the pool's round-robin.
  const auto d = pool.assign("d", WorkerMapping::kDevice, 2);
  EXPECT_EQ(names(d), (Names{"d.w0", "d.w0"}));
  const auto e = pool.assign("e", WorkerMapping::kPool, 1);
  EXPECT_EQ(names(e), (Names{"pool.w2"}));
  EXPECT_EQ(pool.workers().size(), 4u);
}

TEST(WorkerPoolTest, PoolOfZeroMeansOne) {
  WorkerPool pool(0);
  const auto workers = pool.assign("p", WorkerMapping::kPool, 3);
  EXPECT_EQ(names(workers), (Names{"pool.w0", "pool.w0", "pool.w0"}));
  EXPECT_EQ(pool.workers().size(), 1u);
}

TEST(WorkerPoolTest, MixedMappingsAndFind) {
  WorkerPool pool(2);
  const auto dev = pool.assign("dev", WorkerMapping::kDevice, 2);
  const auto pair = pool.assign("pair", WorkerMapping::kQueuePair, 2);
  const auto shared = pool.assign("shared", WorkerMapping::kPool, 3);
  EXPECT_EQ(names(shared), (Names{"pool.w0", "pool.w1", "pool.w0"}));
  EXPECT_EQ(pool.workers().size(), 1u + 2u + 2u);
  EXPECT_EQ(pool.find("dev.w0"), dev[0]);
  EXPECT_EQ(pool.find("pair.w1"), pair[1]);
  EXPECT_EQ(pool.find("pool.w1"), shared[1]);
  EXPECT_EQ(pool.find("pool.w2"), nullptr);
  EXPECT_EQ(pool.find("dev.w1"), nullptr);
  EXPECT_EQ(pool.find(""), nullptr);
  std::set<std::string> all;
  for (const auto& w : pool.workers()) EXPECT_TRUE(all.insert(w->name()).second) << "duplicate " << w->name();
}

TEST(WorkerPoolTest, ZeroPairs) {
  WorkerPool pool;
  EXPECT_TRUE(pool.assign("none", WorkerMapping::kQueuePair, 0).empty());
  EXPECT_TRUE(pool.assign("none", WorkerMapping::kPool, 0).empty());
  EXPECT_TRUE(pool.assign("none", WorkerMapping::kDevice, 0).empty());
}

TEST(WorkerPoolTest, WorkersStartWithThePoolStrategy) {
  WorkerPool pool(2, EnqueueStrategy::kLockedWake);
  pool.assign("a", WorkerMapping::kPool, 2);
  pool.assign("b", WorkerMapping::kDevice, 1);
  for (const auto& w : pool.workers()) EXPECT_EQ(w->work_queue().strategy(), EnqueueStrategy::kLockedWake);
}

TEST(WorkerPoolTest, SetEnqueueStrategyAllOneAndUnknown) {
  WorkerPool pool(2);
  pool.assign("a", WorkerMapping::kQueuePair, 2);
  pool.assign("b", WorkerMapping::kPool, 2);
  ASSERT_EQ(pool.workers().size(), 4u);
  for (const auto& w : pool.workers()) EXPECT_EQ(w->work_queue().strategy(), EnqueueStrategy::kLockless);

  // All workers.
  EXPECT_TRUE(pool.set_enqueue_strategy(EnqueueStrategy::kUnlockThenWake));
  for (const auto& w : pool.workers()) EXPECT_EQ(w->work_queue().strategy(), EnqueueStrategy::kUnlockThenWake);
  // Workers made later follow the pool-wide choice.
  const auto later = pool.assign("c", WorkerMapping::kDevice, 1);
  EXPECT_EQ(later[0]->work_queue().strategy(), EnqueueStrategy::kUnlockThenWake);

  // One by name.
  EXPECT_TRUE(pool.set_enqueue_strategy(EnqueueStrategy::kLockedWake, "a.w1"));
  for (const auto& w : pool.workers()) {
    const EnqueueStrategy expected =
        w->name() == "a.w1" ? EnqueueStrategy::kLockedWake : EnqueueStrategy::kUnlockThenWake;
    EXPECT_EQ(w->work_queue().strategy(), expected) << w->name();
  }
  // Unknown: false, nothing changes.
  EXPECT_FALSE(pool.set_enqueue_strategy(EnqueueStrategy::kLockless, "a.w9"));
  EXPECT_FALSE(pool.set_enqueue_strategy(EnqueueStrategy::kLockless, "pool"));
  for (const auto& w : pool.workers()) {
    EXPECT_NE(w->work_queue().strategy(), EnqueueStrategy::kLockless) << w->name();
  }
  // A worker named alone does not change the pool-wide default for new workers.
  const auto after_one = pool.assign("d", WorkerMapping::kDevice, 1);
  EXPECT_EQ(after_one[0]->work_queue().strategy(), EnqueueStrategy::kUnlockThenWake);
}

TEST(WorkerPoolTest, SetEnqueueStrategyLiveWhileItemsFlow) {
  WorkerPool pool(2);
  const auto workers = pool.assign("live", WorkerMapping::kPool, 2);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> runs{0};
  std::vector<std::thread> producers;
  for (Worker* w : workers) {
    producers.emplace_back([&, w] {
      sync::SpinThenParkEvent ran;
      sync::WorkItem item([&] {
        runs.fetch_add(1, std::memory_order_relaxed);
        ran.set();
      });
      while (!stop.load(std::memory_order_relaxed)) {
        ran.reset();
        w->queue(item);
        if (!ran.wait_for(3'000'000'000)) {
          ADD_FAILURE() << "an item did not run after a strategy switch";
          break;
        }
      }
    });
  }
  for (std::size_t i = 0; i < 300; ++i) {
    pool.set_enqueue_strategy(sync::kAllEnqueueStrategies[i % 3]);
    if (i % 2 == 0) pool.set_enqueue_strategy(sync::kAllEnqueueStrategies[(i + 1) % 3], "pool.w1");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  stop.store(true);
  for (auto& th : producers) th.join();
  EXPECT_GT(runs.load(), 0u);
}

TEST(WorkerPoolTest, WorkersRunItemsAndThePoolStopsThem) {
  std::atomic<int> runs{0};
  std::vector<std::unique_ptr<sync::WorkItem>> items;
  for (int i = 0; i < 6; ++i) items.push_back(std::make_unique<sync::WorkItem>([&] { runs.fetch_add(1); }));
  {
    WorkerPool pool(2);
    const auto a = pool.assign("a", WorkerMapping::kPool, 2);
    const auto b = pool.assign("b", WorkerMapping::kQueuePair, 2);
    const auto c = pool.assign("c", WorkerMapping::kDevice, 2);
    Worker* targets[] = {a[0], a[1], b[0], b[1], c[0], c[1]};
    for (int i = 0; i < 6; ++i) targets[i]->queue(*items[static_cast<size_t>(i)]);
  }  // the destructor stops every worker, running what is queued
  EXPECT_EQ(runs.load(), 6);
}

}  // namespace
}  // namespace uvhost::datapath
