// split_queue_test.cpp - the device side driven by the driver side: basic round trips,
// ring state, indirect chains, frontend addresses, and a property test over random
// chain shapes and sizes (fixed seeds, printed on failure).
#include <cstdint>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "test_guest.h"
#include "uvhost/virtio/detail/ring_access.h"
#include "uvhost/virtio/split_queue.h"
#include "uvhost/virtio/split_queue_driver.h"

namespace uvhost::virtio {
namespace {

using testing::pattern;
using testing::QueuePair;
using testing::TestMemory;

TEST(SplitQueue, EmptyQueuePopsNothing) {
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 8});
  DescriptorChain chain;
  EXPECT_EQ(q.device.available(mem.map()), 0);
  EXPECT_FALSE(q.device.pop(mem.map(), chain));
  EXPECT_FALSE(q.device.is_broken());
}

TEST(SplitQueue, OneChainRoundTrip) {
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 8});
  const uint64_t out_buf = mem.alloc(100), in_buf = mem.alloc(50);
  const auto payload = pattern(100, 1);
  mem.write(out_buf, payload);
  const DriverQueue::Buffer bufs[] = {{out_buf, 100, false}, {in_buf, 50, true}};
  const auto head = q.driver.add_chain(bufs);
  ASSERT_TRUE(head.has_value());
  q.driver.publish();

  DescriptorChain chain;
  ASSERT_TRUE(q.device.pop(mem.map(), chain));
  EXPECT_EQ(chain.head, *head);
  EXPECT_EQ(chain.descriptor_count, 2u);
  ASSERT_EQ(chain.readable.total_bytes(), 100u);
  ASSERT_EQ(chain.writable.total_bytes(), 50u);
  std::vector<std::byte> got(100);
  EXPECT_EQ(copy_from_pieces(chain.readable.pieces(), 0, got), 100u);
  EXPECT_EQ(got, payload);
  const auto reply = pattern(50, 2);
  EXPECT_EQ(copy_to_pieces(chain.writable.pieces(), 0, reply), 50u);
  q.device.add_used(mem.map(), chain.head, 50);
  EXPECT_FALSE(q.driver.reap().has_value()) << "not visible before publish_used";
  q.device.publish_used(mem.map());

  const auto used = q.driver.reap();
  ASSERT_TRUE(used.has_value());
  EXPECT_EQ(used->id, *head);
  EXPECT_EQ(used->len, 50u);
  EXPECT_EQ(mem.read(in_buf, 50), reply);
  EXPECT_EQ(q.driver.free_descriptors(), 8);
}

// prefetch_next_chain() is a hint: on a queue not started, with nothing known to be
// available, or with chains pending, the pops around it see exactly the same.
TEST(SplitQueue, PrefetchNextChainChangesNothing) {
  TestMemory mem;
  DeviceQueue idle;
  idle.prefetch_next_chain(mem.map());  // not started: no rings to look at
  EXPECT_FALSE(idle.is_started());

  QueuePair q(mem, DriverOptions{.size = 8});
  q.device.prefetch_next_chain(mem.map());  // nothing seen available yet
  std::vector<uint16_t> heads;
  for (uint8_t i = 0; i < 3; ++i) {
    const DriverQueue::Buffer buf[] = {{mem.alloc(64), 64, true}};
    const auto head = q.driver.add_chain(buf);
    ASSERT_TRUE(head.has_value());
    heads.push_back(*head);
  }
  q.driver.publish();
  ASSERT_EQ(q.device.available(mem.map()), 3);
  for (const uint16_t head : heads) {
    q.device.prefetch_next_chain(mem.map());
    DescriptorChain chain;
    ASSERT_TRUE(q.device.pop(mem.map(), chain, ChainDirection::kWritableOnly));
    EXPECT_EQ(chain.head, head);
    EXPECT_EQ(chain.writable.total_bytes(), 64u);
    q.device.add_used(mem.map(), chain.head, 0);
  }
  q.device.prefetch_next_chain(mem.map());  // all popped
  DescriptorChain none;
  EXPECT_FALSE(q.device.pop(mem.map(), none));
  q.device.publish_used(mem.map());
  for (const uint16_t head : heads) {
    const auto used = q.driver.reap();
    ASSERT_TRUE(used.has_value());
    EXPECT_EQ(used->id, head);
  }
  EXPECT_FALSE(q.device.is_broken());
}

