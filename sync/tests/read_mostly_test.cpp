// read_mostly_test.cpp - ReadMostly<T> under every GuardPolicy: consistent snapshots
// under concurrent replace/update, deferred destruction, RCU readers never blocking,
// exited reader threads, misuse.
#include "sync_test_support.h"
#include "uvhost/sync/read_mostly.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace uvhost::sync {
namespace {

using namespace std::chrono_literals;

using testing::eventually;

// A table whose every field holds its generation; counts constructions/destructions.
struct Table {
  static inline std::atomic<int64_t> alive{0};
  static inline std::atomic<int64_t> destroyed{0};
  uint64_t generation = 0;
  std::array<uint64_t, 16> slots{};

  explicit Table(uint64_t g) : generation(g) {
    slots.fill(g);
    alive.fetch_add(1);
  }
  Table(const Table& other) : generation(other.generation), slots(other.slots) { alive.fetch_add(1); }
  Table& operator=(const Table&) = delete;
  ~Table() {
    slots.fill(~uint64_t{0});  // a reader of a destroyed table would see this
    alive.fetch_sub(1);
    destroyed.fetch_add(1);
  }
  bool consistent() const {
    for (uint64_t s : slots) {
      if (s != generation) return false;
    }
    return true;
  }
};

class ReadMostlyTest : public ::testing::TestWithParam<GuardPolicy> {};

TEST(ReadMostlyPolicy, StringsRoundTrip) {
  for (GuardPolicy p : kAllGuardPolicies) EXPECT_EQ(base::parse_enum<GuardPolicy>(to_string(p)), p);
  EXPECT_EQ(to_string(GuardPolicy::kMutex), "mutex");
  EXPECT_EQ(to_string(GuardPolicy::kRwSem), "rwsem");
  EXPECT_EQ(to_string(GuardPolicy::kPthreadRwlock), "pthread-rwlock");
  EXPECT_EQ(to_string(GuardPolicy::kRcu), "rcu");
  EXPECT_FALSE(base::parse_enum<GuardPolicy>("seqlock").has_value());
}

TEST_P(ReadMostlyTest, ReadReturnsValueAndReplaceDestroysOld) {
  const int64_t alive_before = Table::alive.load();
  {
    ReadMostly<Table> guard(GetParam(), std::make_unique<Table>(1));
    EXPECT_EQ(guard.policy(), GetParam());
    EXPECT_EQ(guard.read([](const Table& t) { return t.generation; }), 1u);
    const int64_t destroyed_before = Table::destroyed.load();
    guard.replace(std::make_unique<Table>(2));
    EXPECT_EQ(Table::destroyed.load(), destroyed_before + 1);  // old one gone on return
    guard.update([](Table& t) {
      ++t.generation;
      t.slots.fill(t.generation);
    });
    EXPECT_EQ(guard.read([](const Table& t) { return t.generation; }), 3u);
    guard.read([](const Table& t) { EXPECT_TRUE(t.consistent()); });  // void fn
  }
  EXPECT_EQ(Table::alive.load(), alive_before);
}

// Readers always see a whole table of one generation, and generations never go back.
// With more readers than cores, a writer waits for preempted readers (a time slice per
// replace is common), so the number of generations is kept small.
constexpr uint64_t kGenerations = 50;

TEST_P(ReadMostlyTest, ConsistentSnapshotsUnderConcurrentReplace) {
  const int64_t alive_before = Table::alive.load();
  {
    ReadMostly<Table> guard(GetParam(), std::make_unique<Table>(0));
    std::atomic<bool> stop{false};
    std::atomic<bool> failed{false};
    std::atomic<uint64_t> reads{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 4; ++r) {
      readers.emplace_back([&] {
        uint64_t last = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          const uint64_t g = guard.read([&](const Table& t) {
            if (!t.consistent()) failed.store(true);
            return t.generation;
          });
          if (g < last) failed.store(true);
          last = g;
          reads.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    std::thread writer([&] {
      for (uint64_t g = 1; g <= kGenerations; ++g) {
        if (g % 2 == 0) {
          guard.replace(std::make_unique<Table>(g));
        } else {
          guard.update([g](Table& t) {
            t.generation = g;
            t.slots.fill(g);
          });
        }
        std::this_thread::sleep_for(100us);
      }
    });
    writer.join();
    EXPECT_TRUE(eventually([&] { return reads.load() > 1000; }));
    stop.store(true);
    for (auto& th : readers) th.join();
    EXPECT_FALSE(failed.load());
    EXPECT_EQ(guard.read([](const Table& t) { return t.generation; }), kGenerations);
  }
  EXPECT_EQ(Table::alive.load(), alive_before);
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, ReadMostlyTest, ::testing::ValuesIn(kAllGuardPolicies),
                         [](const ::testing::TestParamInfo<GuardPolicy>& param_info) {
                           std::string name(to_string(param_info.param));
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// RCU: while a reader is inside read() on the old table, replace() waits in the grace
// period and the old table stays alive; other readers proceed meanwhile (they are never
// blocked by the stuck writer); the old table is destroyed right after the reader leaves.
TEST(ReadMostlyRcu, ReadersNeverBlockAndOldTableOutlivesItsReaders) {
  ReadMostly<Table> guard(GuardPolicy::kRcu, std::make_unique<Table>(1));
  std::atomic<bool> reader_inside{false};
  std::atomic<bool> reader_release{false};
  std::atomic<bool> replace_returned{false};

  std::thread slow_reader([&] {
    guard.read([&](const Table& t) {
      reader_inside.store(true);
      while (!reader_release.load()) std::this_thread::sleep_for(100us);
      EXPECT_EQ(t.generation, 1u);  // still alive: not freed under us (ASan checks too)
      EXPECT_TRUE(t.consistent());
    });
  });
  ASSERT_TRUE(eventually([&] { return reader_inside.load(); }));

  const int64_t destroyed_before = Table::destroyed.load();
  std::thread writer([&] {
    guard.replace(std::make_unique<Table>(2));
    replace_returned.store(true);
  });

  // The writer is stuck in the grace period, yet new readers run and see table 2.
  ASSERT_TRUE(eventually([&] { return guard.read([](const Table& t) { return t.generation; }) == 2; }));
  std::thread fast_reader([&] {
    for (int i = 0; i < 10000; ++i) {
      EXPECT_EQ(guard.read([](const Table& t) { return t.generation; }), 2u);
    }
  });
  fast_reader.join();  // completed while the writer is still waiting
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(replace_returned.load());
  EXPECT_EQ(Table::destroyed.load(), destroyed_before);  // table 1 not destroyed yet

  reader_release.store(true);
  slow_reader.join();
  writer.join();
  EXPECT_TRUE(replace_returned.load());
  EXPECT_EQ(Table::destroyed.load(), destroyed_before + 1);
}

// Reader threads that registered with liburcu and exited must not stall a grace period.
TEST(ReadMostlyRcu, ExitedReaderThreadsDoNotBlockReplace) {
  ReadMostly<Table> guard(GuardPolicy::kRcu, std::make_unique<Table>(1));
  for (int round = 0; round < 20; ++round) {
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; ++t) {
      pool.emplace_back([&] { (void)guard.read([](const Table& table) { return table.generation; }); });
    }
    for (auto& th : pool) th.join();
    guard.replace(std::make_unique<Table>(static_cast<uint64_t>(round) + 2));
  }
  EXPECT_EQ(guard.read([](const Table& t) { return t.generation; }), 21u);
}

// Lock policies: a replace() waits for readers that are inside, then destroys the old.
TEST(ReadMostlyLocks, ReplaceWaitsForReadersInside) {
  for (GuardPolicy policy : {GuardPolicy::kMutex, GuardPolicy::kRwSem, GuardPolicy::kPthreadRwlock}) {
    ReadMostly<Table> guard(policy, std::make_unique<Table>(1));
    std::atomic<bool> inside{false};
    std::atomic<bool> release{false};
    std::atomic<bool> replaced{false};
    std::thread reader([&] {
      guard.read([&](const Table& t) {
        inside.store(true);
        while (!release.load()) std::this_thread::sleep_for(100us);
        EXPECT_TRUE(t.consistent());
      });
    });
    ASSERT_TRUE(eventually([&] { return inside.load(); }));
    std::thread writer([&] {
      guard.replace(std::make_unique<Table>(2));
      replaced.store(true);
    });
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(replaced.load()) << to_string(policy);
    release.store(true);
    reader.join();
    writer.join();
    EXPECT_EQ(guard.read([](const Table& t) { return t.generation; }), 2u);
  }
}

#if UVHOST_MISUSE_CHECKS_ENABLED
TEST(ReadMostlyDeathTest, ReplaceInsideReadAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (GuardPolicy policy : kAllGuardPolicies) {
    ReadMostly<Table> guard(policy, std::make_unique<Table>(1));
    EXPECT_DEATH(guard.read([&](const Table&) { guard.replace(std::make_unique<Table>(2)); }),
                 "read-mostly: replace\\(\\) called inside read\\(\\)")
        << to_string(policy);
  }
}
#endif

}  // namespace
}  // namespace uvhost::sync
