// virtio_micro.cpp - cost of the device-side virtqueue walk, single thread.
//
// One benchmark iteration = one batch of 128 64-byte transmit packets: the "driver"
// only advances avail->idx (the avail ring permanently holds the same heads), the
// device pops and validates each chain, copies the 12-byte virtio-net header and the
// 64-byte frame out, adds a used element; per batch it publishes used->idx and asks
// whether to signal the guest. Counters: time_per_packet (CPU seconds, SI prefix), and
// descriptors per second.
// Layouts: 0 = one descriptor per packet (header + frame together), 1 = two descriptors
// (header, frame), 2 = one indirect descriptor pointing at a two-entry table.
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

#include "uvhost/virtio/detail/ring_access.h"
#include "uvhost/virtio/guest_memory.h"
#include "uvhost/virtio/net_header.h"
#include "uvhost/virtio/split_queue.h"

namespace {

using namespace uvhost::virtio;

constexpr uint16_t kQueueSize = 256;
constexpr uint16_t kBatch = 128;
constexpr uint64_t kGuestBase = 0x100000;
constexpr size_t kFrame = 64;
constexpr size_t kAvail = 4096, kUsed = 8192, kBuffers = 16384, kTables = 65536;

struct StaticRing {
  std::vector<std::byte> bytes = std::vector<std::byte>(1 << 20);
  std::unique_ptr<GuestMemoryMap> memory;
  DeviceQueue queue{"bench"};
  uint16_t avail_idx = 0;
  uint32_t descriptors_per_packet = 0;

  explicit StaticRing(int layout) {
    std::vector<std::unique_ptr<MemoryRegion>> regions;
    regions.push_back(MemoryRegion::borrow(kGuestBase, kGuestBase, bytes));
    memory = GuestMemoryMap::create(std::move(regions));
    std::byte* base = bytes.data();
    QueueConfig config{kQueueSize, kGuestBase, kGuestBase + kAvail, kGuestBase + kUsed};
    config.indirect_desc = true;
    for (uint16_t c = 0; c < kBatch; ++c) {
      const uint64_t buffer = kGuestBase + kBuffers + uint64_t{c} * 128;
      const Descriptor header{buffer, kNetHeaderSizeMrg, kDescFlagNext, 0};
      const Descriptor frame{buffer + 16, kFrame, 0, 0};
      uint16_t head = c;
      if (layout == 0) {
        detail::store_descriptor(base + size_t{c} * 16, Descriptor{buffer, kNetHeaderSizeMrg + kFrame, 0, 0});
        descriptors_per_packet = 1;
      } else if (layout == 1) {
        head = static_cast<uint16_t>(2 * c);
        Descriptor first = header;
        first.next = static_cast<uint16_t>(head + 1);
        detail::store_descriptor(base + size_t{head} * 16, first);
        detail::store_descriptor(base + size_t{head + 1u} * 16, frame);
        descriptors_per_packet = 2;
      } else {
        const uint64_t table = kTables + uint64_t{c} * 32;
        Descriptor first = header;
        first.next = 1;
        detail::store_descriptor(base + table, first);
        detail::store_descriptor(base + table + 16, frame);
        detail::store_descriptor(base + size_t{c} * 16, Descriptor{kGuestBase + table, 32, kDescFlagIndirect, 0});
        descriptors_per_packet = 3;  // the table pointer + two entries
      }
      detail::ring_store<uint16_t>(base + kAvail + avail_entry_offset(c), head, std::memory_order_relaxed);
      detail::ring_store<uint16_t>(base + kAvail + avail_entry_offset(c + kBatch), head, std::memory_order_relaxed);
    }
    if (!queue.start(config, *memory)) std::abort();
  }

  void driver_offers_batch() {
    avail_idx = static_cast<uint16_t>(avail_idx + kBatch);
    detail::ring_store<uint16_t>(bytes.data() + kAvail + kRingIdxOffset, avail_idx, std::memory_order_release);
  }
};

void BM_DeviceWalk64ByteTx(benchmark::State& state) {
  StaticRing ring(static_cast<int>(state.range(0)));
  // Bursts of 64 chains, as the datapath pops them (DeviceQueue::pop_burst).
  std::vector<DescriptorChain> chains(64);
  std::byte out[kNetHeaderSizeMrg + kFrame];
  uint64_t packets = 0;
  for (auto _ : state) {
    ring.driver_offers_batch();
    for (;;) {
      const size_t n = ring.queue.pop_burst(*ring.memory, chains, ChainDirection::kReadableOnly);
      if (n == 0) break;
      for (size_t i = 0; i < n; ++i) {
        benchmark::DoNotOptimize(copy_from_pieces(chains[i].readable.pieces(), 0, out));
        benchmark::ClobberMemory();
        ring.queue.add_used(*ring.memory, chains[i].head, 0);
      }
      packets += n;
    }
    ring.queue.publish_used(*ring.memory);
    benchmark::DoNotOptimize(ring.queue.must_signal_guest(*ring.memory));
  }
  if (ring.queue.is_broken()) state.SkipWithError("queue broke");
  state.SetItemsProcessed(static_cast<int64_t>(packets));
  // Seconds per packet (printed with an SI prefix: "16.8n" = 16.8 ns).
  state.counters["time_per_packet"] =
      benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["descriptors_per_s"] =
      benchmark::Counter(static_cast<double>(packets * ring.descriptors_per_packet), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DeviceWalk64ByteTx)->ArgName("layout")->Arg(0)->Arg(1)->Arg(2);

}  // namespace