TEST(SplitQueue, IndirectChainAndMixedChain) {
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 8, .indirect_desc = true});
  const uint64_t a = mem.alloc(10), b = mem.alloc(20), c = mem.alloc(30);
  const DriverQueue::Buffer bufs[] = {{a, 10, false}, {b, 20, false}, {c, 30, true}};
  ASSERT_TRUE(q.driver.add_chain(bufs, /*indirect=*/true).has_value());
  EXPECT_EQ(q.driver.free_descriptors(), 7) << "an indirect chain takes one ring descriptor";
  q.driver.publish();
  DescriptorChain chain;
  ASSERT_TRUE(q.device.pop(mem.map(), chain));
  EXPECT_EQ(chain.readable.total_bytes(), 30u);
  EXPECT_EQ(chain.writable.total_bytes(), 30u);
  EXPECT_EQ(chain.descriptor_count, 4u);  // the pointer descriptor + 3 entries
}

TEST(SplitQueue, DirectDescriptorsFollowedByAnIndirectTable) {
  // Spec: the device must handle normal chained descriptors followed by one indirect one.
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 8, .indirect_desc = true});
  const uint64_t hdr = mem.alloc(12), data = mem.alloc(64), table = mem.alloc(32);
  q.driver.write_descriptor(0, Descriptor{hdr, 12, kDescFlagNext, 1});
  q.driver.write_descriptor(1, Descriptor{table, 32, kDescFlagIndirect, 0});
  std::byte* t = mem.host(table);
  detail::store_descriptor(t, Descriptor{data, 60, kDescFlagNext, 1});
  detail::store_descriptor(t + 16, Descriptor{data + 60, 4, 0, 0});
  q.driver.write_avail_entry(0, 0);
  q.driver.store_avail_index(1);
  DescriptorChain chain;
  ASSERT_TRUE(q.device.pop(mem.map(), chain));
  EXPECT_EQ(chain.readable.total_bytes(), 76u);
  EXPECT_EQ(chain.readable.size(), 3u);
}

TEST(SplitQueue, UnalignedIndirectTableSpanningRegions) {
  TestMemory mem(64 * 1024, 2);
  QueuePair q(mem, DriverOptions{.size = 8, .indirect_desc = true});
  const uint64_t data = mem.alloc(64);
  const uint64_t table = mem.alloc_spanning(48, 23);  // entry 1 straddles the boundary, odd address
  std::vector<std::byte> bytes(48);
  const Descriptor entries[] = {{data, 8, kDescFlagNext, 1}, {data + 8, 8, kDescFlagNext, 2}, {data + 16, 8, 0, 0}};
  std::memcpy(bytes.data(), entries, sizeof entries);
  mem.write(table, bytes);
  q.driver.write_descriptor(0, Descriptor{table, 48, kDescFlagIndirect, 0});
  q.driver.write_avail_entry(0, 0);
  q.driver.store_avail_index(1);
  DescriptorChain chain;
  ASSERT_TRUE(q.device.pop(mem.map(), chain)) << to_string(q.device.error());
  EXPECT_EQ(chain.readable.total_bytes(), 24u);
  EXPECT_EQ(chain.readable[1].data, mem.host(data + 8));
}

TEST(SplitQueue, BufferSpanningTwoRegionsComesBackInTwoPieces) {
  TestMemory mem(64 * 1024, 2);
  QueuePair q(mem, DriverOptions{.size = 4});
  const uint64_t buf = mem.alloc_spanning(100, 40);
  const auto payload = pattern(100, 7);
  mem.write(buf, payload);
  const DriverQueue::Buffer bufs[] = {{buf, 100, false}};
  ASSERT_TRUE(q.driver.add_chain(bufs).has_value());
  q.driver.publish();
  DescriptorChain chain;
  ASSERT_TRUE(q.device.pop(mem.map(), chain));
  ASSERT_EQ(chain.readable.size(), 2u);
  EXPECT_EQ(chain.readable[0].len, 40u);
  EXPECT_EQ(chain.readable[1].len, 60u);
  std::vector<std::byte> got(100);
  copy_from_pieces(chain.readable.pieces(), 0, got);
  EXPECT_EQ(got, payload);
}

