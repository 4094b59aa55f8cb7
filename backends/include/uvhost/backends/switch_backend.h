// switch_backend.h - the `switch` backend: ports of one daemon joined by an L2
// learning switch (SwitchHub, one per daemon), optionally with a tap as uplink to the
// host. Every port with backend=switch is a SwitchBackend made by the hub.
//
// Contract
// --------
//  Membership
//  - SwitchHub::add_port(name, queue_pairs, mtu) makes a port (PortId unique for the hub's
//    life, never reused, so a stale MAC entry cannot name a later port), with the MTU
//    given (none: no limit, see MTU below). It takes part
//    in switching once attach(injector) has run: attach() adds {id, injector, name} to
//    the hub's live member set, detach() removes it, waits until no thread can still
//    be using the injector (the member set's grace period, below), then flushes the
//    port's MACs from the table (LearningSwitch::remove_port). A port may be attached
//    and detached again; destroying it detaches it. queue_pairs in
//    1..ReceiveSteering::kMaxQueuePairs (std::invalid_argument otherwise).
//  - The hub must outlive its ports and is not copyable; destroying a hub that still
//    has ports aborts in debug builds.
//  - The live member set is a small vector read on every frame by every worker and
//    changed on attach/detach only: published through sync::ReadMostly
//    (read_mostly.h; policy from SwitchHubOptions, kRcu by default: readers take no
//    lock; attach()/detach() wait for a grace period, microseconds). Lookups are a
//    linear scan (a handful of ports).
//
//  Offered features (offered_features()): CSUM and every HOST_* offload (the switch
//  validates each frame and segments or completes it in software for a receiver that
//  needs it) and every GUEST_* offload (such frames go on unchanged to a guest that
//  negotiated the matching feature, and to the uplink tap).
//
//  Forwarding (SwitchBackend::transmit_burst(pair, frames), on pair's worker; each
//  frame is copied out of guest memory once, so the decision and every copy see the
//  same bytes)
//  - A detached port's frames are dropped (ingress_detached), nothing learned.
//  - Admission, before anything is learned from the frame: a frame with offloads
//    (NEEDS_CSUM or a gso_type) is checked against the features its sender negotiated
//    (validate_offload, offload_validate.h; a port's features are those it last got
//    in features_changed(), the uplink tap may send every offload): one that fails is
//    dropped (offload_invalid, and per reason in the stats). Then the sender's MTU: a
//    frame longer than its MTU frame (below), or a GSO frame whose longest segment is,
//    is dropped (ingress_over_mtu).
//  - LearningSwitch::forward(frame, this port, steady_clock now, pair's counters)
//    decides (switch_forwarding.h: learn the source MAC, then unicast / flood / drop
//    with a reason, counted per pair). Drop: returns false.
//  - The frame's flow hash (flow_hash.h, the same for both directions of a
//    conversation) is recorded in the sending port's receive steering
//    (receive_steering.h): that flow was transmitted on `pair`. Not for a TCP segment
//    without payload (a pure ACK, SYN, FIN, RST; FrameFlow::tcp_without_payload): a
//    Linux guest sends those from whichever CPU handled the event (an ACK from the CPU
//    that took the data in, or from its reader's), and XPS puts each on that CPU's
//    queue, so a receiving guest's ACKs alternate between its queues. Recorded, they
//    would move the flow's data between the receiver's queues while earlier frames
//    are still in the other one: out of order. Segments with data come from the
//    socket's sender, whose queue XPS keeps while data is in flight.
//  - Unicast: the destination member gets a copy (Packet: header with num_buffers 0,
//    frame) through inject(receive pair, ...). A destination
//    that is not in the member set (detached, or removed while the frame was decided)
//    is a drop, counted (not_attached).
//  - Flood: a copy to every member but this port (the uplink included). No other
//    member: counted (no_target).
//  - Before each copy: the receiver's MTU: a frame longer than its MTU frame, or a GSO
//    frame whose longest segment is (whether it goes whole or segmented), is not
//    delivered to it (over_mtu). Then offloads fitted to the receiving guest
//    (offload_fit, offload_adapt.h, using its port's features; the uplink tap takes
//    everything): GSO it cannot take -> the frame is segmented in software, with the
//    gso_size its sender set, and every segment injected (segmented counts the copies,
//    segments the segments; a segment refused by the receiver ends that copy as
//    inject_failed); a partial checksum for a guest without GUEST_CSUM -> completed in
//    software (checksum_completed). A guest without GUEST_CSUM never gets a flag, one
//    without a GUEST_TSO*/UFO/USO feature never gets that gso_type; flags other than
//    NEEDS_CSUM are never forwarded (the switch validated no checksum). UFO over IPv6
//    takes its fragment ids from a counter of the hub (random start).
//  - Receive pair of a copy (every segment of a segmented copy too): the receiving
//    port's steering for the frame's flow hash: the pair its guest last transmitted
//    that flow on, else hash % its queue pairs (receive_steering.h). Never the
//    sender's pair: the sending guest may move a flow between its transmit queues
//    (XPS follows its process's CPU), and the flow must still reach the receiver on
//    one queue, in order. The uplink has one queue.
//  - Per copy: delivered or inject_failed (the receiver's queue stopped or full: a port
//    whose frontend is not connected ends here). Never waits.
//  - Returns true when at least one copy was delivered.
//
//  MTU
//  - A port's MTU: add_port's, then the frontend's NET_SET_MTU (mtu_changed(), the
//    last one stays across connections); none (0) until one is given: no limit. Its
//    MTU frame is the MTU plus an Ethernet header and one VLAN tag (kMtuFrameOverhead:
//    a guest with MTU 1500 sends and takes frames of up to 1518 bytes). The uplink has
//    no MTU here (its tap's MTU is the host kernel's business).
//
//  Uplink (SwitchHub::add_tap_uplink(options, error), at most one)
//  - Opens a TapBackend with one queue (options.queue_pairs is ignored: 1) and makes it
//    one more member ("uplink:<tap name>"), served by a thread of the hub: epoll on the
//    tap fd, a wake eventfd and a stop eventfd. Frames read from the tap are forwarded
//    like a port's (ingress = the uplink; each copy to the receive pair its port's
//    steering picks for the frame's flow hash); copies
//    forwarded to the uplink are queued (bounded: kUplinkQueue frames; beyond, the copy
//    is refused: inject_failed for the sender, queue_full for the uplink) and written
//    to the tap by that thread, so workers never make a tap system call and the tap
//    has a single writer. Stopped (thread joined, member removed) by ~SwitchHub.
//  - The tap's TUNSETOFFLOAD is every receive offload its kernel takes (the GUEST_*
//    part of TapBackend::offered_features()): the host hands the switch partial
//    checksums and GSO super-frames as they are, and the switch segments or completes
//    them per receiving guest like any port's frames.
//
//  Counters and threads
//  - Per pair: forwarding reasons and learn results (ForwardingCounters) and delivery
//    counters, each written only by transmit(pair) (one thread per pair: port_backend.h)
//    with relaxed load+store; the uplink has its own, written by its thread. Table
//    counters: MacTable::stats(). All readable from any thread (relaxed).
//  - A port's receive steering: written by its own transmit(pair) calls, read by every
//    thread that delivers to it, all relaxed (receive_steering.h says why that is
//    enough). Not counted: the per-queue counters of the datapath (`ctl stats`) show
//    where frames went.
//  - SwitchBackend::stats(): {"id", "name", "attached", "mtu", "forwarding": {reason: n},
//    "learn": {result: n}, "delivery": {counter: n}, "offload_invalid": {reason: n},
//    "bad_pair"}.
//  - SwitchHub::stats(): {"ports": [each port's stats()], "uplink": null or {"id",
//    "name", "forwarding", "learn", "delivery", "offload_invalid", "queue_full", "tap":
//    TapBackend::stats()},
//    "table": {"capacity", "entries", "learned", "moved", "refreshed", "refused_full",
//    "evicted_aged", "flushed", "read_gave_up", "writer_lock"}, "member_policy"}.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "uvhost/backends/net_features.h"
#include "uvhost/backends/offload_adapt.h"
#include "uvhost/backends/offload_counters.h"
#include "uvhost/backends/offload_validate.h"
#include "uvhost/backends/pair_counters.h"
#include "uvhost/backends/port_backend.h"
#include "uvhost/backends/receive_steering.h"
#include "uvhost/backends/switch_forwarding.h"
#include "uvhost/backends/tap_backend.h"
#include "uvhost/base/name_table.h"
#include "uvhost/sync/read_mostly.h"
#include "uvhost/sync/thread_annotations.h"

