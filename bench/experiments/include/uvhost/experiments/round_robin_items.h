// round_robin_items.h - one guest flow's virtqueues for the WorkQueue lab: `count` work
// items that each run `work`, handed out round-robin by next(). A producer offering
// faster than one item is run spreads its offers over its items, so an offer rarely
// finds its item still queued (coalesced).
//
// Not thread-safe: next() belongs to one producer thread; the items run on the worker.
// The items must be neither queued nor running when this is destroyed.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "uvhost/sync/work_queue.h"

namespace uvhost::experiments {

class RoundRobinItems {
 public:
  // count >= 1.
  RoundRobinItems(std::size_t count, const std::function<void()>& work);
  sync::WorkItem& next() noexcept;
  std::size_t size() const noexcept { return items_.size(); }

 private:
  std::vector<std::unique_ptr<sync::WorkItem>> items_;
  std::size_t cursor_ = 0;
};

}  // namespace uvhost::experiments