TEST(SplitQueue, RingStateCanBeSavedAndRestored) {
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 4});
  const uint64_t buf = mem.alloc(16);
  const DriverQueue::Buffer bufs[] = {{buf, 16, false}};
  DescriptorChain chain;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(q.driver.add_chain(bufs).has_value());
    q.driver.publish();
    ASSERT_TRUE(q.device.pop(mem.map(), chain));
    q.device.add_used(mem.map(), chain.head, 0);
    q.device.publish_used(mem.map());
    ASSERT_TRUE(q.driver.reap().has_value());
  }
  ASSERT_TRUE(q.driver.add_chain(bufs).has_value());
  q.driver.publish();
  // GET_VRING_BASE, then a new backend instance: SET_VRING_BASE + start.
  const uint16_t base = q.device.last_avail_index();
  EXPECT_EQ(base, 3);
  DeviceQueue restarted("restarted");
  restarted.set_last_avail_index(base);
  ASSERT_TRUE(restarted.start(q.driver.device_config(), mem.map()));
  EXPECT_EQ(restarted.used_index(), 3) << "the used index continues from the ring";
  ASSERT_TRUE(restarted.pop(mem.map(), chain));
  EXPECT_FALSE(restarted.pop(mem.map(), chain));
  restarted.reset();
  EXPECT_FALSE(restarted.is_started());
  EXPECT_EQ(restarted.last_avail_index(), 0);
}

TEST(SplitQueue, FrontendAddressesAreTranslatedAndMapChangesAreFollowed) {
  TestMemory mem;
  DriverOptions options{.size = 4};
  const uint64_t ring = mem.alloc(DriverQueue::required_bytes(options), 4096);
  DriverQueue driver(options, DriverRingArea{mem.host(ring), ring, DriverQueue::required_bytes(options)});
  QueueConfig config = driver.device_config();
  config.address_space = AddressSpace::kFrontendVirtual;
  config.desc_addr += TestMemory::kFrontendDelta;
  config.avail_addr += TestMemory::kFrontendDelta;
  config.used_addr += TestMemory::kFrontendDelta;
  DeviceQueue device("frontend");
  ASSERT_TRUE(device.start(config, mem.map()));
  const uint64_t buf = mem.alloc(16);
  const DriverQueue::Buffer bufs[] = {{buf, 16, false}};
  ASSERT_TRUE(driver.add_chain(bufs).has_value());
  driver.publish();
  DescriptorChain chain;
  ASSERT_TRUE(device.pop(mem.map(), chain));

  // A second map over the same bytes (a new SET_MEM_TABLE): the queue re-translates.
  std::vector<std::unique_ptr<MemoryRegion>> regions;
  const MemoryRegion& r = mem.map().region(0);
  regions.push_back(MemoryRegion::borrow(r.guest_phys_addr(), r.frontend_addr(), {r.host(), r.size()}));
  auto second = GuestMemoryMap::create(std::move(regions));
  ASSERT_TRUE(driver.add_chain(bufs).has_value());
  driver.publish();
  ASSERT_TRUE(device.pop(*second, chain));
  EXPECT_FALSE(device.is_broken());
}

