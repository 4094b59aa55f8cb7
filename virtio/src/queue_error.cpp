// queue_error.cpp - names of queue errors for log lines and test messages.
#include "uvhost/virtio/queue_error.h"

namespace uvhost::virtio {

std::string_view to_string(QueueError error) noexcept {
  switch (error) {
    case QueueError::kNone: return "no error";
    case QueueError::kBadQueueSize: return "queue size is not a power of two in 1..32768";
    case QueueError::kRingMisaligned: return "ring is not properly aligned";
    case QueueError::kRingNotMapped: return "ring is not inside guest memory";
    case QueueError::kAvailIndexJump: return "avail index moved by more than the queue size";
    case QueueError::kHeadOutOfRange: return "avail ring entry is not a descriptor index";
    case QueueError::kNextOutOfRange: return "descriptor next index out of range";
    case QueueError::kChainTooLong: return "descriptor chain loops or is longer than its table";
    case QueueError::kIndirectNotNegotiated: return "indirect descriptor without VIRTIO_F_INDIRECT_DESC";
    case QueueError::kNestedIndirect: return "indirect descriptor inside an indirect table";
    case QueueError::kIndirectWithNext: return "descriptor has both INDIRECT and NEXT";
    case QueueError::kIndirectBadLength: return "indirect table length is 0, not a multiple of 16, or too long";
    case QueueError::kIndirectNotMapped: return "indirect table is not inside guest memory";
    case QueueError::kBufferNotMapped: return "buffer is not inside guest memory";
    case QueueError::kZeroLengthBuffer: return "descriptor has length 0";
    case QueueError::kChainTooLarge: return "descriptor chain is larger than 4 GiB or has too many pieces";
    case QueueError::kReadableAfterWritable: return "device-readable descriptor after a device-writable one";
    case QueueError::kUnexpectedWritable: return "device-writable buffer in a chain that must be device-readable";
    case QueueError::kUnexpectedReadable: return "device-readable buffer in a chain that must be device-writable";
    case QueueError::kRxBufferTooSmall: return "receive buffer smaller than the virtio-net header (MRG_RXBUF)";
    case QueueError::kGuestMemoryFault: return "guest memory cut short under the device";
  }
  return "unknown queue error";
}

}  // namespace uvhost::virtio
