// packet_pool.cpp - the shared buffer pool and its per-thread caches (see packet_pool.h).
#include "uvhost/experiments/packet_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "uvhost/sync/misuse.h"

namespace uvhost::experiments {
namespace {

constexpr std::size_t kCacheLine = 64;
constexpr std::size_t kPage = 4096;

}  // namespace

void PacketPool::FreeAligned::operator()(std::byte* p) const noexcept { std::free(p); }

PacketPool::PacketPool(PacketPoolOptions options, std::unique_ptr<sync::SectionLock> lock)
    : options_(options), lock_(std::move(lock)) {
  if (!lock_) throw std::invalid_argument("packet pool: no lock");
  if (options_.buffers < 1 || options_.buffers >= kNoBuffer)
    throw std::invalid_argument(fmt::format("packet pool: {} buffers (1 .. {})", options_.buffers, kNoBuffer - 1));
  if (options_.buffer_size < kCacheLine || options_.buffer_size % kCacheLine != 0)
    throw std::invalid_argument(
        fmt::format("packet pool: buffer size {} is not a positive multiple of 64", options_.buffer_size));
  if (options_.batch < 1 || options_.batch > options_.cache_capacity)
    throw std::invalid_argument(fmt::format("packet pool: batch {} must be 1 .. cache capacity {}", options_.batch,
                                            options_.cache_capacity));
  if (options_.buffer_size > SIZE_MAX / options_.buffers)
    throw std::invalid_argument("packet pool: buffers x buffer size overflows");
  std::size_t bytes = options_.buffers * options_.buffer_size;
  bytes = (bytes + kPage - 1) / kPage * kPage;  // aligned_alloc wants a multiple of the alignment
  auto* memory = static_cast<std::byte*>(std::aligned_alloc(kPage, bytes));
  if (memory == nullptr) throw std::bad_alloc();
  memory_.reset(memory);
  std::memset(memory, 0, bytes);  // fault every page in now, not on the datapath

  // Stack order: buffer 0 on top, so a fresh pool hands out ascending ids.
  free_.resize(options_.buffers);
  for (std::size_t i = 0; i < options_.buffers; ++i)
    free_[i] = static_cast<BufferId>(options_.buffers - 1 - i);
}

PacketPool::~PacketPool() {
  std::lock_guard guard(caches_mutex_);
  UVHOST_MISUSE_CHECK(caches_.empty(), "PacketPool destroyed while a Cache of it is alive");
}

std::span<std::byte> PacketPool::data(BufferId id) const noexcept {
  UVHOST_MISUSE_CHECK(id < options_.buffers, "PacketPool::data(): buffer id out of range");
  return {memory_.get() + static_cast<std::size_t>(id) * options_.buffer_size, options_.buffer_size};
}

std::size_t PacketPool::shared_free() {
  std::size_t n = 0;
  lock_->run([&] { n = free_.size(); });
  return n;
}

void PacketPool::refill_locked(std::vector<BufferId>& cache, std::size_t n) noexcept {
  n = std::min(n, free_.size());
  // The stack's top n ids, top first, so the cache's back (its next get()) is the
  // id freed last: the warmest buffer.
  const auto top = free_.end() - static_cast<std::ptrdiff_t>(n);
  cache.insert(cache.end(), std::make_reverse_iterator(free_.end()), std::make_reverse_iterator(top));
  free_.erase(top, free_.end());  // free_ has capacity for every buffer: no reallocation
}

void PacketPool::flush_locked(std::vector<BufferId>& cache, std::size_t n) noexcept {
  // The cache's n oldest ids (its front) go on the stack; the cache drops them after
  // the critical section, outside the lock.
  free_.insert(free_.end(), cache.begin(), cache.begin() + static_cast<std::ptrdiff_t>(n));
}

bool PacketPool::check_invariants(std::span<const BufferId> outside, std::string& why) const {
  std::vector<uint8_t> seen(options_.buffers, 0);
  std::size_t total = 0;
  auto visit = [&](std::span<const BufferId> ids, const char* where) {
    for (BufferId id : ids) {
      if (id >= options_.buffers) {
        why = fmt::format("buffer id {} out of range in {}", id, where);
        return false;
      }
      if (seen[id]++ != 0) {
        why = fmt::format("buffer {} is in two places (second: {})", id, where);
        return false;
      }
      ++total;
    }
    return true;
  };
  // Quiescent by contract: reading free_ without the lock is fine; the caller's
  // join()/synchronization ordered every earlier critical section before this.
  if (!visit(free_, "the shared free list")) return false;
  {
    std::lock_guard guard(caches_mutex_);
    for (const Cache* cache : caches_)
      if (!visit(cache->contents(), "a cache")) return false;
  }
  if (!visit(outside, "the caller's buffers")) return false;
  if (total != options_.buffers) {
    why = fmt::format("{} of {} buffers accounted for ({} lost)", total, options_.buffers,
                      options_.buffers - total);
    return false;
  }
  return true;
}

PacketPool::Cache::Cache(PacketPool& pool) : pool_(pool) {
  // One batch more than the capacity: put() flushes before pushing, refill() only
  // runs on an empty cache, so ids_ never grows past capacity; the slack is for safety.
  ids_.reserve(pool_.options_.cache_capacity + pool_.options_.batch);
  std::lock_guard guard(pool_.caches_mutex_);
  pool_.caches_.push_back(this);
}

PacketPool::Cache::~Cache() {
  drain();
  std::lock_guard guard(pool_.caches_mutex_);
  std::erase(pool_.caches_, this);
}

void PacketPool::Cache::refill() noexcept {
  ++stats_.refills;
  PacketPool& pool = pool_;
  std::vector<BufferId>& ids = ids_;
  const std::size_t batch = pool.options_.batch;
  pool.lock_->run([&pool, &ids, batch] { pool.refill_locked(ids, batch); });
}

void PacketPool::Cache::flush_oldest(std::size_t n) noexcept {
  ++stats_.flushes;
  PacketPool& pool = pool_;
  std::vector<BufferId>& ids = ids_;
  n = std::min(n, ids.size());
  pool.lock_->run([&pool, &ids, n] { pool.flush_locked(ids, n); });
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(n));  // private: outside the lock
}

void PacketPool::Cache::put(BufferId id) noexcept {
  UVHOST_MISUSE_CHECK(id < pool_.options_.buffers, "PacketPool::Cache::put(): buffer id out of range");
  ++stats_.puts;
  if (ids_.size() >= pool_.options_.cache_capacity) flush_oldest(pool_.options_.batch);
  ids_.push_back(id);
}

void PacketPool::Cache::drain() noexcept {
  while (!ids_.empty()) flush_oldest(pool_.options_.batch);
}

}  // namespace uvhost::experiments
