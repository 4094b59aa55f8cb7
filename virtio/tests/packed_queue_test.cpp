// packed_queue_test.cpp - packed virtqueues (VIRTIO_F_RING_PACKED): the device side
// driven by our packed driver (round trips, indirect chains, wrap-around, ring base,
// un-pop, notification suppression both ways, IN_ORDER batches), a property test over
// random chain shapes and ring sizes (not only powers of two), and a hostile guest and
// a hostile device.
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "test_guest.h"
#include "uvhost/virtio/detail/ring_access.h"
#include "uvhost/virtio/net_rx.h"
#include "uvhost/virtio/packed_queue_driver.h"
#include "uvhost/virtio/packed_ring_layout.h"
#include "uvhost/virtio/split_queue.h"

namespace uvhost::virtio {
namespace {

using testing::PackedQueuePair;
using testing::pattern;
using testing::TestMemory;
using Buffer = PackedDriverQueue::Buffer;

// Writes a whole descriptor into ring slot `slot`, flags included (a guest that does
// what it wants).
void write_raw(const PackedDriverQueue& driver, uint16_t slot, const PackedDescriptor& d) {
  std::byte* p = driver.desc_ring() + size_t{slot} * kDescriptorSize;
  detail::ring_store<uint64_t>(p, d.addr, std::memory_order_relaxed);
  detail::ring_store<uint32_t>(p + kPackedDescLenOffset, d.len, std::memory_order_relaxed);
  detail::ring_store<uint16_t>(p + kPackedDescIdOffset, d.id, std::memory_order_relaxed);
  detail::ring_store<uint16_t>(p + kPackedDescFlagsOffset, d.flags, std::memory_order_release);
}
uint16_t avail_on_first_lap(uint16_t extra = 0) { return static_cast<uint16_t>(packed_avail_flags(true) | extra); }

TEST(PackedQueue, EmptyRingPopsNothing) {
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 8});
  DescriptorChain chain;
  EXPECT_EQ(q.device.available(mem.map()), 0);
  EXPECT_FALSE(q.device.pop(mem.map(), chain));
  EXPECT_FALSE(q.device.is_broken());
  EXPECT_EQ(q.device.last_avail_index(), 0x8000) << "position 0, wrap counter 1";
}

TEST(PackedQueue, OneChainRoundTrip) {
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 8});
  const uint64_t out_buf = mem.alloc(100), in_buf = mem.alloc(50);
  const auto payload = pattern(100, 1);
  mem.write(out_buf, payload);
  const Buffer bufs[] = {{out_buf, 100, false}, {in_buf, 50, true}};
  const auto id = q.driver.add_chain(bufs);
  ASSERT_TRUE(id.has_value());
  DescriptorChain chain;
  EXPECT_FALSE(q.device.pop(mem.map(), chain)) << "added but not published: the first flags are not stored yet";
  EXPECT_TRUE(q.driver.publish()) << "the device area starts at ENABLE";
  EXPECT_EQ(q.device.available(mem.map()), 1);

  ASSERT_TRUE(q.device.pop(mem.map(), chain));
  EXPECT_EQ(chain.head, *id);
  EXPECT_EQ(chain.descriptor_count, 2u);
  ASSERT_EQ(chain.readable.total_bytes(), 100u);
  ASSERT_EQ(chain.writable.total_bytes(), 50u);
  std::vector<std::byte> got(100);
  EXPECT_EQ(copy_from_pieces(chain.readable.pieces(), 0, got), 100u);
  EXPECT_EQ(got, payload);
  const auto reply = pattern(50, 2);
  EXPECT_EQ(copy_to_pieces(chain.writable.pieces(), 0, reply), 50u);
  EXPECT_EQ(q.device.last_avail_index(), 2 | 0x8000);
  q.device.add_used(mem.map(), chain.head, 50);
  EXPECT_FALSE(q.driver.reap().has_value()) << "not visible before publish_used";
  q.device.publish_used(mem.map());
  EXPECT_TRUE(q.device.must_signal_guest(mem.map()));

  const auto used = q.driver.reap();
  ASSERT_TRUE(used.has_value());
  EXPECT_EQ(used->id, *id);
  EXPECT_EQ(used->len, 50u);
  EXPECT_EQ(mem.read(in_buf, 50), reply);
  EXPECT_EQ(q.driver.free_descriptors(), 8);
  EXPECT_FALSE(q.driver.device_misbehaved());
}

