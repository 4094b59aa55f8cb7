// switch_uplink.cpp - a tap served by its own thread as a switch member (see
// switch_uplink.h).
#include "switch_uplink.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include <spdlog/spdlog.h>

#include "uvhost/backends/net_features.h"
#include "uvhost/base/errno_text.h"

namespace uvhost::backends {
namespace {

void signal(int fd) noexcept {
  const uint64_t one = 1;
  (void)!::write(fd, &one, sizeof(one));  // eventfd: fails only if the count would overflow
}

void drain(int fd) noexcept {
  uint64_t count = 0;
  (void)!::read(fd, &count, sizeof(count));
}

bool watch(int epoll_fd, int fd, uint32_t events, std::string& error) {
  epoll_event event{};
  event.events = events;
  event.data.fd = fd;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
    error = base::errno_text("switch uplink: epoll_ctl");
    return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<SwitchUplink> SwitchUplink::open(const TapBackendOptions& options, std::string& error) {
  TapBackendOptions one_queue = options;
  one_queue.queue_pairs = 1;
  std::unique_ptr<TapBackend> tap = TapBackend::open(one_queue, error);
  if (!tap) return nullptr;
  // The switch takes whatever the host hands it (and fits it to each guest): every
  // receive offload the kernel knows.
  tap->features_changed(tap->offered_features() & net_feature::kGuestOffloads);
  base::UniqueFd epoll_fd(::epoll_create1(EPOLL_CLOEXEC));
  base::UniqueFd wake_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  base::UniqueFd stop_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd || !wake_fd || !stop_fd) {
    error = base::errno_text("switch uplink: epoll/eventfd");
    return nullptr;
  }
  if (!watch(epoll_fd.get(), tap->rx_fd(0), EPOLLIN | EPOLLET, error) ||
      !watch(epoll_fd.get(), wake_fd.get(), EPOLLIN, error) ||
      !watch(epoll_fd.get(), stop_fd.get(), EPOLLIN, error)) {
    return nullptr;
  }
  return std::unique_ptr<SwitchUplink>(
      new SwitchUplink(std::move(tap), std::move(epoll_fd), std::move(wake_fd), std::move(stop_fd)));
}

SwitchUplink::SwitchUplink(std::unique_ptr<TapBackend> tap, base::UniqueFd epoll_fd, base::UniqueFd wake_fd,
                           base::UniqueFd stop_fd)
    : tap_(std::move(tap)),
      epoll_fd_(std::move(epoll_fd)),
      wake_fd_(std::move(wake_fd)),
      stop_fd_(std::move(stop_fd)) {
  sync::MutexLock lock(mutex_);  // not shared yet; the lock only tells the analysis so
  outgoing_.reserve(kCapacity);
}

SwitchUplink::~SwitchUplink() {
  stop();
}

void SwitchUplink::start(FrameHandler on_frame) {
  on_frame_ = std::move(on_frame);
  thread_ = std::thread([this] { run(); });
}

void SwitchUplink::stop() {
  {
    sync::MutexLock lock(mutex_);
    stopped_ = true;
    outgoing_.clear();
  }
  if (thread_.joinable()) {
    signal(stop_fd_.get());
    thread_.join();
  }
}

bool SwitchUplink::inject(uint32_t pair, PacketPtr packet) noexcept {
  (void)pair;
  bool was_empty = false;
  {
    sync::MutexLock lock(mutex_);
    if (stopped_ || outgoing_.size() >= kCapacity) {
      if (!stopped_) queue_full_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
      return false;
    }
    was_empty = outgoing_.empty();
    outgoing_.push_back(std::move(packet));  // within the reserved capacity: no allocation
  }
  if (was_empty) signal(wake_fd_.get());  // after the push (see the wake-up protocol)
  return true;
}

void SwitchUplink::write_queued(std::vector<PacketPtr>& batch) {
  {
    sync::MutexLock lock(mutex_);
    batch.swap(outgoing_);
  }
  for (const PacketPtr& packet : batch) (void)tap_->transmit(0, packet->header, packet->frame);  // counted by the tap
  batch.clear();
}

void SwitchUplink::run() {
  std::vector<PacketPtr> batch;
  batch.reserve(kCapacity);
  Packet packet;
  bool readable = true;  // the tap may hold frames already
  for (;;) {
    epoll_event events[3];
    const int ready = ::epoll_wait(epoll_fd_.get(), events, 3, readable ? 0 : -1);
    if (ready < 0 && errno != EINTR) {
      spdlog::error("switch uplink {}: {}; uplink stopped", tap_->name(), base::errno_text("epoll_wait"));
      return;
    }
    for (int i = 0; i < ready; ++i) {
      const int fd = events[i].data.fd;
      if (fd == stop_fd_.get()) return;
      if (fd == wake_fd_.get()) drain(wake_fd_.get());  // before the swap (see the wake-up protocol)
      if (fd == tap_->rx_fd(0)) readable = true;
    }
    write_queued(batch);
    if (readable) {
      int budget = kReadBudget;
      while (budget > 0 && tap_->pull(0, packet)) {
        on_frame_(packet);
        --budget;
      }
      readable = budget == 0;  // budget spent: there may be more (no new edge will say so)
    }
  }
}

}  // namespace uvhost::backends
