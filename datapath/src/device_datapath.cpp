// device_datapath.cpp - the control plane of DeviceDatapath: hooks, inject, settings and
// snapshots (the handlers are in transmit_path.cpp, receive_path.cpp, idle_poll.cpp).
#include "uvhost/datapath/device_datapath.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "uvhost/backends/rarp_frame.h"
#include "uvhost/base/errno_text.h"

#include "uvhost/vhost_user/features.h"
#include "uvhost/virtio/guest_memory_fault.h"
#include "vring.h"

namespace uvhost::datapath {

DeviceDatapath::DeviceDatapath(DatapathOptions options, backends::PortBackend& backend,
                               std::vector<Worker*> pair_workers)
    : options_(std::move(options)), backend_(backend) {
  if (options_.queue_pairs == 0 || pair_workers.size() != options_.queue_pairs) {
    throw std::invalid_argument("DeviceDatapath: one worker per queue pair is needed");
  }
  if (options_.burst == 0) options_.burst = 1;
  failure_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!failure_fd_) throw std::runtime_error(base::errno_text("DeviceDatapath: eventfd"));
  for (uint32_t index = 0; index < queue_count(); ++index) {
    auto vring = std::make_unique<Vring>(
        index, pair_workers[index / 2], [this](Vring& q) { handle(q); }, options_.inbound_frames);
    // relaxed: no thread sees the vring yet.
    vring->poll_word.store(pack(options_.poll), std::memory_order_relaxed);
    vrings_.push_back(std::move(vring));
  }
  // Register the handlers for the `accurate` exit policy's question.
  for (auto& vring : vrings_) {
    Vring* q = vring.get();
    q->worker->run([q] { q->worker->register_datapath_item(&q->handler); });
  }
  backend_.attach(*this);
}

DeviceDatapath::~DeviceDatapath() {
  // No more injects (the switch stops handing out our pointer before detach returns).
  backend_.detach();
  for (auto& vring : vrings_) {
    Vring* q = vring.get();
    q->worker->run([this, q] {
      if (q->started) (void)stop_on_worker(*q);
      drop_pending_receive(*q);
      q->worker->unregister_datapath_item(&q->handler);
    });
  }
  // A handler may still be queued (a kick that came just before the stop): run()
  // flushes the worker, so it has run (and found its ring stopped) when this returns.
  for (auto& vring : vrings_) vring->worker->run([] {});
}

template <class Fn>
void DeviceDatapath::for_each_on_worker(Fn fn) {
  for (auto& vring : vrings_) {
    Vring* q = vring.get();
    q->worker->run([&fn, q] { fn(*q); });
  }
}

// ---- Hooks -----------------------------------------------------------------

bool DeviceDatapath::queue_started(const vhost_user::QueueStart& start, virtio::GuardedGuestMemory& memory) {
  if (start.index >= vrings_.size()) return false;
  Vring& q = *vrings_[start.index];
  bool ok = false;
  q.worker->run([&] { ok = start_on_worker(q, start, memory); });
  return ok;
}

bool DeviceDatapath::start_on_worker(Vring& q, const vhost_user::QueueStart& start,
                                     virtio::GuardedGuestMemory& memory) {
  if (q.started) (void)stop_on_worker(q);
  drop_pending_receive(q);  // frames injected for the previous connection
  auto ring = std::make_unique<virtio::DeviceQueue>(options_.name + " vring " + std::to_string(q.index));
  ring->set_last_avail_index(start.last_avail_index);
  const bool ok = memory.read([&](const virtio::GuestMemoryMap& map) {
    if (!ring->start(start.config, map)) return false;
    // Where the ring starts: after a frontend reconnects (QEMU replays SET_VRING_BASE)
    // these are mid-stream positions, not 0, which an operator can check in the log.
    spdlog::info("{}: vring {} ({}) starts at avail position {}, used index {}, {} chains waiting", options_.name,
                 q.index, q.is_tx ? "from the guest" : "to the guest", ring->last_avail_index(), ring->used_index(),
                 ring->available(map));
    // Receive rings: we want a kick only while waiting for buffers (wait_for_buffers).
    if (!q.is_tx) ring->disable_guest_kicks(map);
    return true;
  });
  if (!ok) return false;
  q.ring = std::move(ring);
  q.kicks_disabled = !q.is_tx;
  q.memory = &memory;
  q.kick_fd = start.kick_fd;
  q.call_fd = start.call_fd;
  q.err_fd = start.err_fd;
  q.err_signalled = false;
  q.seen_faults = 0;  // look once at the first burst: the memory may have faulted already
  q.enabled = start.enabled;
  q.log_used = start.log_used;
  q.log_guest_addr = start.log_guest_addr;
  q.log_kick_fields();  // the receive ring's disable_guest_kicks() above
  q.started = true;
  q.idle_since.reset();
  q.dry_since.reset();
  if (q.is_tx && q.chains.empty()) {
    q.chains.resize(options_.burst);
    q.frames.resize(options_.burst);
    if (options_.tx_delivery == TxDelivery::kAtMostOnce) {
      q.bounce = std::make_unique<TxBounce>(options_.burst, kMaxFrame + virtio::kNetHeaderSizeMrg);
    }
  }
  if (q.kick_fd >= 0) {
    q.worker->watch(q.kick_fd, [this, &q] { on_kick(q); });
  } else {
    spdlog::info("{}: vring {} has no kick fd (NOFD): polled as poll=always", options_.name, q.index);
  }
  if (!q.is_tx) {
    q.rx_fd = backend_.rx_fd(q.pair);
    // Edge-triggered: receive_burst() pulls until the backend has nothing (or the
    // guest has no room, and then the guest's kick brings us back).
    if (q.rx_fd >= 0) q.worker->watch(q.rx_fd, [&q] { q.worker->queue(q.handler); }, true);
  }
  refresh_view(q);
  // Whatever is in the ring already (SET_VRING_BASE after a reconnect) or waiting in
  // the backend: one run now.
  q.worker->queue(q.handler);
  return true;
}

