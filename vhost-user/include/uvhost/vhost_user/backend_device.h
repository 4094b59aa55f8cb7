// backend_device.h - the backend side of one vhost-user connection: the protocol state
// machine of a virtio-net device.
//
// Contract
// --------
//  What it guarantees
//  - handle_one() receives one message and answers it as the spec says; handle() does
//    the same for a message received elsewhere. Requests: GET/SET_FEATURES,
//    GET/SET_PROTOCOL_FEATURES, SET_OWNER, RESET_OWNER, SET_MEM_TABLE,
//    GET_MAX_MEM_SLOTS, ADD_MEM_REG, REM_MEM_REG, SET_VRING_NUM/ADDR/BASE,
//    GET_VRING_BASE, SET_VRING_KICK/CALL/ERR, SET_VRING_ENABLE, GET_QUEUE_NUM,
//    GET/SET_STATUS, NET_SET_MTU, SET_LOG_BASE, SET_LOG_FD, SEND_RARP,
//    SET_BACKEND_REQ_FD, IOTLB_MSG.
//  - VIRTIO_F_ACCESS_PLATFORM acked: what the datapath translates through is the IOVA
//    view of the memory table made from the IOTLB (iotlb.h), republished on every
//    IOTLB update or invalidation and every memory table change; ring addresses are
//    IOVAs; a queue's misses go out on the back-end channel (backend_channel.h). An
//    IOTLB_MSG without the feature, of a type other than update (2) or invalidate (3),
//    or an update outside the memory table is refused. Without the feature the memory
//    table itself is published, as before.
//  - GET_FEATURES offers offered_net_features(queue_pairs, backend_features)
//    (features.h); SET_FEATURES is refused when it holds a bit not offered or breaks
//    the spec's offload dependency rules (virtio/net_features.h: e.g. HOST_TSO4
//    without CSUM), or changes anything but LOG_ALL while rings run.
//  - A request that is malformed (parser), unknown, unsupported, not allowed by what
//    was negotiated, or invalid (ring size, memory regions, ...) is refused: if the
//    frontend set NEED_REPLY and REPLY_ACK is negotiated it gets a nonzero u64 reply
//    and the connection goes on; otherwise the device logs one line (spdlog, with the
//    reason) and closes the connection (handle returns kClosed). Never a hang: we
//    never wait for anything but the next message (and a started message's remainder
//    for at most the connection's continuation timeout). Requests with a reply of their
//    own (GET_*, SET_LOG_BASE) get it on success; on failure the same rule as above.
//  - With NEED_REPLY and REPLY_ACK negotiated, requests without a reply of their own
//    get a u64 0 on success.
//  - Guest memory is published through GuardedGuestMemory (policy chosen at creation,
//    RCU by default), so a SET_MEM_TABLE / ADD / REM does not stop other queues'
//    datapath: readers see the old or the new map, never a freed one.
//  - Ring life cycle (spec "Ring states"): stopped until SET_VRING_KICK (with size,
//    addresses and memory set); started disabled if VHOST_USER_F_PROTOCOL_FEATURES
//    was negotiated, else enabled; SET_VRING_ENABLE toggles; GET_VRING_BASE stops it
//    and answers the next avail index. The datapath hears all of it via DatapathHooks.
//  - Every fd received is owned (UniqueFd) and closed when replaced, unused, refused,
//    or when the device is destroyed. The destructor stops every started ring first.
//  - The fd of SET_VRING_KICK / SET_VRING_CALL / SET_VRING_ERR / SET_LOG_FD must be an
//    eventfd (checked through /proc/self/fd), else the request is refused and the ring
//    stays as it was; SET_BACKEND_REQ_FD's must be a connected Unix stream socket
//    (socket_inspection.h); memory region fds: see memory_slots.h.
//
//  What it trusts and what not
//  - Trusts the hooks (datapath_hooks.h). Trusts nothing from the frontend.
//  - One control thread calls handle*/accessors; not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "uvhost/sync/read_mostly.h"
#include "uvhost/vhost_user/backend_channel.h"
#include "uvhost/vhost_user/connection.h"
#include "uvhost/vhost_user/datapath_hooks.h"
#include "uvhost/vhost_user/dirty_log.h"
#include "uvhost/vhost_user/iotlb.h"
#include "uvhost/vhost_user/memory_slots.h"
#include "uvhost/vhost_user/message.h"
#include "uvhost/virtio/guarded_guest_memory.h"

namespace uvhost::vhost_user {

// The most queue pairs a device takes: vring indexes fit the 8-bit index of
// SET_VRING_KICK's u64 payload.
inline constexpr uint32_t kMaxQueuePairs = 128;

struct DeviceOptions {
  std::string name = "vhost-user-net";
  uint32_t queue_pairs = 1;  // 1..kMaxQueuePairs (vring indexes 0..2*pairs-1)
  sync::GuardPolicy memory_policy = sync::GuardPolicy::kRcu;
  uint32_t max_mem_slots = 32;  // GET_MAX_MEM_SLOTS (ADD_MEM_REG limit)
  // The features the port's backend honours (its offloads), offered on top of the
  // base set: offered_net_features() in features.h.
  uint64_t backend_features = 0;
};

// The per-ring state the protocol keeps (exposed for tests and diagnostics).
struct RingControl {
  uint32_t size = 0;  // SET_VRING_NUM; 0 = not set
  std::optional<VringAddress> address;
  uint16_t base = 0;  // SET_VRING_BASE, or what the last stop returned
  base::UniqueFd kick;
  base::UniqueFd call;
  base::UniqueFd err;
  bool kick_set = false;  // SET_VRING_KICK seen (with an fd or NOFD)
  bool started = false;
  bool enabled = false;
};

class BackendDevice {
 public:
  enum class Progress { kContinue, kClosed };