TEST(PackedQueue, IndirectChainTakesOneSlot) {
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 4, .indirect_desc = true, .max_indirect_entries = 4});
  const uint64_t a = mem.alloc(10), b = mem.alloc(20), c = mem.alloc(30);
  mem.write(a, pattern(10, 3));
  mem.write(b, pattern(20, 4));
  const Buffer bufs[] = {{a, 10, false}, {b, 20, false}, {c, 30, true}};
  const auto id = q.driver.add_chain(bufs, true);
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(q.driver.free_descriptors(), 3);
  q.driver.publish();
  DescriptorChain chain;
  ASSERT_TRUE(q.device.pop(mem.map(), chain));
  EXPECT_EQ(chain.head, *id);
  EXPECT_EQ(chain.descriptor_count, 4u) << "three entries and the descriptor pointing at the table";
  EXPECT_EQ(chain.readable.total_bytes(), 30u);
  EXPECT_EQ(chain.writable.total_bytes(), 30u);
  EXPECT_EQ(q.device.last_avail_index(), 1 | 0x8000);
  q.device.add_used(mem.map(), chain.head, 30);
  q.device.publish_used(mem.map());
  const auto used = q.driver.reap();
  ASSERT_TRUE(used.has_value());
  EXPECT_EQ(used->id, *id);
  EXPECT_EQ(q.driver.free_descriptors(), 4);
}

// A ring whose size is not a power of two, a chain running past its end, and the wrap
// counters flipping: the base encodes the position and the lap.
TEST(PackedQueue, ChainsWrapAroundTheRingAndTheBaseFollows) {
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 5, .initial_index = 3});
  EXPECT_EQ(q.device.last_avail_index(), 3 | 0x8000);
  const uint64_t buf = mem.alloc(64);
  const Buffer three[] = {{buf, 8, false}, {buf + 8, 8, false}, {buf + 16, 8, true}};
  for (int round = 0; round < 4; ++round) {
    const auto id = q.driver.add_chain(three);
    ASSERT_TRUE(id.has_value());
    q.driver.publish();
    DescriptorChain chain;
    ASSERT_TRUE(q.device.pop(mem.map(), chain)) << "round " << round;
    EXPECT_EQ(chain.readable.total_bytes(), 16u);
    EXPECT_EQ(chain.writable.total_bytes(), 8u);
    q.device.add_used(mem.map(), chain.head, 8);
    q.device.publish_used(mem.map());
    const auto used = q.driver.reap();
    ASSERT_TRUE(used.has_value());
    EXPECT_EQ(used->id, *id);
    EXPECT_EQ(q.device.last_avail_index(), q.driver.next_avail().encode());
  }
  // From position 3, 4 chains of 3 slots: 15 = 3 x 5, position 0 after three flips of
  // the wrap counter (1, 0, 1, 0).
  EXPECT_EQ(q.device.last_avail_index(), 0);
  EXPECT_FALSE(q.device.is_broken());

  // A device started again from that base (vhost-user SET_VRING_BASE) carries on.
  DeviceQueue again("again");
  again.set_last_avail_index(q.device.last_avail_index());
  ASSERT_TRUE(again.start(q.driver.device_config(), mem.map()));
  const auto id = q.driver.add_chain(three);
  ASSERT_TRUE(id.has_value());
  q.driver.publish();
  DescriptorChain chain;
  ASSERT_TRUE(again.pop(mem.map(), chain));
  EXPECT_EQ(chain.head, *id);
  again.add_used(mem.map(), chain.head, 0);
  again.publish_used(mem.map());
  const auto used = q.driver.reap();
  ASSERT_TRUE(used.has_value());
  EXPECT_EQ(used->id, *id);
}