uint16_t DeviceDatapath::queue_stopped(uint32_t index) {
  Vring& q = *vrings_.at(index);
  uint16_t next = 0;
  q.worker->run([&] { next = stop_on_worker(q); });
  return next;
}

uint16_t DeviceDatapath::stop_on_worker(Vring& q) {
  if (q.kick_fd >= 0) q.worker->unwatch(q.kick_fd);
  if (q.rx_fd >= 0) q.worker->unwatch(q.rx_fd);
  const uint16_t next = q.ring ? q.ring->last_avail_index() : 0;
  q.ring.reset();
  q.started = false;
  q.memory = nullptr;
  q.kick_fd = q.call_fd = q.err_fd = q.rx_fd = -1;
  refresh_view(q);
  drop_pending_receive(q);
  return next;
}

void DeviceDatapath::drop_pending_receive(Vring& q) {
  if (q.is_tx) return;
  uint64_t dropped = 0;
  if (q.held) {
    q.held.reset();
    ++dropped;
  }
  if (q.pulled_held) {
    q.pulled_held = false;
    ++dropped;
  }
  while (q.inbound->pop() != nullptr) ++dropped;
  if (dropped > 0) q.counters.dropped.add(dropped);
}

void DeviceDatapath::refresh_view(Vring& q) {
  // relaxed: reporting; release on `accepting`: see vring.h.
  q.view_started.store(q.started, std::memory_order_relaxed);
  q.view_enabled.store(q.enabled, std::memory_order_relaxed);
  const bool broken = q.ring != nullptr && q.ring->is_broken();
  q.view_broken.store(broken, std::memory_order_relaxed);
  q.view_no_kick_fd.store(q.started && q.kick_fd < 0, std::memory_order_relaxed);
  // The frontend's error notification (SET_VRING_ERR), once per break.
  if (broken && !q.err_signalled) {
    q.err_signalled = true;
    if (q.err_fd >= 0) (void)::eventfd_write(q.err_fd, 1);
  }
  q.accepting.store(!q.is_tx && q.running() && q.enabled, std::memory_order_release);
}

void DeviceDatapath::memory_changed() {
  for (auto& vring : vrings_) {
    // relaxed: a handler run on a ring that just stopped finds it stopped.
    if (vring->view_started.load(std::memory_order_relaxed)) vring->worker->queue(vring->handler);
  }
}

void DeviceDatapath::queue_enabled(uint32_t index, bool enabled) {
  Vring& q = *vrings_.at(index);
  q.worker->run([&] {
    q.enabled = enabled;
    refresh_view(q);
    if (q.started) q.worker->queue(q.handler);
  });
}

void DeviceDatapath::call_fd_changed(uint32_t index, int call_fd) {
  Vring& q = *vrings_.at(index);
  q.worker->run([&] { q.call_fd = call_fd; });
}

void DeviceDatapath::err_fd_changed(uint32_t index, int err_fd) {
  Vring& q = *vrings_.at(index);
  q.worker->run([&] { q.err_fd = err_fd; });
}