  BackendDevice(Connection connection, DatapathHooks& hooks, DeviceOptions options = {});
  ~BackendDevice();
  BackendDevice(const BackendDevice&) = delete;
  BackendDevice& operator=(const BackendDevice&) = delete;

  // Receives one message (blocks until it arrives) and handles it.
  Progress handle_one();
  // Handles one message received elsewhere (also the fuzzer's entry point).
  Progress handle(RawMessage raw);

  bool is_open() const noexcept { return connection_.is_open(); }
  Connection& connection() noexcept { return connection_; }
  const std::string& close_reason() const noexcept { return close_reason_; }
  // The frontend hung up between messages (as opposed to a refused message, a broken
  // stream or a failed reply).
  bool closed_by_frontend() const noexcept { return closed_by_frontend_; }

  uint32_t queue_count() const noexcept { return options_.queue_pairs * 2; }
  uint64_t offered_features() const noexcept;
  uint64_t acked_features() const noexcept { return acked_features_; }
  uint64_t protocol_features() const noexcept { return protocol_features_; }
  bool has_protocol(uint64_t bit) const noexcept { return (protocol_features_ & bit) != 0; }
  bool owner_set() const noexcept { return owner_set_; }
  uint8_t status() const noexcept { return status_; }
  uint16_t mtu() const noexcept { return mtu_; }
  uint64_t rarp_count() const noexcept { return rarp_count_; }
  const std::array<uint8_t, 6>& last_rarp_mac() const noexcept { return rarp_mac_; }
  const RingControl& vring(uint32_t index) const { return vrings_.at(index); }
  size_t memory_slot_count() const noexcept { return slots_.size(); }
  virtio::GuardedGuestMemory& memory() noexcept { return *memory_; }
  bool access_platform() const noexcept;
  // The IOTLB and the back-end channel (VIRTIO_F_ACCESS_PLATFORM), for stats.
  IotlbStats iotlb_stats() const noexcept;
  DirtyLog* dirty_log() noexcept { return log_.get(); }

 private:
  // What handling one request came to.
  struct Outcome {
    bool ok = true;
    std::string reason;             // why not, for the log and the close reason
    std::optional<Payload> reply;   // the request's own reply, if it has one
  };
  static Outcome fail(std::string reason) { return Outcome{false, std::move(reason), std::nullopt}; }

  Outcome dispatch(Message& message);
  static Outcome dispatch_vring_fd(BackendDevice& device, Message& message);
  Outcome on_set_features(uint64_t features);
  Outcome on_set_protocol_features(uint64_t features);
  Outcome on_set_mem_table(Message& message);
  Outcome on_add_mem_reg(Message& message);
  Outcome on_rem_mem_reg(const SingleRegion& region);
  Outcome on_set_log_base(Message& message);
  Outcome on_set_vring_num(const VringState& state);
  Outcome on_set_vring_addr(const VringAddress& address);
  Outcome on_set_vring_base(const VringState& state);
  Outcome on_get_vring_base(const VringState& state);
  Outcome on_set_vring_fd(Request request, const VringFd& vring, Message& message);
  Outcome on_set_vring_enable(const VringState& state);
  Outcome on_net_set_mtu(uint64_t mtu);
  Outcome on_set_status(uint64_t status);
  Outcome on_send_rarp(uint64_t payload);
  Outcome on_set_backend_req_fd(Message& message);
  Outcome on_iotlb_msg(const IotlbMessage& message);
  Outcome require_protocol(uint64_t bit, const char* name) const;

  // A new memory table (SET_MEM_TABLE, ADD/REM_MEM_REG): kept, and published.
  void publish_memory(std::unique_ptr<virtio::GuestMemoryMap> map);
  // Publishes what the datapath translates through: the memory table, or its IOVA view.
  void publish_translation();
  Outcome try_start(uint32_t index);
  uint16_t stop(uint32_t index);
  void stop_all();

  // Sends `payload` as the reply to `request`; false (connection closed) on failure.
  bool send_reply(Request request, const Payload& payload);
  Progress refuse(uint32_t request, uint32_t flags, const std::string& reason);
  Progress close_with(std::string reason);

  Connection connection_;
  DatapathHooks& hooks_;
  DeviceOptions options_;
  std::string close_reason_;
  bool closed_by_frontend_ = false;

  uint64_t acked_features_ = 0;
  uint64_t protocol_features_ = 0;
  bool owner_set_ = false;
  uint8_t status_ = 0;
  uint16_t mtu_ = 0;
  uint64_t rarp_count_ = 0;
  std::array<uint8_t, 6> rarp_mac_{};

  MemorySlots slots_;
  std::unique_ptr<virtio::GuestMemoryMap> table_;  // the memory table as last built
  Iotlb iotlb_;
  BackendChannel backend_channel_;
  std::unique_ptr<virtio::GuardedGuestMemory> memory_;
  std::unique_ptr<DirtyLog> log_;
  base::UniqueFd log_eventfd_;
  std::vector<RingControl> vrings_;
};

}  // namespace uvhost::vhost_user
