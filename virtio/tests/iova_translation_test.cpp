// iova_translation_test.cpp - VIRTIO_F_ACCESS_PLATFORM on the device side: the IOVA
// view of guest memory (GuestMemoryMap::iova_view) and a DeviceQueue that reports
// translation misses instead of breaking (translation_miss.h), split and packed.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "test_guest.h"
#include "uvhost/virtio/copy_bytes.h"
#include "uvhost/virtio/split_queue.h"
#include "uvhost/virtio/translation_miss.h"

namespace uvhost::virtio {
namespace {

using testing::pattern;
using testing::TestMemory;

// IOVAs are the guest physical addresses moved up by this much, so a test that mixed
// the two up would translate nothing.
constexpr uint64_t kIovaOffset = 0x40000000000;
constexpr uint64_t kPage = 4096;

uint64_t iova_of(uint64_t gpa) { return gpa + kIovaOffset; }

// The IOVA mapping of guest physical [gpa, gpa + size) in a TestMemory.
IovaMapping mapping_of(uint64_t gpa, uint64_t size, Access access = Access::kReadWrite) {
  return IovaMapping{iova_of(gpa), size, gpa + TestMemory::kFrontendDelta, access};
}

struct RecordedMiss {
  uint64_t iova;
  Access access;
  bool operator==(const RecordedMiss&) const = default;
};

class RecordingSink final : public TranslationMissSink {
 public:
  void translation_missed(uint64_t iova, Access access) noexcept override { misses.push_back({iova, access}); }
  std::vector<RecordedMiss> misses;
};

TEST(IovaView, TranslatesThroughMappingsAndMergesContiguousPages) {
  TestMemory mem;
  const uint64_t gpa = mem.alloc(3 * kPage, kPage);
  // Three pages mapped one by one, as an IOMMU's misses fill them: one range.
  const IovaMapping pages[] = {mapping_of(gpa, kPage), mapping_of(gpa + kPage, kPage),
                               mapping_of(gpa + 2 * kPage, kPage)};
  const auto view = mem.map().iova_view(pages);
  ASSERT_NE(view, nullptr);
  EXPECT_NE(view->generation(), mem.map().generation());
  IoVector out(4);
  ASSERT_EQ(view->translate(iova_of(gpa), 3 * kPage, out), TranslateStatus::kOk);
  ASSERT_EQ(out.size(), 1u) << "contiguous pages must merge into one piece";
  EXPECT_EQ(out[0].data, mem.host(gpa));
  EXPECT_EQ(view->translate_contiguous(iova_of(gpa) + 100, 2 * kPage, Access::kWrite), mem.host(gpa + 100));
  // The guest physical address is not an IOVA.
  EXPECT_EQ(view->translate_contiguous(gpa, 16), nullptr);
  EXPECT_EQ(view->first_unmapped(gpa, 16), gpa);
  // Dirty logging still speaks guest physical addresses.
  EXPECT_EQ(view->host_to_guest(mem.host(gpa + 5)), gpa + 5);
  // The frontend side is the memory table's.
  EXPECT_EQ(view->translate_frontend_contiguous(gpa + TestMemory::kFrontendDelta, 8), mem.host(gpa));
}

TEST(IovaView, GapsAreReportedAsTheFirstUnmappedAddress) {
  TestMemory mem;
  const uint64_t gpa = mem.alloc(3 * kPage, kPage);
  const IovaMapping pages[] = {mapping_of(gpa, kPage), mapping_of(gpa + 2 * kPage, kPage)};
  const auto view = mem.map().iova_view(pages);
  ASSERT_NE(view, nullptr);
  IoVector out(4);
  EXPECT_EQ(view->translate(iova_of(gpa), 3 * kPage, out), TranslateStatus::kUnmapped);
  EXPECT_EQ(out.size(), 0u) << "a failed translation appends nothing";
  EXPECT_EQ(view->first_unmapped(iova_of(gpa), 3 * kPage), iova_of(gpa + kPage));
  EXPECT_EQ(view->first_unmapped(iova_of(gpa) + 10, 100), std::nullopt);
  EXPECT_EQ(view->first_unmapped(iova_of(gpa + 2 * kPage), 2 * kPage), iova_of(gpa + 3 * kPage));
  // A mapping whose frontend addresses lie partly outside memory keeps only its inside.
  const IovaMapping past_the_end[] = {IovaMapping{0x1000, 2 * kPage, TestMemory::kFrontendDelta + mem.end() - kPage,
                                                  Access::kRead}};
  const auto clipped = mem.map().iova_view(past_the_end);
  ASSERT_NE(clipped, nullptr);
  EXPECT_NE(clipped->translate_contiguous(0x1000, kPage), nullptr);
  EXPECT_EQ(clipped->first_unmapped(0x1000, 2 * kPage), 0x1000 + kPage);
}

TEST(IovaView, TheAccessAMappingGrantsIsEnforced) {
  TestMemory mem;
  const uint64_t ro = mem.alloc(kPage, kPage), wo = mem.alloc(kPage, kPage);
  const IovaMapping mappings[] = {mapping_of(ro, kPage, Access::kRead), mapping_of(wo, kPage, Access::kWrite)};
  const auto view = mem.map().iova_view(mappings);
  ASSERT_NE(view, nullptr);
  IoVector out(4);
  EXPECT_EQ(view->translate(iova_of(ro), 64, out, Access::kRead), TranslateStatus::kOk);
  EXPECT_EQ(view->translate(iova_of(ro), 64, out, Access::kWrite), TranslateStatus::kNoAccess);
  EXPECT_EQ(view->translate(iova_of(wo), 64, out, Access::kWrite), TranslateStatus::kOk);
  EXPECT_EQ(view->translate(iova_of(wo), 64, out, Access::kRead), TranslateStatus::kNoAccess);
  EXPECT_EQ(view->translate(iova_of(ro), 64, out, Access::kReadWrite), TranslateStatus::kNoAccess);
  EXPECT_EQ(out.size(), 2u);
  // A range over both: neither access covers all of it (and they do not merge).
  EXPECT_EQ(view->translate(iova_of(ro) + kPage - 8, 16, out, Access::kRead), TranslateStatus::kNoAccess);
  EXPECT_EQ(view->translate_contiguous(iova_of(ro), 8, Access::kWrite), nullptr);
  GuestMemoryMap::RegionCursor cursor;
  EXPECT_FALSE(view->translate_within_region(iova_of(ro), 8, out, cursor, Access::kWrite));
  EXPECT_TRUE(view->translate_within_region(iova_of(ro), 8, out, cursor, Access::kRead));
  EXPECT_EQ(view->host_within_region(iova_of(ro), 8, cursor, Access::kWrite), nullptr) << "the cursor keeps the access";
  // A memory table grants both.
  EXPECT_EQ(mem.map().translate(ro, 64, out, Access::kReadWrite), TranslateStatus::kOk);
}

TEST(IovaView, OverlappingOrWrappingMappingsAreRefused) {
  TestMemory mem;
  const uint64_t gpa = mem.alloc(2 * kPage, kPage);
  const IovaMapping overlapping[] = {mapping_of(gpa, 2 * kPage), mapping_of(gpa + kPage, kPage)};
  EXPECT_EQ(mem.map().iova_view(overlapping), nullptr);
  const IovaMapping wrapping[] = {IovaMapping{~uint64_t{0} - 10, 100, gpa + TestMemory::kFrontendDelta}};
  EXPECT_EQ(mem.map().iova_view(wrapping), nullptr);
  const IovaMapping empty[] = {IovaMapping{0x1000, 0, gpa + TestMemory::kFrontendDelta}};
  EXPECT_EQ(mem.map().iova_view(empty), nullptr);
}

// A view keeps the memory table's mappings alive: the table can go (SET_MEM_TABLE made
// a new one) while a reader still translates through the view.
TEST(IovaView, OutlivesTheMemoryTableItWasMadeFrom) {
  const int fd = ::memfd_create("iova-view-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 64 * 1024), 0);
  std::vector<std::unique_ptr<MemoryRegion>> regions;
  regions.push_back(MemoryRegion::map_fd(RegionSpec{0x100000, 64 * 1024, 0x7f0000100000, 0, fd}));
  ASSERT_NE(regions.back(), nullptr);
  auto table = GuestMemoryMap::create(std::move(regions));
  ASSERT_NE(table, nullptr);
  const IovaMapping mapping[] = {IovaMapping{0x5000, 64 * 1024, 0x7f0000100000, Access::kReadWrite}};
  const auto view = table->iova_view(mapping);
  ASSERT_NE(view, nullptr);
  table.reset();  // munmaps nothing yet: the view shares the region
  std::byte* host = view->translate_contiguous(0x5000 + 1000, 8, Access::kWrite);
  ASSERT_NE(host, nullptr);
  std::memset(host, 0x5a, 8);
  EXPECT_EQ(host[7], std::byte{0x5a});
  EXPECT_EQ(view->host_to_guest(host), 0x100000u + 1000);
}

// A split ring driven with IOVAs: the driver writes IOVAs into its ring, the device
// starts with the ring's IOVAs and a sink for its misses.
struct IovaQueue {
  IovaQueue(TestMemory& memory, const DriverOptions& options)
      : mem(memory),
        ring_gpa(memory.alloc(DriverQueue::required_bytes(options), kPage)),
        ring_bytes(DriverQueue::required_bytes(options)),
        driver(options, DriverRingArea{memory.host(ring_gpa), ring_gpa, ring_bytes}),
        device("iova-queue") {
    config = driver.device_config();
    config.desc_addr += kIovaOffset;
    config.avail_addr += kIovaOffset;
    config.used_addr += kIovaOffset;
    config.translation_misses = &sink;
  }
  IovaMapping ring_mapping() const { return mapping_of(ring_gpa, ring_bytes); }

  TestMemory& mem;
  uint64_t ring_gpa;
  size_t ring_bytes;
  DriverQueue driver;
  DeviceQueue device;
  RecordingSink sink;
  QueueConfig config;
};

TEST(IovaQueue, RingsWithoutTranslationAreAskedForAndTheQueueStartsWhenTheyCome) {
  TestMemory mem;
  // The ring continues at index 5 (a previous device used it): used->idx must be read
  // when the rings resolve, not at start() when they cannot be read.
  IovaQueue q(mem, DriverOptions{.size = 8, .initial_index = 5});
  q.device.set_last_avail_index(5);
  const auto empty = mem.map().iova_view({});
  ASSERT_TRUE(q.device.start(q.config, *empty)) << "a miss is not an error";
  EXPECT_FALSE(q.device.is_broken());
  const std::vector<RecordedMiss> rings = {{q.config.desc_addr, Access::kRead},
                                           {q.config.avail_addr, Access::kRead},
                                           {q.config.used_addr, Access::kWrite}};
  EXPECT_EQ(q.sink.misses, rings);
  DescriptorChain chain;
  EXPECT_EQ(q.device.available(*empty), 0);
  EXPECT_FALSE(q.device.pop(*empty, chain));
  EXPECT_FALSE(q.device.is_broken());

  const uint64_t buf = mem.alloc(64);
  const DriverQueue::Buffer out[] = {{iova_of(buf), 64, false}};
  ASSERT_TRUE(q.driver.add_chain(out).has_value());
  q.driver.publish();
  const IovaMapping both[] = {q.ring_mapping(), mapping_of(buf, 64, Access::kRead)};
  const auto view = mem.map().iova_view(both);
  ASSERT_TRUE(q.device.pop(*view, chain));
  EXPECT_EQ(q.device.used_index(), 5u);
  EXPECT_EQ(chain.readable.total_bytes(), 64u);
  EXPECT_EQ(chain.readable[0].data, mem.host(buf));
  q.device.add_used(*view, chain.head, 0);
  q.device.publish_used(*view);
  const auto used = q.driver.reap();
  ASSERT_TRUE(used.has_value());
  EXPECT_EQ(used->id, chain.head);
}

TEST(IovaQueue, ABufferWithoutTranslationStaysAvailableUntilItIsMapped) {
  TestMemory mem;
  IovaQueue q(mem, DriverOptions{.size = 8});
  const uint64_t first = mem.alloc(100), buf = mem.alloc(2 * kPage, kPage);
  const auto payload = pattern(2 * kPage, 7);
  mem.write(buf, payload);
  const DriverQueue::Buffer one[] = {{iova_of(first), 100, true}};
  const DriverQueue::Buffer two[] = {{iova_of(buf), 2 * kPage, true}};
  ASSERT_TRUE(q.driver.add_chain(one).has_value());
  const auto head = q.driver.add_chain(two);
  ASSERT_TRUE(head.has_value());
  q.driver.publish();

  // The ring and the first buffer, and only the first page of the second.
  const IovaMapping partial[] = {q.ring_mapping(), mapping_of(first, 100), mapping_of(buf, kPage)};
  const auto view = mem.map().iova_view(partial);
  ASSERT_TRUE(q.device.start(q.config, *view));
  EXPECT_TRUE(q.sink.misses.empty());
  DescriptorChain chains[2];
  ASSERT_EQ(q.device.pop_burst(*view, chains, ChainDirection::kWritableOnly), 1u) << "the first chain, not the second";
  EXPECT_FALSE(q.device.is_broken());
  ASSERT_EQ(q.sink.misses.size(), 1u);
  EXPECT_EQ(q.sink.misses[0], (RecordedMiss{iova_of(buf + kPage), Access::kWrite})) << "the first unmapped byte";
  EXPECT_EQ(q.device.last_avail_index(), 1u) << "the missed chain is not consumed";
  // Retried under the same view: the same miss again (the sink decides what to send).
  EXPECT_EQ(q.device.pop_burst(*view, chains, ChainDirection::kWritableOnly), 0u);
  EXPECT_EQ(q.sink.misses.size(), 2u);
  // A datapath that found the ring dry re-enables kicks and re-checks: under this map
  // there is nothing it can take, so it must not be told to try again (it would spin).
  EXPECT_FALSE(q.device.enable_guest_kicks(*view));
  EXPECT_FALSE(q.device.enable_guest_kicks_for_more(*view, 1));
  // More buffers arriving do not change that either; a new map does.
  const DriverQueue::Buffer three[] = {{iova_of(first), 100, true}};
  ASSERT_TRUE(q.driver.add_chain(three).has_value());
  q.driver.publish();
  EXPECT_FALSE(q.device.enable_guest_kicks(*view));

  const IovaMapping full[] = {q.ring_mapping(), mapping_of(first, 100), mapping_of(buf, 2 * kPage)};
  const auto updated = mem.map().iova_view(full);
  EXPECT_TRUE(q.device.enable_guest_kicks(*updated));
  ASSERT_EQ(q.device.pop_burst(*updated, std::span(chains, 1), ChainDirection::kWritableOnly), 1u);
  EXPECT_EQ(chains[0].head, *head);
  ASSERT_EQ(chains[0].writable.size(), 1u);
  EXPECT_EQ(chains[0].writable[0].data, mem.host(buf));
  EXPECT_EQ(q.sink.misses.size(), 2u);
}

TEST(IovaQueue, AnIndirectTableWithoutTranslationIsAMissForReading) {
  TestMemory mem;
  IovaQueue q(mem, DriverOptions{.size = 8, .indirect_desc = true});
  const uint64_t buf = mem.alloc(64);
  const DriverQueue::Buffer bufs[] = {{iova_of(buf), 64, false}, {iova_of(buf), 64, false}};
  ASSERT_TRUE(q.driver.add_chain(bufs, /*indirect=*/true).has_value());
  q.driver.publish();
  const IovaMapping rings[] = {q.ring_mapping(), mapping_of(buf, 64)};
  const auto view = mem.map().iova_view(rings);
  ASSERT_TRUE(q.device.start(q.config, *view));
  DescriptorChain chain;
  EXPECT_FALSE(q.device.pop(*view, chain));
  EXPECT_FALSE(q.device.is_broken());
  ASSERT_EQ(q.sink.misses.size(), 1u);
  EXPECT_EQ(q.sink.misses[0].access, Access::kRead);
  EXPECT_NE(q.sink.misses[0].iova, iova_of(buf)) << "the table's address, not the buffer's";
}

// A mapping that exists but does not grant the access is the guest's error: a device
// that wrote into a read-only mapping would do what the IOMMU is there to forbid.
TEST(IovaQueue, AWritableBufferInAReadOnlyMappingBreaksTheQueue) {
  TestMemory mem;
  IovaQueue q(mem, DriverOptions{.size = 8});
  const uint64_t buf = mem.alloc(64);
  const DriverQueue::Buffer in[] = {{iova_of(buf), 64, true}};
  ASSERT_TRUE(q.driver.add_chain(in).has_value());
  q.driver.publish();
  const IovaMapping mappings[] = {q.ring_mapping(), mapping_of(buf, 64, Access::kRead)};
  const auto view = mem.map().iova_view(mappings);
  ASSERT_TRUE(q.device.start(q.config, *view));
  DescriptorChain chain;
  EXPECT_FALSE(q.device.pop(*view, chain));
  EXPECT_TRUE(q.device.is_broken());
  EXPECT_EQ(q.device.error(), QueueError::kBufferNotMapped);
  EXPECT_TRUE(q.sink.misses.empty());
}

TEST(IovaQueue, AUsedRingInAReadOnlyMappingBreaksTheQueue) {
  TestMemory mem;
  IovaQueue q(mem, DriverOptions{.size = 8});
  const IovaMapping read_only[] = {mapping_of(q.ring_gpa, q.ring_bytes, Access::kRead)};
  const auto view = mem.map().iova_view(read_only);
  EXPECT_FALSE(q.device.start(q.config, *view));
  EXPECT_EQ(q.device.error(), QueueError::kRingNotMapped);
}

TEST(IovaQueue, WithoutASinkAnUnmappedBufferBreaksTheQueueAsBefore) {
  TestMemory mem;
  IovaQueue q(mem, DriverOptions{.size = 8});
  q.config.translation_misses = nullptr;
  const DriverQueue::Buffer out[] = {{iova_of(mem.alloc(64)), 64, false}};
  ASSERT_TRUE(q.driver.add_chain(out).has_value());
  q.driver.publish();
  const IovaMapping rings[] = {q.ring_mapping()};
  const auto view = mem.map().iova_view(rings);
  ASSERT_TRUE(q.device.start(q.config, *view));
  DescriptorChain chain;
  EXPECT_FALSE(q.device.pop(*view, chain));
  EXPECT_EQ(q.device.error(), QueueError::kBufferNotMapped);
}

TEST(IovaQueue, PackedRingMissesAndResumes) {
  TestMemory mem;
  const DriverOptions options{.size = 8};
  const uint64_t ring_gpa = mem.alloc(PackedDriverQueue::required_bytes(options), kPage);
  const size_t ring_bytes = PackedDriverQueue::required_bytes(options);
  PackedDriverQueue driver(options, DriverRingArea{mem.host(ring_gpa), ring_gpa, ring_bytes});
  RecordingSink sink;
  QueueConfig config = driver.device_config();
  config.desc_addr += kIovaOffset;
  config.avail_addr += kIovaOffset;
  config.used_addr += kIovaOffset;
  config.translation_misses = &sink;
  DeviceQueue device("iova-packed");
  device.set_last_avail_index(driver.base());

  const auto empty = mem.map().iova_view({});
  ASSERT_TRUE(device.start(config, *empty));
  ASSERT_EQ(sink.misses.size(), 3u);
  EXPECT_EQ(sink.misses[0], (RecordedMiss{config.desc_addr, Access::kReadWrite}));

  const uint64_t buf = mem.alloc(256);
  const auto payload = pattern(256, 3);
  mem.write(buf, payload);
  const PackedDriverQueue::Buffer out[] = {{iova_of(buf), 256, false}};
  ASSERT_TRUE(driver.add_chain(out).has_value());
  driver.publish();
  const IovaMapping ring_only[] = {mapping_of(ring_gpa, ring_bytes)};
  const auto rings = mem.map().iova_view(ring_only);
  DescriptorChain chain;
  EXPECT_FALSE(device.pop(*rings, chain));
  EXPECT_FALSE(device.is_broken());
  EXPECT_EQ(sink.misses.back(), (RecordedMiss{iova_of(buf), Access::kRead}));
  EXPECT_FALSE(device.enable_guest_kicks(*rings)) << "nothing to take before the map changes";

  const IovaMapping all[] = {mapping_of(ring_gpa, ring_bytes), mapping_of(buf, 256, Access::kRead)};
  const auto view = mem.map().iova_view(all);
  ASSERT_TRUE(device.pop(*view, chain));
  std::vector<std::byte> got(256);
  EXPECT_EQ(copy_from_pieces(chain.readable.pieces(), 0, got), 256u);
  EXPECT_EQ(got, payload);
  device.add_used(*view, chain.head, 0);
  device.publish_used(*view);
  EXPECT_TRUE(driver.reap().has_value());
}

}  // namespace
}  // namespace uvhost::virtio
