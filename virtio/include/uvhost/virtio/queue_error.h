// queue_error.h - why a device queue stopped trusting its guest.
//
// Every value is a violation of the virtio spec by the driver (or a frontend message
// that sets the queue up wrongly). When a DeviceQueue detects one it logs one error
// line (queue name, error, details) and enters the broken state: every later
// operation is ignored until reset().
#pragma once

#include <string_view>

#include "uvhost/base/name_table.h"

namespace uvhost::virtio {

using base::to_string;

enum class QueueError {
  kNone,
  kBadQueueSize,            // split: not a power of two in 1..32768; packed: not in 1..32768
  kRingMisaligned,          // desc table not 16-, avail not 2-, used not 4-byte aligned
  kRingNotMapped,           // a ring is not inside one guest memory region
  kAvailIndexJump,          // avail->idx moved more than the queue size past us
  kHeadOutOfRange,          // avail ring entry >= queue size
  kNextOutOfRange,          // descriptor `next` >= table size
  kChainTooLong,            // longer than the table: a loop, or simply too long
  kIndirectNotNegotiated,   // VIRTQ_DESC_F_INDIRECT without VIRTIO_F_INDIRECT_DESC
  kNestedIndirect,          // indirect flag inside an indirect table
  kIndirectWithNext,        // both INDIRECT and NEXT set
  kIndirectBadLength,       // table length 0, not a multiple of 16, or > queue size entries
  kIndirectNotMapped,       // the indirect table is outside guest memory or wraps
  kBufferNotMapped,         // a buffer is outside guest memory or wraps
  kZeroLengthBuffer,        // a descriptor with len 0
  kChainTooLarge,           // total chain length over 2^32 - 1 bytes, or too many pieces
  kReadableAfterWritable,   // a device-readable descriptor after a device-writable one
  kUnexpectedWritable,      // a device-writable buffer where only readable ones belong
  kUnexpectedReadable,      // a device-readable buffer where only writable ones belong
  kRxBufferTooSmall,        // MRG_RXBUF receive buffer smaller than the virtio-net header
  kGuestMemoryFault,        // a ring lies in guest memory whose file was cut short (SIGBUS absorbed)
  kRingBaseOutOfRange,      // packed: the base's position (SET_VRING_BASE) is not below the queue size
};

// The errors a failed translation of a buffer or an indirect table gives: with an
// IOTLB (translation_miss.h) such a failure may be a miss instead.
constexpr bool is_translation_failure(QueueError error) noexcept {
  return error == QueueError::kBufferNotMapped || error == QueueError::kIndirectNotMapped;
}

// What each error means, for log lines and test messages.
inline constexpr auto kQueueErrorNames = base::name_table<QueueError>({
    {QueueError::kNone, "no error"},
    {QueueError::kBadQueueSize, "queue size is out of range (split: a power of two in 1..32768; packed: 1..32768)"},
    {QueueError::kRingMisaligned, "ring is not properly aligned"},
    {QueueError::kRingNotMapped, "ring is not inside guest memory"},
    {QueueError::kAvailIndexJump, "avail index moved by more than the queue size"},
    {QueueError::kHeadOutOfRange, "avail ring entry is not a descriptor index"},
    {QueueError::kNextOutOfRange, "descriptor next index out of range"},
    {QueueError::kChainTooLong, "descriptor chain loops or is longer than its table"},
    {QueueError::kIndirectNotNegotiated, "indirect descriptor without VIRTIO_F_INDIRECT_DESC"},
    {QueueError::kNestedIndirect, "indirect descriptor inside an indirect table"},
    {QueueError::kIndirectWithNext, "descriptor has both INDIRECT and NEXT"},
    {QueueError::kIndirectBadLength, "indirect table length is 0, not a multiple of 16, or too long"},
    {QueueError::kIndirectNotMapped, "indirect table is not inside guest memory"},
    {QueueError::kBufferNotMapped, "buffer is not inside guest memory"},
    {QueueError::kZeroLengthBuffer, "descriptor has length 0"},
    {QueueError::kChainTooLarge, "descriptor chain is larger than 4 GiB or has too many pieces"},
    {QueueError::kReadableAfterWritable, "device-readable descriptor after a device-writable one"},
    {QueueError::kUnexpectedWritable, "device-writable buffer in a chain that must be device-readable"},
    {QueueError::kUnexpectedReadable, "device-readable buffer in a chain that must be device-writable"},
    {QueueError::kRxBufferTooSmall, "receive buffer smaller than the virtio-net header (MRG_RXBUF)"},
    {QueueError::kGuestMemoryFault, "guest memory cut short under the device"},
    {QueueError::kRingBaseOutOfRange, "packed ring base position is not below the queue size"},
});

constexpr const auto& enum_names(QueueError) noexcept { return kQueueErrorNames; }

}  // namespace uvhost::virtio
