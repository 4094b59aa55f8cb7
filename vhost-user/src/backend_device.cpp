// backend_device.cpp - the vhost-user backend state machine (see backend_device.h).
#include "uvhost/vhost_user/backend_device.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "uvhost/vhost_user/features.h"
#include "uvhost/vhost_user/socket_inspection.h"

namespace uvhost::vhost_user {

namespace {

// Virtio split rings: a power of two up to 32768 (virtio 1.2, 2.7).
constexpr uint32_t kMaxRingSize = 32768;
// Ethernet minimum MTU that virtio-net allows (VIRTIO_NET_F_MTU: "at least 68").
constexpr uint64_t kMinMtu = 68;
constexpr uint64_t kMaxMtu = 65535;

bool is_power_of_two(uint32_t n) { return n != 0 && (n & (n - 1)) == 0; }

// Is `fd` an eventfd? Empty if so, else why not (for the refusal).
//
// Why it matters: the datapath reads kick fds and writes call fds on its own threads,
// trusting them to be eventfds (an 8-byte counter: a write adds to it and, in practice,
// never blocks; a read drains it). A pipe as call fd fills up and then blocks the
// writer once the frontend stops reading; a memfd or a socket means something else
// again. So anything but an eventfd is refused.
//
// How: the kernel names every eventfd's file "[eventfd]" on its anon inode, which
// readlink of /proc/self/fd/N shows as "anon_inode:[eventfd]". fstat cannot tell:
// eventfds share one anon inode with timerfds, signalfds, epoll fds and more, whose
// st_mode has no file type to rely on; fstatfs's ANON_INODE_FS_MAGIC has the same
// blind spot. One readlink is a few microseconds, on the control path
// only. Without /proc the check fails closed: the fd is refused and the reason says why.
std::string not_an_eventfd(int fd) {
  constexpr std::string_view kEventfd = "anon_inode:[eventfd]";
  const std::string path = fmt::format("/proc/self/fd/{}", fd);
  char target[64];  // enough for every anon inode name; longer names are cut (and differ)
  const ssize_t n = ::readlink(path.c_str(), target, sizeof(target));
  if (n < 0) {
    return fmt::format("cannot tell whether the fd is an eventfd: readlink {}: {}", path, std::strerror(errno));
  }
  const std::string_view what(target, static_cast<size_t>(n));
  if (what == kEventfd) return {};
  // The name may come from the frontend (a memfd's or a file's): escaped, quoted.
  return fmt::format("fd is {:?}, not an eventfd", what);
}

}  // namespace

BackendDevice::BackendDevice(Connection connection, DatapathHooks& hooks, DeviceOptions options)
    : connection_(std::move(connection)),
      hooks_(hooks),
      options_(std::move(options)),
      slots_(options_.max_mem_slots),
      backend_channel_(options_.name) {
  if (options_.queue_pairs == 0 || options_.queue_pairs > kMaxQueuePairs) {
    spdlog::warn("{}: {} queue pairs out of range 1..{}, using 1", options_.name, options_.queue_pairs, kMaxQueuePairs);
    options_.queue_pairs = 1;
  }
  table_ = virtio::GuestMemoryMap::create({});
  memory_ = std::make_unique<virtio::GuardedGuestMemory>(options_.memory_policy, table_->share());
  vrings_.resize(queue_count());
}

BackendDevice::~BackendDevice() {
  stop_all();
  // The hooks may outlive this device (a port serves one connection after another):
  // they must not keep a pointer to the log about to be unmapped.
  if (log_) hooks_.log_changed(nullptr);
}

uint64_t BackendDevice::offered_features() const noexcept {
  return offered_net_features(options_.queue_pairs, options_.backend_features);
}

BackendDevice::Progress BackendDevice::handle_one() {
  if (!connection_.is_open()) return Progress::kClosed;
  ReceiveResult received = connection_.receive();
  switch (received.status) {
    case ReceiveStatus::kMessage: return handle(std::move(received.message));
    case ReceiveStatus::kClosed:
      spdlog::info("{}: frontend closed the connection", options_.name);
      close_reason_ = "frontend closed the connection";
      closed_by_frontend_ = true;
      stop_all();
      connection_.close();
      return Progress::kClosed;
    case ReceiveStatus::kError: break;
  }
  return close_with(received.error);
}

BackendDevice::Progress BackendDevice::handle(RawMessage raw) {
  if (!connection_.is_open()) return Progress::kClosed;
  ParseResult parsed = parse_request(std::move(raw), ParseLimits{queue_count()});
  if (const auto* error = std::get_if<ParseError>(&parsed)) {
    return refuse(error->request, error->flags, error->reason);
  }
  Message& message = std::get<Message>(parsed);
  spdlog::debug("{}: {}", options_.name, to_string(message.request));
  Outcome outcome = dispatch(message);
  if (!outcome.ok) {
    return refuse(static_cast<uint32_t>(message.request), message.flags,
                  fmt::format("{}: {}", to_string(message.request), outcome.reason));
  }
  if (outcome.reply) {
    if (!send_reply(message.request, *outcome.reply)) return Progress::kClosed;
  } else if (message.need_reply() && has_protocol(protocol::kReplyAck)) {
    if (!send_reply(message.request, uint64_t{0})) return Progress::kClosed;
  }
  return Progress::kContinue;
}

BackendDevice::Progress BackendDevice::refuse(uint32_t request, uint32_t flags, const std::string& reason) {
  // REPLY_ACK lets the frontend learn of a failure and go on; without it the spec gives
  // no way to say "no", so the connection ends. A message whose version is wrong is
  // not vhost-user at all: no reply to it.
  const bool may_answer = (flags & kFlagNeedReply) != 0 && (flags & kVersionMask) == kVersion1 &&
                          has_protocol(protocol::kReplyAck);
  if (!may_answer) return close_with(reason);
  spdlog::warn("{}: refused: {}", options_.name, reason);
  if (!send_reply(static_cast<Request>(request), uint64_t{1})) return Progress::kClosed;
  return Progress::kContinue;
}

BackendDevice::Progress BackendDevice::close_with(std::string reason) {
  spdlog::error("{}: closing the connection: {}", options_.name, reason);
  close_reason_ = std::move(reason);
  stop_all();
  connection_.close();
  return Progress::kClosed;
}

bool BackendDevice::send_reply(Request request, const Payload& payload) {
  const std::vector<std::byte> bytes = encode_reply(request, payload);
  const SendResult sent = connection_.send(bytes);
  if (!sent.ok) {
    close_with(fmt::format("cannot send the reply to {}: {}", to_string(request), sent.error));
    return false;
  }
  return true;
}

BackendDevice::Outcome BackendDevice::require_protocol(uint64_t bit, const char* name) const {
  if (has_protocol(bit)) return {};
  return fail(fmt::format("protocol feature {} not negotiated", name));
}

BackendDevice::Outcome BackendDevice::dispatch(Message& message) {
  // The handler of each request the parser accepts (kRequestTable names them and gives
  // their rules); the static_assert below keeps the two in step.
  using Handler = Outcome (*)(BackendDevice&, Message&);
  struct HandlerRow {
    Request request;
    Handler handler;
  };
  static constexpr HandlerRow kHandlers[] = {
      {Request::kGetFeatures, [](BackendDevice& d, Message&) { return Outcome{true, {}, Payload{d.offered_features()}}; }},
      {Request::kSetFeatures, [](BackendDevice& d, Message& m) { return d.on_set_features(std::get<uint64_t>(m.payload)); }},
      {Request::kSetOwner,
       [](BackendDevice& d, Message&) {
         // QEMU sends SET_OWNER once per vhost_dev, i.e. once per queue pair on one socket.
         d.owner_set_ = true;
         return Outcome{};
       }},
      {Request::kResetOwner,
       [](BackendDevice& d, Message&) {
         // Deprecated; the spec recommends ignoring it or disabling all rings. We stop them.
         d.stop_all();
         return Outcome{};
       }},
      {Request::kGetProtocolFeatures, [](BackendDevice&, Message&) { return Outcome{true, {}, Payload{protocol::kImplemented}}; }},
      {Request::kSetProtocolFeatures,
       [](BackendDevice& d, Message& m) { return d.on_set_protocol_features(std::get<uint64_t>(m.payload)); }},
      {Request::kGetQueueNum,
       [](BackendDevice& d, Message&) {
         if (Outcome gate = d.require_protocol(protocol::kMq, "MQ"); !gate.ok) return gate;
         // Queue pairs, as QEMU compares it with its "queues=" (pairs) and DPDK answers.
         return Outcome{true, {}, Payload{uint64_t{d.options_.queue_pairs}}};
       }},
      {Request::kSetMemTable, [](BackendDevice& d, Message& m) { return d.on_set_mem_table(m); }},
      {Request::kGetMaxMemSlots,
       [](BackendDevice& d, Message&) {
         if (Outcome gate = d.require_protocol(protocol::kConfigureMemSlots, "CONFIGURE_MEM_SLOTS"); !gate.ok) return gate;
         return Outcome{true, {}, Payload{uint64_t{d.options_.max_mem_slots}}};
       }},
      {Request::kAddMemReg, [](BackendDevice& d, Message& m) { return d.on_add_mem_reg(m); }},
      {Request::kRemMemReg, [](BackendDevice& d, Message& m) { return d.on_rem_mem_reg(std::get<SingleRegion>(m.payload)); }},
      {Request::kSetLogBase, [](BackendDevice& d, Message& m) { return d.on_set_log_base(m); }},
      {Request::kSetLogFd,
       [](BackendDevice& d, Message& m) {
         // The kernel's vhost takes an eventfd here too (VHOST_SET_LOG_FD: eventfd_ctx_fdget).
         if (std::string why = not_an_eventfd(m.fds.at(0).get()); !why.empty()) return fail(std::move(why));
         d.log_eventfd_ = std::move(m.fds.at(0));
         return Outcome{};
       }},
      {Request::kSetVringNum, [](BackendDevice& d, Message& m) { return d.on_set_vring_num(std::get<VringState>(m.payload)); }},
      {Request::kSetVringAddr,
       [](BackendDevice& d, Message& m) { return d.on_set_vring_addr(std::get<VringAddress>(m.payload)); }},
      {Request::kSetVringBase, [](BackendDevice& d, Message& m) { return d.on_set_vring_base(std::get<VringState>(m.payload)); }},
      {Request::kGetVringBase, [](BackendDevice& d, Message& m) { return d.on_get_vring_base(std::get<VringState>(m.payload)); }},
      {Request::kSetVringKick, &BackendDevice::dispatch_vring_fd},
      {Request::kSetVringCall, &BackendDevice::dispatch_vring_fd},
      {Request::kSetVringErr, &BackendDevice::dispatch_vring_fd},
      {Request::kSetVringEnable,
       [](BackendDevice& d, Message& m) { return d.on_set_vring_enable(std::get<VringState>(m.payload)); }},
      {Request::kNetSetMtu, [](BackendDevice& d, Message& m) { return d.on_net_set_mtu(std::get<uint64_t>(m.payload)); }},
      {Request::kSetStatus, [](BackendDevice& d, Message& m) { return d.on_set_status(std::get<uint64_t>(m.payload)); }},
      {Request::kGetStatus,
       [](BackendDevice& d, Message&) {
         if (Outcome gate = d.require_protocol(protocol::kStatus, "STATUS"); !gate.ok) return gate;
         return Outcome{true, {}, Payload{uint64_t{d.status_}}};
       }},
      {Request::kSendRarp, [](BackendDevice& d, Message& m) { return d.on_send_rarp(std::get<uint64_t>(m.payload)); }},
      {Request::kSetBackendReqFd, [](BackendDevice& d, Message& m) { return d.on_set_backend_req_fd(m); }},
      {Request::kIotlbMsg, [](BackendDevice& d, Message& m) { return d.on_iotlb_msg(std::get<IotlbMessage>(m.payload)); }},
  };
  // Exactly the requests the parser accepts have a handler.
  static_assert([] {
    for (const RequestEntry& entry : kRequestTable) {
      size_t handlers = 0;
      for (const HandlerRow& row : kHandlers) handlers += row.request == entry.request ? 1 : 0;
      if (handlers != (entry.rule.accepted ? 1u : 0u)) return false;
    }
    return true;
  }());
  for (const HandlerRow& row : kHandlers) {
    if (row.request == message.request) return row.handler(*this, message);
  }
  // The parser lets through only the requests above; this is a guard against drift.
  return fail("not implemented");
}

BackendDevice::Outcome BackendDevice::dispatch_vring_fd(BackendDevice& device, Message& message) {
  return device.on_set_vring_fd(message.request, std::get<VringFd>(message.payload), message);
}

BackendDevice::Outcome BackendDevice::on_set_features(uint64_t features) {
  const uint64_t unknown = features & ~offered_features();
  if (unknown != 0) {
    return fail(fmt::format("features {:#x} ({}) were not offered", unknown, fmt::join(feature_names(unknown), " ")));
  }
  // A driver must not accept a feature without the ones it requires (virtio 1.2,
  // 5.1.3.1): such a set would have us hand the guest frames it cannot take.
  if (std::string why = virtio::net_feature::offload_dependency_violation(features); !why.empty()) {
    return fail(fmt::format("features {:#x} break the spec's dependency rules: {}", features, why));
  }
  // A running ring was started with EVENT_IDX/INDIRECT as negotiated then; only the
  // log switch may change under it (migration turns VHOST_F_LOG_ALL on and off).
  for (const RingControl& ring : vrings_) {
    if (ring.started && ((features ^ acked_features_) & ~feature::kLogAll) != 0) {
      return fail("only VHOST_F_LOG_ALL may change while rings run");
    }
  }
  const bool logging_changed = ((features ^ acked_features_) & feature::kLogAll) != 0;
  const bool translation_changed = ((features ^ acked_features_) & feature::kAccessPlatform) != 0;
  if (((features ^ acked_features_) & ~feature::kLogAll) != 0) {
    spdlog::info("{}: negotiated features: {}", options_.name, fmt::join(feature_names(features), " "));
  }
  acked_features_ = features;
  hooks_.features_changed(features);
  if (translation_changed) {
    if (!access_platform()) iotlb_.clear();
    publish_translation();
  }
  if (logging_changed) {
    spdlog::info("{}: dirty-page logging {} (VHOST_F_LOG_ALL)", options_.name,
                 (features & feature::kLogAll) != 0 ? "on" : "off");
  }
  return {};
}

BackendDevice::Outcome BackendDevice::on_set_protocol_features(uint64_t features) {
  const uint64_t unknown = features & ~protocol::kImplemented;
  if (unknown != 0) return fail(fmt::format("protocol features {:#x} were not offered", unknown));
  protocol_features_ = features;
  return {};
}

void BackendDevice::publish_memory(std::unique_ptr<virtio::GuestMemoryMap> map) {
  table_ = std::move(map);
  publish_translation();
}

void BackendDevice::publish_translation() {
  std::unique_ptr<virtio::GuestMemoryMap> next = access_platform() ? iotlb_.view(*table_) : table_->share();
  if (!next) {  // cannot happen: the table and the IOTLB were both checked
    spdlog::error("{}: cannot build the translation of guest memory; keeping the previous one", options_.name);
    return;
  }
  // Waits (RCU: a grace period) until no datapath reader can still see the old map,
  // then drops it (a region is unmapped with the last map sharing it); readers are
  // never blocked by this.
  memory_->replace(std::move(next));
  hooks_.memory_changed();
}

bool BackendDevice::access_platform() const noexcept {
  return (acked_features_ & feature::kAccessPlatform) != 0;
}

IotlbStats BackendDevice::iotlb_stats() const noexcept {
  return IotlbStats{iotlb_.size(),        iotlb_.updates(),
                    iotlb_.invalidations(), iotlb_.evictions(),
                    backend_channel_.misses_sent(), backend_channel_.misses_unreported()};
}

BackendDevice::Outcome BackendDevice::on_set_backend_req_fd(Message& message) {
  if (Outcome gate = require_protocol(protocol::kBackendReq, "BACKEND_REQ"); !gate.ok) return gate;
  // Only a connected Unix stream socket can carry the channel's messages (QEMU sends
  // one end of a socketpair); anything else is refused here, not found out at the
  // first miss.
  std::string error;
  const std::optional<HandedSocket> socket = inspect_handed_socket(message.fds.at(0).get(), error);
  if (!socket) return fail(fmt::format("back-end channel: {}", error));
  if (socket->listening) return fail("back-end channel: the fd is a listening socket, not a connected one");
  backend_channel_.set(std::move(message.fds.at(0)));
  return {};
}

BackendDevice::Outcome BackendDevice::on_iotlb_msg(const IotlbMessage& message) {
  if (!access_platform()) return fail("VIRTIO_F_ACCESS_PLATFORM was not negotiated");
  switch (static_cast<IotlbType>(message.type)) {
    case IotlbType::kUpdate: {
      const virtio::IovaMapping mapping{message.iova, message.size, message.user_addr,
                                        static_cast<virtio::Access>(message.perm)};
      std::string error;
      if (!iotlb_.update(mapping, *table_, error)) return fail(error);
      backend_channel_.translation_arrived(message.iova, message.size);
      spdlog::debug("{}: IOTLB update iova {:#x} size {:#x} -> uaddr {:#x} perm {}", options_.name, message.iova,
                    message.size, message.user_addr, message.perm);
      break;
    }
    case IotlbType::kInvalidate:
      iotlb_.invalidate(message.iova, message.size);
      spdlog::debug("{}: IOTLB invalidate iova {:#x} size {:#x}", options_.name, message.iova, message.size);
      break;
    default:
      return fail(fmt::format("IOTLB message type {} is not one a frontend sends (2 update, 3 invalidate)",
                              message.type));
  }
  publish_translation();
  return {};
}

BackendDevice::Outcome BackendDevice::on_set_mem_table(Message& message) {
  const auto& table = std::get<MemoryTable>(message.payload);
  std::vector<MemorySlot> slots;
  slots.reserve(table.count);
  for (uint32_t i = 0; i < table.count; ++i) slots.push_back(MemorySlot{table.regions[i], std::move(message.fds[i])});
  std::string error;
  auto map = slots_.replace(std::move(slots), error);
  if (!map) return fail(error);
  publish_memory(std::move(map));
  return {};
}

BackendDevice::Outcome BackendDevice::on_add_mem_reg(Message& message) {
  if (Outcome gate = require_protocol(protocol::kConfigureMemSlots, "CONFIGURE_MEM_SLOTS"); !gate.ok) return gate;
  std::string error;
  auto map = slots_.add(MemorySlot{std::get<SingleRegion>(message.payload).region, std::move(message.fds.at(0))},
                        error);
  if (!map) return error.empty() ? Outcome{} : fail(error);  // empty: a region present again (memory_slots.h)
  publish_memory(std::move(map));
  return {};
}

BackendDevice::Outcome BackendDevice::on_rem_mem_reg(const SingleRegion& region) {
  if (Outcome gate = require_protocol(protocol::kConfigureMemSlots, "CONFIGURE_MEM_SLOTS"); !gate.ok) return gate;
  std::string error;
  auto map = slots_.remove(region.region, error);
  if (!map) return error.empty() ? Outcome{} : fail(error);  // empty: still referenced (memory_slots.h)
  publish_memory(std::move(map));
  return {};
}

BackendDevice::Outcome BackendDevice::on_set_log_base(Message& message) {
  if (Outcome gate = require_protocol(protocol::kLogShmfd, "LOG_SHMFD"); !gate.ok) return gate;
  const auto& area = std::get<LogArea>(message.payload);
  std::string error;
  auto log = DirtyLog::map(std::move(message.fds.at(0)), area.size, area.offset, error);
  if (!log) return fail(error);
  std::unique_ptr<DirtyLog> old = std::exchange(log_, std::move(log));
  hooks_.log_changed(log_.get());
  // `old` is unmapped here, after the datapath switched to the new log.
  // With LOG_SHMFD the frontend waits for this reply (a u64 0).
  return Outcome{true, {}, Payload{uint64_t{0}}};
}

BackendDevice::Outcome BackendDevice::on_set_vring_num(const VringState& state) {
  RingControl& ring = vrings_[state.index];
  if (ring.started) return fail(fmt::format("ring {} is running", state.index));
  // A packed ring's size need not be a power of two.
  if ((acked_features_ & feature::kRingPacked) != 0) {
    if (state.num == 0 || state.num > kMaxRingSize) {
      return fail(fmt::format("ring {} size {} is not in 1..{}", state.index, state.num, kMaxRingSize));
    }
  } else if (!is_power_of_two(state.num) || state.num > kMaxRingSize) {
    return fail(fmt::format("ring {} size {} is not a power of two in 1..{}", state.index, state.num, kMaxRingSize));
  }
  ring.size = state.num;
  return {};
}

BackendDevice::Outcome BackendDevice::on_set_vring_addr(const VringAddress& address) {
  RingControl& ring = vrings_[address.index];
  const bool log_used = (address.flags & kVringFlagLog) != 0;
  if (ring.started) {
    const VringAddress& current = *ring.address;
    const bool same_rings = current.desc_user_addr == address.desc_user_addr &&
                            current.used_user_addr == address.used_user_addr &&
                            current.avail_user_addr == address.avail_user_addr;
    if (!same_rings) return fail(fmt::format("ring {} is running: stop it before moving its rings", address.index));
    ring.address = address;
    hooks_.used_log_changed(address.index, log_used, address.log_guest_addr);
    return {};
  }
  ring.address = address;
  return {};
}

BackendDevice::Outcome BackendDevice::on_set_vring_base(const VringState& state) {
  RingControl& ring = vrings_[state.index];
  if (ring.started) return fail(fmt::format("ring {} is running", state.index));
  // Split rings: a 16-bit free-running index. Packed rings: position | wrap << 15, and
  // QEMU puts the used side's in the upper 16 bits; the used side is taken equal to the
  // avail side (the ring stopped drained), as DPDK's vhost library does.
  const bool packed = (acked_features_ & feature::kRingPacked) != 0;
  if (!packed && state.num > 0xffff) {
    return fail(fmt::format("ring {} base {} does not fit 16 bits", state.index, state.num));
  }
  ring.base = static_cast<uint16_t>(state.num & 0xffff);
  return {};
}

BackendDevice::Outcome BackendDevice::on_get_vring_base(const VringState& state) {
  const uint16_t base = stop(state.index);
  // Packed: the used side in the upper half, as QEMU reads it back; it equals the avail
  // side, because the datapath stops with every popped chain used.
  const bool packed = (acked_features_ & feature::kRingPacked) != 0;
  const uint32_t num = packed ? (uint32_t{base} << 16) | base : base;
  return Outcome{true, {}, Payload{VringState{state.index, num}}};
}

BackendDevice::Outcome BackendDevice::on_set_vring_fd(Request request, const VringFd& vring, Message& message) {
  RingControl& ring = vrings_[vring.index];
  base::UniqueFd fd = vring.no_fd ? base::UniqueFd() : std::move(message.fds.at(0));
  // Checked before anything changes: a refused fd leaves the ring as it was (a running
  // ring keeps its old kick), and `fd` is closed on the way out.
  if (fd) {
    if (std::string why = not_an_eventfd(fd.get()); !why.empty()) {
      return fail(fmt::format("ring {}: {}", vring.index, why));
    }
  }
  switch (request) {
    case Request::kSetVringKick: {
      // A new kick fd for a running ring: stop it (keeping its position) and restart.
      if (ring.started) stop(vring.index);
      ring.kick = std::move(fd);
      ring.kick_set = true;
      return try_start(vring.index);
    }
    case Request::kSetVringCall: {
      base::UniqueFd old = std::exchange(ring.call, std::move(fd));
      if (ring.started) hooks_.call_fd_changed(vring.index, ring.call.get());
      return {};  // `old` is closed here, after the datapath let go of it
    }
    default: {
      base::UniqueFd old = std::exchange(ring.err, std::move(fd));
      if (ring.started) hooks_.err_fd_changed(vring.index, ring.err.get());
      return {};  // `old` is closed here, after the datapath let go of it
    }
  }
}

BackendDevice::Outcome BackendDevice::on_set_vring_enable(const VringState& state) {
  // Accepted whenever: we always offer VHOST_USER_F_PROTOCOL_FEATURES, and QEMU may
  // send this while setting up queue pairs, before SET_FEATURES of that vhost_dev.
  if (state.num > 1) return fail(fmt::format("ring {} enable value {} (must be 0 or 1)", state.index, state.num));
  RingControl& ring = vrings_[state.index];
  ring.enabled = state.num == 1;
  if (ring.started) hooks_.queue_enabled(state.index, ring.enabled);
  return {};
}

BackendDevice::Outcome BackendDevice::on_net_set_mtu(uint64_t mtu) {
  if (Outcome gate = require_protocol(protocol::kNetMtu, "NET_MTU"); !gate.ok) return gate;
  if (mtu < kMinMtu || mtu > kMaxMtu) return fail(fmt::format("MTU {} out of range {}..{}", mtu, kMinMtu, kMaxMtu));
  mtu_ = static_cast<uint16_t>(mtu);
  hooks_.mtu_changed(mtu_);
  return {};
}

BackendDevice::Outcome BackendDevice::on_set_status(uint64_t status) {
  if (Outcome gate = require_protocol(protocol::kStatus, "STATUS"); !gate.ok) return gate;
  if (status > 0xff) return fail(fmt::format("device status {:#x} does not fit 8 bits", status));
  status_ = static_cast<uint8_t>(status);
  hooks_.status_changed(status_);
  return {};
}

BackendDevice::Outcome BackendDevice::on_send_rarp(uint64_t payload) {
  if (Outcome gate = require_protocol(protocol::kRarp, "RARP"); !gate.ok) return gate;
  // "The first 6 bytes of the payload contain the mac address": bytes in memory order.
  std::memcpy(rarp_mac_.data(), &payload, rarp_mac_.size());
  ++rarp_count_;
  hooks_.rarp_requested(rarp_mac_);
  return {};
}

BackendDevice::Outcome BackendDevice::try_start(uint32_t index) {
  RingControl& ring = vrings_[index];
  if (ring.size == 0 || !ring.address) {
    return fail(fmt::format("ring {} got its kick before its size and addresses", index));
  }
  const bool has_memory = memory_->read([](const virtio::GuestMemoryMap& map) { return map.region_count() > 0; });
  if (!has_memory) return fail(fmt::format("ring {} got its kick before any guest memory", index));
  const VringAddress& address = *ring.address;
  QueueStart start;
  start.index = index;
  start.config.size = ring.size;
  start.config.desc_addr = address.desc_user_addr;
  start.config.avail_addr = address.avail_user_addr;
  start.config.used_addr = address.used_user_addr;
  // With ACCESS_PLATFORM ring addresses are IOVAs, translated (and missed) like buffers.
  start.config.address_space =
      access_platform() ? virtio::AddressSpace::kGuestPhysical : virtio::AddressSpace::kFrontendVirtual;
  start.config.translation_misses = access_platform() ? &backend_channel_ : nullptr;
  start.config.event_idx = (acked_features_ & feature::kRingEventIdx) != 0;
  start.config.indirect_desc = (acked_features_ & feature::kRingIndirectDesc) != 0;
  start.config.in_order = (acked_features_ & feature::kInOrder) != 0;
  start.config.packed = (acked_features_ & feature::kRingPacked) != 0;
  start.last_avail_index = ring.base;
  start.kick_fd = ring.kick.get();
  start.call_fd = ring.call.get();
  start.err_fd = ring.err.get();
  // Spec "Ring states": without VHOST_USER_F_PROTOCOL_FEATURES a ring starts enabled.
  start.enabled = (acked_features_ & feature::kProtocolFeatures) != 0 ? ring.enabled : true;
  start.log_used = (address.flags & kVringFlagLog) != 0;
  start.log_guest_addr = address.log_guest_addr;
  if (!hooks_.queue_started(start, *memory_)) {
    return fail(fmt::format("ring {} cannot start: the datapath refused it (rings outside guest memory?)", index));
  }
  ring.started = true;
  ring.enabled = start.enabled;
  return {};
}

uint16_t BackendDevice::stop(uint32_t index) {
  RingControl& ring = vrings_[index];
  if (ring.started) {
    ring.base = hooks_.queue_stopped(index);
    ring.started = false;
    // A stopped ring restarts only with a new SET_VRING_KICK (as QEMU sends it).
    ring.kick.reset();
    ring.kick_set = false;
  }
  return ring.base;
}

void BackendDevice::stop_all() {
  for (uint32_t i = 0; i < vrings_.size(); ++i) stop(i);
}

}  // namespace uvhost::vhost_user
