// PacketPool: the shared buffer pool with per-thread caches.
//  - a cache refills `batch` buffers on an empty get and flushes its `batch` oldest on
//    a full put; a balanced thread stops taking the lock once warm;
//  - exhaustion returns kNoBuffer; buffers are distinct and 64-byte aligned;
//  - check_invariants catches a lost buffer and a buffer put twice;
//  - bad options are refused;
//  - many threads (more than cores) under every kind of lock, buffers flowing from the
//    threads that get them to other threads that put them: each buffer is owned by one
//    thread at a time (stamped and re-checked), and the count is conserved. Run under
//    TSan too: the buffer bytes are handed between threads only through the lock.
#include "uvhost/experiments/packet_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "uvhost/sync/baseline_locks.h"
#include "uvhost/sync/delegation_lock.h"
#include "uvhost/sync/qspinlock.h"

namespace uvhost::experiments {
namespace {

PacketPoolOptions small_options() {
  PacketPoolOptions o;
  o.buffers = 256;
  o.buffer_size = 128;
  o.cache_capacity = 8;
  o.batch = 4;
  return o;
}

TEST(PacketPool, CacheRefillsAndFlushesInBatches) {
  PacketPool pool(small_options(), sync::make_section_lock<sync::StdMutexLock>());
  EXPECT_STREQ(pool.lock().name(), "std::mutex");
  PacketPool::Cache cache(pool);
  std::vector<BufferId> held;
  for (int i = 0; i < 8; ++i) held.push_back(cache.get());
  EXPECT_EQ(cache.stats().refills, 2u);  // 8 gets, batch 4
  EXPECT_EQ(pool.shared_free(), 256u - 8u);
  EXPECT_TRUE(cache.contents().empty());
  for (BufferId id : held) cache.put(id);
  EXPECT_EQ(cache.stats().flushes, 0u);  // 8 fit the cache
  EXPECT_EQ(cache.contents().size(), 8u);
  cache.put(cache.get());  // balanced: no lock
  EXPECT_EQ(cache.stats().refills, 2u);
  EXPECT_EQ(cache.stats().flushes, 0u);

  // A 9th put on a full cache flushes the 4 oldest first.
  const std::vector<BufferId> before(cache.contents().begin(), cache.contents().end());
  BufferId extra = kNoBuffer;
  {
    PacketPool::Cache other(pool);
    extra = other.get();
  }  // `other` flushes what it refilled back on destruction
  cache.put(extra);
  EXPECT_EQ(cache.stats().flushes, 1u);
  ASSERT_EQ(cache.contents().size(), 5u);
  EXPECT_EQ(cache.contents()[0], before[4]);
  EXPECT_EQ(cache.contents()[4], extra);

  std::string why;
  EXPECT_TRUE(pool.check_invariants({}, why)) << why;
  cache.drain();
  EXPECT_TRUE(cache.contents().empty());
  EXPECT_EQ(pool.shared_free(), 256u);
  EXPECT_TRUE(pool.check_invariants({}, why)) << why;
}

TEST(PacketPool, BuffersAreDistinctAlignedAndExhaustionIsReported) {
  PacketPool pool(small_options(), sync::make_section_lock<sync::DelegationLock>());
  EXPECT_STREQ(pool.lock().name(), "delegation");
  PacketPool::Cache cache(pool);
  std::set<BufferId> ids;
  std::set<const std::byte*> addresses;
  for (int i = 0; i < 256; ++i) {
    const BufferId id = cache.get();
    ASSERT_NE(id, kNoBuffer) << i;
    EXPECT_TRUE(ids.insert(id).second) << "buffer handed out twice: " << id;
    const auto bytes = pool.data(id);
    EXPECT_EQ(bytes.size(), 128u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes.data()) % 64, 0u);
    EXPECT_TRUE(addresses.insert(bytes.data()).second);
    std::memset(bytes.data(), 0xab, bytes.size());  // the whole buffer is ours to write
  }
  EXPECT_EQ(cache.get(), kNoBuffer);
  EXPECT_EQ(cache.stats().exhausted, 1u);
  const std::vector<BufferId> held(ids.begin(), ids.end());
  std::string why;
  EXPECT_TRUE(pool.check_invariants(held, why)) << why;
  for (BufferId id : held) cache.put(id);
  EXPECT_TRUE(pool.check_invariants({}, why)) << why;
}

TEST(PacketPool, InvariantCheckCatchesLossAndDoublePut) {
  PacketPool pool(small_options(), sync::make_section_lock<sync::QSpinLock>());
  std::string why;
  {
    PacketPool::Cache cache(pool);
    const BufferId a = cache.get();
    const BufferId b = cache.get();
    EXPECT_FALSE(pool.check_invariants({}, why));  // a and b are held but not declared
    EXPECT_NE(why.find("lost"), std::string::npos) << why;
    const std::vector<BufferId> held{a, b};
    EXPECT_TRUE(pool.check_invariants(held, why)) << why;
    cache.put(a);
    cache.put(a);  // misuse: the same buffer twice
    cache.put(b);
  }
  EXPECT_FALSE(pool.check_invariants({}, why));
  EXPECT_NE(why.find("two places"), std::string::npos) << why;
}

TEST(PacketPool, RefusesBadOptions) {
  auto lock = [] { return sync::make_section_lock<sync::StdMutexLock>(); };
  PacketPoolOptions o = small_options();
  o.buffers = 0;
  EXPECT_THROW(PacketPool(o, lock()), std::invalid_argument);
  o = small_options();
  o.buffer_size = 100;  // not a multiple of 64
  EXPECT_THROW(PacketPool(o, lock()), std::invalid_argument);
  o = small_options();
  o.batch = 9;  // more than the cache holds
  EXPECT_THROW(PacketPool(o, lock()), std::invalid_argument);
  o = small_options();
  o.batch = 0;
  EXPECT_THROW(PacketPool(o, lock()), std::invalid_argument);
  EXPECT_THROW(PacketPool(small_options(), nullptr), std::invalid_argument);
}

// Threads in pairs of roles: "receivers" get buffers, stamp them with their owner and
// hand them over a lock-free mailbox to "transmitters", which check the stamp and put
// them back. So receivers' caches keep refilling and transmitters' keep flushing: the
// shared list is hit all the time. A buffer handed out twice shows up as a stamp
// overwritten while its owner held it.
//
// Pure spinning FIFO locks (qspinlock, CK's MCS) hand the lock to the next waiter in
// line even when that waiter is preempted, so with more threads than cores most
// handoffs wait out a time slice (under TSan, minutes for 3000 rounds). This test is
// about conservation, not speed: they run fewer pairs and rounds, still oversubscribed.
template <class Lock>
void many_threads_conserve_buffers(std::size_t pairs = 6, int rounds = 3000) {  // 12 threads on 2 cores
  PacketPoolOptions o;
  o.buffers = 1024;
  o.buffer_size = 256;
  o.cache_capacity = 32;
  o.batch = 8;
  PacketPool pool(o, sync::make_section_lock<Lock>());

  // Mailbox per pair: a burst of ids, handed over with release/acquire on `full`.
  struct alignas(64) Mailbox {
    std::atomic<bool> full{false};
    std::vector<BufferId> ids;
  };
  std::vector<Mailbox> mail(pairs);
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < pairs; ++p) {
    threads.emplace_back([&, p] {  // receiver
      PacketPool::Cache cache(pool);
      std::vector<BufferId> burst;
      for (int r = 0; r < rounds; ++r) {
        burst.clear();
        for (int i = 0; i < 8; ++i) {
          const BufferId id = cache.get();
          if (id == kNoBuffer) break;  // the others hold everything for a moment
          const uint64_t stamp = (uint64_t(p) << 32) | uint64_t(r);
          std::memcpy(pool.data(id).data(), &stamp, sizeof stamp);
          burst.push_back(id);
        }
        for (BufferId id : burst) {  // still ours: nobody may have written it
          uint64_t seen;
          std::memcpy(&seen, pool.data(id).data(), sizeof seen);
          if (seen != ((uint64_t(p) << 32) | uint64_t(r))) conflicts.fetch_add(1, std::memory_order_relaxed);
        }
        // acquire: the transmitter has finished with the previous burst's vector.
        while (mail[p].full.load(std::memory_order_acquire)) std::this_thread::yield();
        mail[p].ids = burst;
        mail[p].full.store(true, std::memory_order_release);  // release: ids and buffer bytes
      }
    });
    threads.emplace_back([&, p] {  // transmitter
      PacketPool::Cache cache(pool);
      for (int r = 0; r < rounds; ++r) {
        // acquire: pairs with the receiver's release; its writes to the buffers too.
        while (!mail[p].full.load(std::memory_order_acquire)) std::this_thread::yield();
        for (BufferId id : mail[p].ids) {
          uint64_t seen;
          std::memcpy(&seen, pool.data(id).data(), sizeof seen);
          if (seen != ((uint64_t(p) << 32) | uint64_t(r))) conflicts.fetch_add(1, std::memory_order_relaxed);
          cache.put(id);
        }
        mail[p].full.store(false, std::memory_order_release);  // release: done with ids
      }
      EXPECT_GT(cache.stats().flushes, 0u);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(conflicts.load(), 0);
  std::string why;
  EXPECT_TRUE(pool.check_invariants({}, why)) << why;
  EXPECT_EQ(pool.shared_free(), o.buffers);  // every cache drained on its thread's exit
}

TEST(PacketPool, ManyThreadsStdMutex) { many_threads_conserve_buffers<sync::StdMutexLock>(); }
TEST(PacketPool, ManyThreadsDelegation) { many_threads_conserve_buffers<sync::DelegationLock>(); }
TEST(PacketPool, ManyThreadsQSpinLock) { many_threads_conserve_buffers<sync::QSpinLock>(3, 300); }
TEST(PacketPool, ManyThreadsCkMcs) { many_threads_conserve_buffers<sync::CkMcsLock>(3, 300); }

}  // namespace
}  // namespace uvhost::experiments
