// device_fuzz.cpp - libFuzzer target: arbitrary bytes as guest memory and ring state,
// fed to the device side as the datapath drives it (burst pops, copy out, write in,
// push used through the shadow ring, notifications, MRG_RXBUF and plain receive with
// buffers reserved a burst at a time, frames forwarded guest to guest). Every chain a
// burst pop returns is walked again by the full walker and must come out identical
// (the direct-chain fast path may only ever agree with it).
//
// Input layout (little-endian), kept in sync with make_corpus.py:
//   [0]      flags: bit0 EVENT_IDX, bit1 INDIRECT_DESC, bit2 MRG_RXBUF,
//                   bit3 frontend (vhost-user) ring addresses, bits4-5 chain direction
//                   (0 any, 1 readable only, 2 writable only, 3 any), bit6 legacy 10-byte header,
//                   bit7 IN_ORDER (batched used entries for read-only runs)
//   [1]      low nibble: log2(queue size) (mod 9: sizes 1..256); high nibble: chains to
//            pop in the transmit phase (15: up to 64), the rest is left for receive;
//            the burst size (pops per pop_burst, and buffers reserved per receive
//            refill) is 1 + the high nibble
//   [2..3]   initial last avail index (SET_VRING_BASE)
//   [4..5]   receive frame length; with bit3 and bits4-5 both set (IOVA mode,
//            VIRTIO_F_ACCESS_PLATFORM) also the IOTLB of the transmit phase: the nine
//            4 KiB pages of the regions are mapped at IOVA = guest address except those
//            whose bit 0-8 is set, and pages 0-6 are read-only where bit 9-15 is set;
//            misses go to a sink that checks each named an unmapped IOVA; the receive
//            phase then runs with every page mapped read/write (the misses answered)
//   [6..9]   descriptor table address   [10..13] avail ring   [14..17] used ring
//   [18..]   guest memory image: region A (16 KiB at 0x0), region B (16 KiB at 0x4000,
//            adjacent to A, so buffers can span both), region C (4 KiB at 0x10000,
//            after a hole); missing bytes are zero.
// (fuzz_guest.h builds it: each region its own exact-size heap allocation, so ASan
// flags any access outside.)
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <spdlog/spdlog.h>

#include "../src/chain_walker.h"  // the full walker, to check the fast path against
#include "fuzz_guest.h"
#include "uvhost/virtio/guest_memory.h"
#include "uvhost/virtio/net_rx.h"
#include "uvhost/virtio/split_queue.h"