TEST(PackedQueue, UnpoppedChainsArePoppedAgainInOrder) {
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 8, .initial_index = 6});
  const uint64_t buf = mem.alloc(64);
  std::vector<uint16_t> ids;
  for (int i = 0; i < 3; ++i) {
    const Buffer two[] = {{buf, 8, true}, {buf + 8, 8, true}};
    ids.push_back(*q.driver.add_chain(two));
  }
  q.driver.publish();
  DescriptorChain chains[3];
  ASSERT_EQ(q.device.pop_burst(mem.map(), chains, ChainDirection::kWritableOnly), 3u);
  const uint16_t after = q.device.last_avail_index();
  q.device.unpop(2);
  EXPECT_EQ(q.device.last_avail_index(), 0 | 0x0000) << "position 6 + 2 = 8 wraps to 0 on the next lap";
  EXPECT_EQ(q.device.available(mem.map()), 2);
  EXPECT_EQ(q.device.available(mem.map(), 1), 1) << "counting stops at `enough`";
  ASSERT_EQ(q.device.pop_burst(mem.map(), std::span(chains).subspan(1), ChainDirection::kWritableOnly), 2u);
  EXPECT_EQ(chains[1].head, ids[1]);
  EXPECT_EQ(chains[2].head, ids[2]);
  EXPECT_EQ(q.device.last_avail_index(), after);
  for (const auto& c : chains) q.device.add_used(mem.map(), c.head, 16);
  q.device.publish_used(mem.map());
  for (uint16_t id : ids) {
    const auto used = q.driver.reap();
    ASSERT_TRUE(used.has_value());
    EXPECT_EQ(used->id, id);
    EXPECT_EQ(used->len, 16u);
  }
}

TEST(PackedQueue, KickSuppressionBothWaysWithoutEventIdx) {
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 8});
  const uint64_t buf = mem.alloc(64);
  const Buffer one[] = {{buf, 64, true}};
  q.device.disable_guest_kicks(mem.map());
  ASSERT_TRUE(q.driver.add_chain(one));
  EXPECT_FALSE(q.driver.publish()) << "DISABLE in the device area";
  EXPECT_TRUE(q.device.enable_guest_kicks(mem.map())) << "a chain arrived while kicks were off";
  DescriptorChain chain;
  ASSERT_TRUE(q.device.pop(mem.map(), chain));
  EXPECT_FALSE(q.device.enable_guest_kicks(mem.map()));
  ASSERT_TRUE(q.driver.add_chain(one));
  EXPECT_TRUE(q.driver.publish()) << "ENABLE";

  q.driver.disable_interrupts();
  q.device.add_used(mem.map(), chain.head, 1);
  q.device.publish_used(mem.map());
  EXPECT_FALSE(q.device.must_signal_guest(mem.map())) << "DISABLE in the driver area";
  EXPECT_TRUE(q.driver.enable_interrupts()) << "a used descriptor is pending";
  ASSERT_TRUE(q.driver.reap());
  ASSERT_TRUE(q.device.pop(mem.map(), chain));
  q.device.add_used(mem.map(), chain.head, 1);
  q.device.publish_used(mem.map());
  EXPECT_TRUE(q.device.must_signal_guest(mem.map()));
  EXPECT_FALSE(q.device.must_signal_guest(mem.map())) << "nothing published since";
}

