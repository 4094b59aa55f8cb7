// worker_pool.cpp - see worker_pool.h.
#include "uvhost/datapath/worker_pool.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace uvhost::datapath {

WorkerPool::WorkerPool(uint32_t pool_size, sync::EnqueueStrategy strategy)
    : pool_size_(pool_size == 0 ? 1 : pool_size), strategy_(strategy) {}

// Workers stop (running what is queued) in reverse order of creation.
WorkerPool::~WorkerPool() {
  while (!workers_.empty()) workers_.pop_back();
}

Worker* WorkerPool::make(std::string name) {
  workers_.push_back(std::make_unique<Worker>(std::move(name), strategy_));
  return workers_.back().get();
}

std::vector<Worker*> WorkerPool::assign(const std::string& port, WorkerMapping mapping, uint32_t queue_pairs) {
  std::vector<Worker*> out;
  out.reserve(queue_pairs);
  switch (mapping) {
    case WorkerMapping::kDevice: {
      Worker* worker = make(port + ".w0");
      owned_.emplace_back(port, worker);
      out.assign(queue_pairs, worker);
      break;
    }
    case WorkerMapping::kQueuePair:
      for (uint32_t pair = 0; pair < queue_pairs; ++pair) {
        out.push_back(make(fmt::format("{}.w{}", port, pair)));
        owned_.emplace_back(port, out.back());
      }
      break;
    case WorkerMapping::kPool:
      if (shared_.empty()) {
        for (uint32_t i = 0; i < pool_size_; ++i) shared_.push_back(make(fmt::format("pool.w{}", i)));
      }
      for (uint32_t pair = 0; pair < queue_pairs; ++pair) {
        out.push_back(shared_[next_shared_]);
        next_shared_ = (next_shared_ + 1) % static_cast<uint32_t>(shared_.size());
      }
      break;
  }
  return out;
}

void WorkerPool::release(const std::string& port) {
  for (auto owned = owned_.begin(); owned != owned_.end();) {
    if (owned->first != port) {
      ++owned;
      continue;
    }
    Worker* worker = owned->second;
    owned = owned_.erase(owned);
    std::erase_if(workers_, [worker](const std::unique_ptr<Worker>& w) { return w.get() == worker; });
  }
}

bool WorkerPool::place(const std::string& port, const WorkerPlacement& placement, std::string& error) {
  std::vector<Worker*> own;
  for (const auto& [owner, worker] : owned_) {
    if (owner == port) own.push_back(worker);
  }
  if (own.empty()) {
    error = fmt::format("port {} has no workers of its own to place (workers=pool shares them)", port);
    return false;
  }
  return place(own, placement, error);
}

bool WorkerPool::place(std::span<Worker* const> workers, const WorkerPlacement& placement, std::string& error) {
  for (size_t i = 0; i < workers.size(); ++i) {
    Worker* worker = workers[i];
    if (std::find(workers.begin(), workers.begin() + static_cast<std::ptrdiff_t>(i), worker) !=
        workers.begin() + static_cast<std::ptrdiff_t>(i)) {
      continue;  // listed before (workers=device: one worker for every pair)
    }
    bool placed = false;
    worker->run([&] { placed = apply_to_this_thread(placement, error); });
    if (!placed) return false;
  }
  return true;
}

Worker* WorkerPool::find(std::string_view name) const noexcept {
  for (const auto& worker : workers_) {
    if (worker->name() == name) return worker.get();
  }
  return nullptr;
}

bool WorkerPool::set_enqueue_strategy(sync::EnqueueStrategy strategy, std::string_view worker) {
  if (worker.empty()) {
    strategy_ = strategy;
    for (const auto& w : workers_) w->work_queue().set_strategy(strategy);
    return true;
  }
  Worker* found = find(worker);
  if (found == nullptr) return false;
  found->work_queue().set_strategy(strategy);
  return true;
}

}  // namespace uvhost::datapath
