// frontend.cpp - the embedded frontend's control path: handshake, guest memory, vring
// setup and teardown (see frontend.h). The datapath is in frontend_queue.cpp.
#include "uvhost/vhost_user/frontend.h"

#include <sys/eventfd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "uvhost/vhost_user/frontend_queue.h"

namespace uvhost::vhost_user {

namespace {

constexpr size_t kPageSize = 4096;
constexpr size_t align_up(size_t value, size_t alignment) noexcept { return (value + alignment - 1) & ~(alignment - 1); }

bool is_power_of_two(uint32_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }

virtio::DriverOptions driver_options(const FrontendOptions& options, uint64_t features) {
  virtio::DriverOptions d;
  d.size = options.queue_size;
  d.event_idx = (features & feature::kRingEventIdx) != 0;
  d.in_order = (features & feature::kInOrder) != 0;
  d.indirect_desc = false;  // one descriptor per buffer: nothing to gain
  return d;
}

}  // namespace

Frontend::Frontend(Connection connection, const FrontendOptions& options)
    : connection_(std::move(connection)), options_(options), vring_bases_(size_t{options.queue_pairs} * 2) {}

Frontend::~Frontend() {
  connection_.close();
  pairs_.clear();  // the driver rings point into the mapping: gone before it
  if (memory_ != nullptr) ::munmap(memory_, memory_bytes_);
  if (log_ != nullptr) ::munmap(log_, log_bytes_);
}

bool Frontend::fail(std::string why) {
  if (error_.empty()) error_ = std::move(why);
  return false;
}

std::unique_ptr<Frontend> Frontend::start(Connection connection, const FrontendOptions& options, std::string& error) {
  if (!is_power_of_two(options.queue_size) || options.queue_size > 32768) {
    error = fmt::format("frontend: queue size {} is not a power of two up to 32768", options.queue_size);
    return nullptr;
  }
  if (options.queue_pairs == 0 || options.queue_pairs > 64) {
    error = fmt::format("frontend: {} queue pairs (1 to 64)", options.queue_pairs);
    return nullptr;
  }
  if (options.buffer_size < 64 + virtio::kNetHeaderSizeMrg || options.buffer_size > 65536) {
    error = fmt::format("frontend: buffer size {} (76 to 65536)", options.buffer_size);
    return nullptr;
  }
  std::unique_ptr<Frontend> frontend(new Frontend(std::move(connection), options));
  if (!frontend->negotiate() || !frontend->setup_memory() || !frontend->setup_vrings() ||
      !frontend->enable_vrings(true)) {
    error = frontend->error_;
    return nullptr;  // the destructor closes the socket
  }
  return frontend;
}

// ---------------------------------------------------------------- messages

bool Frontend::await_reply(Request expected, ReplyKind kind, Payload& reply) {
  // A backend that never answers must not hang us.
  if (!connection_.wait_readable(options_.reply_timeout)) {
    return fail(fmt::format("frontend: no reply to {} within {} ms", to_string(expected),
                            options_.reply_timeout.count()));
  }
  ReceiveResult received = connection_.receive();
  if (received.status == ReceiveStatus::kClosed) {
    return fail(fmt::format("frontend: backend closed the socket instead of answering {}", to_string(expected)));
  }
  if (received.status != ReceiveStatus::kMessage) {
    return fail(fmt::format("frontend: receiving the reply to {}: {}", to_string(expected), received.error));
  }
  ReplyResult parsed = parse_reply(std::move(received.message), expected, kind);
  if (auto* bad = std::get_if<ParseError>(&parsed)) return fail("frontend: " + bad->reason);
  reply = std::move(std::get<Reply>(parsed).payload);
  return true;
}

bool Frontend::request(Request request, const Payload& payload, std::span<const int> fds) {
  if (broken()) return false;
  const bool ack = (protocol_features_ & protocol::kReplyAck) != 0;
  const std::vector<std::byte> bytes = encode(request, ack ? kFlagNeedReply : 0, payload);
  SendResult sent = connection_.send(bytes, fds);
  if (!sent.ok) return fail(fmt::format("frontend: sending {}: {}", to_string(request), sent.error));
  if (!ack) return true;
  Payload reply;
  if (!await_reply(request, ReplyKind::kU64, reply)) return false;
  const uint64_t status = std::get<uint64_t>(reply);
  if (status != 0) return fail(fmt::format("frontend: backend refused {} (ack {})", to_string(request), status));
  return true;
}

template <class Reply>
bool Frontend::request_reply(Request request, const Payload& payload, Reply& value) {
  static_assert(std::is_same_v<Reply, uint64_t> || std::is_same_v<Reply, VringState>);
  constexpr ReplyKind kind = std::is_same_v<Reply, uint64_t> ? ReplyKind::kU64 : ReplyKind::kVringState;
  if (broken()) return false;
  // Requests with a reply of their own never ask for an ack too (the spec: the reply is
  // the answer).
  SendResult sent = connection_.send(encode(request, 0, payload));
  if (!sent.ok) return fail(fmt::format("frontend: sending {}: {}", to_string(request), sent.error));
  Payload reply;
  if (!await_reply(request, kind, reply)) return false;
  value = std::get<Reply>(reply);
  return true;
}

// ---------------------------------------------------------------- handshake

bool Frontend::negotiate() {
  uint64_t offered = 0;
  if (!request_reply(Request::kGetFeatures, std::monostate{}, offered)) return false;
  // Several queue pairs need VIRTIO_NET_F_MQ and the MQ protocol feature: asked for
  // whenever options.queue_pairs > 1, whatever options.features says.
  const bool multiqueue = options_.queue_pairs > 1;
  const uint64_t asked = options_.features | (multiqueue ? feature::kNetMq : 0);
  // Only bits we asked for and the backend offered; anything else it sets is ignored.
  features_ = offered & asked;

  if ((features_ & feature::kProtocolFeatures) != 0) {
    uint64_t offered_protocol = 0;
    if (!request_reply(Request::kGetProtocolFeatures, std::monostate{}, offered_protocol)) return false;
    uint64_t wanted = (options_.protocol_features | (multiqueue ? protocol::kMq : 0)) & offered_protocol;
    // MQ only matters with several pairs; STATUS is never asked for (it would make a
    // backend such as DPDK wait for SET_STATUS DRIVER_OK before using the rings).
    wanted &= ~protocol::kStatus;
    if (!request(Request::kSetProtocolFeatures, wanted)) return false;
    // From here on REPLY_ACK (if in `wanted`) applies.
    protocol_features_ = wanted;
    if ((protocol_features_ & protocol::kMq) != 0) {
      uint64_t queues = 0;
      if (!request_reply(Request::kGetQueueNum, std::monostate{}, queues)) return false;
      if (queues < options_.queue_pairs) {
        return fail(fmt::format("frontend: backend has {} queue pairs, {} asked for", queues, options_.queue_pairs));
      }
    }
  }
  if (multiqueue &&
      ((features_ & feature::kNetMq) == 0 || (protocol_features_ & protocol::kMq) == 0)) {
    return fail("frontend: several queue pairs need VIRTIO_NET_F_MQ and the MQ protocol feature");
  }
  if (!request(Request::kSetOwner, std::monostate{})) return false;
  if (!request(Request::kSetFeatures, features_)) return false;

  mrg_rxbuf_ = (features_ & feature::kNetMrgRxbuf) != 0;
  header_size_ = virtio::net_header_size(mrg_rxbuf_ || (features_ & feature::kVersion1) != 0);
  return true;
}

bool Frontend::setup_memory() {
  const virtio::DriverOptions d = driver_options(options_, features_);
  const bool packed = (features_ & feature::kRingPacked) != 0;
  const size_t ring_bytes = align_up(virtio::DriverRing::required_bytes(d, packed), kPageSize);
  const size_t buffer_bytes = align_up(size_t{options_.queue_size} * options_.buffer_size, kPageSize);
  const size_t vrings = size_t{options_.queue_pairs} * 2;
  memory_bytes_ = vrings * (ring_bytes + buffer_bytes);

  if (options_.memory_dir.empty()) {
    memfd_.reset(::memfd_create("uvhost-frontend", MFD_CLOEXEC));
    if (!memfd_) return fail(fmt::format("frontend: memfd_create: {}", std::strerror(errno)));
  } else {
    // An unlinked file in the directory (hugetlbfs: sized in whole huge pages).
    std::string path = options_.memory_dir + "/uvhost-frontend-XXXXXX";
    memfd_.reset(::mkostemp(path.data(), O_CLOEXEC));
    if (!memfd_) return fail(fmt::format("frontend: mkostemp in {}: {}", options_.memory_dir, std::strerror(errno)));
    (void)::unlink(path.c_str());
    struct statvfs fs {};
    if (::fstatvfs(memfd_.get(), &fs) == 0 && fs.f_bsize > kPageSize) memory_bytes_ = align_up(memory_bytes_, fs.f_bsize);
  }
  if (::ftruncate(memfd_.get(), static_cast<off_t>(memory_bytes_)) != 0) {
    return fail(fmt::format("frontend: ftruncate({}): {}", memory_bytes_, std::strerror(errno)));
  }
  void* mapping = ::mmap(nullptr, memory_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_.get(), 0);
  if (mapping == MAP_FAILED) return fail(fmt::format("frontend: mmap: {}", std::strerror(errno)));
  memory_ = static_cast<std::byte*>(mapping);

  // Layout: all rings first, then all buffers (each piece page-aligned).
  const uint64_t base = options_.guest_phys_base;
  auto guest_of = [&](const std::byte* host) { return base + static_cast<uint64_t>(host - memory_); };
  std::byte* next_ring = memory_;
  std::byte* next_buffers = memory_ + vrings * ring_bytes;
  for (uint32_t p = 0; p < options_.queue_pairs; ++p) {
    auto pair = std::make_unique<FrontendQueuePair>();
    for (FrontendVring* vring : {&pair->rx, &pair->tx}) {
      vring->index = 2 * p + (vring == &pair->tx ? 1u : 0u);
      vring->ring_host = next_ring;
      vring->ring_bytes = ring_bytes;
      vring->buffers_host = next_buffers;
      vring->buffers_guest = guest_of(next_buffers);
      vring->slot_of_head.assign(options_.queue_size, FrontendVring::kNoSlot);
      next_ring += ring_bytes;
      next_buffers += buffer_bytes;
      vring->kick.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
      vring->call.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
      if (!vring->kick || !vring->call) return fail(fmt::format("frontend: eventfd: {}", std::strerror(errno)));
      vring->queue = std::make_unique<virtio::DriverRing>(
          d, virtio::DriverRingArea{vring->ring_host, guest_of(vring->ring_host), ring_bytes},
          virtio::eventfd_kick(vring->kick.get()), packed);
      // Polling is the default: the device need not signal us until a wait_*() asks.
      vring->queue->disable_interrupts();
    }
    pair->tx_next_slot.assign(options_.queue_size, FrontendVring::kNoSlot);
    pair->tx_chain.reserve(options_.queue_size);
    pair->tx_free_slots.reserve(options_.queue_size);
    for (uint32_t s = options_.queue_size; s-- > 0;) pair->tx_free_slots.push_back(static_cast<uint16_t>(s));
    pairs_.push_back(std::move(pair));
  }

  MemoryTable table;
  table.count = 1;
  table.regions[0] = MemoryRegionDesc{base, memory_bytes_, reinterpret_cast<uint64_t>(memory_), 0};
  const int fds[] = {memfd_.get()};
  return request(Request::kSetMemTable, table, fds);
}

bool Frontend::setup_vrings() {
  for (auto& pair : pairs_) {
    // RX buffers are posted before the ring starts: the device may fill them at once.
    for (uint16_t slot = 0; slot < options_.queue_size; ++slot) {
      const virtio::DriverRing::Buffer buffer{pair->rx.slot_guest(slot, options_.buffer_size), options_.buffer_size,
                                              true};
      const std::optional<uint16_t> head = pair->rx.queue->add_chain({&buffer, 1});
      if (!head) return fail("frontend: internal: RX ring full while posting");
      pair->rx.slot_of_head[*head] = slot;
    }
    // No kick yet (no kick fd sent): publish just makes avail->idx visible.
    (void)pair->rx.queue->publish();

    for (FrontendVring* vring : {&pair->rx, &pair->tx}) {
      const virtio::QueueConfig config = vring->queue->device_config();
      auto user_addr = [&](uint64_t guest) {
        return reinterpret_cast<uint64_t>(memory_) + (guest - options_.guest_phys_base);
      };
      const int call_fd[] = {vring->call.get()};
      const int kick_fd[] = {vring->kick.get()};
      const bool no_kick = options_.no_kick_fd;
      if (options_.err_fds) {
        vring->err.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
        if (!vring->err) return fail(fmt::format("frontend: eventfd: {}", std::strerror(errno)));
        const int err_fd[] = {vring->err.get()};
        if (!request(Request::kSetVringErr, VringFd{vring->index, false}, err_fd)) return false;
      }
      if (!request(Request::kSetVringNum, VringState{vring->index, options_.queue_size}) ||
          !request(Request::kSetVringBase, VringState{vring->index, vring->queue->initial_base()}) ||
          !request(Request::kSetVringAddr,
                   VringAddress{vring->index, 0, user_addr(config.desc_addr), user_addr(config.used_addr),
                                user_addr(config.avail_addr), 0}) ||
          !request(Request::kSetVringCall, VringFd{vring->index, false}, call_fd) ||
          // The kick fd starts the ring: everything above must be in place first.
          !request(Request::kSetVringKick, VringFd{vring->index, no_kick},
                   no_kick ? std::span<const int>() : std::span<const int>(kick_fd))) {
        return false;
      }
    }
  }
  return true;
}

bool Frontend::enable_vrings(bool enable) {
  // Without protocol features rings are enabled from the start and the message is not
  // part of the protocol.
  if ((features_ & feature::kProtocolFeatures) == 0) return true;
  for (auto& pair : pairs_) {
    for (const FrontendVring* vring : {&pair->rx, &pair->tx}) {
      if (!request(Request::kSetVringEnable, VringState{vring->index, enable ? 1u : 0u})) return false;
    }
  }
  // The device may have stalled on an empty ring before it was enabled: kick once.
  if (enable) {
    for (auto& pair : pairs_) virtio::eventfd_kick(pair->rx.kick.get())();
  }
  return true;
}

bool Frontend::stop() {
  if (!connection_.is_open()) return !broken();
  bool ok = !broken() && enable_vrings(false);
  for (auto& pair : pairs_) {
    for (const FrontendVring* vring : {&pair->rx, &pair->tx}) {
      if (!ok) break;
      VringState state;
      ok = request_reply(Request::kGetVringBase, VringState{vring->index, 0}, state);
      if (!ok) break;
      if (state.index != vring->index) {
        ok = fail(fmt::format("frontend: GET_VRING_BASE for vring {} answered for vring {}", vring->index,
                              state.index));
        break;
      }
      // The next entry the device would process lies between the first we have not
      // reaped and the last we made available: anything else is a lie about the ring.
      if (!vring->queue->stopped_base_plausible(state.num)) {
        ok = fail(fmt::format("frontend: GET_VRING_BASE for vring {} answered {:#x}, which the ring cannot have reached",
                              vring->index, state.num));
        break;
      }
      vring_bases_[vring->index] = static_cast<uint16_t>(state.num);
    }
  }
  connection_.close();
  return ok;
}

std::optional<uint16_t> Frontend::stopped_base(uint32_t vring) const {
  if (vring >= vring_bases_.size()) return std::nullopt;
  return vring_bases_[vring];
}

// ---------------------------------------------------------------- connecting

std::unique_ptr<Frontend> connect_frontend(const std::string& path, const FrontendOptions& options,
                                           std::chrono::milliseconds total, std::string& error) {
  Backoff backoff;
  backoff.total = total;
  backoff.max = std::chrono::milliseconds{200};
  std::optional<Connection> connection = connect_with_backoff(path, backoff, error);
  if (!connection) return nullptr;
  return Frontend::start(std::move(*connection), options, error);
}

std::unique_ptr<Frontend> listen_frontend(const std::string& path, const FrontendOptions& options,
                                          std::chrono::milliseconds accept_timeout, std::string& error) {
  Listener::Options listen_options;
  listen_options.replace_stale = true;
  std::optional<Listener> listener = Listener::bind(path, listen_options, error);
  if (!listener) return nullptr;
  std::optional<Connection> connection = listener->accept(accept_timeout, error);
  if (!connection) return nullptr;
  // The listener goes (and unlinks the path) when we return; the connection stays.
  return Frontend::start(std::move(*connection), options, error);
}

}  // namespace uvhost::vhost_user