// With EVENT_IDX each side asks for one notification at a position (DESC mode).
TEST(PackedQueue, EventIdxKicksOnlyWhenThePositionAskedForIsPassed) {
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 8, .event_idx = true});
  const uint64_t buf = mem.alloc(64);
  const Buffer one[] = {{buf, 64, false}};
  EXPECT_FALSE(q.device.enable_guest_kicks(mem.map()));  // DESC at position 0, wrap 1
  ASSERT_TRUE(q.driver.add_chain(one));
  EXPECT_TRUE(q.driver.publish()) << "passes position 0";
  ASSERT_TRUE(q.driver.add_chain(one));
  EXPECT_FALSE(q.driver.publish()) << "position 1 was not asked for";
  DescriptorChain chains[2];
  ASSERT_EQ(q.device.pop_burst(mem.map(), chains), 2u);
  EXPECT_FALSE(q.device.enable_guest_kicks(mem.map()));  // now position 2
  ASSERT_TRUE(q.driver.add_chain(one));
  EXPECT_TRUE(q.driver.publish());

  // Waiting for three more buffers: the kick comes with the third, not before.
  DescriptorChain third;
  ASSERT_TRUE(q.device.pop(mem.map(), third));
  EXPECT_FALSE(q.device.enable_guest_kicks_for_more(mem.map(), 3));
  ASSERT_TRUE(q.driver.add_chain(one));
  EXPECT_FALSE(q.driver.publish());
  ASSERT_TRUE(q.driver.add_chain(one));
  EXPECT_FALSE(q.driver.publish());
  ASSERT_TRUE(q.driver.add_chain(one));
  EXPECT_TRUE(q.driver.publish());

  // The driver asks for an interrupt at its next used position.
  q.device.add_used(mem.map(), chains[0].head, 0);
  q.device.publish_used(mem.map());
  EXPECT_TRUE(q.device.must_signal_guest(mem.map()));
  q.device.add_used(mem.map(), chains[1].head, 0);
  q.device.publish_used(mem.map());
  EXPECT_FALSE(q.device.must_signal_guest(mem.map())) << "the driver has not reaped the first yet";
  ASSERT_TRUE(q.driver.reap());
  ASSERT_TRUE(q.driver.reap());  // asks for position 2 now
  q.device.add_used(mem.map(), third.head, 0);
  q.device.publish_used(mem.map());
  EXPECT_TRUE(q.device.must_signal_guest(mem.map()));
}

TEST(PackedQueue, InOrderDriverTakesABatchedUsedDescriptor) {
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 8, .initial_index = 5, .in_order = true});
  const uint64_t buf = mem.alloc(64);
  std::vector<uint16_t> ids;
  for (int i = 0; i < 3; ++i) {
    const Buffer two[] = {{buf, 8, false}, {buf + 8, 8, false}};
    ids.push_back(*q.driver.add_chain(two));
  }
  q.driver.publish();
  // A device that batches (DPDK's vhost library does on packed in-order rings): one used
  // descriptor, in the first chain's slot, naming the last chain; the rest is skipped.
  write_raw(q.driver, 5, PackedDescriptor{0, 0, ids[2], packed_used_flags(true)});
  for (uint16_t expected : ids) {
    const auto used = q.driver.reap();
    ASSERT_TRUE(used.has_value());
    EXPECT_EQ(used->id, expected);
    EXPECT_EQ(used->len, 0u);
  }
  EXPECT_FALSE(q.driver.reap().has_value());
  EXPECT_EQ(q.driver.next_used(), (PackedPosition{3, false})) << "5 + 6 slots in a ring of 8";
  EXPECT_EQ(q.driver.free_descriptors(), 8);
  EXPECT_FALSE(q.driver.device_misbehaved());
}

// VIRTIO_F_IN_ORDER on a packed ring: the device returns a run of chains it only read
// as one used descriptor in the run's first slot, naming the last; a chain it wrote
// into keeps its own. The driver takes each chain back, in order.
TEST(PackedQueueInOrder, ReadOnlyRunsAreOneUsedDescriptorAndTheDriverReapsEachChain) {
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 8, .initial_index = 6, .in_order = true});
  const uint64_t buf = mem.alloc(64);
  std::vector<uint16_t> ids;
  for (int i = 0; i < 3; ++i) {
    const Buffer two[] = {{buf, 8, false}, {buf + 8, 8, false}};
    ids.push_back(*q.driver.add_chain(two));  // slots 6-7, 0-1, 2-3
  }
  const Buffer writable[] = {{buf + 16, 16, true}};
  ids.push_back(*q.driver.add_chain(writable));  // slot 4
  q.driver.publish();
  DescriptorChain chains[4];
  ASSERT_EQ(q.device.pop_burst(mem.map(), chains), 4u);
  for (int i = 0; i < 3; ++i) q.device.add_used(mem.map(), chains[i].head, 0);
  q.device.add_used(mem.map(), chains[3].head, 10);
  q.device.publish_used(mem.map());

  auto flags_at = [&](uint16_t slot) {
    return detail::ring_load<uint16_t>(q.driver.desc_ring() + slot * kDescriptorSize + kPackedDescFlagsOffset,
                                       std::memory_order_acquire);
  };
  auto id_at = [&](uint16_t slot) {
    return detail::ring_load<uint16_t>(q.driver.desc_ring() + slot * kDescriptorSize + kPackedDescIdOffset,
                                       std::memory_order_relaxed);
  };
  EXPECT_EQ(flags_at(6), packed_used_flags(true));
  EXPECT_EQ(id_at(6), ids[2]) << "the run's last chain";
  EXPECT_EQ(flags_at(0), packed_avail_flags(false) | kDescFlagNext) << "inside the run: left as the driver wrote it";
  EXPECT_EQ(flags_at(2), packed_avail_flags(false) | kDescFlagNext);
  EXPECT_EQ(flags_at(4), packed_used_flags(false)) << "the written chain's own descriptor";
  EXPECT_EQ(id_at(4), ids[3]);

  for (int i = 0; i < 4; ++i) {
    const auto used = q.driver.reap();
    ASSERT_TRUE(used.has_value()) << i;
    EXPECT_EQ(used->id, ids[static_cast<size_t>(i)]);
    EXPECT_EQ(used->len, i == 3 ? 10u : 0u);
  }
  EXPECT_FALSE(q.driver.reap().has_value());
  EXPECT_FALSE(q.driver.device_misbehaved());
  EXPECT_EQ(q.driver.free_descriptors(), 8);
  EXPECT_TRUE(q.device.must_signal_guest(mem.map()));
}