// The queue keeps the region of the last buffer it walked from one burst to the next,
// but only under the same map: a new map over other host memory (the same guest
// addresses, as after a SET_MEM_TABLE) must send the next chain's pieces there.
TEST(SplitQueue, RegionKeptBetweenBurstsIsDroppedWithItsMap) {
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 8});
  const uint64_t buf = mem.alloc(64);
  const DriverQueue::Buffer bufs[] = {{buf, 64, false}};
  const MemoryRegion& first = mem.map().region(0);
  auto inside = [](const std::byte* p, const std::byte* base, size_t size) { return p >= base && p < base + size; };

  ASSERT_TRUE(q.driver.add_chain(bufs).has_value());
  q.driver.publish();
  DescriptorChain chain;
  ASSERT_TRUE(q.device.pop(mem.map(), chain));
  ASSERT_EQ(chain.readable.size(), 1u);
  EXPECT_TRUE(inside(chain.readable[0].data, first.host(), first.size()));

  // The same guest memory, copied to other host memory, in a map of its own.
  ASSERT_TRUE(q.driver.add_chain(bufs).has_value());
  q.driver.publish();
  std::vector<std::byte> copy(first.size());
  std::memcpy(copy.data(), first.host(), first.size());
  std::vector<std::unique_ptr<MemoryRegion>> regions;
  regions.push_back(MemoryRegion::borrow(first.guest_phys_addr(), first.frontend_addr(), copy));
  auto second = GuestMemoryMap::create(std::move(regions));
  ASSERT_TRUE(q.device.pop(*second, chain));
  ASSERT_EQ(chain.readable.size(), 1u);
  EXPECT_TRUE(inside(chain.readable[0].data, copy.data(), copy.size()));
  EXPECT_EQ(chain.readable[0].data - copy.data(), static_cast<ptrdiff_t>(buf - first.guest_phys_addr()));

  // And back under the first map: its own memory again.
  q.device.unpop(1);
  ASSERT_TRUE(q.device.pop(mem.map(), chain));
  EXPECT_TRUE(inside(chain.readable[0].data, first.host(), first.size()));
  EXPECT_FALSE(q.device.is_broken());
}

// Property test: random chain shapes and sizes, checked byte for byte both ways.
struct PropertyParams {
  uint16_t size;
  bool event_idx;
  bool indirect;
  bool in_order = false;  // VIRTIO_F_IN_ORDER on both sides: read-only runs come back batched
};

class SplitQueueProperty : public ::testing::TestWithParam<PropertyParams> {};

