// collecting_injector.h - a real RxInjector for the backends' tests: it keeps every
// injected packet (with the pair it was meant for) in a vector under a mutex, can be
// told to refuse (a stopped queue), and notices use after it was declared gone.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "uvhost/backends/port_backend.h"

namespace uvhost::backends::testing {

struct Injected {
  uint32_t pair = 0;  // already mapped: pair % queue_pairs()
  PacketPtr packet;
  uint32_t asked = 0;  // the pair inject() was called with, as it was
};

class CollectingInjector final : public RxInjector {
 public:
  explicit CollectingInjector(uint32_t pairs = 1) : pairs_(pairs) {}

  bool inject(uint32_t pair, PacketPtr packet) noexcept override {
    // relaxed: test bookkeeping; the detach protocol under test orders the real uses.
    if (gone_.load(std::memory_order_relaxed)) used_after_gone_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mutex_);
    if (refuse_) {
      ++refused_;
      return false;
    }
    if (keep_) packets_.push_back(Injected{pair % pairs_, std::move(packet), pair});
    ++accepted_;
    changed_.notify_all();
    return true;
  }
  uint32_t queue_pairs() const noexcept override { return pairs_; }

  void set_refuse(bool refuse) {
    std::lock_guard<std::mutex> lock(mutex_);
    refuse_ = refuse;
  }
  // Count only (for stress tests that inject millions of packets).
  void set_keep(bool keep) {
    std::lock_guard<std::mutex> lock(mutex_);
    keep_ = keep;
  }
  // From now on, any inject() is a bug of the caller (it was detached).
  void set_gone(bool gone) { gone_.store(gone, std::memory_order_relaxed); }
  uint64_t used_after_gone() const { return used_after_gone_.load(std::memory_order_relaxed); }

  std::vector<Injected> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(packets_, {});
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return packets_.size();
  }
  uint64_t accepted() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return accepted_;
  }
  uint64_t refused() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return refused_;
  }
  // Waits until at least `count` packets are kept; false after `timeout`.
  bool wait_for(size_t count, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return packets_.size() >= count; });
  }

 private:
  const uint32_t pairs_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Injected> packets_;
  bool refuse_ = false;
  bool keep_ = true;
  uint64_t accepted_ = 0;
  uint64_t refused_ = 0;
  std::atomic<bool> gone_{false};
  std::atomic<uint64_t> used_after_gone_{0};
};

}  // namespace uvhost::backends::testing
