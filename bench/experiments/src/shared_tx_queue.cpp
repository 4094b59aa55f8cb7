// shared_tx_queue.cpp - the bounded TX queue under a SectionLock (see shared_tx_queue.h).
#include "uvhost/experiments/shared_tx_queue.h"

#include <algorithm>
#include <stdexcept>
#include <thread>

namespace uvhost::experiments {

SharedTxQueue::SharedTxQueue(std::size_t capacity, std::unique_ptr<sync::SectionLock> lock)
    : lock_(std::move(lock)), ring_(capacity) {
  if (capacity == 0) throw std::invalid_argument("shared tx queue: capacity 0");
  if (!lock_) throw std::invalid_argument("shared tx queue: no lock");
}

std::size_t SharedTxQueue::push_burst(std::span<const TxDescriptor> burst) {
  std::size_t accepted = 0;
  lock_->run([&] { accepted = push_locked(burst, true); });
  return accepted;
}

std::size_t SharedTxQueue::try_push_burst(std::span<const TxDescriptor> burst) {
  std::size_t accepted = 0;
  lock_->run([&] { accepted = push_locked(burst, false); });
  return accepted;
}

std::size_t SharedTxQueue::pop_burst(std::span<TxDescriptor> out) {
  std::size_t n = 0;
  lock_->run([&] { n = pop_locked(out); });
  return n;
}

SharedTxQueueStats SharedTxQueue::stats() {
  SharedTxQueueStats snapshot;
  lock_->run([&] {
    snapshot = stats_;
    snapshot.size = count_;
  });
  return snapshot;
}

std::size_t SharedTxQueue::push_locked(std::span<const TxDescriptor> burst, bool drop_rest) noexcept {
  const std::size_t n = std::min(burst.size(), ring_.size() - count_);
  std::size_t tail = head_ + count_;
  if (tail >= ring_.size()) tail -= ring_.size();
  for (std::size_t i = 0; i < n; ++i) {
    ring_[tail] = burst[i];
    if (++tail == ring_.size()) tail = 0;
  }
  count_ += n;
  stats_.accepted += n;
  const std::size_t rest = burst.size() - n;
  if (drop_rest)
    stats_.dropped += rest;
  else
    stats_.refused += rest;
  if (rest != 0) ++stats_.full;
  ++stats_.push_bursts;
  return n;
}

std::size_t SharedTxQueue::pop_locked(std::span<TxDescriptor> out) noexcept {
  const std::size_t n = std::min(out.size(), count_);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = ring_[head_];
    if (++head_ == ring_.size()) head_ = 0;
  }
  count_ -= n;
  stats_.popped += n;
  ++stats_.pop_bursts;
  return n;
}

TxqDrained drain_in_order(SharedTxQueue& queue, std::size_t workers, std::size_t burst,
                          const std::atomic<std::size_t>& workers_left) {
  TxqDrained drained{std::vector<uint64_t>(workers, 0), 0};
  std::vector<TxDescriptor> out(burst);
  std::vector<int64_t> last_seq(workers, -1);
  for (;;) {
    // acquire: pairs with each worker's release when it leaves; read BEFORE the pop, so
    // a pass that sees 0 workers left and an empty queue has seen every push.
    const bool last_pass = workers_left.load(std::memory_order_acquire) == 0;
    const std::size_t n = queue.pop_burst(out);
    for (std::size_t i = 0; i < n; ++i) {
      const auto worker = static_cast<std::size_t>(out[i].cookie >> 32);
      const auto seq = static_cast<int64_t>(out[i].cookie & 0xffffffffu);
      if (worker >= workers || seq <= last_seq[worker]) {
        ++drained.order_errors;
        continue;
      }
      last_seq[worker] = seq;
      ++drained.per_worker[worker];
    }
    if (n == 0) {
      if (last_pass) break;
      std::this_thread::yield();  // an idle NIC queue: let the workers run
    }
  }
  return drained;
}

}  // namespace uvhost::experiments
