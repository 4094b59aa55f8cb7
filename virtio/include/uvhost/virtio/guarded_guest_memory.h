// guarded_guest_memory.h - the current GuestMemoryMap, published through the sync
// layer's read-mostly guard.
//
// Contract
// --------
//  - read(fn) runs fn(const GuestMemoryMap&) on the map current at some instant; the
//    map (and so every mmap behind every IoPiece it produced) stays mapped until fn
//    returns. Keep no pointer into guest memory after fn returns.
//  - replace(map) publishes a new map (SET_MEM_TABLE) and destroys the old one, which
//    munmaps its regions and closes their fds, only after every read() that could
//    still see it has returned (see uvhost/sync/read_mostly.h for the per-policy cost).
//  - A DeviceQueue notices the new map by its generation() and re-translates its ring
//    addresses on its next operation.
#pragma once

#include <memory>
#include <utility>

#include "uvhost/sync/read_mostly.h"
#include "uvhost/virtio/guest_memory.h"

namespace uvhost::virtio {

class GuardedGuestMemory {
 public:
  GuardedGuestMemory(sync::GuardPolicy policy, std::unique_ptr<GuestMemoryMap> initial)
      : guard_(policy, std::move(initial)) {}

  template <class F>
  decltype(auto) read(F&& fn) const {
    return guard_.read(std::forward<F>(fn));
  }

  void replace(std::unique_ptr<GuestMemoryMap> next) { guard_.replace(std::move(next)); }

  sync::GuardPolicy policy() const noexcept { return guard_.policy(); }

 private:
  sync::ReadMostly<GuestMemoryMap> guard_;
};

}  // namespace uvhost::virtio
