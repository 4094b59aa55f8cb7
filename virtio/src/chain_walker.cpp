// chain_walker.cpp - descriptor chain validation (direct and indirect).
#include "chain_walker.h"

#include <limits>

#include <fmt/format.h>

#include "uvhost/virtio/detail/ring_access.h"
#include "uvhost/virtio/ring_layout.h"

namespace uvhost::virtio::detail {
namespace {

// Loads entry `index` of an indirect table given as host pieces. The table need not be
// aligned and may span regions, so an entry may straddle two pieces.
Descriptor load_indirect_entry(const IoVector& table, uint32_t index) noexcept {
  size_t offset = size_t{index} * kDescriptorSize;
  for (size_t p = 0; p < table.size(); ++p) {
    const IoPiece& piece = table[p];
    if (offset >= piece.len) {
      offset -= piece.len;
      continue;
    }
    if (piece.len - offset >= kDescriptorSize) return load_descriptor(piece.data + offset);
    // Straddles pieces: gather byte by byte (relaxed, each byte read once).
    std::byte bytes[kDescriptorSize];
    size_t have = 0;
    for (size_t q = p; q < table.size() && have < kDescriptorSize; ++q) {
      const IoPiece& part = table[q];
      for (size_t i = (q == p ? offset : 0); i < part.len && have < kDescriptorSize; ++i) {
        bytes[have++] = ring_load<std::byte>(part.data + i, std::memory_order_relaxed);
      }
    }
    return load_descriptor(bytes);  // a local array: plain loads would do, this is fine
  }
  return Descriptor{};  // unreachable: index < table length / 16 is checked by the caller
}

}  // namespace

QueueError walk_chain(const WalkContext& context, uint16_t head, DescriptorChain& chain, std::string& detail) {
  chain.clear();
  chain.head = head;
  if (head >= context.queue_size) {
    detail = fmt::format("head {} >= queue size {}", head, context.queue_size);
    return QueueError::kHeadOutOfRange;
  }

  uint32_t index = head;
  uint32_t table_size = context.queue_size;  // entries in the table being walked
  uint32_t walked_in_table = 0;
  bool in_indirect = false;
  bool seen_writable = false;
  uint64_t total_bytes = 0;

  for (;;) {
    if (++walked_in_table > table_size) {
      detail = fmt::format("head {}: more than {} descriptors in {} table", head, table_size,
                           in_indirect ? "an indirect" : "the");
      return QueueError::kChainTooLong;
    }
    ++chain.descriptor_count;
    const Descriptor desc = in_indirect ? load_indirect_entry(context.indirect_scratch, index)
                                        : load_descriptor(context.desc_table + size_t{index} * kDescriptorSize);

    if ((desc.flags & kDescFlagIndirect) != 0) {
      if (!context.indirect_allowed) {
        detail = fmt::format("head {}: descriptor {}", head, index);
        return QueueError::kIndirectNotNegotiated;
      }
      if (in_indirect) {
        detail = fmt::format("head {}: indirect entry {}", head, index);
        return QueueError::kNestedIndirect;
      }
      if ((desc.flags & kDescFlagNext) != 0) {
        detail = fmt::format("head {}: descriptor {}", head, index);
        return QueueError::kIndirectWithNext;
      }
      // The WRITE flag of the descriptor pointing at the table is ignored (spec).
      if (desc.len == 0 || desc.len % kDescriptorSize != 0 || desc.len / kDescriptorSize > context.queue_size) {
        detail = fmt::format("head {}: indirect table length {}", head, desc.len);
        return QueueError::kIndirectBadLength;
      }
      context.indirect_scratch.clear();
      const TranslateStatus status = context.memory.translate(desc.addr, desc.len, context.indirect_scratch);
      if (status != TranslateStatus::kOk) {
        detail = fmt::format("head {}: indirect table {:#x}+{}: {}", head, desc.addr, desc.len, to_string(status));
        return QueueError::kIndirectNotMapped;
      }
      in_indirect = true;
      table_size = desc.len / static_cast<uint32_t>(kDescriptorSize);
      walked_in_table = 0;
      index = 0;
      continue;
    }

    if (desc.len == 0) {
      detail = fmt::format("head {}: descriptor {} at {:#x}", head, index, desc.addr);
      return QueueError::kZeroLengthBuffer;
    }
    const bool writable = (desc.flags & kDescFlagWrite) != 0;
    if (writable) {
      if (context.direction == ChainDirection::kReadableOnly) {
        detail = fmt::format("head {}: descriptor {}", head, index);
        return QueueError::kUnexpectedWritable;
      }
      seen_writable = true;
    } else {
      if (context.direction == ChainDirection::kWritableOnly) {
        detail = fmt::format("head {}: descriptor {}", head, index);
        return QueueError::kUnexpectedReadable;
      }
      if (seen_writable) {
        detail = fmt::format("head {}: descriptor {}", head, index);
        return QueueError::kReadableAfterWritable;
      }
    }
    total_bytes += desc.len;
    if (total_bytes > std::numeric_limits<uint32_t>::max()) {
      detail = fmt::format("head {}: {} bytes so far", head, total_bytes);
      return QueueError::kChainTooLarge;
    }
    IoVector& pieces = writable ? chain.writable : chain.readable;
    const TranslateStatus status = context.memory.translate(desc.addr, desc.len, pieces);
    if (status == TranslateStatus::kTooManyPieces) {
      detail = fmt::format("head {}: more than {} pieces", head, pieces.max_pieces());
      return QueueError::kChainTooLarge;
    }
    if (status != TranslateStatus::kOk) {
      detail = fmt::format("head {}: descriptor {} buffer {:#x}+{}: {}", head, index, desc.addr, desc.len,
                           to_string(status));
      return QueueError::kBufferNotMapped;
    }

    if ((desc.flags & kDescFlagNext) == 0) return QueueError::kNone;
    if (desc.next >= table_size) {
      detail = fmt::format("head {}: next {} >= table size {}", head, desc.next, table_size);
      return QueueError::kNextOutOfRange;
    }
    index = desc.next;
  }
}

}  // namespace uvhost::virtio::detail
