// descriptor_chain.h - one descriptor chain as the device sees it after validation.
//
// Contract
// --------
//  - A DescriptorChain is filled by DeviceQueue::pop(): the head index to return in
//    the used ring, and the host pieces of its device-readable part followed by its
//    device-writable part, already checked against guest memory. It holds only host
//    pointers: valid while the GuestMemoryMap passed to pop() is alive.
//  - Reuse one DescriptorChain across pops: clear() keeps the vectors' capacity, so a
//    warmed-up queue pops without allocating.
//  - ChainDirection lets the caller state what a chain must contain (virtio-net: TX
//    chains are device-readable only, RX chains device-writable only); a chain that
//    violates it breaks the queue.
#pragma once

#include <cstdint>

#include "uvhost/virtio/io_vector.h"

namespace uvhost::virtio {

enum class ChainDirection {
  kAny,            // readable part, then writable part (the generic rule)
  kReadableOnly,   // e.g. virtio-net transmit
  kWritableOnly,   // e.g. virtio-net receive
};

struct DescriptorChain {
  uint16_t head = 0;              // id to hand back in the used ring
  uint32_t descriptor_count = 0;  // descriptors walked (indirect table entries included)
  IoVector readable;              // device-readable bytes, in chain order
  IoVector writable;              // device-writable bytes, in chain order

  void clear() noexcept {
    head = 0;
    descriptor_count = 0;
    readable.clear();
    writable.clear();
  }
};

}  // namespace uvhost::virtio