namespace uvhost::backends {

// What happened to the copies of a switched frame (per pair, per ingress).
namespace switch_delivery {

using base::to_string;

enum Counter : size_t {
  kDelivered,          // copies the receiver's injector took
  kInjectFailed,       // copies the receiver's injector refused (queue stopped or full)
  kNotAttached,        // unicast to a port that is not in the member set
  kNoTarget,           // flood with no other member
  kSegmented,          // copies segmented in software: GSO the receiving guest did not negotiate
  kSegments,           // ... the segments they became
  kChecksumCompleted,  // partial checksums completed for a guest without GUEST_CSUM
  kOffloadInvalid,     // frames dropped: offload header refused (validate_offload)
  kOverMtu,            // copies not delivered: longer than the receiving port's MTU frame
  kIngressOverMtu,     // frames dropped: longer than the sending port's MTU frame
  kIngressDetached,    // frames transmitted by a port that is not attached
  kCount
};
// The counters' names in the JSON stats (every value but kCount).
inline constexpr auto kCounterNames = base::name_table<Counter>({
    {kDelivered, "delivered"},
    {kInjectFailed, "inject_failed"},
    {kNotAttached, "not_attached"},
    {kNoTarget, "no_target"},
    {kSegmented, "segmented"},
    {kSegments, "segments"},
    {kChecksumCompleted, "checksum_completed"},
    {kOffloadInvalid, "offload_invalid"},
    {kOverMtu, "over_mtu"},
    {kIngressOverMtu, "ingress_over_mtu"},
    {kIngressDetached, "ingress_detached"},
});
static_assert(kCounterNames.size() == kCount);
constexpr const auto& enum_names(Counter) noexcept { return kCounterNames; }
}  // namespace switch_delivery

// The delivery counters of one ingress (a port or the uplink), per pair, and its frames
// dropped by offload validation, per reason.
struct SwitchDeliveryCounters {
  explicit SwitchDeliveryCounters(uint32_t pairs) : copies(pairs), offload_invalid(pairs) {}
  void add(uint32_t pair, size_t which, uint64_t n = 1) noexcept { copies.add(pair, which, n); }
  uint64_t total(size_t which) const noexcept { return copies.total(which); }
  uint32_t pairs() const noexcept { return copies.pairs(); }