// virtio-net receive (MRG_RXBUF) into packed rings: a frame spread over several
// buffers, reserved a burst at a time, the rest given back; the driver reads it whole.
TEST(PackedQueue, MergeableReceiveSpreadsAFrameOverBuffers) {
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 8, .event_idx = true, .initial_index = 6});
  std::vector<uint64_t> buffers;
  for (int i = 0; i < 8; ++i) {
    buffers.push_back(mem.alloc(1024));
    const Buffer one[] = {{buffers.back(), 1024, true}};
    ASSERT_TRUE(q.driver.add_chain(one));
  }
  q.driver.publish();
  NetReceiveWriter writer(RxOptions{.mrg_rxbuf = true, .reserve = 4});
  const auto frame = pattern(2500, 9);
  for (int packet = 0; packet < 2; ++packet) {
    const RxResult result = writer.deliver(q.device, mem.map(), NetHeader{}, frame);
    ASSERT_EQ(result.status, RxStatus::kDelivered);
    EXPECT_EQ(result.buffers, 3);
  }
  writer.release(q.device);
  q.device.publish_used(mem.map());
  EXPECT_TRUE(q.device.must_signal_guest(mem.map()));
  for (int packet = 0; packet < 2; ++packet) {
    std::vector<std::byte> got;
    for (int b = 0; b < 3; ++b) {
      const auto used = q.driver.reap();
      ASSERT_TRUE(used.has_value()) << "packet " << packet << " buffer " << b;
      const auto bytes = mem.read(buffers[used->id], used->len);
      got.insert(got.end(), bytes.begin() + (b == 0 ? kNetHeaderSizeMrg : 0), bytes.end());
    }
    EXPECT_EQ(got, frame);
  }
  EXPECT_FALSE(q.driver.reap().has_value());
  EXPECT_EQ(q.device.available(mem.map()), 2) << "the two buffers given back";
}

// ---------------------------------------------------------------------------------
// A hostile guest: each violation breaks the queue with its own error, nothing popped.

struct HostileCase {
  const char* name;
  QueueError expected;
  bool indirect_desc;
  // Writes the ring (first lap, from position 0) and returns nothing.
  void (*write)(const PackedDriverQueue& driver, TestMemory& mem);
};

class PackedHostile : public ::testing::TestWithParam<HostileCase> {};

TEST_P(PackedHostile, BreaksTheQueueWithItsError) {
  const HostileCase c = GetParam();
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 4, .indirect_desc = c.indirect_desc});
  c.write(q.driver, mem);
  DescriptorChain chain;
  EXPECT_FALSE(q.device.pop(mem.map(), chain));
  EXPECT_TRUE(q.device.is_broken());
  EXPECT_EQ(q.device.error(), c.expected) << to_string(q.device.error());
  // A broken queue does nothing more.
  q.device.add_used(mem.map(), 0, 0);
  q.device.publish_used(mem.map());
  EXPECT_FALSE(q.device.must_signal_guest(mem.map()));
}

