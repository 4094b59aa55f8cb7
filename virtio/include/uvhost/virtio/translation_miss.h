// translation_miss.h - where a device queue reports an address its IOTLB cannot
// translate yet (VIRTIO_F_ACCESS_PLATFORM).
//
// Contract
// --------
//  - With VIRTIO_F_ACCESS_PLATFORM every address in a ring and in a descriptor is an
//    I/O virtual address, and the device only knows the translations the frontend sent
//    (vhost-user's IOTLB). An address no translation covers is not a driver error: the
//    device asks for it (an IOTLB miss) and tries again when the translations change.
//  - A DeviceQueue whose QueueConfig::translation_misses is set does exactly that: the
//    chain (or the ring) that needs the address stays where it is, unconsumed, the
//    queue is not broken, and translation_missed() is called with the first address
//    that no translation covers and the access the device needs there. The same miss
//    may be reported again on every retry: the sink decides what to send.
//  - translation_missed() runs on the queue's thread (a datapath worker), inside the
//    memory map's read section: it must not block.
#pragma once

#include <cstdint>

#include "uvhost/virtio/guest_memory.h"

namespace uvhost::virtio {

// A range the device needs and the access it needs there.
struct TranslationNeed {
  uint64_t addr = 0;
  uint64_t len = 0;
  Access access = Access::kRead;
};

class TranslationMissSink {
 public:
  virtual ~TranslationMissSink() = default;
  virtual void translation_missed(uint64_t iova, Access access) noexcept = 0;
};

}  // namespace uvhost::virtio
