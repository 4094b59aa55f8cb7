// pair_counters.h - statistics counters of a backend, one block per queue pair, each
// written by one thread and read by any.
//
// Contract
// --------
//  - PairCounters<N> holds N uint64_t counters for each of `pairs` queue pairs. Each
//    pair's block is on its own cache line(s), so workers serving different pairs
//    never share a written line.
//  - add(pair, which, n): single writer per (pair, object): the thread that owns the
//    pair in one direction (port_backend.h: calls for the same pair and direction never
//    run concurrently). A backend that counts both directions keeps one PairCounters
//    per direction. The increment is a relaxed load + store (no locked instruction):
//    with one writer no increment is lost.
//  - total(which) / at(pair, which): any thread, any time; relaxed loads, so a reader
//    sees some recent value of each counter (statistics need no ordering, and two
//    counters read one after the other may be from slightly different instants).
//  - pair must be < pairs(): debug builds abort otherwise (callers check the pair
//    before counting; see each backend's `bad_pair` counter).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "uvhost/base/single_writer_counter.h"
#include "uvhost/sync/misuse.h"

namespace uvhost::backends {

template <size_t N>
class PairCounters {
 public:
  explicit PairCounters(uint32_t pairs) : pairs_(pairs), blocks_(std::make_unique<Block[]>(pairs)) {}

  uint32_t pairs() const noexcept { return pairs_; }

  void add(uint32_t pair, size_t which, uint64_t n = 1) noexcept {
    UVHOST_MISUSE_CHECK(pair < pairs_ && which < N, "pair-counters: pair or counter out of range");
    blocks_[pair].values[which].add(n);  // one writer per pair (contract)
  }

  uint64_t at(uint32_t pair, size_t which) const noexcept { return blocks_[pair].values[which].get(); }

  uint64_t total(size_t which) const noexcept {
    uint64_t sum = 0;
    for (uint32_t pair = 0; pair < pairs_; ++pair) sum += at(pair, which);
    return sum;
  }

 private:
  struct alignas(64) Block {
    std::array<base::SingleWriterCounter, N> values{};
  };

  uint32_t pairs_;
  std::unique_ptr<Block[]> blocks_;
};

}  // namespace uvhost::backends