uint64_t buffer(TestMemory& mem) { return mem.alloc(64); }

INSTANTIATE_TEST_SUITE_P(
    Cases, PackedHostile,
    ::testing::Values(
        HostileCase{"BufferIdBeyondTheQueueSize", QueueError::kHeadOutOfRange, false,
                    [](const PackedDriverQueue& d, TestMemory& m) {
                      write_raw(d, 0, {buffer(m), 8, 4, avail_on_first_lap()});
                    }},
        HostileCase{"ChainThatNeverEnds", QueueError::kChainTooLong, false,
                    [](const PackedDriverQueue& d, TestMemory& m) {
                      const uint64_t b = buffer(m);
                      for (uint16_t s = 0; s < 4; ++s) write_raw(d, s, {b, 8, 0, avail_on_first_lap(kDescFlagNext)});
                    }},
        HostileCase{"IndirectWithNext", QueueError::kIndirectWithNext, true,
                    [](const PackedDriverQueue& d, TestMemory& m) {
                      write_raw(d, 0, {buffer(m), 16, 0, avail_on_first_lap(kDescFlagIndirect | kDescFlagNext)});
                    }},
        HostileCase{"IndirectAfterNext", QueueError::kIndirectWithNext, true,
                    [](const PackedDriverQueue& d, TestMemory& m) {
                      const uint64_t b = buffer(m);
                      write_raw(d, 1, {b, 16, 0, avail_on_first_lap(kDescFlagIndirect)});
                      write_raw(d, 0, {b, 8, 0, avail_on_first_lap(kDescFlagNext)});
                    }},
        HostileCase{"IndirectNotNegotiated", QueueError::kIndirectNotNegotiated, false,
                    [](const PackedDriverQueue& d, TestMemory& m) {
                      write_raw(d, 0, {buffer(m), 16, 0, avail_on_first_lap(kDescFlagIndirect)});
                    }},
        HostileCase{"IndirectTableOfOddLength", QueueError::kIndirectBadLength, true,
                    [](const PackedDriverQueue& d, TestMemory& m) {
                      write_raw(d, 0, {buffer(m), 17, 0, avail_on_first_lap(kDescFlagIndirect)});
                    }},
        HostileCase{"IndirectInsideAnIndirectTable", QueueError::kNestedIndirect, true,
                    [](const PackedDriverQueue& d, TestMemory& m) {
                      const uint64_t table = m.alloc(32);
                      const uint64_t b = buffer(m);
                      write_raw(d, 0, {table, 32, 0, avail_on_first_lap(kDescFlagIndirect)});
                      // Entries are written through the driver's view of guest memory.
                      std::byte* entries = m.host(table);
                      detail::ring_store<uint64_t>(entries, b, std::memory_order_relaxed);
                      detail::ring_store<uint32_t>(entries + 8, 8, std::memory_order_relaxed);
                      detail::ring_store<uint64_t>(entries + 16, b, std::memory_order_relaxed);
                      detail::ring_store<uint32_t>(entries + 24, 8, std::memory_order_relaxed);
                      detail::ring_store<uint16_t>(entries + 30, kDescFlagIndirect, std::memory_order_relaxed);
                    }},
        HostileCase{"IndirectTableOutsideMemory", QueueError::kIndirectNotMapped, true,
                    [](const PackedDriverQueue& d, TestMemory& m) {
                      write_raw(d, 0, {m.end() + 0x1000, 32, 0, avail_on_first_lap(kDescFlagIndirect)});
                    }},
        HostileCase{"ZeroLengthBuffer", QueueError::kZeroLengthBuffer, false,
                    [](const PackedDriverQueue& d, TestMemory& m) {
                      write_raw(d, 0, {buffer(m), 0, 0, avail_on_first_lap()});
                    }},
        HostileCase{"BufferOutsideMemory", QueueError::kBufferNotMapped, false,
                    [](const PackedDriverQueue& d, TestMemory& m) {
                      write_raw(d, 0, {m.end() + 0x1000, 8, 0, avail_on_first_lap()});
                    }},
        HostileCase{"BufferWrappingAddressSpace", QueueError::kBufferNotMapped, false,
                    [](const PackedDriverQueue& d, TestMemory&) {
                      write_raw(d, 0, {~uint64_t{0} - 4, 64, 0, avail_on_first_lap()});
                    }},
        HostileCase{"ReadableAfterWritable", QueueError::kReadableAfterWritable, false,
                    [](const PackedDriverQueue& d, TestMemory& m) {
                      const uint64_t b = buffer(m);
                      write_raw(d, 1, {b, 8, 1, avail_on_first_lap()});
                      write_raw(d, 0, {b, 8, 0, avail_on_first_lap(kDescFlagNext | kDescFlagWrite)});
                    }}),
    [](const ::testing::TestParamInfo<HostileCase>& param_info) { return param_info.param.name; });