void DeviceDatapath::used_log_changed(uint32_t index, bool log_used, uint64_t log_guest_addr) {
  Vring& q = *vrings_.at(index);
  q.worker->run([&] {
    q.log_used = log_used;
    q.log_guest_addr = log_guest_addr;
  });
}

void DeviceDatapath::features_changed(uint64_t features) {
  const bool mrg = (features & vhost_user::feature::kNetMrgRxbuf) != 0;
  const size_t header =
      virtio::net_header_size((features & (vhost_user::feature::kVersion1 | vhost_user::feature::kNetMrgRxbuf)) != 0);
  const bool log_all = (features & vhost_user::feature::kLogAll) != 0;
  for_each_on_worker([&](Vring& q) {
    q.header_size = header;
    q.log_all = log_all;
    if (!q.is_tx) q.writer = virtio::NetReceiveWriter(virtio::RxOptions{mrg, header, options_.burst});
  });
  backend_.features_changed(features);
}

void DeviceDatapath::mtu_changed(uint16_t mtu) { backend_.mtu_changed(mtu); }

void DeviceDatapath::log_changed(vhost_user::DirtyLog* log) {
  for_each_on_worker([log](Vring& q) { q.log = log; });
}

// The destination of a migration announces the guest (QEMU asks when the guest cannot
// announce itself: no VIRTIO_NET_F_GUEST_ANNOUNCE): the RARP frame goes out of the
// backend as if the guest had sent it on pair 0, on that pair's transmit worker (the
// thread transmit_burst() belongs to). A tap writes it to the host, a switch floods it
// to the other ports and learns the MAC on this one.
void DeviceDatapath::rarp_requested(const std::array<uint8_t, 6>& mac) {
  rarp_requests_.fetch_add(1, std::memory_order_relaxed);
  const auto frame = backends::rarp_announcement(mac);
  virtio::IoPiece piece;
  const backends::TxFrame announcement = backends::TxFrame::contiguous(virtio::NetHeader{}, frame, piece);
  Vring& tx = *vrings_.at(1);
  backends::TxBurstResult result;
  tx.worker->run([&] { result = backend_.transmit_burst(0, std::span<const backends::TxFrame>(&announcement, 1)); });
  if (result.frames == 1) {
    rarp_sent_.fetch_add(1, std::memory_order_relaxed);
    spdlog::info("{}: announced {:02x} with a RARP frame through its {} backend", options_.name, fmt::join(mac, ":"),
                 backend_.kind());
  } else {
    spdlog::warn("{}: the backend did not take the RARP announcement of {:02x}", options_.name, fmt::join(mac, ":"));
  }
}

// ---- Any thread -------------------------------------------------------------

