// queue_error.h - why a device queue stopped trusting its guest.
//
// Every value is a violation of the virtio spec by the driver (or a frontend message
// that sets the queue up wrongly). When a DeviceQueue detects one it logs one error
// line (queue name, error, details) and enters the broken state: every later
// operation is ignored until reset().
#pragma once

#include <string_view>

namespace uvhost::virtio {

enum class QueueError {
  kNone,
  kBadQueueSize,            // not a power of two in 1..32768
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
};

std::string_view to_string(QueueError error) noexcept;

}  // namespace uvhost::virtio
