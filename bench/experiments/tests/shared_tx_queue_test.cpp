// SharedTxQueue: the bounded TX queue shared by more workers than queues.
//  - FIFO, a burst that does not fit is accepted as a prefix and the rest counted as
//    dropped, wrap-around, stats consistent;
//  - bad arguments refused;
//  - many workers (more than cores) pushing bursts under each kind of lock with one
//    consumer draining: every accepted descriptor popped exactly once, each worker's in
//    order, accepted + dropped == offered (under TSan too: the lock is the only
//    synchronization between workers and consumer).
#include "uvhost/experiments/shared_tx_queue.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <thread>
#include <vector>

#include "uvhost/sync/baseline_locks.h"
#include "uvhost/sync/delegation_lock.h"
#include "uvhost/sync/qspinlock.h"

namespace uvhost::experiments {
namespace {

std::vector<TxDescriptor> burst_of(uint64_t first, std::size_t n) {
  std::vector<TxDescriptor> burst(n);
  for (std::size_t i = 0; i < n; ++i) burst[i] = {uint32_t(first + i), 60, first + i};
  return burst;
}

TEST(SharedTxQueue, FifoPrefixAcceptanceAndDrops) {
  SharedTxQueue q(8, sync::make_section_lock<sync::StdMutexLock>());
  EXPECT_EQ(q.capacity(), 8u);
  EXPECT_EQ(q.push_burst(burst_of(0, 5)), 5u);
  EXPECT_EQ(q.push_burst(burst_of(5, 5)), 3u);  // 3 fit, 2 dropped
  auto s = q.stats();
  EXPECT_EQ(s.accepted, 8u);
  EXPECT_EQ(s.dropped, 2u);
  EXPECT_EQ(s.size, 8u);
  EXPECT_EQ(q.push_burst(burst_of(10, 1)), 0u);

  std::array<TxDescriptor, 6> out{};
  ASSERT_EQ(q.pop_burst(out), 6u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(out[i].cookie, i);
  // Wrap around: the ring's head is at 6 now.
  EXPECT_EQ(q.push_burst(burst_of(100, 6)), 6u);
  ASSERT_EQ(q.pop_burst(out), 6u);
  EXPECT_EQ(out[0].cookie, 6u);
  EXPECT_EQ(out[1].cookie, 7u);
  EXPECT_EQ(out[2].cookie, 100u);
  EXPECT_EQ(out[5].cookie, 103u);
  ASSERT_EQ(q.pop_burst(out), 2u);
  EXPECT_EQ(out[1].cookie, 105u);
  EXPECT_EQ(q.pop_burst(out), 0u);
  s = q.stats();
  EXPECT_EQ(s.accepted, 14u);
  EXPECT_EQ(s.dropped, 3u);
  EXPECT_EQ(s.popped, 14u);
  EXPECT_EQ(s.size, 0u);
  EXPECT_EQ(s.push_bursts, 4u);
  EXPECT_EQ(s.pop_bursts, 4u);
}

TEST(SharedTxQueue, RefusesBadArguments) {
  EXPECT_THROW(SharedTxQueue(0, sync::make_section_lock<sync::StdMutexLock>()), std::invalid_argument);
  EXPECT_THROW(SharedTxQueue(4, nullptr), std::invalid_argument);
}

// Pure spinning FIFO locks (qspinlock, CK's ticket lock) hand the lock to the next
// waiter in line even when it is preempted, so with more threads than cores most
// handoffs wait out a time slice (under TSan, minutes for 1500 bursts each). The test
// is about exactly-once delivery, not speed: they run fewer workers and bursts, still
// more threads than cores.
template <class Lock>
void workers_and_consumer_exactly_once(std::size_t worker_count = 12, uint32_t bursts = 1500) {
  // Default: more workers than cores (and than queues: one).
  constexpr std::size_t kBurst = 8;
  SharedTxQueue q(64, sync::make_section_lock<Lock>());  // small: some bursts are dropped
  std::vector<uint64_t> accepted(worker_count, 0), offered(worker_count, 0);
  std::atomic<std::size_t> workers_left{worker_count};

  TxqDrained drained;
  std::thread consumer([&] { drained = drain_in_order(q, worker_count, 32, workers_left); });
  std::vector<std::thread> workers;
  for (std::size_t w = 0; w < worker_count; ++w) {
    workers.emplace_back([&, w] {
      std::array<TxDescriptor, kBurst> burst;
      uint32_t seq = 0;
      for (uint32_t b = 0; b < bursts; ++b) {
        for (auto& d : burst) {
          d = {seq, 64, (uint64_t(w) << 32) | seq};
          ++seq;
        }
        accepted[w] += q.push_burst(burst);
        offered[w] += kBurst;
      }
      workers_left.fetch_sub(1, std::memory_order_release);  // release: pairs with the consumer
    });
  }
  for (auto& t : workers) t.join();
  consumer.join();

  EXPECT_EQ(drained.order_errors, 0u);
  uint64_t total_accepted = 0, total_offered = 0;
  for (std::size_t w = 0; w < worker_count; ++w) {
    EXPECT_EQ(drained.per_worker[w], accepted[w]) << "worker " << w;
    total_accepted += accepted[w];
    total_offered += offered[w];
  }
  const auto s = q.stats();
  EXPECT_EQ(s.accepted, total_accepted);
  EXPECT_EQ(s.accepted + s.dropped, total_offered);
  EXPECT_EQ(s.popped, total_accepted);
  EXPECT_EQ(s.size, 0u);
  EXPECT_EQ(s.push_bursts, uint64_t(worker_count) * bursts);
}

TEST(SharedTxQueue, ManyWorkersStdMutex) { workers_and_consumer_exactly_once<sync::StdMutexLock>(); }
TEST(SharedTxQueue, ManyWorkersDelegation) { workers_and_consumer_exactly_once<sync::DelegationLock>(); }
TEST(SharedTxQueue, ManyWorkersQSpinLock) { workers_and_consumer_exactly_once<sync::QSpinLock>(5, 300); }
TEST(SharedTxQueue, ManyWorkersCkTicket) { workers_and_consumer_exactly_once<sync::CkTicketLock>(5, 300); }

}  // namespace
}  // namespace uvhost::experiments
