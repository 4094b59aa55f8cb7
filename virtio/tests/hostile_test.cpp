// hostile_test.cpp - a guest that writes anything. Every case must give one clear error
// log line, break only that queue (later pops and used writes ignored until reset), and
// never crash, touch memory outside the mapped regions (run under ASan), or hang.
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "test_guest.h"
#include "uvhost/virtio/detail/ring_access.h"
#include "uvhost/virtio/net_rx.h"

namespace uvhost::virtio {
namespace {

using testing::QueuePair;
using testing::TestMemory;

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(16);
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("hostile", sink_));
  }
  void TearDown() override { spdlog::set_default_logger(previous_); }

  QueuePair& queue(uint16_t size = 8, bool indirect = true) {
    pair_ = std::make_unique<QueuePair>(mem_, DriverOptions{.size = size, .indirect_desc = indirect});
    return *pair_;
  }
  // Makes descriptor `head` the one available entry.
  void offer(uint16_t head) {
    pair_->driver.write_avail_entry(0, head);
    pair_->driver.store_avail_index(1);
  }
  uint64_t buffer(size_t len) { return mem_.alloc(len); }

  // The queue must refuse the chain with `error`, say so in the log, and stay broken.
  void expect_broken(QueueError error, ChainDirection direction = ChainDirection::kAny) {
    DeviceQueue& device = pair_->device;
    DescriptorChain chain;
    EXPECT_FALSE(device.pop(mem_.map(), chain, direction));
    expect_broken_state(error);
  }
  void expect_broken_state(QueueError error) {
    DeviceQueue& device = pair_->device;
    ASSERT_TRUE(device.is_broken());
    EXPECT_EQ(device.error(), error) << "got: " << to_string(device.error());
    const auto lines = sink_->last_formatted(16);
    ASSERT_EQ(lines.size(), 1u) << "exactly one error line";
    EXPECT_NE(lines[0].find(std::string(to_string(error))), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("test-queue"), std::string::npos) << "the line names the queue: " << lines[0];
    // Broken: everything is ignored until reset.
    DescriptorChain chain;
    EXPECT_FALSE(device.pop(mem_.map(), chain));
    EXPECT_EQ(device.available(mem_.map()), 0);
    const uint16_t used_before = detail::ring_load<uint16_t>(pair_->driver.used_ring() + 2, std::memory_order_relaxed);
    device.add_used(mem_.map(), 0, 1);
    device.publish_used(mem_.map());
    EXPECT_EQ(detail::ring_load<uint16_t>(pair_->driver.used_ring() + 2, std::memory_order_relaxed), used_before);
    EXPECT_FALSE(device.must_signal_guest(mem_.map()));
    EXPECT_FALSE(device.enable_guest_kicks(mem_.map()));
    // A reset brings it back.
    device.reset();
    EXPECT_FALSE(device.is_broken());
  }

  TestMemory mem_{1 << 20, 1};
  std::unique_ptr<QueuePair> pair_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST_F(Hostile, ChainThatLoops) {
  auto& q = queue();
  const uint64_t b = buffer(16);
  q.driver.write_descriptor(0, {b, 16, kDescFlagNext, 1});
  q.driver.write_descriptor(1, {b, 16, kDescFlagNext, 0});
  offer(0);
  expect_broken(QueueError::kChainTooLong);
}

TEST_F(Hostile, DescriptorPointingToItself) {
  auto& q = queue();
  q.driver.write_descriptor(3, {buffer(16), 16, kDescFlagNext, 3});
  offer(3);
  expect_broken(QueueError::kChainTooLong);
}

TEST_F(Hostile, IndirectTableThatLoops) {
  auto& q = queue();
  const uint64_t table = buffer(32), b = buffer(16);
  detail::store_descriptor(mem_.host(table), {b, 16, kDescFlagNext, 1});
  detail::store_descriptor(mem_.host(table + 16), {b, 16, kDescFlagNext, 0});
  q.driver.write_descriptor(0, {table, 32, kDescFlagIndirect, 0});
  offer(0);
  expect_broken(QueueError::kChainTooLong);
}

TEST_F(Hostile, IndirectInsideIndirect) {
  auto& q = queue();
  const uint64_t outer = buffer(16), inner = buffer(16);
  detail::store_descriptor(mem_.host(inner), {buffer(16), 16, 0, 0});
  detail::store_descriptor(mem_.host(outer), {inner, 16, kDescFlagIndirect, 0});
  q.driver.write_descriptor(0, {outer, 16, kDescFlagIndirect, 0});
  offer(0);
  expect_broken(QueueError::kNestedIndirect);
}

