// kicked_queue.h - a virtqueue stand-in for the work-queue lab on the datapath Worker:
// kicks, a handler that does the queue's work, and exactly-once accounting of both.
//
// Contract
// --------
//  - Kicks come one of two ways. Eventfd (a guest kick): signal_eventfd() writes the
//    queue's nonblocking eventfd; the worker's on_ready calls drain_kick(), which reads
//    it and counts its value as consumed, then queues handler(). Pending (a host-side
//    producer: RxInjector, the switch): add_pending() bumps a count (a frame ring's fill
//    level) and the producer queues handler() itself; the handler takes the whole count
//    as consumed.
//  - handler() runs `work` and counts one run. Kicks coalesce (one run may consume
//    many), but none is lost: after the producers stop and the queue drains,
//    consumed() equals the kicks signalled.
//  - consumed() / runs() and kick_totals() are relaxed reads for reporting: the worker
//    is their only writer; a flush of its work queue (or joining it) orders the last
//    values before a final read.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "uvhost/base/unique_fd.h"
#include "uvhost/sync/work_queue.h"

namespace uvhost::experiments {

class KickedQueue {
 public:
  // eventfd_kicks: kicks through an eventfd (throws std::system_error if none can be
  // opened); otherwise through the pending count.
  KickedQueue(bool eventfd_kicks, std::function<void()> work);

  int kick_fd() const noexcept { return kick_.get(); }  // -1 without eventfd kicks
  void signal_eventfd() noexcept;
  void add_pending() noexcept;
  void drain_kick() noexcept;
  sync::WorkItem& handler() noexcept { return *handler_; }

  uint64_t consumed() const noexcept { return consumed_.load(std::memory_order_relaxed); }
  uint64_t runs() const noexcept { return runs_.load(std::memory_order_relaxed); }

 private:
  base::UniqueFd kick_;
  alignas(64) std::atomic<uint64_t> pending_{0};
  alignas(64) std::atomic<uint64_t> consumed_{0};  // written by the worker only
  std::atomic<uint64_t> runs_{0};                  // written by the worker only
  std::unique_ptr<sync::WorkItem> handler_;
};

struct KickTotals {
  uint64_t consumed = 0;
  uint64_t runs = 0;
};
KickTotals kick_totals(const std::vector<std::unique_ptr<KickedQueue>>& queues) noexcept;

}  // namespace uvhost::experiments
