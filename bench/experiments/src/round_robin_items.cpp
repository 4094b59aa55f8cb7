// round_robin_items.cpp - see round_robin_items.h.
#include "uvhost/experiments/round_robin_items.h"

namespace uvhost::experiments {

RoundRobinItems::RoundRobinItems(std::size_t count, const std::function<void()>& work) {
  for (std::size_t i = 0; i < count; ++i) items_.push_back(std::make_unique<sync::WorkItem>(work));
}

sync::WorkItem& RoundRobinItems::next() noexcept {
  sync::WorkItem& item = *items_[cursor_];
  cursor_ = cursor_ + 1 == items_.size() ? 0 : cursor_ + 1;
  return item;
}

}  // namespace uvhost::experiments
