// worker.h - one datapath worker thread: the sync layer's WorkQueue whose idle worker
// sleeps in epoll_wait on the kick eventfds (and other fds) of the queues it serves.
//
// This is the kernel vhost worker's shape in user space. There, a kick eventfd's
// wait-queue callback queues the virtqueue's handle_kick work on the worker (vhost_poll
// -> vhost_work_queue), and the worker runs queued work until none is left. Here the
// worker runs queued WorkItems (WorkQueue), and when none is left it sleeps in
// epoll_wait (Worker is the WorkQueue's IdleWaiter); a watched fd that became readable
// runs its on_ready callback on the worker, which normally reads the eventfd and
// queues the virtqueue's handler. Anything else - another thread injecting a frame,
// a control request - queues an item, which wakes the worker through an internal
// eventfd (only if it is actually asleep: WorkQueue's park/wake protocol).
//
// Contract
// --------
//  - Threads: watch()/unwatch()/poll_events()/datapath item registration run on the
//    worker thread (from a handler, or through run()), so the watch table and the
//    registrations need no lock and a watch is never freed while epoll could hand it
//    out. queue(), run() and stats() may be called from any thread.
//  - on_ready runs on the worker (inside its idle wait or poll_events()); it must be
//    short and not block: read the fd, count, queue an item. It must not watch() or
//    unwatch() (the dispatch loop still holds the batch's Watch pointers); handlers
//    run later, outside the dispatch, and may.
//  - poll_events() (busy loops): the same dispatch without sleeping (epoll_wait with a
//    zero timeout), so a queue that busy-polls still sees the other queues' kicks;
//    maybe_poll_events() does it at most once per event_poll_interval(). That interval
//    backs off while the polls find nothing: kEventPollInterval after a poll (or a
//    wake-up) that dispatched an fd, doubled by each poll that found none, up to
//    kEventPollIntervalMax. An epoll_wait is a syscall (costly in a virtual machine),
//    and a request that arrives during one waits for it to return; a quiet worker's
//    other fds are still seen within kEventPollIntervalMax.
//  - run(fn): runs fn on the worker and waits for it (a control-plane change applied
//    between two handler runs: no lock on the hot path, other items keep flowing).
//    Not from the worker itself.
//  - other_datapath_pending(self): true if a registered virtqueue handler other than
//    `self` is queued (the `accurate` exit policy's question, vhost_has_work_pending()).
//  - The destructor stops the WorkQueue (runs what is queued) and closes its fds.
#pragma once

#include <sys/epoll.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "uvhost/base/single_writer_counter.h"
#include "uvhost/base/unique_fd.h"
#include "uvhost/sync/work_queue.h"

namespace uvhost::datapath {

struct WorkerStats {
  sync::WorkQueueStats queue;   // items run, wakeups, parks, worker CPU
  uint64_t epoll_waits = 0;     // sleeps in epoll_wait
  uint64_t event_polls = 0;     // poll_events() calls that made the syscall
  uint64_t fd_events = 0;       // ready fds dispatched
};

class Worker final : private sync::IdleWaiter {
 public:
  explicit Worker(std::string name, sync::EnqueueStrategy strategy = sync::EnqueueStrategy::kLockless);
  ~Worker() override;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  const std::string& name() const noexcept { return name_; }
  sync::WorkQueue& work_queue() noexcept { return queue_; }
  bool queue(sync::WorkItem& item) noexcept { return queue_.queue(item); }
  bool on_worker_thread() const noexcept { return queue_.on_worker_thread(); }

  // Worker thread only. `edge`: EPOLLET (for fds the owner drains itself, like a tap).
  void watch(int fd, std::function<void()> on_ready, bool edge = false);
  void unwatch(int fd);
  void poll_events() noexcept;
  void maybe_poll_events(std::chrono::steady_clock::time_point now) noexcept {
    if (now - last_event_poll_ >= event_poll_interval_) {
      last_event_poll_ = now;
      poll_events();
    }
  }
  std::chrono::microseconds event_poll_interval() const noexcept { return event_poll_interval_; }

  void register_datapath_item(const sync::WorkItem* item);
  void unregister_datapath_item(const sync::WorkItem* item);
  bool other_datapath_pending(const sync::WorkItem* self) const noexcept;

  void run(const std::function<void()>& fn);

  WorkerStats stats() const;

  // How often a busy loop looks at the other fds (an epoll_wait syscall): this often
  // while fds become ready, backing off to the maximum while none do.
  static constexpr std::chrono::microseconds kEventPollInterval{2};
  static constexpr std::chrono::microseconds kEventPollIntervalMax{32};

 private:
  struct Watch {
    int fd;
    std::function<void()> on_ready;
  };

  void wait_idle() noexcept override;
  void wake() noexcept override;
  // Runs the ready fds' callbacks; returns how many (the wake eventfd not counted).
  int dispatch(int timeout_ms) noexcept;

  std::string name_;
  base::UniqueFd epoll_;
  base::UniqueFd wake_fd_;
  std::unordered_map<int, std::unique_ptr<Watch>> watches_;  // worker thread only
  std::vector<const sync::WorkItem*> datapath_items_;         // worker thread only
  std::chrono::steady_clock::time_point last_event_poll_{};
  std::chrono::microseconds event_poll_interval_ = kEventPollInterval;
  base::SingleWriterCounter epoll_waits_;  // written by the worker only
  base::SingleWriterCounter event_polls_;
  base::SingleWriterCounter fd_events_;
  sync::WorkQueue queue_;  // last: its thread starts in the constructor and uses the above
};

}  // namespace uvhost::datapath
