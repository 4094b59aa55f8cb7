// port.cpp - one port's thread: accept or connect, serve, repeat (see port.h).
#include "uvhost/serve/port.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "uvhost/serve/backend_factory.h"
#include "uvhost/serve/direction.h"
#include "uvhost/vhost_user/backend_device.h"
#include "uvhost/vhost_user/features.h"
#include "uvhost/vhost_user/socket_inspection.h"

namespace uvhost::serve {

using vhost_user::BackendDevice;
using vhost_user::Connection;

namespace {

constexpr std::chrono::milliseconds kBackoffInitial{10};
constexpr std::chrono::milliseconds kBackoffMax{1000};
constexpr std::chrono::milliseconds kShortConnection{1000};

// Is there a socket file at `path` that nobody listens on (left by a dead process)?
bool is_stale_socket(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0 || !S_ISSOCK(info.st_mode)) return false;
  // A live listener (even one whose backlog is full: EAGAIN) is not stale.
  return vhost_user::probe_unix_socket(path) == ECONNREFUSED;
}

// The guest's transmit vrings (odd) carry what comes from it, its receive vrings
// (even) what goes to it.
PortTotals sum(const std::vector<datapath::QueueSnapshot>& queues) {
  PortTotals totals;
  for (const datapath::QueueSnapshot& q : queues) {
    if (q.is_tx) {
      totals.from_guest_packets += q.packets;
      totals.from_guest_bytes += q.bytes;
      totals.from_guest_dropped += q.dropped;
    } else {
      totals.to_guest_packets += q.packets;
      totals.to_guest_bytes += q.bytes;
      totals.to_guest_dropped += q.dropped;
    }
    totals.calls += q.calls;
    if (q.broken) ++totals.broken_queues;
  }
  return totals;
}

// "rx_packets=N rx_bytes=N rx_dropped=N tx_packets=N tx_bytes=N tx_dropped=N" (direction.h).
std::string direction_counters(const PortTotals& t) {
  return fmt::format("{}={} {}={} {}={} {}={} {}={} {}={}", direction_key(Direction::kRx, "packets"),
                     t.from_guest_packets, direction_key(Direction::kRx, "bytes"), t.from_guest_bytes,
                     direction_key(Direction::kRx, "dropped"), t.from_guest_dropped,
                     direction_key(Direction::kTx, "packets"), t.to_guest_packets,
                     direction_key(Direction::kTx, "bytes"), t.to_guest_bytes, direction_key(Direction::kTx, "dropped"),
                     t.to_guest_dropped);
}

}  // namespace

Port::Port(PortSpec spec, int stop_fd, PortEnvironment environment, std::chrono::milliseconds stats_interval)
    : spec_(std::move(spec)),
      own_stop_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      stop_watch_(::epoll_create1(EPOLL_CLOEXEC)),
      stop_fd_(stop_watch_.get()),
      environment_(environment),
      stats_interval_(stats_interval),
      memory_policy_(spec_.memory_policy) {
  if (!own_stop_.valid() || !stop_watch_.valid()) throw std::runtime_error("eventfd/epoll for a port's stop signal");
  // Level-triggered and never read: once either eventfd is written, the epoll fd stays
  // readable for every poll() that includes it.
  for (const int fd : {stop_fd, own_stop_.get()}) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    if (::epoll_ctl(stop_watch_.get(), EPOLL_CTL_ADD, fd, &event) != 0) {
      throw std::runtime_error(fmt::format("epoll_ctl for a port's stop signal: {}", std::strerror(errno)));
    }
  }
}

void Port::request_stop() noexcept { (void)::eventfd_write(own_stop_.get(), 1); }

// The datapath goes first (it detaches from the backend and stops its rings), then the
// backend; the Listener unlinks the socket.
Port::~Port() { datapath_.reset(); }

