// worker.cpp - see worker.h.
#include "uvhost/datapath/worker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "uvhost/base/errno_text.h"
#include "uvhost/sync/spin_then_park.h"

namespace uvhost::datapath {

namespace {

base::UniqueFd must(int fd, const char* what) {
  if (fd < 0) throw std::runtime_error(base::errno_text(what));
  return base::UniqueFd(fd);
}

constexpr int kMaxEventsPerWait = 64;

}  // namespace

Worker::Worker(std::string name, sync::EnqueueStrategy strategy)
    : name_(std::move(name)),
      epoll_(must(::epoll_create1(EPOLL_CLOEXEC), "epoll_create1")),
      wake_fd_(must(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "eventfd")),
      queue_(strategy, this, name_) {
  // The wake eventfd is the one fd watched with a null pointer (no Watch): dispatch()
  // only drains it. Added after queue_ started: a wait_idle() before that sleeps on an
  // epoll set without it, but nothing can be queued before the constructor returns.
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = nullptr;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &event) != 0) {
    throw std::runtime_error(base::errno_text("epoll_ctl"));
  }
}

Worker::~Worker() { queue_.stop(); }

void Worker::wake() noexcept { (void)::eventfd_write(wake_fd_.get(), 1); }

void Worker::wait_idle() noexcept {
  epoll_waits_.add();
  if (dispatch(-1) > 0) event_poll_interval_ = kEventPollInterval;
}

void Worker::poll_events() noexcept {
  event_polls_.add();
  event_poll_interval_ =
      dispatch(0) > 0 ? kEventPollInterval : std::min(2 * event_poll_interval_, kEventPollIntervalMax);
}

int Worker::dispatch(int timeout_ms) noexcept {
  epoll_event events[kMaxEventsPerWait];
  const int ready = ::epoll_wait(epoll_.get(), events, kMaxEventsPerWait, timeout_ms);
  int dispatched = 0;
  for (int i = 0; i < ready; ++i) {
    auto* watch = static_cast<Watch*>(events[i].data.ptr);
    if (watch == nullptr) {
      eventfd_t ignored;
      (void)::eventfd_read(wake_fd_.get(), &ignored);  // non-blocking: may find 0 (EAGAIN)
      continue;
    }
    fd_events_.add();
    ++dispatched;
    watch->on_ready();
  }
  return dispatched;
}

void Worker::watch(int fd, std::function<void()> on_ready, bool edge) {
  auto entry = std::make_unique<Watch>(Watch{fd, std::move(on_ready)});
  epoll_event event{};
  event.events = EPOLLIN | (edge ? EPOLLET : 0u);
  event.data.ptr = entry.get();
  // A fd already watched (the frontend sent the same eventfd for two rings, or a
  // ring got a new kick) is re-pointed at the new callback.
  const auto existing = watches_.find(fd);
  const int op = existing != watches_.end() ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  if (::epoll_ctl(epoll_.get(), op, fd, &event) != 0) {
    spdlog::error("{}: cannot watch fd {}: {}", name_, fd, std::strerror(errno));
    return;
  }
  watches_[fd] = std::move(entry);
}

void Worker::unwatch(int fd) {
  const auto existing = watches_.find(fd);
  if (existing == watches_.end()) return;
  (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  // Safe to free now: dispatch() runs on this thread, and epoll_wait hands out no
  // event for the fd after EPOLL_CTL_DEL.
  watches_.erase(existing);
}

void Worker::register_datapath_item(const sync::WorkItem* item) { datapath_items_.push_back(item); }

void Worker::unregister_datapath_item(const sync::WorkItem* item) {
  datapath_items_.erase(std::remove(datapath_items_.begin(), datapath_items_.end(), item), datapath_items_.end());
}

bool Worker::other_datapath_pending(const sync::WorkItem* self) const noexcept {
  for (const sync::WorkItem* item : datapath_items_) {
    if (item != self && item->is_queued()) return true;
  }
  return false;
}

void Worker::run(const std::function<void()>& fn) {
  // One-shot: the item lives on this stack until flush() saw it run.
  sync::WorkItem item([&fn] { fn(); });
  queue_.queue(item);
  queue_.flush();
}

WorkerStats Worker::stats() const {
  WorkerStats s;
  s.queue = queue_.stats();
  // relaxed: monotonic counters, for reporting.
  s.epoll_waits = epoll_waits_.get();
  s.event_polls = event_polls_.get();
  s.fd_events = fd_events_.get();
  return s;
}

}  // namespace uvhost::datapath