TEST_F(Hostile, IndirectTableLengthNotAMultipleOf16) {
  auto& q = queue();
  q.driver.write_descriptor(0, {buffer(64), 17, kDescFlagIndirect, 0});
  offer(0);
  expect_broken(QueueError::kIndirectBadLength);
}

TEST_F(Hostile, IndirectTableLengthZero) {
  auto& q = queue();
  q.driver.write_descriptor(0, {buffer(64), 0, kDescFlagIndirect, 0});
  offer(0);
  expect_broken(QueueError::kIndirectBadLength);
}

TEST_F(Hostile, IndirectTableLongerThanTheQueue) {
  auto& q = queue(8);
  q.driver.write_descriptor(0, {buffer(16 * 9), 16 * 9, kDescFlagIndirect, 0});
  offer(0);
  expect_broken(QueueError::kIndirectBadLength);
}

TEST_F(Hostile, IndirectWithNext) {
  auto& q = queue();
  const uint64_t table = buffer(16);
  detail::store_descriptor(mem_.host(table), {buffer(16), 16, 0, 0});
  q.driver.write_descriptor(0, {table, 16, kDescFlagIndirect | kDescFlagNext, 1});
  offer(0);
  expect_broken(QueueError::kIndirectWithNext);
}

TEST_F(Hostile, IndirectWithoutTheFeature) {
  auto& q = queue(8, /*indirect=*/false);
  const uint64_t table = buffer(16);
  detail::store_descriptor(mem_.host(table), {buffer(16), 16, 0, 0});
  q.driver.write_descriptor(0, {table, 16, kDescFlagIndirect, 0});
  offer(0);
  expect_broken(QueueError::kIndirectNotNegotiated);
}

TEST_F(Hostile, IndirectTableOutsideMemory) {
  auto& q = queue();
  q.driver.write_descriptor(0, {mem_.end() - 8, 32, kDescFlagIndirect, 0});
  offer(0);
  expect_broken(QueueError::kIndirectNotMapped);
}

TEST_F(Hostile, IndirectTableAddressWraps) {
  auto& q = queue();
  q.driver.write_descriptor(0, {kMax64 - 15, 32, kDescFlagIndirect, 0});
  offer(0);
  expect_broken(QueueError::kIndirectNotMapped);
}

TEST_F(Hostile, IndirectNextOutOfRange) {
  auto& q = queue();
  const uint64_t table = buffer(32);
  detail::store_descriptor(mem_.host(table), {buffer(16), 16, kDescFlagNext, 2});  // table has 2 entries
  q.driver.write_descriptor(0, {table, 32, kDescFlagIndirect, 0});
  offer(0);
  expect_broken(QueueError::kNextOutOfRange);
}

TEST_F(Hostile, BufferOutsideEveryRegion) {
  auto& q = queue();
  q.driver.write_descriptor(0, {0xdead00000000, 64, 0, 0});
  offer(0);
  expect_broken(QueueError::kBufferNotMapped);
}

TEST_F(Hostile, BufferRunningPastTheEndOfMemory) {
  auto& q = queue();
  q.driver.write_descriptor(0, {mem_.end() - 10, 11, 0, 0});
  offer(0);
  expect_broken(QueueError::kBufferNotMapped);
}

TEST_F(Hostile, BufferAddressWraps) {
  auto& q = queue();
  q.driver.write_descriptor(0, {kMax64 - 3, 16, 0, 0});
  offer(0);
  expect_broken(QueueError::kBufferNotMapped);
}

TEST_F(Hostile, ZeroLengthBuffer) {
  auto& q = queue();
  q.driver.write_descriptor(0, {buffer(16), 0, 0, 0});
  offer(0);
  expect_broken(QueueError::kZeroLengthBuffer);
}

TEST_F(Hostile, AbsurdLength) {
  auto& q = queue();
  q.driver.write_descriptor(0, {buffer(16), 0xffffffffu, 0, 0});
  offer(0);
  expect_broken(QueueError::kBufferNotMapped);
}

TEST_F(Hostile, ChainLargerThan4GiB) {
  auto& q = queue();
  q.driver.write_descriptor(0, {buffer(4096), 4096, kDescFlagNext, 1});
  q.driver.write_descriptor(1, {TestMemory::kGuestBase, 0xffffffffu, 0, 0});
  offer(0);
  expect_broken(QueueError::kChainTooLarge);
}

