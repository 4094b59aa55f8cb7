// switch_mac_table_test.cpp - MacTable: learning, lookup, aging (injected time), the
// capacity bound under a flood of random source MACs (no allocation, counters), moves,
// remove_port, expire, and readers racing writers (no torn or foreign binding).
#include "uvhost/backends/switch_mac_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "uvhost/sync/misuse.h"

// Allocation counting for the capacity test: every operator new of this binary goes
// through here; the count is taken only while g_count_allocations is set. Not under
// clang's ThreadSanitizer, whose static runtime defines operator new/delete itself (a
// replacement would be a second definition); the other builds check it.
#if defined(__clang__) && defined(UVHOST_SANITIZER_THREAD)
#define UVHOST_COUNT_ALLOCATIONS 0
#else
#define UVHOST_COUNT_ALLOCATIONS 1
#endif

namespace {
std::atomic<bool> g_count_allocations{false};
std::atomic<uint64_t> g_allocations{0};

[[maybe_unused]] void note_allocation() noexcept {
  if (g_count_allocations.load(std::memory_order_relaxed))
    g_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

// GCC's -Wmismatched-new-delete sees free() in a replaced operator delete and cannot
// tell that every operator new here is malloc/aligned_alloc: they match by design.
#if UVHOST_COUNT_ALLOCATIONS
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t size) {
  note_allocation();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void* operator new(std::size_t size, std::align_val_t align) {
  note_allocation();
  const auto alignment = static_cast<std::size_t>(align);
  const std::size_t rounded = (size + alignment - 1) / alignment * alignment;
  if (void* p = std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t align) { return ::operator new(size, align); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // UVHOST_COUNT_ALLOCATIONS

namespace uvhost::backends {
namespace {

using namespace std::chrono_literals;

const SwitchTime kT0 = SwitchTime{} + 1h;

constexpr MacAddress kMacA{0x52, 0x54, 0x00, 0x00, 0x00, 0x0a};
constexpr MacAddress kMacB{0x52, 0x54, 0x00, 0x00, 0x00, 0x0b};
constexpr MacAddress kMacC{0x52, 0x54, 0x00, 0x00, 0x00, 0x0c};
constexpr MacAddress kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
constexpr MacAddress kIpv4Multicast{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};
constexpr MacAddress kZero{};

// A distinct locally administered unicast MAC per index.
MacAddress indexed_mac(uint32_t i) {
  return MacAddress{0x02,
                    0x00,
                    static_cast<uint8_t>(i >> 24),
                    static_cast<uint8_t>(i >> 16),
                    static_cast<uint8_t>(i >> 8),
                    static_cast<uint8_t>(i)};
}

MacAddress random_unicast_mac(std::mt19937_64& rng) {
  const uint64_t bits = rng();
  MacAddress mac;
  for (size_t i = 0; i < mac.size(); ++i) mac[i] = static_cast<uint8_t>(bits >> (8 * i));
  mac[0] = static_cast<uint8_t>((mac[0] & 0xFEU) | 0x02U);  // unicast, locally administered (never zero)
  return mac;
}

MacTableConfig config_with(size_t capacity, uint64_t seed = 42) {
  MacTableConfig config;
  config.capacity = capacity;
  config.hash_seed = seed;
  return config;
}

TEST(MacAddress, Classification) {
  EXPECT_TRUE(is_broadcast(kBroadcast));
  EXPECT_TRUE(is_multicast(kBroadcast));
  EXPECT_TRUE(is_multicast(kIpv4Multicast));
  EXPECT_FALSE(is_broadcast(kIpv4Multicast));
  EXPECT_FALSE(is_multicast(kMacA));
  EXPECT_TRUE(is_zero(kZero));
  EXPECT_TRUE(is_learnable(kMacA));
  EXPECT_FALSE(is_learnable(kBroadcast));
  EXPECT_FALSE(is_learnable(kIpv4Multicast));
  EXPECT_FALSE(is_learnable(kZero));
  EXPECT_EQ(to_string(kMacA), "52:54:00:00:00:0a");
  EXPECT_EQ(to_string(LearnResult::kRefusedFull), "refused-full");
}

TEST(MacTable, RejectsInvalidConfig) {
  EXPECT_THROW(MacTable{config_with(0)}, std::invalid_argument);
  EXPECT_THROW(MacTable{config_with(MacTable::kMaxCapacity + 1)}, std::invalid_argument);
  MacTableConfig config;
  config.max_age = 0s;
  EXPECT_THROW(MacTable{config}, std::invalid_argument);
  config = {};
  config.refresh_interval = config.max_age;
  EXPECT_THROW(MacTable{config}, std::invalid_argument);
  config.refresh_interval = -1s;
  EXPECT_THROW(MacTable{config}, std::invalid_argument);
}

TEST(MacTable, CapacityIsRoundedUpToWholeBuckets) {
  EXPECT_EQ(MacTable(config_with(1)).capacity(), MacTable::kWays);
  EXPECT_EQ(MacTable(config_with(4096)).capacity(), 4096u);
  EXPECT_EQ(MacTable(config_with(100)).capacity(), 128u);  // 13 buckets -> 16
}

TEST(MacTable, LearnsAndLooksUp) {
  MacTable table(config_with(64));
  EXPECT_FALSE(table.lookup(kMacA, kT0).has_value());
  EXPECT_EQ(table.learn(kMacA, 1, kT0), LearnResult::kLearned);
  EXPECT_EQ(table.learn(kMacB, 2, kT0), LearnResult::kLearned);
  EXPECT_EQ(table.lookup(kMacA, kT0), std::optional<PortId>(1));
  EXPECT_EQ(table.lookup(kMacB, kT0), std::optional<PortId>(2));
  EXPECT_FALSE(table.lookup(kMacC, kT0).has_value());
  EXPECT_EQ(table.size(), 2u);
  // Port 0 is an ordinary port.
  EXPECT_EQ(table.learn(kMacC, 0, kT0), LearnResult::kLearned);
  EXPECT_EQ(table.lookup(kMacC, kT0), std::optional<PortId>(0));
  const MacTableStats stats = table.stats();
  EXPECT_EQ(stats.learned, 3u);
  EXPECT_EQ(stats.entries, 3u);
}

TEST(MacTable, NeverLearnsGroupOrZeroAddresses) {
  MacTable table(config_with(64));
  for (const MacAddress& mac : {kBroadcast, kIpv4Multicast, kZero}) {
    EXPECT_EQ(table.learn(mac, 1, kT0), LearnResult::kNotUnicast) << to_string(mac);
    EXPECT_FALSE(table.lookup(mac, kT0).has_value()) << to_string(mac);
  }
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.stats().learned, 0u);
}

TEST(MacTable, AgesOutAfterMaxAge) {
  MacTable table(config_with(64));  // default max_age 300 s
  table.learn(kMacA, 1, kT0);
  EXPECT_EQ(table.lookup(kMacA, kT0 + 300s - 1ns), std::optional<PortId>(1));
  EXPECT_FALSE(table.lookup(kMacA, kT0 + 300s).has_value());
  EXPECT_FALSE(table.lookup(kMacA, kT0 + 24h).has_value());
  // A time "in the past" (another thread's clock) still counts as fresh.
  EXPECT_EQ(table.lookup(kMacA, kT0 - 1s), std::optional<PortId>(1));
  // Re-learning an aged entry revives it.
  EXPECT_EQ(table.learn(kMacA, 1, kT0 + 400s), LearnResult::kLearned);
  EXPECT_EQ(table.lookup(kMacA, kT0 + 400s), std::optional<PortId>(1));
}

TEST(MacTable, CustomMaxAge) {
  MacTableConfig config = config_with(64);
  config.max_age = 10s;
  config.refresh_interval = 2s;
  MacTable table(config);
  table.learn(kMacA, 1, kT0);
  EXPECT_TRUE(table.lookup(kMacA, kT0 + 9s).has_value());
  EXPECT_FALSE(table.lookup(kMacA, kT0 + 10s).has_value());
}

TEST(MacTable, RefreshesAtMostOncePerInterval) {
  MacTable table(config_with(64));  // refresh_interval 1 s
  EXPECT_EQ(table.learn(kMacA, 1, kT0), LearnResult::kLearned);
  EXPECT_EQ(table.learn(kMacA, 1, kT0 + 500ms), LearnResult::kFresh);
  EXPECT_EQ(table.learn(kMacA, 1, kT0 + 999ms), LearnResult::kFresh);
  EXPECT_EQ(table.learn(kMacA, 1, kT0 + 1s), LearnResult::kRefreshed);
  EXPECT_EQ(table.learn(kMacA, 1, kT0 + 1500ms), LearnResult::kFresh);
  // The refresh at kT0 + 1 s moved the age origin.
  EXPECT_TRUE(table.lookup(kMacA, kT0 + 300s).has_value());
  EXPECT_FALSE(table.lookup(kMacA, kT0 + 301s).has_value());

  // A MAC that keeps sending (every 250 ms for 20 minutes) never ages, with one
  // refresh per second.
  MacTable busy(config_with(64));
  busy.learn(kMacB, 2, kT0);
  for (int i = 1; i <= 4 * 1200; ++i) {
    const SwitchTime now = kT0 + i * 250ms;
    busy.learn(kMacB, 2, now);
    ASSERT_EQ(busy.lookup(kMacB, now), std::optional<PortId>(2)) << i;
  }
  EXPECT_EQ(busy.stats().refreshed, 1200u);
  EXPECT_EQ(busy.stats().learned, 1u);
}

TEST(MacTable, MacMovesBetweenPorts) {
  MacTable table(config_with(64));
  table.learn(kMacA, 1, kT0);
  EXPECT_EQ(table.learn(kMacA, 2, kT0 + 1ms), LearnResult::kMoved);
  EXPECT_EQ(table.lookup(kMacA, kT0 + 1ms), std::optional<PortId>(2));
  EXPECT_EQ(table.learn(kMacA, 1, kT0 + 2ms), LearnResult::kMoved);
  EXPECT_EQ(table.lookup(kMacA, kT0 + 2ms), std::optional<PortId>(1));
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.stats().moved, 2u);
  // A move refreshes the age.
  EXPECT_TRUE(table.lookup(kMacA, kT0 + 2ms + 299s).has_value());
  // Showing up on another port after aging is a new learn, not a move.
  EXPECT_EQ(table.learn(kMacA, 3, kT0 + 1h), LearnResult::kLearned);
  EXPECT_EQ(table.lookup(kMacA, kT0 + 1h), std::optional<PortId>(3));
  EXPECT_EQ(table.stats().moved, 2u);
}

TEST(MacTable, RemovePortFlushesOnlyItsEntries) {
  MacTable table(config_with(64));
  table.learn(kMacA, 1, kT0);
  table.learn(kMacB, 1, kT0);
  table.learn(kMacC, 2, kT0);
  EXPECT_EQ(table.remove_port(1), 2u);
  EXPECT_FALSE(table.lookup(kMacA, kT0).has_value());
  EXPECT_FALSE(table.lookup(kMacB, kT0).has_value());
  EXPECT_EQ(table.lookup(kMacC, kT0), std::optional<PortId>(2));
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.stats().flushed, 2u);
  EXPECT_EQ(table.remove_port(1), 0u);
  EXPECT_EQ(table.remove_port(7), 0u);
  // The slots are free again; the port may come back.
  EXPECT_EQ(table.learn(kMacA, 1, kT0), LearnResult::kLearned);
  EXPECT_EQ(table.lookup(kMacA, kT0), std::optional<PortId>(1));
  EXPECT_EQ(table.size(), 2u);
}

TEST(MacTable, ExpireEvictsOnlyAgedEntries) {
  MacTable table(config_with(64));
  table.learn(kMacA, 1, kT0);
  table.learn(kMacB, 1, kT0 + 100s);
  table.learn(kMacC, 2, kT0 + 200s);
  EXPECT_EQ(table.expire(kT0 + 299s), 0u);
  EXPECT_EQ(table.expire(kT0 + 300s), 1u);  // A
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.expire(kT0 + 450s), 1u);  // B
  EXPECT_EQ(table.lookup(kMacC, kT0 + 450s), std::optional<PortId>(2));
  EXPECT_EQ(table.stats().evicted_aged, 2u);
  EXPECT_EQ(table.size(), 1u);
}

TEST(MacTable, FullBucketRefusesUntilAnEntryAges) {
  MacTable table(config_with(MacTable::kWays));  // a single bucket
  for (uint32_t i = 0; i < MacTable::kWays; ++i) {
    ASSERT_EQ(table.learn(indexed_mac(i), 1, kT0), LearnResult::kLearned) << i;
  }
  const MacAddress newcomer = indexed_mac(1000);
  EXPECT_EQ(table.learn(newcomer, 2, kT0 + 1s), LearnResult::kRefusedFull);
  EXPECT_FALSE(table.lookup(newcomer, kT0 + 1s).has_value());
  // Live entries are never pushed out.
  for (uint32_t i = 0; i < MacTable::kWays; ++i)
    EXPECT_TRUE(table.lookup(indexed_mac(i), kT0 + 1s).has_value());
  // Keep all but entry 3 alive; once 3 ages, the newcomer takes its slot.
  for (uint32_t i = 0; i < MacTable::kWays; ++i) {
    if (i != 3) table.learn(indexed_mac(i), 1, kT0 + 200s);
  }
  EXPECT_EQ(table.learn(newcomer, 2, kT0 + 299s), LearnResult::kRefusedFull);
  EXPECT_EQ(table.learn(newcomer, 2, kT0 + 300s), LearnResult::kLearned);
  EXPECT_EQ(table.lookup(newcomer, kT0 + 300s), std::optional<PortId>(2));
  EXPECT_FALSE(table.lookup(indexed_mac(3), kT0 + 300s).has_value());
  EXPECT_TRUE(table.lookup(indexed_mac(4), kT0 + 300s).has_value());
  const MacTableStats stats = table.stats();
  EXPECT_EQ(stats.refused_full, 2u);
  EXPECT_EQ(stats.evicted_aged, 1u);
  EXPECT_EQ(stats.entries, MacTable::kWays);
}

TEST(MacTable, RandomSourceFloodStaysBounded) {
  MacTable table(config_with(256, 1234));
  // Two MACs of other guests, learned before the flood.
  table.learn(kMacA, 1, kT0);
  table.learn(kMacB, 2, kT0);

  constexpr uint64_t kFlood = 100000;
  std::mt19937_64 rng(99);
  uint64_t learned = 0;
  uint64_t refused = 0;
  g_allocations.store(0);
  g_count_allocations.store(true);
  for (uint64_t i = 0; i < kFlood; ++i) {
    const LearnResult r = table.learn(random_unicast_mac(rng), 3, kT0 + std::chrono::microseconds(i));
    if (r == LearnResult::kLearned) ++learned;
    if (r == LearnResult::kRefusedFull) ++refused;
  }
  g_count_allocations.store(false);

  if (UVHOST_COUNT_ALLOCATIONS) {
    EXPECT_EQ(g_allocations.load(), 0u) << "learn() allocated during the flood";
  }
  EXPECT_EQ(learned + refused, kFlood);
  EXPECT_LE(table.size(), table.capacity());
  EXPECT_GE(table.size(), table.capacity() / 2);  // the flood did fill it
  const MacTableStats stats = table.stats();
  EXPECT_EQ(stats.refused_full, refused);
  EXPECT_EQ(stats.learned, learned + 2);
  EXPECT_GT(refused, kFlood - table.capacity());
  EXPECT_EQ(stats.evicted_aged, 0u);
  // The other guests' live entries survived the flood.
  const SwitchTime after = kT0 + 1s;
  EXPECT_EQ(table.lookup(kMacA, after), std::optional<PortId>(1));
  EXPECT_EQ(table.lookup(kMacB, after), std::optional<PortId>(2));

  // Once the flood's entries age out, new MACs are learned again (reusing their slots).
  const SwitchTime later = kT0 + 1h;
  EXPECT_EQ(table.learn(kMacC, 4, later), LearnResult::kLearned);
  EXPECT_EQ(table.lookup(kMacC, later), std::optional<PortId>(4));
  const size_t before = table.size();
  EXPECT_LE(before, table.capacity());
  EXPECT_EQ(table.expire(later), before - 1);  // everything but C had aged
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.lookup(kMacC, later), std::optional<PortId>(4));
}

TEST(MacTable, HashSeedSpreadsMacsOverBuckets) {
  // 256 sequential MACs into a 512-entry table: with a working hash nothing is refused
  // (a hash that ignored the MAC would send them all to one bucket of 8).
  MacTable table(config_with(512));
  uint64_t refused = 0;
  for (uint32_t i = 0; i < 256; ++i) {
    if (table.learn(indexed_mac(i), 1, kT0) == LearnResult::kRefusedFull) ++refused;
  }
  EXPECT_LE(refused, 8u);
  EXPECT_GE(table.size(), 248u);
}

#if UVHOST_MISUSE_CHECKS_ENABLED
TEST(MacTableDeathTest, LearnOnReservedPortAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  MacTable table(config_with(64));
  EXPECT_DEATH(table.learn(kMacA, kNoPort, kT0), "mac table: learn\\(\\) on kNoPort");
}
#endif

// The writers' lock is a setting (mutex or delegation): the concurrency tests below
// that write from several threads run with each.
class MacTableWriterLock : public ::testing::TestWithParam<sync::SectionLockKind> {
 protected:
  // config_with() and this test's writer lock.
  MacTableConfig writer_config(size_t capacity, uint64_t seed = 42) const {
    MacTableConfig c = config_with(capacity, seed);
    c.writer_lock = GetParam();
    return c;
  }
};
INSTANTIATE_TEST_SUITE_P(Each, MacTableWriterLock,
                         ::testing::ValuesIn(base::values_of(sync::kSectionLockKindNames)),
                         [](const ::testing::TestParamInfo<sync::SectionLockKind>& kind) {
                           return std::string(to_string(kind.param));
                         });

TEST_P(MacTableWriterLock, TableReportsItsWriterLock) {
  const MacTable table(writer_config(64));
  EXPECT_STREQ(table.writer_lock_name(),
               GetParam() == sync::SectionLockKind::kDelegation ? "delegation" : "std::mutex");
}

// Many threads learning the same MACs on the same ports at once insert each MAC once.
TEST_P(MacTableWriterLock, ConcurrentLearnersInsertEachMacOnce) {
  MacTable table(writer_config(1024));
  constexpr uint32_t kMacs = 200;
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&table, t] {
      for (int round = 0; round < 20; ++round) {
        for (uint32_t i = 0; i < kMacs; ++i) {
          const uint32_t mac = (i + static_cast<uint32_t>(t) * 37) % kMacs;
          table.learn(indexed_mac(mac), mac % 5, kT0 + std::chrono::milliseconds(round * 300));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(table.size(), kMacs);
  EXPECT_EQ(table.stats().learned, kMacs);
  EXPECT_EQ(table.stats().moved, 0u);
  for (uint32_t i = 0; i < kMacs; ++i)
    EXPECT_EQ(table.lookup(indexed_mac(i), kT0 + 6s), std::optional<PortId>(i % 5));
}

// Readers look up while writers learn, move, remove ports and expire, in a table so
// small that slots are reused constantly. Every port bound to MAC i is (i << 8) | k
// with k < 4, so a torn read (one slot's MAC with another incarnation's port) shows.
TEST_P(MacTableWriterLock, ReadersSeeOnlyPortsBoundToTheMac) {
  MacTableConfig config = writer_config(16, 5);  // 2 buckets x 8 ways
  config.max_age = 20ms;  // simulated time: entries age quickly
  config.refresh_interval = 1ms;
  MacTable table(config);
  constexpr uint32_t kMacs = 40;
  constexpr int kReaders = 4;
  constexpr int kWriterOps = 30000;
  auto port_of = [](uint32_t mac, uint32_t k) { return (mac << 8) | k; };

  std::atomic<int64_t> clock_ns{
      std::chrono::duration_cast<std::chrono::nanoseconds>(kT0.time_since_epoch()).count()};
  auto now = [&clock_ns] {
    return SwitchTime(std::chrono::nanoseconds(clock_ns.load(std::memory_order_relaxed)));
  };
  std::atomic<int> writers_left{2};
  std::atomic<uint64_t> bad{0};
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> lookups{0};

  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937 rng(static_cast<uint32_t>(r) + 1);
      uint64_t local_hits = 0;
      uint64_t local_lookups = 0;
      uint64_t local_bad = 0;
      // At least 2000 lookups each, and until both writers are done.
      while (writers_left.load(std::memory_order_acquire) > 0 || local_lookups < 2000) {
        const auto mac = static_cast<uint32_t>(rng() % kMacs);
        const std::optional<PortId> port = table.lookup(indexed_mac(mac), now());
        ++local_lookups;
        if (!port) continue;
        ++local_hits;
        if ((*port >> 8) != mac || (*port & 0xFFU) >= 4) ++local_bad;
      }
      hits.fetch_add(local_hits);
      lookups.fetch_add(local_lookups);
      bad.fetch_add(local_bad);
    });
  }
  std::thread learner([&] {
    std::mt19937 rng(100);
    for (int op = 0; op < kWriterOps; ++op) {
      const auto mac = static_cast<uint32_t>(rng() % kMacs);
      const SwitchTime t = SwitchTime(std::chrono::nanoseconds(clock_ns.fetch_add(20000)));  // +20 us
      table.learn(indexed_mac(mac), port_of(mac, static_cast<uint32_t>(rng() % 4)), t);
    }
    writers_left.fetch_sub(1, std::memory_order_release);
  });
  std::thread remover([&] {
    // Runs for as long as the learner does (at least 500 removals).
    std::mt19937 rng(200);
    for (int op = 0; op < 500 || writers_left.load(std::memory_order_acquire) == 2; ++op) {
      table.remove_port(port_of(static_cast<uint32_t>(rng() % kMacs), static_cast<uint32_t>(rng() % 4)));
      if (op % 16 == 0) table.expire(now());
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    writers_left.fetch_sub(1, std::memory_order_release);
  });
  learner.join();
  remover.join();
  for (auto& th : readers) th.join();

  EXPECT_EQ(bad.load(), 0u) << "a lookup returned a port never bound to that MAC";
  EXPECT_GT(hits.load(), 0u);
  EXPECT_GE(lookups.load(), static_cast<uint64_t>(kReaders) * 2000);
  const MacTableStats stats = table.stats();
  EXPECT_GT(stats.moved, 0u);
  EXPECT_GT(stats.flushed + stats.evicted_aged, 0u);
  EXPECT_LE(table.size(), table.capacity());
}

// Ports fighting over the same MACs (MAC flapping): every move is counted once, by the
// table and by the learners alike, and each MAC ends bound to one of the ports.
TEST_P(MacTableWriterLock, FlappingMacsCountEveryMoveOnce) {
  MacTable table(writer_config(64));
  constexpr uint32_t kMacs = 4;
  constexpr int kPorts = 6;
  constexpr int kLearns = 20000;
  std::atomic<uint64_t> moved{0};
  std::atomic<uint64_t> learned{0};
  std::vector<std::thread> ports;
  for (int p = 0; p < kPorts; ++p) {
    ports.emplace_back([&, p] {
      uint64_t my_moved = 0;
      uint64_t my_learned = 0;
      for (int i = 0; i < kLearns; ++i) {
        const LearnResult r =
            table.learn(indexed_mac(static_cast<uint32_t>(i + p) % kMacs), static_cast<PortId>(p), kT0);
        my_moved += r == LearnResult::kMoved ? 1 : 0;
        my_learned += r == LearnResult::kLearned ? 1 : 0;
      }
      moved.fetch_add(my_moved);
      learned.fetch_add(my_learned);
    });
  }
  for (auto& th : ports) th.join();
  EXPECT_EQ(table.stats().moved, moved.load());
  EXPECT_EQ(table.stats().learned, kMacs);
  EXPECT_EQ(learned.load(), kMacs);
  EXPECT_GT(moved.load(), 0u);
  for (uint32_t i = 0; i < kMacs; ++i) {
    const std::optional<PortId> port = table.lookup(indexed_mac(i), kT0);
    ASSERT_TRUE(port.has_value()) << i;
    EXPECT_LT(*port, static_cast<PortId>(kPorts));
  }
}

// The sharpest case for the seqlock: one bucket, and a writer whose clock runs so fast
// that every entry has aged by its next learn, so almost every learn recycles a slot
// (a new MAC, port and timestamp over an old one). Readers use an old `now`, for which
// every entry is fresh, so they return whatever binding they read. Ports again encode
// their MAC: a reader that pairs one incarnation's MAC with another's port fails.
TEST(MacTableConcurrency, ReadersNeverPairAMacWithARecycledSlotsPort) {
  MacTableConfig config = config_with(MacTable::kWays, 11);  // one bucket
  config.max_age = 1us;
  config.refresh_interval = 0ns;
  MacTable table(config);
  constexpr uint32_t kMacs = 24;
  constexpr int kReaders = 4;
  constexpr int kWriterOps = 200000;

  std::atomic<bool> done{false};
  std::atomic<uint64_t> bad{0};
  std::atomic<uint64_t> hits{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937 rng(static_cast<uint32_t>(r) + 7);
      uint64_t local_hits = 0;
      uint64_t local_bad = 0;
      uint64_t n = 0;
      while (!done.load(std::memory_order_acquire) || n < 2000) {
        ++n;
        const auto mac = static_cast<uint32_t>(rng() % kMacs);
        const std::optional<PortId> port = table.lookup(indexed_mac(mac), kT0);
        if (!port) continue;
        ++local_hits;
        if ((*port >> 8) != mac) ++local_bad;
      }
      hits.fetch_add(local_hits);
      bad.fetch_add(local_bad);
    });
  }
  std::mt19937 rng(300);
  for (int op = 0; op < kWriterOps; ++op) {
    const auto mac = static_cast<uint32_t>(rng() % kMacs);
    table.learn(indexed_mac(mac), (mac << 8) | static_cast<uint32_t>(op & 3),
                kT0 + std::chrono::microseconds(2 * op));
  }
  done.store(true, std::memory_order_release);
  for (auto& th : readers) th.join();

  EXPECT_EQ(bad.load(), 0u) << "a lookup paired a MAC with another MAC's port";
  EXPECT_GT(hits.load(), 0u);
  EXPECT_GT(table.stats().evicted_aged, static_cast<uint64_t>(kWriterOps) / 2);  // slots were recycled
}

}  // namespace
}  // namespace uvhost::backends