  PairCounters<switch_delivery::kCount> copies;
  OffloadInvalidCounters offload_invalid;
};

// An MTU's frame: the MTU plus the Ethernet header and one VLAN tag.
inline constexpr size_t kMtuFrameOverhead = 14 + 4;

struct SwitchHubOptions {
  MacTableConfig table;                                      // see switch_mac_table.h
  sync::GuardPolicy member_policy = sync::GuardPolicy::kRcu;  // the live member set's guard
};

class SwitchBackend;
class SwitchUplink;

class SwitchHub {
 public:
  static constexpr size_t kUplinkQueue = 1024;

  // Throws std::invalid_argument for an invalid table config.
  explicit SwitchHub(const SwitchHubOptions& options = {});
  ~SwitchHub();
  SwitchHub(const SwitchHub&) = delete;
  SwitchHub& operator=(const SwitchHub&) = delete;

  std::unique_ptr<SwitchBackend> add_port(std::string name, uint32_t queue_pairs,
                                          std::optional<uint32_t> mtu = std::nullopt) UVHOST_EXCLUDES(mutex_);
  // false (error filled in) when the tap cannot be opened, or there is an uplink already.
  bool add_tap_uplink(const TapBackendOptions& options, std::string& error) UVHOST_EXCLUDES(mutex_);

  // The uplink's tap (nullptr without one), e.g. for its name and ifindex.
  const TapBackend* uplink_tap() const UVHOST_EXCLUDES(mutex_);
  // Ports currently attached, plus the uplink.
  size_t member_count() const;
  const MacTable& table() const noexcept { return switch_.table(); }

  nlohmann::json stats() const UVHOST_EXCLUDES(mutex_);

 private:
  friend class SwitchBackend;

  struct Member {
    PortId id = kNoPort;
    RxInjector* injector = nullptr;
    std::string name;
    const std::atomic<uint64_t>* guest_features = nullptr;  // nullptr: takes every offload (a tap)
    const std::atomic<uint32_t>* mtu = nullptr;             // nullptr or 0: no limit
    const ReceiveSteering* steering = nullptr;              // nullptr: one queue (a tap)
  };
  using Members = std::vector<Member>;
  struct Uplink;