TEST_F(Hostile, ChainWithTooManyPieces) {
  auto& q = queue(2048, false);
  const uint64_t b = buffer(16);
  for (uint16_t i = 0; i < 1100; ++i) {
    q.driver.write_descriptor(i, {b, 1, kDescFlagNext, static_cast<uint16_t>(i + 1)});
  }
  q.driver.write_descriptor(1100, {b, 1, 0, 0});
  offer(0);
  expect_broken(QueueError::kChainTooLarge);
}

TEST_F(Hostile, AvailIndexJumpsByMoreThanTheQueueSize) {
  auto& q = queue(8);
  q.driver.store_avail_index(9);
  DescriptorChain chain;
  EXPECT_EQ(q.device.available(mem_.map()), 0);
  expect_broken_state(QueueError::kAvailIndexJump);
}

TEST_F(Hostile, AvailIndexMovingBackwards) {
  auto& q = queue(8);
  q.driver.store_avail_index(0xffff);  // "-1": a jump of 65535
  expect_broken(QueueError::kAvailIndexJump);
}

TEST_F(Hostile, HeadOutOfRange) {
  queue(8);
  offer(8);
  expect_broken(QueueError::kHeadOutOfRange);
}

// The receive-ring hint reads a head the guest wrote without checking it: it must
// neither fault nor change anything; the pop that follows finds the bad head.
TEST_F(Hostile, PrefetchOfAnOutOfRangeHeadIsHarmless) {
  auto& q = queue(8);
  pair_->driver.write_avail_entry(0, 0xffff);
  pair_->driver.store_avail_index(1);
  ASSERT_EQ(q.device.available(mem_.map()), 1);  // the chain is now known to be available
  q.device.prefetch_next_chain(mem_.map());
  EXPECT_FALSE(q.device.is_broken());
  EXPECT_EQ(q.device.last_avail_index(), 0);
  expect_broken(QueueError::kHeadOutOfRange);
}

TEST_F(Hostile, NextOutOfRange) {
  auto& q = queue(8);
  q.driver.write_descriptor(0, {buffer(16), 16, kDescFlagNext, 8});
  offer(0);
  expect_broken(QueueError::kNextOutOfRange);
}

TEST_F(Hostile, ReadableAfterWritable) {
  auto& q = queue();
  q.driver.write_descriptor(0, {buffer(16), 16, kDescFlagWrite | kDescFlagNext, 1});
  q.driver.write_descriptor(1, {buffer(16), 16, 0, 0});
  offer(0);
  expect_broken(QueueError::kReadableAfterWritable);
}

TEST_F(Hostile, WritableWhereReadableIsNeeded) {
  auto& q = queue();
  q.driver.write_descriptor(0, {buffer(16), 16, kDescFlagNext, 1});
  q.driver.write_descriptor(1, {buffer(16), 16, kDescFlagWrite, 0});
  offer(0);
  expect_broken(QueueError::kUnexpectedWritable, ChainDirection::kReadableOnly);
}

TEST_F(Hostile, ReadableWhereWritableIsNeeded) {
  auto& q = queue();
  q.driver.write_descriptor(0, {buffer(16), 16, 0, 0});
  offer(0);
  expect_broken(QueueError::kUnexpectedReadable, ChainDirection::kWritableOnly);
}

TEST_F(Hostile, ReadableBufferOfferedForReceive) {
  auto& q = queue();
  q.driver.write_descriptor(0, {buffer(2048), 2048, 0, 0});
  offer(0);
  NetReceiveWriter writer(RxOptions{.mrg_rxbuf = true});
  const std::vector<std::byte> frame(64);
  EXPECT_EQ(writer.deliver(q.device, mem_.map(), NetHeader{}, frame).status, RxStatus::kQueueBroken);
  expect_broken_state(QueueError::kUnexpectedReadable);
}

TEST_F(Hostile, MergeableReceiveBufferSmallerThanTheHeader) {
  auto& q = queue();
  q.driver.write_descriptor(0, {buffer(8), 8, kDescFlagWrite, 0});
  offer(0);
  NetReceiveWriter writer(RxOptions{.mrg_rxbuf = true});
  const std::vector<std::byte> frame(64);
  EXPECT_EQ(writer.deliver(q.device, mem_.map(), NetHeader{}, frame).status, RxStatus::kQueueBroken);
  expect_broken_state(QueueError::kRxBufferTooSmall);
}