bool Port::open(std::string& error) {
  // A path no socket can have fails the start in either mode (a client port would
  // otherwise retry it forever).
  const bool handed_over = spec_.socket_fd >= 0;
  if (handed_over && spec_.client) {
    error = fmt::format("{}: a handed-over socket (fd {}) is served, not connected from: client mode does not apply",
                        spec_.name, spec_.socket_fd);
    return false;
  }
  if (!handed_over &&
      (spec_.socket_path.empty() || spec_.socket_path.size() >= sizeof(sockaddr_un::sun_path))) {
    error = fmt::format("{}: socket path '{}' is empty or longer than {} bytes", spec_.name, spec_.socket_path,
                        sizeof(sockaddr_un::sun_path) - 1);
    return false;
  }
  if (!datapath_) {
    backend_ = make_backend(spec_, environment_.switch_hub, error);
    if (!backend_) return false;
    datapath::DatapathOptions options;
    options.name = spec_.name;
    options.queue_pairs = spec_.queue_pairs;
    options.burst = spec_.burst;
    options.weight_packets = spec_.weight_packets;
    options.weight_bytes = spec_.weight_bytes;
    options.poll = spec_.poll;
    options.tx_delivery = spec_.tx_delivery;
    std::vector<datapath::Worker*> workers = environment_.workers->assign(spec_.name, spec_.workers, spec_.queue_pairs);
    if (!spec_.placement.is_default() && !environment_.workers->place(spec_.name, spec_.placement, error)) {
      error = fmt::format("{}: {}", spec_.name, error);
      return false;
    }
    workers_ = workers;
    datapath_ = std::make_unique<datapath::DeviceDatapath>(options, *backend_, std::move(workers));
  }
  if (spec_.client) return true;
  if (handed_over) return adopt_socket(error);
  vhost_user::Listener::Options options;
  options.mode = spec_.socket_mode;
  options.replace_stale = is_stale_socket(spec_.socket_path);
  if (options.replace_stale) spdlog::warn("{}: replacing the stale socket {}", spec_.name, spec_.socket_path);
  listener_ = vhost_user::Listener::bind(spec_.socket_path, options, error);
  if (!listener_) {
    error = fmt::format("{}: {}", spec_.name, error);
    return false;
  }
  return true;
}

bool Port::adopt_socket(std::string& error) {
  auto handed = vhost_user::inspect_handed_socket(spec_.socket_fd, error);
  if (!handed) {
    error = fmt::format("{}: {}", spec_.name, error);
    return false;
  }
  base::UniqueFd socket(spec_.socket_fd);  // ours from here on
  if (handed->listening) {
    listener_ = vhost_user::Listener::adopt(std::move(socket), handed->bound_path);
    spdlog::info("{}: serving the listening socket handed over as fd {} {}", spec_.name, spec_.socket_fd,
                 handed->bound_path);
  } else {
    handed_connection_.emplace(std::move(socket));
    spdlog::info("{}: serving the connection handed over as fd {}", spec_.name, spec_.socket_fd);
  }
  return true;
}

uint64_t Port::offered_features() const noexcept {
  return vhost_user::offered_net_features(spec_.queue_pairs, backend_ ? backend_->offered_features() : 0);
}

std::vector<datapath::QueueSnapshot> Port::snapshot() const {
  return datapath_ ? datapath_->snapshot() : std::vector<datapath::QueueSnapshot>{};
}

PortTotals Port::totals() const {
  PortTotals totals = sum(snapshot());
  // relaxed: reporting.
  totals.connections = connections_.load(std::memory_order_relaxed);
  totals.rejected = rejected_.load(std::memory_order_relaxed);
  totals.protocol_errors = protocol_errors_.load(std::memory_order_relaxed);
  return totals;
}

bool Port::stop_requested() const {
  pollfd entry{stop_fd_, POLLIN, 0};
  return ::poll(&entry, 1, 0) == 1;
}

bool Port::wait_for(int fd, int timeout_ms) const {
  pollfd entries[2] = {{stop_fd_, POLLIN, 0}, {fd, POLLIN, 0}};
  const nfds_t count = fd >= 0 ? 2 : 1;
  int rc;
  do {
    rc = ::poll(entries, count, timeout_ms);
  } while (rc < 0 && errno == EINTR);
  if (rc <= 0 || entries[0].revents != 0) return false;
  return count == 2 && entries[1].revents != 0;
}

