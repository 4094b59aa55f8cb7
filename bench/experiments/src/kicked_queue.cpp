// kicked_queue.cpp - see kicked_queue.h.
#include "uvhost/experiments/kicked_queue.h"

#include <sys/eventfd.h>

#include <cerrno>
#include <system_error>
#include <utility>

namespace uvhost::experiments {
namespace {

// A worker-only counter: relaxed, single writer (see kicked_queue.h).
void bump(std::atomic<uint64_t>& counter, uint64_t by) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

}  // namespace

KickedQueue::KickedQueue(bool eventfd_kicks, std::function<void()> work) {
  if (eventfd_kicks) {
    const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
    kick_ = base::UniqueFd(fd);
  }
  handler_ = std::make_unique<sync::WorkItem>([this, eventfd_kicks, work = std::move(work)] {
    // relaxed: the exchange takes every increment exactly once, and WorkQueue::queue()
    // orders the handler's next run after add_pending() (no lost wake-up).
    if (!eventfd_kicks) bump(consumed_, pending_.exchange(0, std::memory_order_relaxed));
    work();
    bump(runs_, 1);
  });
}

void KickedQueue::signal_eventfd() noexcept { (void)::eventfd_write(kick_.get(), 1); }

void KickedQueue::add_pending() noexcept {
  pending_.fetch_add(1, std::memory_order_relaxed);  // relaxed: see the handler
}

void KickedQueue::drain_kick() noexcept {
  eventfd_t value = 0;
  if (::eventfd_read(kick_.get(), &value) == 0) bump(consumed_, value);
}

KickTotals kick_totals(const std::vector<std::unique_ptr<KickedQueue>>& queues) noexcept {
  KickTotals t;
  for (const auto& q : queues) {
    t.consumed += q->consumed();
    t.runs += q->runs();
  }
  return t;
}

}  // namespace uvhost::experiments