TEST_P(SplitQueueProperty, RandomChainsRoundTrip) {
  const PropertyParams params = GetParam();
  for (uint32_t round = 0; round < 20; ++round) {
    const uint32_t seed = 1000u * params.size + round * 7u + (params.event_idx ? 1u : 0u) + (params.indirect ? 2u : 0u) +
                          (params.in_order ? 4u : 0u);
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " size " << params.size << " event_idx "
                                      << params.event_idx << " indirect " << params.indirect << " in_order "
                                      << params.in_order);
    std::mt19937 rng(seed);
    TestMemory mem(256 * 1024, 4);
    QueuePair q(mem, DriverOptions{.size = params.size, .event_idx = params.event_idx,
                                   .indirect_desc = params.indirect, .max_indirect_entries = 8,
                                   .initial_index = static_cast<uint16_t>(rng()), .in_order = params.in_order});
    testing::RoundTripBooks books;
    DescriptorChain chain;
    for (int step = 0; step < 150; ++step) {
      // Driver: add a random number of random chains.
      const int to_add = static_cast<int>(rng() % 4);
      for (int i = 0; i < to_add; ++i) {
        const std::vector<DriverQueue::Buffer> bufs = books.make_chain(mem, rng, std::min<size_t>(8, params.size));
        const bool indirect = params.indirect && rng() % 2 == 0;
        const auto head = q.driver.add_chain(bufs, indirect);
        if (!head) break;  // ring full
        books.added(*head);
      }
      if (rng() % 2 == 0) q.driver.publish();
      // Device: pop a random number, fill writable parts, return them.
      const int to_pop = static_cast<int>(rng() % 5);
      for (int i = 0; i < to_pop && q.device.pop(q.mem.map(), chain); ++i) {
        uint32_t written = 0;
        ASSERT_TRUE(books.popped(chain, rng, written));
        q.device.add_used(mem.map(), chain.head, written);
      }
      if (rng() % 2 == 0) q.device.publish_used(mem.map());
      // Driver: reap what was published.
      while (auto used = q.driver.reap()) ASSERT_TRUE(books.reaped(*used, mem));
    }
    EXPECT_FALSE(q.device.is_broken()) << to_string(q.device.error());
    EXPECT_GT(books.completed(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SplitQueueProperty,
                         ::testing::Values(PropertyParams{1, false, false}, PropertyParams{2, true, true},
                                           PropertyParams{8, false, true}, PropertyParams{16, true, false},
                                           PropertyParams{64, true, true}, PropertyParams{256, false, true},
                                           PropertyParams{1, false, false, true}, PropertyParams{8, true, true, true},
                                           PropertyParams{64, false, false, true}, PropertyParams{256, true, true, true}));

// VIRTIO_F_IN_ORDER's batched used update: chains the device only read go back as one
// used entry in their run's first slot naming the run's last head; a chain it wrote
// into keeps its own entry; used->idx counts every chain; the driver hands back every
// chain, in order, and the slots inside a batch are never written.
TEST(SplitQueueInOrder, ReadOnlyRunsAreOneUsedEntryAndTheDriverReapsEachChain) {
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 8, .in_order = true});
  ASSERT_TRUE(q.device.config().in_order);
  const uint64_t used = q.driver.device_config().used_addr;
  const std::vector<std::byte> untouched(8 * 8, std::byte{0xee});
  mem.write(used + 4, untouched);
  // Chains 0..5: read, read, written (30 bytes), read, read, read.
  std::vector<uint16_t> heads;
  for (int i = 0; i < 6; ++i) {
    const bool written = i == 2;
    const DriverQueue::Buffer buf{mem.alloc(64), 64, written};
    const auto head = q.driver.add_chain(std::span(&buf, 1));
    ASSERT_TRUE(head.has_value());
    heads.push_back(*head);
  }
  q.driver.publish();
  DescriptorChain chain;
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(q.device.pop(mem.map(), chain));
    q.device.add_used(mem.map(), chain.head, i == 2 ? 30 : 0);
  }
  q.device.publish_used(mem.map());

  auto entry = [&](uint32_t slot) {
    const auto bytes = mem.read(used + 4 + 8 * slot, 8);
    UsedElement e;
    std::memcpy(&e, bytes.data(), sizeof e);
    return e;
  };
  const auto idx = mem.read(used + 2, 2);
  EXPECT_EQ(static_cast<uint16_t>(std::to_integer<uint16_t>(idx[0]) | std::to_integer<uint16_t>(idx[1]) << 8), 6);
  EXPECT_EQ(entry(0).id, heads[1]) << "run {0, 1}: its first slot names its last head";
  EXPECT_EQ(entry(0).len, 0u);
  EXPECT_EQ(entry(1).id, 0xeeeeeeeeu) << "inside a batch: not written";
  EXPECT_EQ(entry(2).id, heads[2]);
  EXPECT_EQ(entry(2).len, 30u) << "a chain written into keeps its own entry";
  EXPECT_EQ(entry(3).id, heads[5]) << "run {3, 4, 5}";
  EXPECT_EQ(entry(4).id, 0xeeeeeeeeu);
  EXPECT_EQ(entry(5).id, 0xeeeeeeeeu);

  for (int i = 0; i < 6; ++i) {
    const auto reaped = q.driver.reap();
    ASSERT_TRUE(reaped.has_value()) << i;
    EXPECT_EQ(reaped->id, heads[static_cast<size_t>(i)]);
    EXPECT_EQ(reaped->len, i == 2 ? 30u : 0u);
  }
  EXPECT_FALSE(q.driver.reap().has_value());
  EXPECT_EQ(q.driver.in_flight(), 0);
  EXPECT_EQ(q.driver.free_descriptors(), 8);
  EXPECT_FALSE(q.driver.device_misbehaved());
}

// Without VIRTIO_F_IN_ORDER the device writes every entry, read-only or not.
TEST(SplitQueueInOrder, WithoutTheFeatureEveryChainHasItsEntry) {
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 4});
  std::vector<uint16_t> heads;
  for (int i = 0; i < 3; ++i) {
    const DriverQueue::Buffer buf{mem.alloc(64), 64, false};
    heads.push_back(*q.driver.add_chain(std::span(&buf, 1)));
  }
  q.driver.publish();
  DescriptorChain chain;
  while (q.device.pop(mem.map(), chain)) q.device.add_used(mem.map(), chain.head, 0);
  q.device.publish_used(mem.map());
  const uint64_t used = q.driver.device_config().used_addr;
  for (uint32_t slot = 0; slot < 3; ++slot) {
    const auto bytes = mem.read(used + 4 + 8 * slot, 4);
    uint32_t id = 0;
    std::memcpy(&id, bytes.data(), sizeof id);
    EXPECT_EQ(id, heads[slot]);
  }
}

}  // namespace
}  // namespace uvhost::virtio

