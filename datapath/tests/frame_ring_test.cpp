// FrameRing: the bounded MPSC queue of packets into a receive virtqueue.
//  - FIFO with one producer, capacity rounding, a full ring hands the packet back,
//    wrap-around over many laps;
//  - 4 producers x 50k packets, one consumer: every packet exactly once, each
//    producer's packets in order, bytes intact (run under TSan: the release/acquire
//    hand-off of the packet);
//  - the destructor frees what is still queued (ASan's leak check).
#include "uvhost/datapath/frame_ring.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define UVHOST_TEST_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UVHOST_TEST_LSAN 1
#endif
#endif
#ifdef UVHOST_TEST_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace uvhost::datapath {
namespace {

using backends::Packet;
using backends::PacketPtr;

// A packet whose frame encodes (producer, sequence) and a checksum-like pattern.
PacketPtr make(uint32_t producer, uint32_t sequence, size_t length = 64) {
  auto packet = std::make_unique<Packet>();
  packet->header.gso_size = static_cast<uint16_t>(producer);
  packet->header.csum_start = static_cast<uint16_t>(sequence & 0xffff);
  packet->frame.resize(length < 8 ? 8 : length);
  std::memcpy(packet->frame.data(), &producer, 4);
  std::memcpy(packet->frame.data() + 4, &sequence, 4);
  for (size_t i = 8; i < packet->frame.size(); ++i) {
    packet->frame[i] = static_cast<std::byte>((producer * 31 + sequence + i) & 0xff);
  }
  return packet;
}

struct Decoded {
  uint32_t producer = 0;
  uint32_t sequence = 0;
  bool intact = false;
};

Decoded decode(const Packet& packet) {
  Decoded d;
  if (packet.frame.size() < 8) return d;
  std::memcpy(&d.producer, packet.frame.data(), 4);
  std::memcpy(&d.sequence, packet.frame.data() + 4, 4);
  d.intact = packet.header.gso_size == static_cast<uint16_t>(d.producer) &&
             packet.header.csum_start == static_cast<uint16_t>(d.sequence & 0xffff);
  for (size_t i = 8; d.intact && i < packet.frame.size(); ++i) {
    d.intact = packet.frame[i] == static_cast<std::byte>((d.producer * 31 + d.sequence + i) & 0xff);
  }
  return d;
}

TEST(FrameRingTest, CapacityIsRoundedUpToAPowerOfTwoOfAtLeastTwo) {
  const std::array<std::pair<size_t, size_t>, 10> cases{{
      {0, 2}, {1, 2}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {255, 256}, {256, 256}, {1024, 1024}, {1025, 2048},
  }};
  for (const auto& [asked, expected] : cases) {
    FrameRing ring(asked);
    EXPECT_EQ(ring.capacity(), expected) << "asked for " << asked;
  }
}

TEST(FrameRingTest, EmptyRing) {
  FrameRing ring(8);
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(ring.pop(), nullptr);
  EXPECT_EQ(ring.pop(), nullptr);
  EXPECT_TRUE(ring.empty());
}

TEST(FrameRingTest, SingleProducerFifo) {
  FrameRing ring(16);
  for (uint32_t i = 0; i < 10; ++i) EXPECT_EQ(ring.push(make(0, i)), nullptr);
  EXPECT_FALSE(ring.empty());
  for (uint32_t i = 0; i < 10; ++i) {
    ASSERT_FALSE(ring.empty());
    PacketPtr packet = ring.pop();
    ASSERT_NE(packet, nullptr);
    const Decoded d = decode(*packet);
    EXPECT_TRUE(d.intact);
    EXPECT_EQ(d.sequence, i);
  }
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(ring.pop(), nullptr);
}

TEST(FrameRingTest, FullRingReturnsThePacket) {
  FrameRing ring(4);
  ASSERT_EQ(ring.capacity(), 4u);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_EQ(ring.push(make(0, i)), nullptr) << i;
  PacketPtr extra = make(0, 99);
  Packet* const raw = extra.get();
  PacketPtr back = ring.push(std::move(extra));
  ASSERT_NE(back, nullptr) << "a full ring accepted a fifth packet";
  EXPECT_EQ(back.get(), raw) << "the same packet comes back";
  EXPECT_EQ(decode(*back).sequence, 99u);
  EXPECT_TRUE(decode(*back).intact);
  // Still full on a second try; the queued packets are untouched.
  back = ring.push(std::move(back));
  ASSERT_NE(back, nullptr);
  // One pop frees exactly one slot.
  PacketPtr first = ring.pop();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(decode(*first).sequence, 0u);
  EXPECT_EQ(ring.push(std::move(back)), nullptr);
  EXPECT_NE(ring.push(make(0, 100)), nullptr);
  for (uint32_t expected : {1u, 2u, 3u, 99u}) {
    PacketPtr packet = ring.pop();
    ASSERT_NE(packet, nullptr);
    EXPECT_EQ(decode(*packet).sequence, expected);
  }
  EXPECT_EQ(ring.pop(), nullptr);
}

TEST(FrameRingTest, WrapsAroundManyLaps) {
  FrameRing ring(8);
  uint32_t next_push = 0;
  uint32_t next_pop = 0;
  uint32_t fulls = 0;
  uint32_t empties = 0;
  // Varying fill levels: the tickets cross the end of the array at every offset, and
  // "full" / "empty" are hit now and then; both must match the count we hold.
  for (uint32_t lap = 0; lap < 2000; ++lap) {
    const uint32_t burst = 1 + lap % 7;
    for (uint32_t i = 0; i < burst; ++i) {
      PacketPtr back = ring.push(make(1, next_push));
      if (back != nullptr) {
        ASSERT_EQ(next_push - next_pop, 8u) << "push refused with room left";
        ASSERT_EQ(decode(*back).sequence, next_push);
        ++fulls;
        break;
      }
      ++next_push;
    }
    // Phases of 100 laps: filling (net +0.5 a lap), then draining (net -1.5 a lap).
    const uint32_t take = 1 + (lap * 5) % 6 + ((lap / 100) % 2 == 1 ? 2 : 0);
    for (uint32_t i = 0; i < take; ++i) {
      PacketPtr packet = ring.pop();
      if (packet == nullptr) {
        ASSERT_EQ(next_pop, next_push) << "pop found nothing with packets queued";
        ASSERT_TRUE(ring.empty());
        ++empties;
        break;
      }
      ASSERT_EQ(decode(*packet).sequence, next_pop++);
      ASSERT_EQ(ring.empty(), next_pop == next_push);
    }
  }
  while (PacketPtr packet = ring.pop()) ASSERT_EQ(decode(*packet).sequence, next_pop++);
  EXPECT_EQ(next_pop, next_push);
  EXPECT_GT(fulls, 0u);
  EXPECT_GT(empties, 0u);
  EXPECT_GT(next_push, 16u * 8u);
}

TEST(FrameRingTest, FourProducersOneConsumerEveryPacketOnceInProducerOrder) {
  constexpr uint32_t kProducers = 4;
  constexpr uint32_t kPerProducer = 50'000;
  FrameRing ring(256);  // small: producers hit "full" and retry
  std::atomic<bool> go{false};
  std::atomic<uint64_t> full_retries{0};
  std::vector<std::thread> producers;
  for (uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      uint64_t retries = 0;
      for (uint32_t s = 0; s < kPerProducer; ++s) {
        PacketPtr packet = make(p, s, 8 + (s % 9));
        while ((packet = ring.push(std::move(packet))) != nullptr) {
          ++retries;
          std::this_thread::yield();
        }
      }
      full_retries.fetch_add(retries, std::memory_order_relaxed);
    });
  }
  std::array<uint32_t, kProducers> next{};
  uint64_t received = 0;
  uint64_t out_of_order = 0;
  uint64_t corrupt = 0;
  uint64_t empty_polls = 0;
  go.store(true, std::memory_order_release);
  const uint64_t total = uint64_t{kProducers} * kPerProducer;
  while (received < total) {
    PacketPtr packet = ring.pop();
    if (packet == nullptr) {
      ++empty_polls;
      std::this_thread::yield();
      continue;
    }
    const Decoded d = decode(*packet);
    if (!d.intact || d.producer >= kProducers) {
      ++corrupt;
      ++received;
      continue;
    }
    if (d.sequence != next[d.producer]) ++out_of_order;
    next[d.producer] = d.sequence + 1;
    ++received;
  }
  for (auto& th : producers) th.join();
  EXPECT_EQ(corrupt, 0u) << "a packet's bytes were not complete when popped";
  EXPECT_EQ(out_of_order, 0u) << "a producer's packets arrived out of order (or one was lost / duplicated)";
  for (uint32_t p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kPerProducer) << "producer " << p;
  EXPECT_EQ(ring.pop(), nullptr) << "more packets than were pushed";
  EXPECT_TRUE(ring.empty());
  RecordProperty("full_retries", static_cast<int>(full_retries.load()));
  RecordProperty("empty_polls", static_cast<int>(empty_polls));
}