bool DeviceDatapath::inject(uint32_t pair, backends::PacketPtr packet) noexcept {
  Vring& q = *vrings_[2 * (pair % options_.queue_pairs)];
  // acquire: pairs with refresh_view()'s release (see vring.h).
  if (!q.accepting.load(std::memory_order_acquire)) {
    q.counters.inject_stopped.fetch_add(1, std::memory_order_relaxed);
    q.counters.inject_dropped.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (q.inbound->push(std::move(packet)) != nullptr) {
    q.counters.inject_dropped.fetch_add(1, std::memory_order_relaxed);  // the ring is full
    return false;
  }
  q.worker->queue(q.handler);
  return true;
}

bool DeviceDatapath::set_poll(std::optional<uint32_t> index, const PollSettings& settings) {
  if (index && *index >= vrings_.size()) return false;
  for (auto& vring : vrings_) {
    if (index && vring->index != *index) continue;
    // relaxed: the handler reads the word once per idle phase; the queue() below
    // makes a sleeping handler run and see it.
    vring->poll_word.store(pack(settings), std::memory_order_relaxed);
    vring->worker->queue(vring->handler);
  }
  return true;
}

PollSettings DeviceDatapath::poll(uint32_t index) const {
  return unpack(vrings_.at(index)->poll_word.load(std::memory_order_relaxed));
}

std::vector<QueueSnapshot> DeviceDatapath::snapshot() const {
  std::vector<QueueSnapshot> out;
  out.reserve(vrings_.size());
  for (const auto& vring : vrings_) {
    const Vring& q = *vring;
    const QueueCounters& c = q.counters;
    QueueSnapshot s;
    s.index = q.index;
    s.pair = q.pair;
    s.is_tx = q.is_tx;
    s.worker = q.worker->name();
    // relaxed: reporting.
    s.started = q.view_started.load(std::memory_order_relaxed);
    s.enabled = q.view_enabled.load(std::memory_order_relaxed);
    s.broken = q.view_broken.load(std::memory_order_relaxed);
    s.no_kick_fd = q.view_no_kick_fd.load(std::memory_order_relaxed);
    s.poll = unpack(q.poll_word.load(std::memory_order_relaxed));
    s.packets = c.packets.get();
    s.bytes = c.bytes.get();
    s.inject_dropped = c.inject_dropped.load(std::memory_order_relaxed);
    s.inject_stopped = c.inject_stopped.load(std::memory_order_relaxed);
    s.dropped = c.dropped.get() + s.inject_dropped;
    s.kicks = c.kicks.get();
    s.calls = c.calls.get();
    s.calls_suppressed = c.calls_suppressed.get();
    s.polls = c.polls.get();
    s.poll_ns = c.poll_ns.get();
    s.weight_yields = c.weight_yields.get();
    s.handler_runs = c.handler_runs.get();
    s.rx_waits = c.rx_waits.get();
    for (size_t i = 0; i < kPollExitCount; ++i) s.exits[i] = c.exits[i].get();
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<std::string> DeviceDatapath::take_failure() {
  eventfd_t ignored;
  (void)::eventfd_read(failure_fd_.get(), &ignored);  // non-blocking: drains a pending signal
  sync::MutexLock lock(failure_mutex_);
  return std::exchange(failure_, std::nullopt);
}

// ---- Worker thread: shared by both directions ---------------------------------

bool DeviceDatapath::faults_moved(const Vring& q) noexcept {
  return virtio::guest_memory_fault::fault_count() != q.seen_faults;
}

bool DeviceDatapath::check_memory_fault(Vring& q) {
  q.seen_faults = virtio::guest_memory_fault::fault_count();
  if (q.memory == nullptr || q.ring == nullptr) return false;
  std::string description;
  q.memory->read([&](const virtio::GuestMemoryMap& map) {
    const virtio::MemoryRegion* region = map.faulted_region();
    if (region == nullptr) return;
    description = fmt::format(
        "guest memory region gpa [{:#x}, {:#x}] ({} bytes on {}) was cut short under the device: its file holds {} "
        "bytes, the region needs {}",
        region->guest_phys_addr(), region->guest_last(), region->size(), virtio::to_string(region->backing()),
        region->backing_size_now(), region->required_backing_size());
  });
  if (description.empty()) return false;
  // The region reads zeros now; the ring is done with. Silent: reported below, once.
  q.ring->mark_broken(virtio::QueueError::kGuestMemoryFault, description);
  refresh_view(q);
  bool first = false;
  {
    sync::MutexLock lock(failure_mutex_);
    if (!failure_) {
      failure_ = description;
      first = true;
    }
  }
  if (first) {
    spdlog::error("{}: {}; device broken, ending the connection", options_.name, description);
    (void)::eventfd_write(failure_fd_.get(), 1);
  }
  return true;
}

void DeviceDatapath::on_kick(Vring& q) {
  eventfd_t ignored;
  // Readable said epoll, so this read does not block even if the frontend made the
  // eventfd blocking.
  (void)::eventfd_read(q.kick_fd, &ignored);
  q.counters.kicks.add();
  q.worker->queue(q.handler);
}

void DeviceDatapath::set_kicks(Vring& q, bool enabled) {
  if (q.kicks_disabled == !enabled) return;
  q.memory->read([&](const virtio::GuestMemoryMap& map) {
    if (enabled) {
      (void)q.ring->enable_guest_kicks(map);
    } else {
      q.ring->disable_guest_kicks(map);
    }
  });
  q.log_kick_fields();
  q.kicks_disabled = !enabled;
}

void DeviceDatapath::publish_and_signal(Vring& q, const virtio::GuestMemoryMap& map) {
  const uint16_t from = q.ring->published_used_index();
  const auto count = static_cast<uint16_t>(q.ring->used_index() - from);
  if (count == 0) return;
  q.ring->publish_used(map);
  // Dirty pages after the writes they cover (a log read in between must not miss one).
  if (q.logging() && q.log_used) {
    if (q.ring->config().packed) {
      vhost_user::log_host_writes(*q.log, map, q.ring->last_published_ring_bytes());
    } else {
      vhost_user::log_used_elements(*q.log, q.log_guest_addr, q.ring->used_index(), count, q.ring->config().size);
    }
  }
  if (q.ring->must_signal_guest(map)) {
    if (q.call_fd >= 0) (void)::eventfd_write(q.call_fd, 1);
    q.counters.calls.add();
  } else {
    q.counters.calls_suppressed.add();
  }
}

}  // namespace uvhost::datapath
