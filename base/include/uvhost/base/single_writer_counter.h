// single_writer_counter.h - a statistics counter that one thread at a time writes and
// any thread reads.
//
// Contract
// --------
//  - add() is a relaxed load + store, not a locked read-modify-write: no locked
//    instruction on the hot path. It loses no increment as long as writes never
//    overlap: one owning thread, or writers ordered by something else (a lock held,
//    a hand-off). Counters written from several threads at once need fetch_add.
//  - get() is a relaxed load from any thread: an exact, monotonic value, with no
//    ordering against other memory (several counters read together are not a
//    consistent snapshot).
#pragma once

#include <atomic>
#include <cstdint>

namespace uvhost::base {

class SingleWriterCounter {
 public:
  void add(uint64_t n = 1) noexcept {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t get() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

}  // namespace uvhost::base
