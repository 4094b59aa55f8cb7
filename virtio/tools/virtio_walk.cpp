// virtio_walk.cpp - runs the device-side walk for a fixed number of 64-byte packets,
// so that `valgrind --tool=callgrind` can count instructions per packet
// (scripts/callgrind-virtio.sh runs it twice and divides the difference).
//
// Each packet is a two-descriptor transmit chain (12-byte virtio-net header, 64-byte
// frame). The driver side is reduced to one store per batch: the avail ring always
// holds the same heads, the "driver" only advances avail->idx. The device works as the
// datapath does: it pops bursts of kBurst chains (pop_burst), per packet copies header
// and frame out, adds the burst's used elements, publishes the used index and asks
// whether to signal the guest.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "uvhost/virtio/detail/ring_access.h"
#include "uvhost/virtio/guest_memory.h"
#include "uvhost/virtio/net_header.h"
#include "uvhost/virtio/split_queue.h"

using namespace uvhost::virtio;

int main(int argc, char** argv) {
  const unsigned long packets = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1000000;
  constexpr uint16_t kQueueSize = 256;
  constexpr uint16_t kChains = kQueueSize / 2;
  constexpr uint64_t kGuestBase = 0x100000;
  constexpr size_t kFrame = 64;

  std::vector<std::byte> memory_bytes(1 << 20);
  std::byte* base = memory_bytes.data();
  std::vector<std::unique_ptr<MemoryRegion>> regions;
  regions.push_back(MemoryRegion::borrow(kGuestBase, kGuestBase, memory_bytes));
  auto memory = GuestMemoryMap::create(std::move(regions));

  // Layout: desc table at 0, avail at 4096, used at 8192, buffers from 16384.
  QueueConfig config{kQueueSize, kGuestBase, kGuestBase + 4096, kGuestBase + 8192};
  for (uint16_t c = 0; c < kChains; ++c) {
    const uint64_t buffer = kGuestBase + 16384 + uint64_t{c} * 128;
    const auto d0 = static_cast<uint16_t>(2 * c);
    detail::store_descriptor(base + size_t{d0} * 16, Descriptor{buffer, kNetHeaderSizeMrg, kDescFlagNext,
                                                                 static_cast<uint16_t>(d0 + 1)});
    detail::store_descriptor(base + size_t{d0 + 1u} * 16, Descriptor{buffer + 16, kFrame, 0, 0});
  }
  for (uint16_t i = 0; i < kQueueSize; ++i) {
    detail::ring_store<uint16_t>(base + 4096 + avail_entry_offset(i), static_cast<uint16_t>(2 * (i % kChains)),
                                 std::memory_order_relaxed);
  }
  DeviceQueue queue("walk");
  if (!queue.start(config, *memory)) return 1;

  constexpr size_t kBurst = 64;  // the datapath's default burst
  std::vector<DescriptorChain> chains(kBurst);
  std::byte out[kNetHeaderSizeMrg + kFrame];
  uint64_t checksum = 0;
  uint16_t avail_idx = 0;
  unsigned long done = 0;
  while (done < packets) {
    avail_idx = static_cast<uint16_t>(avail_idx + kChains);
    detail::ring_store<uint16_t>(base + 4096 + kRingIdxOffset, avail_idx, std::memory_order_release);
    for (;;) {
      const size_t n = queue.pop_burst(*memory, chains, ChainDirection::kReadableOnly);
      if (n == 0) break;
      for (size_t i = 0; i < n; ++i) {
        const size_t copied = copy_from_pieces(chains[i].readable.pieces(), 0, out);
        checksum += std::to_integer<uint8_t>(out[copied - 1]);
      }
      queue.add_used(std::span<const DescriptorChain>(chains).first(n), 0);
      done += n;
      queue.publish_used(*memory);
      checksum += queue.must_signal_guest(*memory) ? 1u : 0u;
    }
  }
  std::printf("packets %lu checksum %llu\n", done, static_cast<unsigned long long>(checksum));
  return queue.is_broken() ? 1 : 0;
}
