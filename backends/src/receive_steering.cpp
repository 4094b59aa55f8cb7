// receive_steering.cpp - a switch port's flow -> receive pair table (see
// receive_steering.h).
#include "uvhost/backends/receive_steering.h"

#include <stdexcept>
#include <string>

#include "uvhost/sync/misuse.h"

namespace uvhost::backends {

// The tag and the index come from different bits of the hash, so the tag tells apart
// the flows that share an index.
static_assert(ReceiveSteering::kIndexBits <= 16, "the index bits must not overlap the tag's");
static_assert(ReceiveSteering::kMaxQueuePairs < 0xffff, "pair + 1 must fit the entry's 16 bits");

ReceiveSteering::ReceiveSteering(uint32_t queue_pairs) : queue_pairs_(queue_pairs) {
  if (queue_pairs == 0 || queue_pairs > kMaxQueuePairs) {
    throw std::invalid_argument("receive steering: queue pairs must be in 1.." + std::to_string(kMaxQueuePairs));
  }
  if (queue_pairs > 1) entries_ = std::make_unique<std::atomic<uint32_t>[]>(kEntries);  // value-initialized: empty
}

void ReceiveSteering::record_transmit(uint32_t flow_hash, uint32_t pair) noexcept {
  UVHOST_MISUSE_CHECK(pair < queue_pairs_, "receive steering: transmit pair out of range");
  if (!entries_) return;
  const uint32_t entry = (tag_of(flow_hash) << kTagShift) | (pair + 1);
  std::atomic<uint32_t>& slot = entries_[index_of(flow_hash)];
  // relaxed: the entry is a value on its own (see the header). Stored only when it
  // changes, so the steady state only reads the line.
  if (slot.load(std::memory_order_relaxed) != entry) slot.store(entry, std::memory_order_relaxed);
}

uint32_t ReceiveSteering::receive_pair(uint32_t flow_hash) const noexcept {
  if (!entries_) return 0;
  // relaxed: any entry a writer stored, or an empty one, is acceptable (see the header).
  const uint32_t entry = entries_[index_of(flow_hash)].load(std::memory_order_relaxed);
  const uint32_t recorded = entry & kPairMask;  // pair + 1; 0: empty
  if ((entry >> kTagShift) == tag_of(flow_hash) && recorded != 0 && recorded <= queue_pairs_) return recorded - 1;
  return flow_hash % queue_pairs_;
}

}  // namespace uvhost::backends
