// packed_chain_walker.cpp - descriptor chain validation for packed rings.
#include "packed_chain_walker.h"

#include <fmt/format.h>

#include "chain_walker.h"
#include "uvhost/virtio/detail/ring_access.h"
#include "uvhost/virtio/packed_ring_layout.h"

namespace uvhost::virtio::detail {

namespace {

// One buffer descriptor's checks, shared by ring slots and indirect entries. `where`
// names it for the log line.
class BufferChecks {
 public:
  BufferChecks(const PackedWalkContext& context, DescriptorChain& chain, std::string& detail)
      : context_(context), chain_(chain), detail_(detail) {}

  QueueError add(uint64_t addr, uint32_t len, bool writable, const char* where, uint32_t index) {
    if (len == 0) return failed(QueueError::kZeroLengthBuffer, fmt::format("{} {} at {:#x}", where, index, addr));
    if (writable) {
      if (context_.direction == ChainDirection::kReadableOnly) {
        return failed(QueueError::kUnexpectedWritable, fmt::format("{} {}", where, index));
      }
      seen_writable_ = true;
    } else {
      if (context_.direction == ChainDirection::kWritableOnly) {
        return failed(QueueError::kUnexpectedReadable, fmt::format("{} {}", where, index));
      }
      if (seen_writable_) return failed(QueueError::kReadableAfterWritable, fmt::format("{} {}", where, index));
    }
    total_bytes_ += len;
    if (total_bytes_ > 0xffffffffu) {
      return failed(QueueError::kChainTooLarge, fmt::format("{} bytes by {} {}", total_bytes_, where, index));
    }
    IoVector& pieces = writable ? chain_.writable : chain_.readable;
    const Access access = writable ? Access::kWrite : Access::kRead;
    const TranslateStatus status = context_.memory.translate(addr, len, pieces, access);
    if (status == TranslateStatus::kTooManyPieces) {
      return failed(QueueError::kChainTooLarge, fmt::format("more than {} pieces", pieces.max_pieces()));
    }
    if (status != TranslateStatus::kOk) {
      context_.failed_translation = TranslationNeed{addr, len, access};
      return failed(QueueError::kBufferNotMapped,
                    fmt::format("{} {} buffer {:#x}+{}: {}", where, index, addr, len, to_string(status)));
    }
    ++chain_.descriptor_count;
    return QueueError::kNone;
  }

  QueueError failed(QueueError error, std::string text) {
    detail_ = std::move(text);
    return error;
  }

 private:
  const PackedWalkContext& context_;
  DescriptorChain& chain_;
  std::string& detail_;
  bool seen_writable_ = false;
  uint64_t total_bytes_ = 0;
};

QueueError walk_indirect(const PackedWalkContext& context, const PackedDescriptor& desc, uint16_t slot,
                         BufferChecks& checks, DescriptorChain& chain) {
  if (!context.indirect_allowed) {
    return checks.failed(QueueError::kIndirectNotNegotiated, fmt::format("descriptor {}", slot));
  }
  if ((desc.flags & kDescFlagNext) != 0) {
    return checks.failed(QueueError::kIndirectWithNext, fmt::format("descriptor {}", slot));
  }
  if (desc.len == 0 || desc.len % kDescriptorSize != 0 || desc.len / kDescriptorSize > context.queue_size) {
    return checks.failed(QueueError::kIndirectBadLength, fmt::format("descriptor {}: table length {}", slot, desc.len));
  }
  context.indirect_scratch.clear();
  const TranslateStatus status = context.memory.translate(desc.addr, desc.len, context.indirect_scratch);
  if (status != TranslateStatus::kOk) {
    context.failed_translation = TranslationNeed{desc.addr, desc.len, Access::kRead};
    return checks.failed(QueueError::kIndirectNotMapped, fmt::format("descriptor {}: table {:#x}+{}: {}", slot,
                                                                      desc.addr, desc.len, to_string(status)));
  }
  const std::byte* table = context.indirect_scratch.size() == 1 ? context.indirect_scratch[0].data : nullptr;
  const uint32_t entries = desc.len / static_cast<uint32_t>(kDescriptorSize);
  for (uint32_t i = 0; i < entries; ++i) {
    const PackedDescriptor entry = as_packed(table != nullptr ? load_descriptor(table + size_t{i} * kDescriptorSize)
                                                              : load_spanning_entry(context.indirect_scratch, i));
    if ((entry.flags & kDescFlagIndirect) != 0) {
      return checks.failed(QueueError::kNestedIndirect, fmt::format("descriptor {}: indirect entry {}", slot, i));
    }
    // Only WRITE counts inside a table (NEXT and the rest are ignored, as the spec says).
    const QueueError error = checks.add(entry.addr, entry.len, (entry.flags & kDescFlagWrite) != 0, "indirect entry", i);
    if (error != QueueError::kNone) return error;
  }
  chain.head = desc.id;
  ++chain.descriptor_count;  // the descriptor pointing at the table counts too
  return QueueError::kNone;
}

}  // namespace

QueueError walk_packed_chain(const PackedWalkContext& context, uint16_t first, uint32_t max_slots,
                             DescriptorChain& chain, uint32_t& slots, std::string& detail) {
  chain.clear();
  slots = 0;
  BufferChecks checks(context, chain, detail);
  uint32_t slot = first;
  for (;;) {
    if (slots == max_slots) {
      return checks.failed(QueueError::kChainTooLong,
                           fmt::format("chain at {} runs past the {} slots the driver can have made available", first,
                                       max_slots));
    }
    const PackedDescriptor desc = as_packed(load_aligned_descriptor(context.desc_ring + size_t{slot} * kDescriptorSize));
    ++slots;
    if ((desc.flags & kDescFlagIndirect) != 0) {
      if (slots > 1) return checks.failed(QueueError::kIndirectWithNext, fmt::format("descriptor {} follows NEXT", slot));
      const QueueError error = walk_indirect(context, desc, static_cast<uint16_t>(slot), checks, chain);
      if (error != QueueError::kNone) return error;
    } else {
      const QueueError error =
          checks.add(desc.addr, desc.len, (desc.flags & kDescFlagWrite) != 0, "descriptor", slot);
      if (error != QueueError::kNone) return error;
      if ((desc.flags & kDescFlagNext) != 0) {
        if (++slot == context.queue_size) slot = 0;
        continue;
      }
      chain.head = desc.id;
    }
    if (chain.head >= context.queue_size) {
      return checks.failed(QueueError::kHeadOutOfRange,
                           fmt::format("chain at {}: buffer id {} >= queue size {}", first, chain.head,
                                       context.queue_size));
    }
    return QueueError::kNone;
  }
}

}  // namespace uvhost::virtio::detail
