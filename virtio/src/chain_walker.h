// chain_walker.h (private) - walks and validates one descriptor chain.
//
// Contract: walk_chain() reads each descriptor exactly once (a relaxed single-copy
// load into a local; ordering comes from the caller's acquire load of avail->idx),
// validates the copy, and appends the host pieces of its buffer to `chain`. It stops at
// the first violation and returns it; `failure` then holds what the log line needs
// (describe() turns it into text, off the hot path) and the chain's contents are
// meaningless. Every loop is bounded: at most queue-size descriptors in the main table,
// at most queue-size entries in one indirect table, and at most one indirect table per
// chain.
//
// Design note: the common chains (one to a few direct descriptors, each inside one
// memory region; or one indirect table in one piece) run straight through the loop
// with no formatting, no allocation once the chain's vectors are warm, and a plain
// pointer for the table being walked. Only an indirect table that spans regions takes
// the slower entry-by-entry gather.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "uvhost/virtio/descriptor_chain.h"
#include "uvhost/virtio/detail/ring_access.h"
#include "uvhost/virtio/guest_memory.h"
#include "uvhost/virtio/queue_error.h"
#include "uvhost/virtio/translation_miss.h"

namespace uvhost::virtio::detail {

struct WalkContext {
  const GuestMemoryMap& memory;
  const std::byte* desc_table;  // host pointer, 16-byte aligned, queue_size entries
  uint32_t queue_size;
  bool indirect_allowed;
  ChainDirection direction;
  IoVector& indirect_scratch;   // reused for the indirect table's host pieces
  TranslationNeed& failed_translation;  // set when a buffer or table does not translate
};

// What went wrong, in numbers; formatted only when it is logged.
struct WalkFailure {
  uint16_t head = 0;
  uint32_t index = 0;            // descriptor (or indirect entry) where it happened
  bool in_indirect = false;
  uint64_t addr = 0;             // the descriptor's buffer or table
  uint64_t len = 0;              // its length, or a count (pieces, bytes, table size)
  TranslateStatus status = TranslateStatus::kOk;
};

// Out of line, off the hot path.
Descriptor load_spanning_entry(const IoVector& table, uint32_t index) noexcept;
[[gnu::cold, gnu::noinline]] QueueError report_walk_failure(WalkFailure& failure, QueueError error, uint16_t head,
                                                            uint32_t index, bool in_indirect, uint64_t addr,
                                                            uint64_t len, TranslateStatus status) noexcept;

// What the fast walk needs: fewer fields than WalkContext, so that a burst of common
// chains keeps them in registers (nothing here is formatted or reported).
struct FastWalk {
  const GuestMemoryMap& memory;
  const std::byte* desc_table;  // host pointer, 16-byte aligned, queue_size entries
  uint32_t queue_size;
  bool indirect_allowed;
};

// The common chain, walked with less: direct descriptors, or one indirect table inside
// one memory region, all of the caller's direction (kReadableOnly or kWritableOnly),
// each buffer inside one memory region.
// true: `chain` holds exactly what walk_chain() would have produced. false: the chain
// is something else (indirect, spanning, mixed, or a violation): the caller runs
// walk_chain() from the start, which reads every descriptor again and decides on its
// own reads alone, so nothing read here is trusted twice. `cursor` carries the last
// region found from one chain to the next (the queue keeps it while the map lasts).
// The rest of walk_direct_chain for a head descriptor that points at an indirect table.
template <ChainDirection kDirection>
[[gnu::noinline]] bool walk_indirect_table(const GuestMemoryMap& memory, uint32_t queue_size, bool indirect_allowed,
                                           const Descriptor& head_desc, DescriptorChain& chain,
                                           GuestMemoryMap::RegionCursor& cursor) {
  constexpr bool kWritable = kDirection == ChainDirection::kWritableOnly;
  constexpr uint16_t kWantedFlags = kWritable ? kDescFlagWrite : 0;
  constexpr Access kAccess = kWritable ? Access::kWrite : Access::kRead;
  IoVector& pieces = kWritable ? chain.writable : chain.readable;
  if (!indirect_allowed || (head_desc.flags & kDescFlagNext) != 0 || head_desc.len == 0 ||
      head_desc.len % kDescriptorSize != 0 || head_desc.len / kDescriptorSize > queue_size) {
    return false;
  }
  const std::byte* table = memory.host_within_region(head_desc.addr, head_desc.len, cursor, Access::kRead);
  if (table == nullptr) return false;
  const uint32_t table_size = head_desc.len / static_cast<uint32_t>(kDescriptorSize);
  uint32_t index = 0;
  uint32_t walked = 0;
  uint64_t total_bytes = 0;
  for (;;) {
    const Descriptor desc = load_descriptor(table + size_t{index} * kDescriptorSize);  // need not be aligned
    if ((desc.flags & ~kDescFlagNext) != kWantedFlags || desc.len == 0) return false;
    total_bytes += desc.len;
    if (!memory.translate_within_region(desc.addr, desc.len, pieces, cursor, kAccess)) return false;
    ++walked;
    if ((desc.flags & kDescFlagNext) == 0) break;
    if (desc.next >= table_size || walked >= table_size) return false;
    index = desc.next;
  }
  if (total_bytes > 0xffffffffu) return false;
  chain.descriptor_count = 1 + walked;  // the descriptor pointing at the table counts too
  return true;
}

template <ChainDirection kDirection>
[[gnu::always_inline]] inline bool walk_direct_chain(const FastWalk& walk, uint16_t head, DescriptorChain& chain,
                                                     GuestMemoryMap::RegionCursor& cursor) {
  static_assert(kDirection != ChainDirection::kAny, "the fast walk serves one-direction chains only");
  constexpr bool kWritable = kDirection == ChainDirection::kWritableOnly;
  constexpr uint16_t kWantedFlags = kWritable ? kDescFlagWrite : 0;
  constexpr Access kAccess = kWritable ? Access::kWrite : Access::kRead;
  IoVector& pieces = kWritable ? chain.writable : chain.readable;
  chain.clear();
  chain.head = head;
  if (head >= walk.queue_size) return false;
  Descriptor desc = load_aligned_descriptor(walk.desc_table + size_t{head} * kDescriptorSize);
  // One indirect table inside one region (what Linux drivers use for multi-buffer
  // transmit) is walked fast too; anything else is the full walk's business.
  if ((desc.flags & kDescFlagIndirect) != 0) {
    return walk_indirect_table<kDirection>(walk.memory, walk.queue_size, walk.indirect_allowed, desc, chain, cursor);
  }
  uint32_t walked = 0;
  for (;;) {
    if ((desc.flags & ~kDescFlagNext) != kWantedFlags || desc.len == 0) return false;
    if (!walk.memory.translate_within_region(desc.addr, desc.len, pieces, cursor, kAccess)) return false;
    ++walked;
    if ((desc.flags & kDescFlagNext) == 0) break;
    if (desc.next >= walk.queue_size || walked >= walk.queue_size) return false;
    desc = load_aligned_descriptor(walk.desc_table + size_t{desc.next} * kDescriptorSize);
  }
  if (pieces.total_bytes() > 0xffffffffu) return false;  // pieces held nothing before this chain
  chain.descriptor_count = walked;
  return true;
}

// walk_direct_chain over chains[0, count) in order, for a direction known at run time
// (decided once, not per chain): how many it took before the first it did not take.
// kAny takes none (the full walk's business).
template <ChainDirection kDirection>
[[gnu::always_inline]] inline size_t walk_direct_run(const FastWalk& walk, std::span<DescriptorChain> chains,
                                                     GuestMemoryMap::RegionCursor& cursor) {
  size_t i = 0;
  while (i < chains.size() && walk_direct_chain<kDirection>(walk, chains[i].head, chains[i], cursor)) ++i;
  return i;
}
[[gnu::always_inline]] inline size_t walk_direct_run(ChainDirection direction, const FastWalk& walk,
                                                     std::span<DescriptorChain> chains,
                                                     GuestMemoryMap::RegionCursor& cursor) {
  switch (direction) {
    case ChainDirection::kReadableOnly:
      return walk_direct_run<ChainDirection::kReadableOnly>(walk, chains, cursor);
    case ChainDirection::kWritableOnly:
      return walk_direct_run<ChainDirection::kWritableOnly>(walk, chains, cursor);
    case ChainDirection::kAny:
      break;
  }
  return 0;
}

// Inline: the burst loop in DeviceQueue::pop_burst keeps the context in registers.
[[gnu::always_inline]] inline QueueError walk_chain(const WalkContext& context, uint16_t head, DescriptorChain& chain,
                                                    WalkFailure& failure) {
  chain.clear();
  chain.head = head;

  // The table being walked: a plain pointer while it is contiguous in host memory (the
  // ring's table; an indirect table inside one region), nullptr for a spanning one.
  const std::byte* table = context.desc_table;
  uint32_t table_size = context.queue_size;
  uint32_t index = head;
  uint32_t walked_in_table = 0;
  bool in_indirect = false;
  bool seen_writable = false;
  uint64_t total_bytes = 0;
#define UVHOST_WALK_FAIL(error, addr, len, status) \
  report_walk_failure(failure, error, head, index, in_indirect, addr, len, status)

  if (head >= context.queue_size) [[unlikely]] {
    return UVHOST_WALK_FAIL(QueueError::kHeadOutOfRange, 0, 0, TranslateStatus::kOk);
  }
  for (;;) {
    if (++walked_in_table > table_size) [[unlikely]] {
      return UVHOST_WALK_FAIL(QueueError::kChainTooLong, 0, table_size, TranslateStatus::kOk);
    }
    ++chain.descriptor_count;
    const Descriptor desc = table != nullptr ? load_descriptor(table + size_t{index} * kDescriptorSize)
                                             : load_spanning_entry(context.indirect_scratch, index);

    if ((desc.flags & kDescFlagIndirect) != 0) [[unlikely]] {
      if (!context.indirect_allowed) {
        return UVHOST_WALK_FAIL(QueueError::kIndirectNotNegotiated, desc.addr, desc.len, TranslateStatus::kOk);
      }
      if (in_indirect) return UVHOST_WALK_FAIL(QueueError::kNestedIndirect, desc.addr, desc.len, TranslateStatus::kOk);
      if ((desc.flags & kDescFlagNext) != 0) {
        return UVHOST_WALK_FAIL(QueueError::kIndirectWithNext, desc.addr, desc.len, TranslateStatus::kOk);
      }
      // The WRITE flag of the descriptor pointing at the table is ignored (spec).
      if (desc.len == 0 || desc.len % kDescriptorSize != 0 || desc.len / kDescriptorSize > context.queue_size) {
        return UVHOST_WALK_FAIL(QueueError::kIndirectBadLength, desc.addr, desc.len, TranslateStatus::kOk);
      }
      context.indirect_scratch.clear();
      const TranslateStatus status = context.memory.translate(desc.addr, desc.len, context.indirect_scratch);
      if (status != TranslateStatus::kOk) {
        context.failed_translation = TranslationNeed{desc.addr, desc.len, Access::kRead};
        return UVHOST_WALK_FAIL(QueueError::kIndirectNotMapped, desc.addr, desc.len, status);
      }
      table = context.indirect_scratch.size() == 1 ? context.indirect_scratch[0].data : nullptr;
      in_indirect = true;
      table_size = desc.len / static_cast<uint32_t>(kDescriptorSize);
      walked_in_table = 0;
      index = 0;
      continue;
    }

    if (desc.len == 0) [[unlikely]] {
      return UVHOST_WALK_FAIL(QueueError::kZeroLengthBuffer, desc.addr, 0, TranslateStatus::kOk);
    }
    const bool writable = (desc.flags & kDescFlagWrite) != 0;
    if (writable) {
      if (context.direction == ChainDirection::kReadableOnly) [[unlikely]] {
        return UVHOST_WALK_FAIL(QueueError::kUnexpectedWritable, desc.addr, desc.len, TranslateStatus::kOk);
      }
      seen_writable = true;
    } else {
      if (context.direction == ChainDirection::kWritableOnly) [[unlikely]] {
        return UVHOST_WALK_FAIL(QueueError::kUnexpectedReadable, desc.addr, desc.len, TranslateStatus::kOk);
      }
      if (seen_writable) [[unlikely]] {
        return UVHOST_WALK_FAIL(QueueError::kReadableAfterWritable, desc.addr, desc.len, TranslateStatus::kOk);
      }
    }
    total_bytes += desc.len;
    if (total_bytes > 0xffffffffu) [[unlikely]] {
      return UVHOST_WALK_FAIL(QueueError::kChainTooLarge, desc.addr, total_bytes, TranslateStatus::kOk);
    }
    IoVector& pieces = writable ? chain.writable : chain.readable;
    const Access access = writable ? Access::kWrite : Access::kRead;
    const TranslateStatus status = context.memory.translate(desc.addr, desc.len, pieces, access);
    if (status != TranslateStatus::kOk) [[unlikely]] {
      if (status == TranslateStatus::kTooManyPieces) {
        return UVHOST_WALK_FAIL(QueueError::kChainTooLarge, desc.addr, pieces.max_pieces(), status);
      }
      context.failed_translation = TranslationNeed{desc.addr, desc.len, access};
      return UVHOST_WALK_FAIL(QueueError::kBufferNotMapped, desc.addr, desc.len, status);
    }

    if ((desc.flags & kDescFlagNext) == 0) return QueueError::kNone;
    if (desc.next >= table_size) [[unlikely]] {
      return UVHOST_WALK_FAIL(QueueError::kNextOutOfRange, desc.next, table_size, TranslateStatus::kOk);
    }
    index = desc.next;
  }
#undef UVHOST_WALK_FAIL
}

// The detail part of the log line for `error` found by walk_chain.
std::string describe(QueueError error, const WalkFailure& failure, const WalkContext& context);

}  // namespace uvhost::virtio::detail
