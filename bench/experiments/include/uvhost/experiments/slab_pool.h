// slab_pool.h - the critical section of the delegation lab (bench/lab/delegation_lab.h).
//
// The delegation lock was first measured on SLAB's two list_lock sections:
// cache_alloc_refill (move a batch of free objects from the node's shared pool
// into a CPU's array cache) and cache_flusharray (move a batch back). This is
// that shape in user space:
//  - SharedPool: a stack of free object indices plus, per object, the slab it
//    belongs to and, per slab, an in-use counter. A refill or flush moves
//    `batch` indices and touches each object's slab counter, so the critical
//    section writes several shared cache lines, as the kernel's does.
//  - ThreadCache: one thread's array cache (no lock; private).
// SharedPool is NOT thread-safe: callers run refill()/flush() under the lock
// being measured. check_invariants() proves after a run that no lock let two
// critical sections overlap (a lost or duplicated object breaks the sums).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace uvhost::experiments {

class SharedPool {
 public:
  // `objects` objects spread over slabs of `objects_per_slab`; all start free.
  SharedPool(std::size_t objects, std::size_t objects_per_slab);

  // Moves up to `batch` free objects into `out` (appends). Returns how many.
  std::size_t refill(std::vector<uint32_t>& out, std::size_t batch);
  // Moves the last `batch` objects of `from` back to the pool (fewer if `from` is shorter).
  std::size_t flush(std::vector<uint32_t>& from, std::size_t batch);

  std::size_t free_count() const noexcept { return free_.size(); }
  std::size_t object_count() const noexcept { return slab_of_.size(); }
  // True when free objects + objects held in caches == all objects, each object
  // appears exactly once, and every slab's in-use counter matches. `held` lists
  // the objects in all thread caches. On failure `why` says what broke.
  bool check_invariants(const std::vector<uint32_t>& held, std::string& why) const;

 private:
  std::vector<uint32_t> free_;      // stack of free object indices
  std::vector<uint32_t> slab_of_;   // object -> slab
  std::vector<uint32_t> slab_inuse_;  // slab -> objects taken out of the pool
};

}  // namespace uvhost::experiments