TEST(FrameRingTest, ConcurrentFullRingNeverLosesOrDuplicates) {
  // Capacity 2 with 4 producers: almost every push races with "full"; a packet that
  // comes back must be the one pushed, and nothing may be lost.
  constexpr uint32_t kProducers = 4;
  constexpr uint32_t kPerProducer = 2'000;
  FrameRing ring(2);
  std::atomic<uint64_t> bounced_wrong{0};
  std::vector<std::thread> producers;
  for (uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (uint32_t s = 0; s < kPerProducer; ++s) {
        PacketPtr packet = make(p, s, 8);
        Packet* const raw = packet.get();
        while ((packet = ring.push(std::move(packet))) != nullptr) {
          if (packet.get() != raw) bounced_wrong.fetch_add(1);
          std::this_thread::yield();
        }
      }
    });
  }
  std::array<uint32_t, kProducers> next{};
  uint64_t received = 0;
  uint64_t bad = 0;
  while (received < uint64_t{kProducers} * kPerProducer) {
    PacketPtr packet = ring.pop();
    if (packet == nullptr) {
      std::this_thread::yield();
      continue;
    }
    const Decoded d = decode(*packet);
    if (!d.intact || d.producer >= kProducers || d.sequence != next[d.producer]) {
      ++bad;
    } else {
      ++next[d.producer];
    }
    ++received;
  }
  for (auto& th : producers) th.join();
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(bounced_wrong.load(), 0u);
  EXPECT_EQ(ring.pop(), nullptr);
}

TEST(FrameRingTest, DestructorFreesQueuedPackets) {
  {
    FrameRing ring(64);
    for (uint32_t i = 0; i < 40; ++i) ASSERT_EQ(ring.push(make(2, i, 1500)), nullptr);
    // Some popped, some left behind, after wrapping once.
    for (uint32_t i = 0; i < 30; ++i) ASSERT_NE(ring.pop(), nullptr);
    for (uint32_t i = 40; i < 90; ++i) ASSERT_EQ(ring.push(make(2, i, 1500)), nullptr);
  }  // 60 packets still queued: the destructor must free them
  {
    FrameRing full(4);
    for (uint32_t i = 0; i < 4; ++i) ASSERT_EQ(full.push(make(3, i)), nullptr);
  }
#ifdef UVHOST_TEST_LSAN
  // Fail here (not only at exit) if a queued packet was leaked.
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0) << "FrameRing's destructor leaked queued packets";
#endif
}

}  // namespace
}  // namespace uvhost::datapath
