// transmit_scope.h (private) - what a transmit burst lends its own port's receive side
// while the backend runs: the worker thread and the guest memory map it holds.
//
// Why: a backend that sends a guest's frames back to the same port (loopback) calls
// RxInjector::inject_frame() from inside transmit_burst(). When the receive ring is
// served by this very worker and under the same guest memory, the frame can be copied
// guest to guest right there, once, instead of into a Packet, through a frame ring and
// a second handler run. The scope says whether that is the case (current() on this
// thread, serves()), hands out the map already held (taking the memory guard again
// could deadlock under the mutex and rwsem policies), and at finish() publishes the
// receive rings it delivered into and signals the guest once per ring.
//
// Contract: constructed on the worker thread around one backend call and finished (or
// destroyed) before the map's read section ends. Scopes nest (another port's datapath
// delivering into this thread is not this scope's business: serves() is false).
#pragma once

#include <array>
#include <cstddef>

#include "uvhost/datapath/device_datapath.h"
#include "uvhost/datapath/worker.h"
#include "uvhost/virtio/guarded_guest_memory.h"

namespace uvhost::datapath {

class TransmitScope {
 public:
  TransmitScope(DeviceDatapath& datapath, Worker& worker, virtio::GuardedGuestMemory& memory,
                const virtio::GuestMemoryMap& map) noexcept
      : datapath_(datapath), worker_(worker), memory_(memory), map_(map), previous_(current_) {
    current_ = this;
  }
  ~TransmitScope() { finish(); }
  TransmitScope(const TransmitScope&) = delete;
  TransmitScope& operator=(const TransmitScope&) = delete;

  // This thread's innermost scope, or nullptr.
  static TransmitScope* current() noexcept { return current_; }

  // Is a receive ring of `datapath` on `worker` under `memory` served from here?
  bool serves(const DeviceDatapath* datapath, const Worker* worker,
              const virtio::GuardedGuestMemory* memory) const noexcept {
    return datapath == &datapath_ && worker == &worker_ && memory == &memory_;
  }
  const virtio::GuestMemoryMap& map() const noexcept { return map_; }

  // A receive ring written to: published at finish(). Rings beyond the few kept here
  // are published at once.
  void delivered_into(Vring& q) {
    for (size_t i = 0; i < touched_count_; ++i) {
      if (touched_[i] == &q) return;
    }
    if (touched_count_ == touched_.size()) {
      datapath_.finish_direct(q, map_);
      return;
    }
    touched_[touched_count_++] = &q;
  }

  void finish() {
    if (finished_) return;
    finished_ = true;
    current_ = previous_;
    for (size_t i = 0; i < touched_count_; ++i) datapath_.finish_direct(*touched_[i], map_);
    touched_count_ = 0;
  }

 private:
  DeviceDatapath& datapath_;
  Worker& worker_;
  virtio::GuardedGuestMemory& memory_;
  const virtio::GuestMemoryMap& map_;
  TransmitScope* const previous_;
  std::array<Vring*, 4> touched_;  // [0, touched_count_) in use
  size_t touched_count_ = 0;
  bool finished_ = false;
  static thread_local TransmitScope* current_;
};

}  // namespace uvhost::datapath
