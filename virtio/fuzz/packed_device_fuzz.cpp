// packed_device_fuzz.cpp - libFuzzer target: arbitrary bytes as guest memory and packed
// ring state (VIRTIO_F_RING_PACKED), fed to the device side as the datapath drives it:
// burst pops (some given back with unpop and popped again), copy out, write in, used
// descriptors published, both notification directions, MRG_RXBUF and plain receive
// with buffers reserved a burst at a time. Invariants checked beyond the sanitizers: a
// chain popped again after unpop is the same chain, and the base never names a
// position beyond the ring.
//
// Input layout (little-endian), kept in sync with make_corpus.py (packed_seeds):
//   [0]      flags: bit0 EVENT_IDX, bit1 INDIRECT_DESC, bit2 MRG_RXBUF, bit3 frontend
//                   (vhost-user) ring addresses, bits4-5 chain direction (0 any,
//                   1 readable only, 2 writable only), bit6 give back the second half of
//                   each burst and pop it again, bit7 IN_ORDER (batched used
//                   descriptors for read-only runs)
//   [1]      queue size - 1 (sizes 1..256, not only powers of two)
//   [2]      low nibble: burst size - 1; high nibble: chains to pop in the transmit
//            phase (15: up to 64)
//   [3..4]   base (SET_VRING_BASE: position | wrap counter << 15)
//   [5..6]   receive frame length
//   [7..10]  descriptor ring address  [11..14] driver area  [15..18] device area
//   [19..]   guest memory image, as device_fuzz.cpp: regions A (16 KiB at 0x0), B (16 KiB
//            at 0x4000) and C (4 KiB at 0x10000, after a hole); missing bytes are zero.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <spdlog/spdlog.h>

#include "fuzz_guest.h"
#include "uvhost/virtio/guest_memory.h"
#include "uvhost/virtio/net_rx.h"
#include "uvhost/virtio/packed_ring_layout.h"
#include "uvhost/virtio/split_queue.h"

namespace {

using namespace uvhost::virtio;
using fuzz::le16;
using fuzz::le32;
using fuzz::same_pieces;

constexpr size_t kHeaderBytes = 19;

void check_base(const DeviceQueue& queue) {
  if (queue.is_started() && PackedPosition::decode(queue.last_avail_index()).index >= queue.config().size) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // hostile input logs errors by design
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kHeaderBytes) return 0;
  const uint8_t flags = data[0];
  const bool mrg_rxbuf = (flags & 4) != 0;
  const bool frontend = (flags & 8) != 0;
  const bool give_back = (flags & 64) != 0;
  const ChainDirection direction = fuzz::direction_of(flags);
  const fuzz::FuzzGuest guest(data, size, kHeaderBytes);
  const GuestMemoryMap* memory = &guest.memory();

  QueueConfig config;
  config.packed = true;
  config.size = 1u + data[1];
  config.event_idx = (flags & 1) != 0;
  config.indirect_desc = (flags & 2) != 0;
  config.in_order = (flags & 128) != 0;
  config.address_space = frontend ? AddressSpace::kFrontendVirtual : AddressSpace::kGuestPhysical;
  config.desc_addr = le32(data + 7) + (frontend ? fuzz::kFrontendDelta : 0);
  config.avail_addr = le32(data + 11) + (frontend ? fuzz::kFrontendDelta : 0);
  config.used_addr = le32(data + 15) + (frontend ? fuzz::kFrontendDelta : 0);

  DeviceQueue queue("fuzz-packed");
  queue.set_last_avail_index(le16(data + 3));
  if (!queue.start(config, *memory)) return 0;
  check_base(queue);

  // Transmit-style processing.
  const size_t burst = 1 + (data[2] & 15u);
  const size_t tx_pops = (data[2] >> 4) == 15 ? 64 : data[2] >> 4;
  std::vector<DescriptorChain> chains(burst);
  std::vector<DescriptorChain> again(burst);
  std::vector<std::byte> scratch(4096);
  std::memset(scratch.data(), 0xa5, scratch.size());
  size_t popped_total = 0;
  while (popped_total < tx_pops) {
    const size_t want = std::min(burst, tx_pops - popped_total);
    size_t n = queue.pop_burst(*memory, std::span(chains).first(want), direction);
    if (give_back && n > 1 && !queue.is_broken()) {
      // The second half goes back and must come out the same (nothing was written).
      const size_t keep = n / 2;
      queue.unpop(static_cast<uint16_t>(n - keep));
      const size_t re = queue.pop_burst(*memory, std::span(again).first(n - keep), direction);
      if (re != n - keep) __builtin_trap();
      for (size_t i = 0; i < re; ++i) {
        const DescriptorChain& a = chains[keep + i];
        const DescriptorChain& b = again[i];
        if (a.head != b.head || a.descriptor_count != b.descriptor_count || !same_pieces(a.readable, b.readable) ||
            !same_pieces(a.writable, b.writable)) {
          __builtin_trap();
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      copy_from_pieces(chains[i].readable.pieces(), 0, scratch);
      const size_t written = copy_to_pieces(chains[i].writable.pieces(), 0, scratch);
      queue.add_used(*memory, chains[i].head, static_cast<uint32_t>(written));
    }
    queue.publish_used(*memory);
    check_base(queue);
    popped_total += n;
    if (n == 0) break;
  }
  (void)queue.must_signal_guest(*memory);
  queue.disable_guest_kicks(*memory);
  (void)queue.enable_guest_kicks(*memory);
  (void)queue.available(*memory, static_cast<uint16_t>(burst));

  // Receive: the rest of the ring, as virtio-net RX buffers.
  NetReceiveWriter writer(RxOptions{mrg_rxbuf, kNetHeaderSizeMrg, burst});
  const std::vector<std::byte> frame(le16(data + 5) % 9000);
  NetHeader header{};
  header.gso_type = data[2];
  for (int i = 0; i < 8; ++i) {
    const RxResult result = writer.deliver(queue, *memory, header, frame);
    if (result.status == RxStatus::kNoBuffers && writer.more_buffers_wanted() == 0) __builtin_trap();
    if (result.status != RxStatus::kDelivered) break;
  }
  writer.release(queue);
  (void)queue.enable_guest_kicks_for_more(*memory, writer.more_buffers_wanted());
  queue.publish_used(*memory);
  (void)queue.must_signal_guest(*memory);
  check_base(queue);
  return 0;
}
