// frame_ring.cpp - see frame_ring.h.
#include "uvhost/datapath/frame_ring.h"

#include <bit>

namespace uvhost::datapath {

FrameRing::FrameRing(size_t capacity) {
  const size_t size = std::bit_ceil(capacity < 2 ? size_t{2} : capacity);
  cells_ = std::make_unique<Cell[]>(size);
  mask_ = size - 1;
  for (size_t i = 0; i < size; ++i) {
    // relaxed: construction, before any other thread sees the ring.
    cells_[i].sequence.store(i, std::memory_order_relaxed);
    cells_[i].packet = nullptr;
  }
}

FrameRing::~FrameRing() {
  while (pop() != nullptr) {
  }
}

backends::PacketPtr FrameRing::push(backends::PacketPtr packet) noexcept {
  // relaxed: the ticket is only a guess until the CAS below claims it.
  uint64_t ticket = tail_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& cell = cells_[ticket & mask_];
    // acquire: pairs with the consumer's release that freed this cell, so our write
    // of cell.packet cannot overtake its read of the previous packet.
    const uint64_t sequence = cell.sequence.load(std::memory_order_acquire);
    const int64_t lag = static_cast<int64_t>(sequence - ticket);
    if (lag == 0) {
      // relaxed: the claim orders nothing by itself; the cell's sequence publishes.
      if (tail_.compare_exchange_weak(ticket, ticket + 1, std::memory_order_relaxed)) {
        cell.packet = packet.release();
        // release: publishes the packet (and its bytes) to the consumer's acquire.
        cell.sequence.store(ticket + 1, std::memory_order_release);
        return nullptr;
      }
      // CAS failure reloaded `ticket`; try again.
    } else if (lag < 0) {
      return packet;  // the cell still holds the packet of ticket - capacity: full
    } else {
      ticket = tail_.load(std::memory_order_relaxed);  // another producer got ahead
    }
  }
}

backends::PacketPtr FrameRing::pop() noexcept {
  Cell& cell = cells_[head_ & mask_];
  // acquire: pairs with the producer's release; the packet is then complete.
  if (cell.sequence.load(std::memory_order_acquire) != head_ + 1) return nullptr;
  backends::PacketPtr packet(cell.packet);
  cell.packet = nullptr;
  // release: our read of the cell happens-before the next producer's write to it.
  cell.sequence.store(head_ + mask_ + 1, std::memory_order_release);
  ++head_;
  return packet;
}

bool FrameRing::empty() const noexcept {
  // acquire: as in pop(); a true "not empty" then lets pop() succeed.
  return cells_[head_ & mask_].sequence.load(std::memory_order_acquire) != head_ + 1;
}

}  // namespace uvhost::datapath