void Port::run() {
  spdlog::info("{}: ready", describe(spec_));
  next_stats_ = std::chrono::steady_clock::now() + stats_interval_;
  // Client mode: a frontend that accepts us and then hangs up at once (or breaks the
  // protocol every time) must not turn this loop into a busy connect/serve cycle: a
  // connection shorter than kShortConnection makes the next connect wait, with the same
  // doubling delay as failed attempts; a longer one resets it.
  auto pause = std::chrono::milliseconds{0};
  while (!stop_requested()) {
    if (!spec_.client && handed_connection_) {
      Connection connection = std::move(*handed_connection_);
      handed_connection_.reset();
      serve(std::move(connection));
      spdlog::info("{}: the handed-over connection was the port's only one: idle until the daemon stops", spec_.name);
      continue;
    }
    if (!spec_.client && !listener_) {
      (void)wait_for(-1, stats_tick());  // nothing to serve: wait for the stop
      continue;
    }
    if (!spec_.client) {
      if (auto connection = accept_frontend()) serve(std::move(*connection));
      continue;
    }
    if (pause.count() > 0) (void)wait_for(-1, static_cast<int>(pause.count()));  // ends early on a stop
    auto connection = connect_to_frontend();
    if (!connection) continue;
    const auto began = std::chrono::steady_clock::now();
    serve(std::move(*connection));
    const bool short_lived = std::chrono::steady_clock::now() - began < kShortConnection;
    pause = short_lived ? std::clamp(pause * 2, kBackoffInitial, kBackoffMax) : std::chrono::milliseconds{0};
  }
  log_stats("stopped");
}

int Port::stats_tick() {
  if (stats_interval_.count() <= 0) return -1;
  const auto now = std::chrono::steady_clock::now();
  if (now >= next_stats_) {
    log_stats("running");
    next_stats_ = std::max(next_stats_ + stats_interval_, now);
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next_stats_ - now);
  return static_cast<int>(std::max<int64_t>(left.count(), 1));
}

std::optional<Connection> Port::accept_frontend() {
  for (;;) {
    if (wait_for(listener_->fd(), stats_tick())) break;
    if (stop_requested()) return std::nullopt;
  }
  std::string error;
  auto connection = listener_->accept(std::chrono::milliseconds{0}, error);
  if (!connection && !error.empty()) spdlog::warn("{}: accept: {}", spec_.name, error);
  return connection;
}

std::optional<Connection> Port::connect_to_frontend() {
  auto delay = kBackoffInitial;
  for (unsigned attempt = 1;; ++attempt) {
    std::string error;
    auto connection = vhost_user::connect_unix(spec_.socket_path, error);
    if (connection) {
      spdlog::info("{}: connected to {} (attempt {})", spec_.name, spec_.socket_path, attempt);
      return connection;
    }
    // The first failure is news; the retries that follow are not (a frontend may be
    // away for a long time).
    if (attempt == 1) {
      spdlog::info("{}: {}; retrying with backoff up to {} ms", spec_.name, error, kBackoffMax.count());
    } else {
      spdlog::debug("{}: attempt {}: {}", spec_.name, attempt, error);
    }
    if (wait_for(-1, static_cast<int>(delay.count())) || stop_requested()) return std::nullopt;
    delay = std::min(delay * 2, kBackoffMax);
  }
}

void Port::reject_extra_frontend() {
  std::string error;
  auto extra = listener_->accept(std::chrono::milliseconds{0}, error);
  if (!extra) return;
  rejected_.fetch_add(1, std::memory_order_relaxed);
  spdlog::warn("{}: a second frontend connected while one is served: closed it", spec_.name);
}  // `extra` closes here

