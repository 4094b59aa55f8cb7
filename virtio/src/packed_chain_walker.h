// packed_chain_walker.h (private) - walks and validates one chain of a packed ring.
//
// Contract: walk_packed_chain() reads each descriptor once (relaxed loads into a local;
// ordering comes from the caller's acquire load of the chain's first flags), validates
// the copy and appends the host pieces of its buffers to `chain`, as walk_chain() does
// for a split ring, with the same errors and the same rules (readable before writable,
// the caller's direction, no zero-length buffer, at most 4 GiB). What differs is the
// packed format's:
//  - the chain is `first` and the descriptors after it in the ring while NEXT is set,
//    running past the end of the ring if need be; it may take at most `max_slots`
//    slots (the ones the device does not hold already), or it is kChainTooLong;
//  - its buffer id is in its last descriptor and must be below the queue size (as every
//    driver allocates them; the device hands it back in add_used());
//  - INDIRECT: only as a chain's single descriptor (with NEXT, or after one that has
//    it: kIndirectWithNext); its table's entries follow one another, only their WRITE
//    flag counts, and an INDIRECT flag among them is kNestedIndirect.
// On failure `detail` holds the log line's detail (formatted only then) and the chain's
// contents are meaningless. Every loop is bounded by max_slots or the table's length.
#pragma once

#include <cstdint>
#include <string>

#include "uvhost/virtio/descriptor_chain.h"
#include "uvhost/virtio/guest_memory.h"
#include "uvhost/virtio/queue_error.h"
#include "uvhost/virtio/translation_miss.h"

namespace uvhost::virtio::detail {

struct PackedWalkContext {
  const GuestMemoryMap& memory;
  const std::byte* desc_ring;  // host pointer, 16-byte aligned, queue_size descriptors
  uint32_t queue_size;
  bool indirect_allowed;
  ChainDirection direction;
  IoVector& indirect_scratch;  // reused for the indirect table's host pieces
  TranslationNeed& failed_translation;  // set when a buffer or table does not translate
};

// `slots` receives the ring slots the chain took (1 for an indirect one).
QueueError walk_packed_chain(const PackedWalkContext& context, uint16_t first, uint32_t max_slots,
                             DescriptorChain& chain, uint32_t& slots, std::string& detail);

}  // namespace uvhost::virtio::detail