TEST(PackedQueue, DirectionIsEnforced) {
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 4});
  const uint64_t buf = mem.alloc(64);
  const Buffer writable[] = {{buf, 8, true}};
  ASSERT_TRUE(q.driver.add_chain(writable));
  q.driver.publish();
  DescriptorChain chain;
  EXPECT_FALSE(q.device.pop(mem.map(), chain, ChainDirection::kReadableOnly));
  EXPECT_EQ(q.device.error(), QueueError::kUnexpectedWritable);
}

TEST(PackedQueue, BaseBeyondTheQueueSizeDoesNotStart) {
  TestMemory mem;
  const DriverOptions options{.size = 6};
  const uint64_t gpa = mem.alloc(PackedDriverQueue::required_bytes(options), 4096);
  PackedDriverQueue driver(options, DriverRingArea{mem.host(gpa), gpa, PackedDriverQueue::required_bytes(options)});
  DeviceQueue device("base");
  device.set_last_avail_index(0x8000 | 6);
  EXPECT_FALSE(device.start(driver.device_config(), mem.map()));
  EXPECT_EQ(device.error(), QueueError::kRingBaseOutOfRange);
}

TEST(PackedQueue, MisalignedOrUnmappedAreasDoNotStart) {
  TestMemory mem;
  const DriverOptions options{.size = 8};
  const uint64_t gpa = mem.alloc(PackedDriverQueue::required_bytes(options), 4096);
  PackedDriverQueue driver(options, DriverRingArea{mem.host(gpa), gpa, PackedDriverQueue::required_bytes(options)});
  QueueConfig misaligned = driver.device_config();
  misaligned.used_addr += 2;
  DeviceQueue a("misaligned");
  a.set_last_avail_index(driver.base());
  EXPECT_FALSE(a.start(misaligned, mem.map()));
  EXPECT_EQ(a.error(), QueueError::kRingMisaligned);
  QueueConfig unmapped = driver.device_config();
  unmapped.desc_addr = mem.end();
  DeviceQueue b("unmapped");
  b.set_last_avail_index(driver.base());
  EXPECT_FALSE(b.start(unmapped, mem.map()));
  EXPECT_EQ(b.error(), QueueError::kRingNotMapped);
  QueueConfig too_big = driver.device_config();
  too_big.size = kMaxQueueSize + 1;
  DeviceQueue c("size");
  EXPECT_FALSE(c.start(too_big, mem.map()));
  EXPECT_EQ(c.error(), QueueError::kBadQueueSize);
}

// ---------------------------------------------------------------------------------
// A hostile device: the driver frees nothing it did not hand out.

TEST(PackedQueueDriver, UsedIdNotPublishedStopsReaping) {
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 4});
  const uint64_t buf = mem.alloc(64);
  const Buffer one[] = {{buf, 8, true}};
  const auto published = q.driver.add_chain(one);
  q.driver.publish();
  const auto added = q.driver.add_chain(one);  // never published
  ASSERT_TRUE(published && added);
  write_raw(q.driver, 0, PackedDescriptor{0, 8, *added, packed_used_flags(true)});
  EXPECT_FALSE(q.driver.reap().has_value());
  EXPECT_TRUE(q.driver.device_misbehaved());
  EXPECT_EQ(q.driver.in_flight(), 2);
}