void Port::follow_frontends_cpus(const Connection& connection) {
  ucred peer{};
  socklen_t size = sizeof(peer);
  const bool known = ::getsockopt(connection.fd(), SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0;
  if (!known || peer.pid <= 0) {
    spdlog::warn("{}: cpus=frontend: the frontend's process is unknown ({}); the workers stay where they are",
                 spec_.name, known ? "the socket names no process" : std::strerror(errno));
    return;
  }
  std::string error;
  datapath::WorkerPlacement placement = spec_.placement;
  std::optional<datapath::CpuList> cpus = datapath::cpus_of_process(peer.pid, error);
  if (cpus) {
    placement.cpus = std::move(*cpus);
    if (datapath::WorkerPool::place(workers_, placement, error)) {
      spdlog::info("{}: workers on CPUs {}, the frontend's (pid {})", spec_.name, datapath::to_string(placement.cpus),
                   peer.pid);
      return;
    }
  }
  spdlog::warn("{}: cpus=frontend: {}; the workers stay where they are", spec_.name, error);
}

void Port::serve(Connection connection) {
  const uint64_t number = connections_.fetch_add(1, std::memory_order_relaxed) + 1;
  const PortTotals before = totals();
  spdlog::info("{}: frontend connected (connection {})", spec_.name, number);
  if (spec_.placement.follow_frontend) follow_frontends_cpus(connection);
  vhost_user::DeviceOptions device_options;
  device_options.name = spec_.name;
  device_options.queue_pairs = spec_.queue_pairs;
  device_options.memory_policy = memory_policy();
  device_options.backend_features = backend_->offered_features();
  auto device = std::make_unique<BackendDevice>(std::move(connection), *datapath_, device_options);
  connected_.store(true, std::memory_order_relaxed);
  (void)datapath_->take_failure();  // a failure belongs to the connection it ended
  std::optional<std::string> failure;

  // This thread only speaks the protocol; packets move on the workers.
  std::vector<pollfd> entries;
  // Set once the frontend has hung up: from then on a frontend waiting on the listener
  // is its successor (a guest that reconnects at once), not a second frontend; it stays
  // in the backlog until this connection's last messages are read and it ends.
  bool frontend_leaving = false;
  for (;;) {
    entries.clear();
    entries.push_back({stop_fd_, POLLIN, 0});
    entries.push_back({device->connection().fd(), POLLIN | POLLRDHUP, 0});
    entries.push_back({datapath_->failure_fd(), POLLIN, 0});
    if (listener_ && !frontend_leaving) entries.push_back({listener_->fd(), POLLIN, 0});
    const int ready = ::poll(entries.data(), entries.size(), stats_tick());
    if (ready < 0 && errno != EINTR) {
      spdlog::error("{}: poll: {}", spec_.name, std::strerror(errno));
      break;
    }
    if (ready <= 0) continue;
    if (entries[0].revents != 0) break;  // the daemon stops: the device's destructor stops the rings
    frontend_leaving = frontend_leaving || (entries[1].revents & (POLLHUP | POLLRDHUP)) != 0;
    if (entries[2].revents != 0) {
      // The datapath logged the error line; the device is done with (its memory is gone).
      failure = datapath_->take_failure();
      if (failure) break;
    }
    if (entries.size() > 3 && entries[3].revents != 0 && !frontend_leaving) reject_extra_frontend();
    if (entries[1].revents != 0) {
      const bool closed = device->handle_one() == BackendDevice::Progress::kClosed;
      negotiated_.store(device->acked_features(), std::memory_order_relaxed);
      guest_mtu_.store(device->mtu(), std::memory_order_relaxed);
      store_iotlb(device->iotlb_stats());
      if (closed) break;
    }
  }

  const bool stopping = device->is_open() && !failure;
  const std::string reason = failure ? "device failed: " + *failure
                             : stopping ? "the daemon stops"
                                        : device->close_reason();
  if (failure || (!stopping && !device->closed_by_frontend())) {
    protocol_errors_.fetch_add(1, std::memory_order_relaxed);
  }
  // Destroy the device before reporting: it stops the rings (after their last burst
  // was completed and published) and closes every fd the frontend sent.
  device.reset();
  connected_.store(false, std::memory_order_relaxed);
  negotiated_.store(0, std::memory_order_relaxed);
  guest_mtu_.store(0, std::memory_order_relaxed);
  store_iotlb({});
  const PortTotals after = totals();
  PortTotals delta;
  delta.from_guest_packets = after.from_guest_packets - before.from_guest_packets;
  delta.from_guest_bytes = after.from_guest_bytes - before.from_guest_bytes;
  delta.from_guest_dropped = after.from_guest_dropped - before.from_guest_dropped;
  delta.to_guest_packets = after.to_guest_packets - before.to_guest_packets;
  delta.to_guest_bytes = after.to_guest_bytes - before.to_guest_bytes;
  delta.to_guest_dropped = after.to_guest_dropped - before.to_guest_dropped;
  spdlog::info("{}: connection {} ended ({}): {}", spec_.name, number, reason, direction_counters(delta));
}

void Port::store_iotlb(const vhost_user::IotlbStats& stats) noexcept {
  const uint64_t values[] = {stats.entries,    stats.updates, stats.invalidations,
                             stats.evictions, stats.misses,  stats.misses_unreported};
  for (size_t i = 0; i < iotlb_.size(); ++i) iotlb_[i].store(values[i], std::memory_order_relaxed);
}

vhost_user::IotlbStats Port::iotlb() const noexcept {
  auto at = [this](size_t i) { return iotlb_[i].load(std::memory_order_relaxed); };
  return {at(0), at(1), at(2), at(3), at(4), at(5)};
}

void Port::log_stats(const char* when) const {
  const PortTotals t = totals();
  spdlog::info("{}: {}: connections={} {} calls={}", spec_.name, when, t.connections, direction_counters(t),
               t.calls);
}

}  // namespace uvhost::serve