namespace uvhost::virtio::testing {
namespace {
// The driver side does not trust the device either: a used entry naming a chain that
// is not in flight is not freed; reaping stops and device_misbehaved() reports it.
TEST(SplitQueueDriver, UsedIdNotInFlightStopsReaping) {
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 8});
  const uint64_t buf = mem.alloc(64);
  const DriverQueue::Buffer bufs[] = {{buf, 64, true}};
  const auto head = q.driver.add_chain(bufs);
  ASSERT_TRUE(head.has_value());
  q.driver.publish();
  const uint16_t bogus_id = static_cast<uint16_t>((*head + 3) % 8);
  const uint64_t used = q.driver.device_config().used_addr;
  const uint32_t element[2] = {bogus_id, 64};
  mem.write(used + 4, std::as_bytes(std::span(element)));
  const uint16_t idx = 1;
  mem.write(used + 2, std::as_bytes(std::span(&idx, 1)));
  EXPECT_FALSE(q.driver.reap().has_value());
  EXPECT_TRUE(q.driver.device_misbehaved());
  EXPECT_EQ(q.driver.in_flight(), 1) << "the real chain stays in flight, nothing freed";
  EXPECT_FALSE(q.driver.reap().has_value()) << "reaping stays stopped";
}

// An in-order driver checks a batch against what it made available and what the device
// published. Three one-buffer chains are added, the first `made_available` of them
// published; the device then writes one used entry naming the third chain (a batch of
// three) and sets used->idx to `used_idx`. Returns the driver's verdict after one reap().
struct InOrderBatchVerdict {
  bool reaped;
  bool misbehaved;
  uint16_t in_flight;
};
InOrderBatchVerdict reap_batch_of_three(int made_available, uint16_t used_idx) {
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 8, .in_order = true});
  std::vector<uint16_t> heads;
  for (int i = 0; i < 3; ++i) {
    const DriverQueue::Buffer buf{mem.alloc(64), 64, false};
    heads.push_back(*q.driver.add_chain(std::span(&buf, 1)));
    if (i + 1 == made_available) q.driver.publish();
  }
  const uint64_t used = q.driver.device_config().used_addr;
  const uint32_t element[2] = {heads[2], 0};
  mem.write(used + 4, std::as_bytes(std::span(element)));
  mem.write(used + 2, std::as_bytes(std::span(&used_idx, 1)));
  const bool reaped = q.driver.reap().has_value();
  return {reaped, q.driver.device_misbehaved(), q.driver.in_flight()};
}

TEST(SplitQueueDriver, InOrderBatchOfWhatWasMadeAvailableAndPublishedIsReaped) {
  const InOrderBatchVerdict verdict = reap_batch_of_three(3, 3);
  EXPECT_TRUE(verdict.reaped);
  EXPECT_FALSE(verdict.misbehaved);
  EXPECT_EQ(verdict.in_flight, 2) << "the first chain of the batch is returned, two to go";
}

// The batch would end beyond used->idx: only two entries published.
TEST(SplitQueueDriver, InOrderBatchEndingBeyondUsedIndexStopsReaping) {
  const InOrderBatchVerdict verdict = reap_batch_of_three(3, 2);
  EXPECT_FALSE(verdict.reaped);
  EXPECT_TRUE(verdict.misbehaved);
  EXPECT_EQ(verdict.in_flight, 3) << "nothing of the batch is freed";
}

// The batch reaches a chain the driver added but never made available.
TEST(SplitQueueDriver, InOrderBatchReachingAChainNotYetMadeAvailableStopsReaping) {
  const InOrderBatchVerdict verdict = reap_batch_of_three(2, 3);
  EXPECT_FALSE(verdict.reaped);
  EXPECT_TRUE(verdict.misbehaved);
  EXPECT_EQ(verdict.in_flight, 3) << "nothing of the batch is freed";
}
}  // namespace
}  // namespace uvhost::virtio::testing