TEST(PackedQueueDriver, UsedIdOutOfRangeStopsReaping) {
  TestMemory mem;
  PackedQueuePair q(mem, DriverOptions{.size = 4, .in_order = true});
  const uint64_t buf = mem.alloc(64);
  const Buffer one[] = {{buf, 8, true}};
  ASSERT_TRUE(q.driver.add_chain(one));
  q.driver.publish();
  write_raw(q.driver, 0, PackedDescriptor{0, 8, 9, packed_used_flags(true)});
  EXPECT_FALSE(q.driver.reap().has_value());
  EXPECT_TRUE(q.driver.device_misbehaved());
}

// ---------------------------------------------------------------------------------
// Random chains through both sides: every byte, id and length checked, over many laps.

struct PackedPropertyParams {
  uint16_t size;
  bool event_idx;
  bool indirect;
  bool in_order;
};

class PackedQueueProperty : public ::testing::TestWithParam<PackedPropertyParams> {};

TEST_P(PackedQueueProperty, RandomChainsRoundTrip) {
  const PackedPropertyParams params = GetParam();
  for (uint32_t round = 0; round < 20; ++round) {
    const uint32_t seed = 1000u * params.size + round * 7u + (params.event_idx ? 1u : 0u) + (params.indirect ? 2u : 0u) +
                          (params.in_order ? 4u : 0u);
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " size " << params.size << " event_idx "
                                      << params.event_idx << " indirect " << params.indirect << " in_order "
                                      << params.in_order);
    std::mt19937 rng(seed);
    TestMemory mem(256 * 1024, 4);
    PackedQueuePair q(mem, DriverOptions{.size = params.size, .event_idx = params.event_idx,
                                         .indirect_desc = params.indirect, .max_indirect_entries = 8,
                                         .initial_index = static_cast<uint16_t>(rng()), .in_order = params.in_order});
    testing::RoundTripBooks books;
    for (int step = 0; step < 150; ++step) {
      const int to_add = static_cast<int>(rng() % 4);
      for (int i = 0; i < to_add; ++i) {
        const std::vector<Buffer> bufs = books.make_chain(mem, rng, std::min<size_t>(8, params.size));
        const bool indirect = params.indirect && rng() % 2 == 0;
        const auto id = q.driver.add_chain(bufs, indirect);
        if (!id) break;  // ring full
        books.added(*id);
      }
      if (rng() % 2 == 0) q.driver.publish();
      // Device: a burst, some of it sometimes given back (popped again next time).
      const int to_pop = static_cast<int>(rng() % 5);
      const bool give_back = rng() % 8 == 0;
      std::vector<DescriptorChain> burst(static_cast<size_t>(to_pop));
      const size_t popped = q.device.pop_burst(mem.map(), burst);
      size_t keep = popped;
      if (give_back && popped > 0) {
        keep = popped - 1 - rng() % popped;  // give back at least one, maybe all
        q.device.unpop(static_cast<uint16_t>(popped - keep));
      }
      for (size_t i = 0; i < keep; ++i) {
        uint32_t written = 0;
        ASSERT_TRUE(books.popped(burst[i], rng, written));
        q.device.add_used(mem.map(), burst[i].head, written);
      }
      if (rng() % 2 == 0) {
        q.device.publish_used(mem.map());
        (void)q.device.must_signal_guest(mem.map());
      }
      while (auto used = q.driver.reap()) ASSERT_TRUE(books.reaped(*used, mem));
      ASSERT_FALSE(q.driver.device_misbehaved());
    }
    EXPECT_FALSE(q.device.is_broken()) << to_string(q.device.error());
    EXPECT_GT(books.completed(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PackedQueueProperty,
                         ::testing::Values(PackedPropertyParams{1, false, false, false},
                                           PackedPropertyParams{3, true, true, false},
                                           PackedPropertyParams{8, false, true, true},
                                           PackedPropertyParams{100, true, false, true},
                                           PackedPropertyParams{256, true, true, false},
                                           PackedPropertyParams{256, false, false, true}));

}  // namespace
}  // namespace uvhost::virtio