  // Admission (see the contract): the frame's offloads against its sender's features,
  // its length against the sender's MTU (0: none). false: dropped, counted; else
  // `layout` is the frame's (kind kNone without segmentation).
  bool admit(const virtio::NetHeader& header, std::span<const std::byte> frame, uint64_t sender_features,
             uint32_t sender_mtu, SwitchDeliveryCounters& counters, uint32_t counter_pair, OffloadLayout& layout);
  // Copies of one admitted frame to the decision's members, each on the receive pair
  // its member's steering picks for `flow` (the frame's flow_hash); returns how many
  // were delivered. `owned`, when it holds the Packet that `frame` lies in, is handed
  // to the last member instead of a copy (a unicast frame is then never copied here at
  // all); `frame` must not be used after deliver() returns then.
  size_t deliver(const ForwardDecision& decision, PortId ingress, uint32_t flow, const virtio::NetHeader& header,
                 std::span<const std::byte> frame, const OffloadLayout& layout, SwitchDeliveryCounters& counters,
                 uint32_t counter_pair, PacketPtr* owned = nullptr);
  bool deliver_copy(const Member& member, uint32_t flow, const virtio::NetHeader& header,
                    std::span<const std::byte> frame, const OffloadLayout& layout, SwitchDeliveryCounters& counters,
                    uint32_t counter_pair, PacketPtr* owned);
  void forward_from_uplink(Uplink& uplink, Packet& packet);  // on the uplink thread

  void join(Member member);
  void leave(PortId id);
  void unregister(SwitchBackend* port) UVHOST_EXCLUDES(mutex_);

  LearningSwitch switch_;
  sync::ReadMostly<Members> members_;
  Ipv6FragmentIds ipv6_fragment_ids_;

  mutable sync::Mutex mutex_;  // membership bookkeeping only, never taken on the data path
  std::vector<SwitchBackend*> ports_ UVHOST_GUARDED_BY(mutex_);  // made by add_port, not destroyed
  PortId next_id_ UVHOST_GUARDED_BY(mutex_) = 0;
  std::unique_ptr<Uplink> uplink_ UVHOST_GUARDED_BY(mutex_);
};

class SwitchBackend final : public PortBackend {
 public:
  ~SwitchBackend() override;
  SwitchBackend(const SwitchBackend&) = delete;
  SwitchBackend& operator=(const SwitchBackend&) = delete;

  std::string_view kind() const noexcept override { return "switch"; }
  std::string describe() const override;

  void attach(RxInjector& injector) override;
  void detach() override;
  uint64_t offered_features() const noexcept override { return kOfferedFeatures; }
  void features_changed(uint64_t features) override;
  void mtu_changed(uint32_t mtu) override;
  TxBurstResult transmit_burst(uint32_t pair, std::span<const TxFrame> frames) override;

  nlohmann::json stats() const override;

  PortId id() const noexcept { return id_; }
  const std::string& name() const noexcept { return name_; }
  uint32_t queue_pairs() const noexcept { return delivery_.pairs(); }
  bool attached() const noexcept { return attached_.load(std::memory_order_relaxed); }  // relaxed: a status
  uint32_t mtu() const noexcept { return mtu_.load(std::memory_order_relaxed); }          // 0: none
  ForwardingStats forwarding() const noexcept;  // summed over the pairs
  uint64_t delivery(switch_delivery::Counter counter) const noexcept { return delivery_.total(counter); }
  uint64_t offload_invalid(OffloadReason reason) const noexcept {
    return delivery_.offload_invalid.total(static_cast<size_t>(reason));
  }

 private:
  friend class SwitchHub;
  static constexpr uint64_t kOfferedFeatures = net_feature::kHostOffloads | net_feature::kGuestOffloads;

  SwitchBackend(SwitchHub& hub, PortId id, std::string name, uint32_t queue_pairs);

  struct alignas(64) PairForwarding {
    ForwardingCounters counters;
  };

  // One frame, copied out of guest memory into `packet` (stable: the decision and
  // every copy see the same bytes), decided and delivered; true: a copy went out.
  bool forward_one(uint32_t pair, PacketPtr packet);

  SwitchHub& hub_;
  const PortId id_;
  const std::string name_;
  std::unique_ptr<PairForwarding[]> forwarding_;  // [pair]
  SwitchDeliveryCounters delivery_;
  // Which of this port's pairs a frame for it takes: written by this port's transmit
  // workers, read by every thread that delivers to it (relaxed: receive_steering.h).
  ReceiveSteering steering_;
  // What this port's guest negotiated (features_changed): what it may receive (read by
  // other ports' workers when they deliver to it) and which offloads it may send (read
  // by transmit()). relaxed: a value on its own, publishes nothing.
  std::atomic<uint64_t> guest_features_{0};
  // This port's MTU (0: none), set by add_port() and mtu_changed() (control thread),
  // read by every worker that forwards from or to this port. relaxed: as above.
  std::atomic<uint32_t> mtu_{0};
  // Set by attach()/detach() (control thread, no traffic running), read by transmit().
  std::atomic<bool> attached_{false};
  std::atomic<uint64_t> bad_pair_{0};  // relaxed fetch_add: rare, any thread
};

}  // namespace uvhost::backends
