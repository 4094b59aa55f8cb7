// chain_walker.cpp - descriptor chain validation (direct and indirect).
#include "chain_walker.h"

#include <limits>

#include <fmt/format.h>

#include "uvhost/virtio/detail/ring_access.h"
#include "uvhost/virtio/ring_layout.h"

namespace uvhost::virtio::detail {
// Loads entry `index` of an indirect table that spans regions (several host pieces),
// so an entry may straddle two pieces.
Descriptor load_spanning_entry(const IoVector& table, uint32_t index) noexcept {
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

QueueError report_walk_failure(WalkFailure& failure, QueueError error, uint16_t head, uint32_t index,
                               bool in_indirect, uint64_t addr, uint64_t len, TranslateStatus status) noexcept {
  failure = WalkFailure{head, index, in_indirect, addr, len, status};
  return error;
}

std::string describe(QueueError error, const WalkFailure& f, const WalkContext& context) {
  const char* where = f.in_indirect ? "indirect entry" : "descriptor";
  switch (error) {
    case QueueError::kHeadOutOfRange:
      return fmt::format("head {} >= queue size {}", f.head, context.queue_size);
    case QueueError::kChainTooLong:
      return fmt::format("head {}: more than {} descriptors in {} table", f.head, f.len,
                         f.in_indirect ? "an indirect" : "the");
    case QueueError::kIndirectNotNegotiated:
    case QueueError::kIndirectWithNext:
    case QueueError::kUnexpectedWritable:
    case QueueError::kUnexpectedReadable:
    case QueueError::kReadableAfterWritable:
      return fmt::format("head {}: {} {}", f.head, where, f.index);
    case QueueError::kNestedIndirect:
      return fmt::format("head {}: indirect entry {}", f.head, f.index);
    case QueueError::kIndirectBadLength:
      return fmt::format("head {}: indirect table length {}", f.head, f.len);
    case QueueError::kIndirectNotMapped:
      return fmt::format("head {}: indirect table {:#x}+{}: {}", f.head, f.addr, f.len, to_string(f.status));
    case QueueError::kZeroLengthBuffer:
      return fmt::format("head {}: {} {} at {:#x}", f.head, where, f.index, f.addr);
    case QueueError::kChainTooLarge:
      return f.status == TranslateStatus::kTooManyPieces
                 ? fmt::format("head {}: more than {} pieces", f.head, f.len)
                 : fmt::format("head {}: {} bytes so far", f.head, f.len);
    case QueueError::kBufferNotMapped:
      return fmt::format("head {}: {} {} buffer {:#x}+{}: {}", f.head, where, f.index, f.addr, f.len,
                         to_string(f.status));
    case QueueError::kNextOutOfRange:
      return fmt::format("head {}: next {} >= table size {}", f.head, f.addr, f.len);
    default:
      return fmt::format("head {}: {} {}", f.head, where, f.index);
  }
}

}  // namespace uvhost::virtio::detail
