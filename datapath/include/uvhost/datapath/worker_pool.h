// worker_pool.h - which worker serves which virtqueue: the mapping chosen per port.
//
//   device  one worker for every queue of the port (vhost-net: one vhost thread per
//           device);
//   pair    one worker per queue pair (its receive and transmit queue together);
//   pool    the daemon's shared pool of N workers; the port's queue pairs are dealt
//           round-robin over it, continuing where the previous port stopped, so
//           several ports share workers (fewer threads than queues).
// A pair's two vrings are always on the same worker: loopback and the RX side of a
// request/response stay on one thread.
//
// Contract
// --------
//  - WorkerPool owns every worker it made; they live until the pool is destroyed,
//    which must come after every port using them is gone, or, for a port's own
//    workers (device, pair), until release() of that port.
//  - assign() is called at port creation (control thread, before traffic) and returns
//    one Worker per queue pair. Not thread-safe against itself; workers() neither.
//  - release(port) destroys the workers assign() made for that port alone (device,
//    pair; the shared pool stays), joining their threads; the port's datapath must be
//    gone. A port of the same name may then be assigned again.
//  - place(port, placement) sets the CPU affinity and scheduling policy of the workers
//    assign() made for that port alone (device, pair), on their own threads
//    (worker_placement.h); false with `error` if the port has none (pool: the shared
//    workers are not one port's to place) or the kernel refuses.
//  - place(workers, placement): the same for the given workers (each once, however
//    often it is listed), from any thread that is not one of them: it touches no
//    state of the pool, so a port's thread may re-place its workers when a frontend
//    connects while the control thread assigns another port's.
//  - set_enqueue_strategy() applies to every worker (or the one named) at once, live.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "uvhost/base/name_table.h"
#include "uvhost/datapath/worker_placement.h"
#include "uvhost/datapath/worker.h"

namespace uvhost::datapath {

using base::to_string;

enum class WorkerMapping : uint8_t { kDevice, kQueuePair, kPool };
inline constexpr auto kWorkerMappingNames =
    base::name_table<WorkerMapping>({{WorkerMapping::kDevice, "device"},
                                     {WorkerMapping::kQueuePair, "pair"},
                                     {WorkerMapping::kPool, "pool"}});
constexpr const auto& enum_names(WorkerMapping) noexcept { return kWorkerMappingNames; }

class WorkerPool {
 public:
  // `pool_size`: workers of the shared pool (made on first use), at least 1.
  explicit WorkerPool(uint32_t pool_size = 2, sync::EnqueueStrategy strategy = sync::EnqueueStrategy::kLockless);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  std::vector<Worker*> assign(const std::string& port, WorkerMapping mapping, uint32_t queue_pairs);
  void release(const std::string& port);
  bool place(const std::string& port, const WorkerPlacement& placement, std::string& error);
  static bool place(std::span<Worker* const> workers, const WorkerPlacement& placement, std::string& error);

  const std::vector<std::unique_ptr<Worker>>& workers() const noexcept { return workers_; }
  Worker* find(std::string_view name) const noexcept;
  // false: no worker of that name.
  bool set_enqueue_strategy(sync::EnqueueStrategy strategy, std::string_view worker = {});

 private:
  Worker* make(std::string name);

  uint32_t pool_size_;
  sync::EnqueueStrategy strategy_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<Worker*> shared_;  // the pool, made on first use
  std::vector<std::pair<std::string, Worker*>> owned_;  // a port's own workers, by port name
  uint32_t next_shared_ = 0;
};

}  // namespace uvhost::datapath
