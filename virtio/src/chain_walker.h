// chain_walker.h (private) - walks and validates one descriptor chain.
//
// Contract: walk_chain() reads each descriptor exactly once (a relaxed single-copy
// load into a local; ordering comes from the caller's acquire load of avail->idx),
// validates the copy, and appends the host pieces of its buffer to `chain`. It stops at
// the first violation and returns it, with a human-readable detail for the log; the
// chain's contents are then meaningless. Every loop is bounded: at most queue-size
// descriptors in the main table, at most queue-size entries in one indirect table, and
// at most one indirect table per chain.
#pragma once

#include <cstdint>
#include <string>

#include "uvhost/virtio/descriptor_chain.h"
#include "uvhost/virtio/guest_memory.h"
#include "uvhost/virtio/queue_error.h"

namespace uvhost::virtio::detail {

struct WalkContext {
  const GuestMemoryMap& memory;
  const std::byte* desc_table;  // host pointer, 16-byte aligned, queue_size entries
  uint32_t queue_size;
  bool indirect_allowed;
  ChainDirection direction;
  IoVector& indirect_scratch;   // reused for the indirect table's host pieces
};

QueueError walk_chain(const WalkContext& context, uint16_t head, DescriptorChain& chain, std::string& detail);

}  // namespace uvhost::virtio::detail