// Not enough receive buffers for a packet's num_buffers is back-pressure, not a spec
// violation: nothing is written to the used ring, the popped chains are given back, the
// queue stays usable, and the packet goes in once the driver posts more buffers.
TEST_F(Hostile, MergeableReceiveWithTooFewBuffers) {
  auto& q = queue(8);
  for (uint16_t i = 0; i < 2; ++i) {
    const DriverQueue::Buffer b{buffer(256), 256, true};
    ASSERT_TRUE(q.driver.add_chain({&b, 1}).has_value());
  }
  q.driver.publish();
  NetReceiveWriter writer(RxOptions{.mrg_rxbuf = true});
  const std::vector<std::byte> frame(1000);  // needs 4 chains of 256
  const RxResult r = writer.deliver(q.device, mem_.map(), NetHeader{}, frame);
  EXPECT_EQ(r.status, RxStatus::kNoBuffers);
  EXPECT_FALSE(q.device.is_broken());
  EXPECT_EQ(q.device.used_index(), 0) << "no used element for a packet that did not fit";
  EXPECT_EQ(q.device.last_avail_index(), 0) << "chains given back";
  for (uint16_t i = 0; i < 2; ++i) {
    const DriverQueue::Buffer b{buffer(256), 256, true};
    ASSERT_TRUE(q.driver.add_chain({&b, 1}).has_value());
  }
  q.driver.publish();
  const RxResult retry = writer.deliver(q.device, mem_.map(), NetHeader{}, frame);
  EXPECT_EQ(retry.status, RxStatus::kDelivered);
  EXPECT_EQ(retry.buffers, 4);
}

// Ring configuration errors (from the frontend's SET_VRING_* messages).
class HostileRing : public Hostile {
 protected:
  void start_with(QueueConfig config, QueueError error) {
    auto& q = queue(8);
    q.device.reset();
    EXPECT_FALSE(q.device.start(config, mem_.map()));
    expect_broken_state(error);
  }
  QueueConfig good() {
    auto& q = queue(8);
    return q.driver.device_config();
  }
};

TEST_F(HostileRing, QueueSizeNotAPowerOfTwo) {
  QueueConfig c = good();
  c.size = 6;
  start_with(c, QueueError::kBadQueueSize);
}

TEST_F(HostileRing, QueueSizeTooLarge) {
  QueueConfig c = good();
  c.size = 65536;
  start_with(c, QueueError::kBadQueueSize);
}

TEST_F(HostileRing, DescriptorTableMisaligned) {
  QueueConfig c = good();
  c.desc_addr += 8;
  start_with(c, QueueError::kRingMisaligned);
}

TEST_F(HostileRing, AvailRingMisaligned) {
  QueueConfig c = good();
  c.avail_addr += 1;
  start_with(c, QueueError::kRingMisaligned);
}

TEST_F(HostileRing, UsedRingMisaligned) {
  QueueConfig c = good();
  c.used_addr += 2;
  start_with(c, QueueError::kRingMisaligned);
}

TEST_F(HostileRing, RingOutsideGuestMemory) {
  QueueConfig c = good();
  c.used_addr = 0x4000'0000'0000;
  start_with(c, QueueError::kRingNotMapped);
}

TEST_F(HostileRing, RingRunningPastTheEndOfMemory) {
  QueueConfig c = good();
  c.desc_addr = mem_.end() - 64;  // 8 descriptors need 128 bytes
  start_with(c, QueueError::kRingNotMapped);
}

TEST_F(HostileRing, RingAddressWraps) {
  QueueConfig c = good();
  c.avail_addr = kMax64 - 1;
  start_with(c, QueueError::kRingNotMapped);
}

TEST_F(HostileRing, FrontendRingAddressNotMapped) {
  QueueConfig c = good();
  c.address_space = AddressSpace::kFrontendVirtual;  // guest addresses are not frontend ones
  start_with(c, QueueError::kRingNotMapped);
}

// Guest memory behind a started queue disappears (a new SET_MEM_TABLE without it).
TEST_F(Hostile, RingsGoneAfterMemoryTableChange) {
  auto& q = queue(8);
  std::vector<std::byte> other(4096);
  std::vector<std::unique_ptr<MemoryRegion>> regions;
  regions.push_back(MemoryRegion::borrow(0x100000000, 0x100000000, other));
  auto map = GuestMemoryMap::create(std::move(regions));
  DescriptorChain chain;
  EXPECT_FALSE(q.device.pop(*map, chain));
  expect_broken_state(QueueError::kRingNotMapped);
}

}  // namespace
}  // namespace uvhost::virtio