namespace {

using namespace uvhost::virtio;
using fuzz::le16;
using fuzz::le32;

constexpr size_t kHeaderBytes = 18;

// The full walk of `head` must give exactly what the burst pop gave.
void check_against_full_walk(const GuestMemoryMap& memory, const QueueConfig& config, ChainDirection direction,
                             const DescriptorChain& popped) {
  TranslationNeed failed;
  std::byte* desc = config.address_space == AddressSpace::kGuestPhysical
                        ? memory.translate_contiguous(config.desc_addr, desc_table_bytes(config.size))
                        : memory.translate_frontend_contiguous(config.desc_addr, desc_table_bytes(config.size));
  if (desc == nullptr) __builtin_trap();
  IoVector scratch(64);
  const detail::WalkContext context{memory, desc, config.size, config.indirect_desc, direction, scratch, failed};
  DescriptorChain again;
  detail::WalkFailure failure;
  if (detail::walk_chain(context, popped.head, again, failure) != QueueError::kNone) __builtin_trap();
  if (again.descriptor_count != popped.descriptor_count || !fuzz::same_pieces(again.readable, popped.readable) ||
      !fuzz::same_pieces(again.writable, popped.writable)) {
    __builtin_trap();
  }
}

// The IOTLB of IOVA mode: each reported miss must name an address the map lacks.
class CheckingMissSink final : public TranslationMissSink {
 public:
  const GuestMemoryMap* memory = nullptr;
  void translation_missed(uint64_t iova, Access) noexcept override {
    if (memory == nullptr || memory->translate_contiguous(iova, 1, Access::kRead) != nullptr ||
        memory->translate_contiguous(iova, 1, Access::kWrite) != nullptr) {
      __builtin_trap();
    }
  }
};

// The regions' pages at IOVA = guest address; `mask` as the input layout says.
std::unique_ptr<GuestMemoryMap> iova_view(const GuestMemoryMap& memory, uint16_t mask) {
  constexpr uint64_t kPages[] = {0x0, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 0x10000};
  std::vector<IovaMapping> mappings;
  for (size_t i = 0; i < std::size(kPages); ++i) {
    if ((mask >> i) & 1u) continue;
    const bool read_only = i < 7 && ((mask >> (9 + i)) & 1u) != 0;
    mappings.push_back(IovaMapping{kPages[i], 0x1000, kPages[i] + fuzz::kFrontendDelta,
                                   read_only ? Access::kRead : Access::kReadWrite});
  }
  auto view = memory.iova_view(mappings);
  if (!view) __builtin_trap();
  return view;
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
  const bool iova_mode = (flags & 0x38) == 0x38;
  const bool frontend = (flags & 8) != 0 && !iova_mode;
  const ChainDirection direction = fuzz::direction_of(flags);
  const fuzz::FuzzGuest guest(data, size, kHeaderBytes);
  const GuestMemoryMap* memory = &guest.memory();
  CheckingMissSink misses;
  std::unique_ptr<GuestMemoryMap> partial, full;
  if (iova_mode) {
    partial = iova_view(guest.memory(), le16(data + 4));
    full = iova_view(guest.memory(), 0);
    memory = partial.get();
    misses.memory = partial.get();
  }

  QueueConfig config;
  config.size = 1u << ((data[1] & 15u) % 9);
  config.event_idx = (flags & 1) != 0;
  config.indirect_desc = (flags & 2) != 0;
  config.in_order = (flags & 128) != 0;
  config.address_space = frontend ? AddressSpace::kFrontendVirtual : AddressSpace::kGuestPhysical;
  config.desc_addr = le32(data + 6) + (frontend ? fuzz::kFrontendDelta : 0);
  config.avail_addr = le32(data + 10) + (frontend ? fuzz::kFrontendDelta : 0);
  config.used_addr = le32(data + 14) + (frontend ? fuzz::kFrontendDelta : 0);
  if (iova_mode) config.translation_misses = &misses;

  DeviceQueue queue("fuzz");
  queue.set_last_avail_index(le16(data + 2));
  if (!queue.start(config, *memory)) return 0;

  // Transmit-style processing: burst pops, copy out, fill writable parts, push used.
  const size_t burst = 1 + (data[1] >> 4);
  std::vector<DescriptorChain> chains(burst);
  std::vector<std::byte> scratch(4096);
  std::memset(scratch.data(), 0xa5, scratch.size());
  const size_t tx_pops = (data[1] >> 4) == 15 ? 64 : data[1] >> 4;
  size_t popped_total = 0;
  // Keep the last transmitted frame's pieces as a guest-to-guest source for receive.
  DescriptorChain forwarded;
  while (popped_total < tx_pops) {
    const size_t n = queue.pop_burst(*memory, std::span(chains).first(std::min(burst, tx_pops - popped_total)),
                                     direction);
    // Checked before anything is written: the writes below may rewrite descriptors.
    for (size_t i = 0; i < n; ++i) check_against_full_walk(*memory, config, direction, chains[i]);
    for (size_t i = 0; i < n; ++i) {
      copy_from_pieces(chains[i].readable.pieces(), 0, scratch);
      const size_t written = copy_to_pieces(chains[i].writable.pieces(), 0, scratch);
      queue.add_used(*memory, chains[i].head, static_cast<uint32_t>(written));
      if (!chains[i].readable.empty()) forwarded = chains[i];
    }
    queue.publish_used(*memory);
    popped_total += n;
    if (n == 0) break;
  }
  (void)queue.must_signal_guest(*memory);
  queue.disable_guest_kicks(*memory);
  (void)queue.enable_guest_kicks(*memory);
  if (iova_mode) {  // every miss answered: a new map, which the queue must pick up
    memory = full.get();
    misses.memory = full.get();
  }

  // Receive: the rest of the ring, as virtio-net RX buffers.
  NetReceiveWriter writer(RxOptions{mrg_rxbuf,
                                    (flags & 64) != 0 && !mrg_rxbuf ? kNetHeaderSizeLegacy : kNetHeaderSizeMrg,
                                    burst});
  const std::vector<std::byte> frame(le16(data + 4) % 9000);
  NetHeader header{};
  header.gso_type = data[1];
  for (int i = 0; i < 8; ++i) {
    RxResult result;
    if (i % 2 == 1 && forwarded.readable.total_bytes() > 0) {
      // A frame forwarded in place: a rewritten prefix, then the transmit chain's bytes
      // (which may overlap these very receive buffers: torn bytes, never a crash).
      const std::byte prefix[6] = {};
      const size_t total = forwarded.readable.total_bytes();
      const size_t take = std::min<size_t>(sizeof prefix, total);
      const RxSource source{std::span<const std::byte>(prefix, take), forwarded.readable.pieces(), take, total};
      result = writer.deliver(queue, *memory, header, source);
    } else {
      result = writer.deliver(queue, *memory, header, frame);
    }
    if (result.status == RxStatus::kNoBuffers && writer.more_buffers_wanted() == 0) __builtin_trap();
    if (result.status != RxStatus::kDelivered) break;
  }
  writer.release(queue);
  (void)queue.enable_guest_kicks_for_more(*memory, writer.more_buffers_wanted());
  queue.publish_used(*memory);
  (void)queue.must_signal_guest(*memory);
  return 0;
}
