// slab_pool.cpp - SLAB-like refill/flush critical sections for the delegation lab.
#include "uvhost/experiments/slab_pool.h"

#include <algorithm>
#include <fmt/format.h>

namespace uvhost::experiments {

SharedPool::SharedPool(std::size_t objects, std::size_t objects_per_slab) {
  const std::size_t per_slab = std::max<std::size_t>(objects_per_slab, 1);
  const std::size_t slabs = (objects + per_slab - 1) / per_slab;
  slab_of_.resize(objects);
  slab_inuse_.assign(slabs, 0);
  free_.reserve(objects);
  for (std::size_t object = 0; object < objects; ++object)
    slab_of_[object] = static_cast<uint32_t>(object / per_slab);
  // Interleave slabs in the free stack so consecutive objects of one batch touch
  // different slab counters (different cache lines), as a fragmented node does.
  for (std::size_t index_in_slab = 0; index_in_slab < per_slab; ++index_in_slab)
    for (std::size_t slab = 0; slab < slabs; ++slab) {
      const std::size_t object = slab * per_slab + index_in_slab;
      if (object < objects) free_.push_back(static_cast<uint32_t>(object));
    }
}

std::size_t SharedPool::refill(std::vector<uint32_t>& out, std::size_t batch) {
  const std::size_t n = std::min(batch, free_.size());
  for (std::size_t i = 0; i < n; ++i) {
    const uint32_t object = free_.back();
    free_.pop_back();
    ++slab_inuse_[slab_of_[object]];
    out.push_back(object);
  }
  return n;
}

std::size_t SharedPool::flush(std::vector<uint32_t>& from, std::size_t batch) {
  const std::size_t n = std::min(batch, from.size());
  for (std::size_t i = 0; i < n; ++i) {
    const uint32_t object = from.back();
    from.pop_back();
    --slab_inuse_[slab_of_[object]];
    free_.push_back(object);
  }
  return n;
}

bool SharedPool::check_invariants(const std::vector<uint32_t>& held, std::string& why) const {
  const std::size_t objects = slab_of_.size();
  if (free_.size() + held.size() != objects) {
    why = fmt::format("{} free + {} held != {} objects", free_.size(), held.size(), objects);
    return false;
  }
  std::vector<uint8_t> seen(objects, 0);
  std::vector<uint32_t> inuse(slab_inuse_.size(), 0);
  for (uint32_t object : free_) {
    if (object >= objects || seen[object]++) {
      why = fmt::format("object {} free twice or out of range", object);
      return false;
    }
  }
  for (uint32_t object : held) {
    if (object >= objects || seen[object]++) {
      why = fmt::format("object {} held twice or also free", object);
      return false;
    }
    ++inuse[slab_of_[object]];
  }
  if (inuse != slab_inuse_) {
    why = "a slab's in-use counter does not match the objects held";
    return false;
  }
  return true;
}

}  // namespace uvhost::experiments
