// receive_steering_test.cpp - ReceiveSteering: a flow goes to the pair it was last
// transmitted on, an unrecorded one (or one whose entry holds another flow's tag) to
// hash % pairs, one pair needs no table, bad pair counts are refused, and writers on
// two pairs race readers without a pair ever out of range (run it under TSan).
#include "uvhost/backends/receive_steering.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

namespace uvhost::backends {
namespace {

// A hash whose % 4 is 1, and hashes sharing its index (low bits) with another tag or
// the same tag.
constexpr uint32_t kFlow = 0x1234'0a05;
constexpr uint32_t kSameIndexOtherTag = kFlow ^ 0x0001'0000;
constexpr uint32_t kSameIndexSameTag = kFlow ^ 0x0000'a000;  // bits 12..15: neither index nor tag

TEST(ReceiveSteering, AnUnrecordedFlowTakesItsHashModuloThePairs) {
  const ReceiveSteering steering(4);
  for (const uint32_t hash : {0U, 1U, 2U, 3U, kFlow, 0xffff'ffffU, 0x8000'0002U}) {
    EXPECT_EQ(steering.receive_pair(hash), hash % 4) << hash;
  }
}

TEST(ReceiveSteering, ARecordedFlowTakesThePairItWasLastTransmittedOn) {
  ReceiveSteering steering(4);
  ASSERT_EQ(kFlow % 4, 1u);
  steering.record_transmit(kFlow, 3);
  EXPECT_EQ(steering.receive_pair(kFlow), 3u);
  steering.record_transmit(kFlow, 0);  // the flow moved
  EXPECT_EQ(steering.receive_pair(kFlow), 0u);
  steering.record_transmit(kFlow, 0);
  EXPECT_EQ(steering.receive_pair(kFlow), 0u);
  // Another flow in the same entry, told apart by its tag: not steered.
  EXPECT_EQ(steering.receive_pair(kSameIndexOtherTag), kSameIndexOtherTag % 4);
  // One with the same index and tag shares the entry (a collision: still a valid pair).
  EXPECT_EQ(steering.receive_pair(kSameIndexSameTag), 0u);
  // Recording the other flow takes the entry over: the first one falls back to its hash.
  steering.record_transmit(kSameIndexOtherTag, 2);
  EXPECT_EQ(steering.receive_pair(kSameIndexOtherTag), 2u);
  EXPECT_EQ(steering.receive_pair(kFlow), kFlow % 4);
}

TEST(ReceiveSteering, EveryEntryIsItsOwn) {
  ReceiveSteering steering(2);
  for (uint32_t index = 0; index < ReceiveSteering::kEntries; ++index) {
    const uint32_t hash = (index * 0x9e37U << 16) | index;
    steering.record_transmit(hash, 1 - hash % 2);  // never what the hash alone would pick
  }
  for (uint32_t index = 0; index < ReceiveSteering::kEntries; ++index) {
    const uint32_t hash = (index * 0x9e37U << 16) | index;
    ASSERT_EQ(steering.receive_pair(hash), 1 - hash % 2) << index;
  }
}

TEST(ReceiveSteering, OnePairNeedsNoTable) {
  ReceiveSteering steering(1);
  steering.record_transmit(kFlow, 0);
  for (const uint32_t hash : {0U, 1U, kFlow, 0xffff'ffffU}) EXPECT_EQ(steering.receive_pair(hash), 0u);
  EXPECT_EQ(steering.queue_pairs(), 1u);
}

TEST(ReceiveSteering, PairCountsOutsideVirtioNetsRangeAreRefused) {
  EXPECT_THROW(ReceiveSteering(0), std::invalid_argument);
  EXPECT_THROW(ReceiveSteering(ReceiveSteering::kMaxQueuePairs + 1), std::invalid_argument);
  ReceiveSteering most(ReceiveSteering::kMaxQueuePairs);
  most.record_transmit(kFlow, ReceiveSteering::kMaxQueuePairs - 1);
  EXPECT_EQ(most.receive_pair(kFlow), ReceiveSteering::kMaxQueuePairs - 1);
}

// Two writers (a port's two transmit workers) record the same flows on their own pairs
// while two readers (other ports delivering) pick pairs: every pick is in range, and
// once the writers stop the last record of each flow holds.
TEST(ReceiveSteering, WritersOnTwoPairsRaceReaders) {
  constexpr uint32_t kPairs = 3;
  constexpr uint32_t kFlows = 512;
  ReceiveSteering steering(kPairs);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> out_of_range{0};
  std::vector<std::thread> threads;
  for (uint32_t writer = 0; writer < 2; ++writer) {
    threads.emplace_back([&, writer] {
      for (int round = 0; round < 200; ++round) {
        for (uint32_t flow = 0; flow < kFlows; ++flow) steering.record_transmit(flow * 0x9e3779b9U, writer + 1);
      }
    });
  }
  for (int reader = 0; reader < 2; ++reader) {
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        for (uint32_t flow = 0; flow < kFlows; ++flow) {
          if (steering.receive_pair(flow * 0x9e3779b9U) >= kPairs) out_of_range.fetch_add(1);
        }
      }
    });
  }
  threads[0].join();
  threads[1].join();
  stop.store(true);
  threads[2].join();
  threads[3].join();
  EXPECT_EQ(out_of_range.load(), 0u);
  steering.record_transmit(7 * 0x9e3779b9U, 0);
  EXPECT_EQ(steering.receive_pair(7 * 0x9e3779b9U), 0u);
  // (An odd multiplier keeps the flows' low 12 bits, their indexes, distinct.)
  for (uint32_t flow = 0; flow < kFlows; ++flow) {
    const uint32_t pair = steering.receive_pair(flow * 0x9e3779b9U);
    EXPECT_TRUE(flow == 7 ? pair == 0 : pair == 1 || pair == 2) << flow << ": " << pair;
  }
}

}  // namespace
}  // namespace uvhost::backends
