// switch_backend.cpp - SwitchHub and its ports: the learning switch between ports and
// an optional tap uplink (see switch_backend.h).
#include "uvhost/backends/switch_backend.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "switch_uplink.h"
#include "uvhost/backends/flow_hash.h"
#include "uvhost/backends/net_features.h"
#include "uvhost/backends/offload_adapt.h"
#include "uvhost/sync/misuse.h"

namespace uvhost::backends {

namespace {

// {name: count} over every value of a name table.
template <typename E, size_t N, typename CountFn>
nlohmann::json counts_json(const base::NameTable<E, N>& table, CountFn count) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& entry : table) out[std::string(entry.name)] = count(entry.value);
  return out;
}

nlohmann::json reasons_json(const ForwardingStats& stats) {
  return counts_json(kForwardReasonNames, [&](ForwardReason reason) { return stats.count(reason); });
}

nlohmann::json learn_json(const ForwardingStats& stats) {
  return counts_json(kLearnResultNames, [&](LearnResult result) { return stats.count(result); });
}

nlohmann::json delivery_json(const SwitchDeliveryCounters& counters) {
  return counts_json(switch_delivery::kCounterNames,
                     [&](switch_delivery::Counter counter) { return counters.total(counter); });
}

// What the uplink tap may send: every transmit offload (its frames are still validated).
constexpr uint64_t kUplinkSenderFeatures = net_feature::kHostOffloads;

// The longest frame a port with this MTU sends or takes (0: no MTU, no limit).
size_t mtu_frame_limit(uint32_t mtu) noexcept {
  return mtu == 0 ? std::numeric_limits<size_t>::max() : size_t{mtu} + kMtuFrameOverhead;
}

// The longest frame a (validated) frame puts on a link: itself, or its longest segment.
size_t longest_on_link(std::span<const std::byte> frame, const OffloadLayout& layout) noexcept {
  return layout.kind == GsoKind::kNone ? frame.size() : layout.max_segment_bytes;
}

}  // namespace

// ---- the uplink's state in the hub ------------------------------------------------------

struct SwitchHub::Uplink {
  std::unique_ptr<SwitchUplink> link;
  PortId id = kNoPort;
  std::string name;
  ForwardingCounters forwarding;         // written by the uplink thread only
  SwitchDeliveryCounters delivery{1};    // likewise
};

// ---- SwitchHub --------------------------------------------------------------------------

SwitchHub::SwitchHub(const SwitchHubOptions& options)
    : switch_(options.table), members_(options.member_policy, std::make_unique<Members>()) {}

SwitchHub::~SwitchHub() {
  std::unique_ptr<Uplink> uplink;
  {
    sync::MutexLock lock(mutex_);
    UVHOST_MISUSE_CHECK(ports_.empty(), "switch hub: destroyed while it still has ports");
    uplink = std::move(uplink_);
  }
  if (uplink) {
    leave(uplink->id);   // no worker injects into the uplink after this returns
    uplink->link->stop();  // its thread delivered into ports, whose injectors are still valid
  }
}

std::unique_ptr<SwitchBackend> SwitchHub::add_port(std::string name, uint32_t queue_pairs, std::optional<uint32_t> mtu) {
  if (queue_pairs == 0 || queue_pairs > ReceiveSteering::kMaxQueuePairs) {
    throw std::invalid_argument(
        fmt::format("switch port: queue_pairs must be in 1..{}", ReceiveSteering::kMaxQueuePairs));
  }
  sync::MutexLock lock(mutex_);
  std::unique_ptr<SwitchBackend> port(new SwitchBackend(*this, next_id_++, std::move(name), queue_pairs));
  if (mtu) port->mtu_changed(*mtu);
  ports_.push_back(port.get());
  return port;
}

bool SwitchHub::add_tap_uplink(const TapBackendOptions& options, std::string& error) {
  sync::MutexLock lock(mutex_);
  if (uplink_) {
    error = fmt::format("switch: there is an uplink already ({})", uplink_->name);
    return false;
  }
  auto uplink = std::make_unique<Uplink>();
  uplink->link = SwitchUplink::open(options, error);
  if (!uplink->link) return false;
  uplink->id = next_id_++;
  uplink->name = "uplink:" + uplink->link->tap().name();
  join(Member{uplink->id, uplink->link.get(), uplink->name, nullptr, nullptr, nullptr});
  // The thread gets its Uplink directly: it never reads uplink_ (set below, reset by
  // ~SwitchHub under mutex_ while the thread may still run).
  Uplink* const raw = uplink.get();
  uplink->link->start([this, raw](Packet& packet) { forward_from_uplink(*raw, packet); });
  spdlog::info("switch: uplink {} (port id {})", uplink->link->tap().describe(), uplink->id);
  uplink_ = std::move(uplink);
  return true;
}

const TapBackend* SwitchHub::uplink_tap() const {
  sync::MutexLock lock(mutex_);
  return uplink_ ? &uplink_->link->tap() : nullptr;
}

size_t SwitchHub::member_count() const {
  return members_.read([](const Members& members) { return members.size(); });
}

void SwitchHub::join(Member member) {
  members_.update([&](Members& members) { members.push_back(std::move(member)); });
}

void SwitchHub::leave(PortId id) {
  // update() returns after the grace period: no reader still holds the old set, so
  // nobody uses the member's injector any more.
  members_.update([id](Members& members) {
    std::erase_if(members, [id](const Member& member) { return member.id == id; });
  });
}

void SwitchHub::unregister(SwitchBackend* port) {
  sync::MutexLock lock(mutex_);
  std::erase(ports_, port);
}

bool SwitchHub::deliver_copy(const Member& member, uint32_t flow, const virtio::NetHeader& header,
                             std::span<const std::byte> frame, const OffloadLayout& layout,
                             SwitchDeliveryCounters& counters, uint32_t counter_pair, PacketPtr* owned) {
  // relaxed: the features and the MTU are values on their own (switch_backend.h).
  const uint64_t features =
      member.guest_features != nullptr ? member.guest_features->load(std::memory_order_relaxed) : ~uint64_t{0};
  const uint32_t mtu = member.mtu != nullptr ? member.mtu->load(std::memory_order_relaxed) : 0;
  if (longest_on_link(frame, layout) > mtu_frame_limit(mtu)) {
    counters.add(counter_pair, switch_delivery::kOverMtu);
    return false;
  }
  const uint32_t pair = member.steering != nullptr ? member.steering->receive_pair(flow) : 0;
  const OffloadFit fit = offload_fit(header, layout, features);
  if (fit == OffloadFit::kSegment) {
    const size_t injected =
        inject_segments(*member.injector, pair, layout, frame, features, ipv6_fragment_ids_.for_layout(layout));
    counters.add(counter_pair, switch_delivery::kSegmented);
    counters.add(counter_pair, switch_delivery::kSegments, injected);
    if (injected < layout.segments) {
      counters.add(counter_pair, switch_delivery::kInjectFailed);
      return false;
    }
    counters.add(counter_pair, switch_delivery::kDelivered);
    return true;
  }
  PacketPtr packet;
  if (owned != nullptr && *owned != nullptr) {
    packet = std::move(*owned);  // the frame's own Packet: no copy
    packet->header = delivered_header(header);
  } else {
    packet = make_packet(delivered_header(header), frame);
  }
  // The range was validated: the checksum is as it is, or completed.
  if (fit == OffloadFit::kCompleteChecksum && adapt_checksum(*packet, features) == ChecksumAdapt::kCompleted) {
    counters.add(counter_pair, switch_delivery::kChecksumCompleted);
  }
  if (!member.injector->inject(pair, std::move(packet))) {
    counters.add(counter_pair, switch_delivery::kInjectFailed);
    return false;
  }
  counters.add(counter_pair, switch_delivery::kDelivered);
  return true;
}

bool SwitchHub::admit(const virtio::NetHeader& header, std::span<const std::byte> frame, uint64_t sender_features,
                      uint32_t sender_mtu, SwitchDeliveryCounters& counters, uint32_t counter_pair,
                      OffloadLayout& layout) {
  layout = OffloadLayout{};  // kind kNone: nothing to segment
  if (has_offloads(header)) {
    const OffloadCheck check = validate_offload(header, frame, sender_features);
    if (!check.ok()) {
      counters.add(counter_pair, switch_delivery::kOffloadInvalid);
      counters.offload_invalid.add(counter_pair, static_cast<size_t>(check.reason));
      return false;
    }
    layout = check.layout;
  }
  if (longest_on_link(frame, layout) > mtu_frame_limit(sender_mtu)) {
    counters.add(counter_pair, switch_delivery::kIngressOverMtu);
    return false;
  }
  return true;
}

size_t SwitchHub::deliver(const ForwardDecision& decision, PortId ingress, uint32_t flow,
                          const virtio::NetHeader& header, std::span<const std::byte> frame, const OffloadLayout& layout,
                          SwitchDeliveryCounters& counters, uint32_t counter_pair, PacketPtr* owned) {
  // Inside read(): the members' injectors stay valid (leave() waits for us).
  return members_.read([&](const Members& members) -> size_t {
    if (decision.kind == ForwardKind::kUnicast) {
      for (const Member& member : members) {
        if (member.id == decision.port) {
          return deliver_copy(member, flow, header, frame, layout, counters, counter_pair, owned) ? 1 : 0;
        }
      }
      counters.add(counter_pair, switch_delivery::kNotAttached);
      return 0;
    }
    // The last target may take the frame's own Packet: every other one is copied first.
    const Member* last = nullptr;
    for (const Member& member : members) {
      if (member.id != ingress) last = &member;
    }
    size_t targets = 0;
    size_t delivered = 0;
    for (const Member& member : members) {
      if (member.id == ingress) continue;
      ++targets;
      if (deliver_copy(member, flow, header, frame, layout, counters, counter_pair, &member == last ? owned : nullptr)) {
        ++delivered;
      }
    }
    if (targets == 0) counters.add(counter_pair, switch_delivery::kNoTarget);
    return delivered;
  });
}

void SwitchHub::forward_from_uplink(Uplink& uplink, Packet& packet) {
  OffloadLayout layout;
  if (!admit(packet.header, packet.frame, kUplinkSenderFeatures, 0, uplink.delivery, 0, layout)) return;
  const ForwardDecision decision = switch_.forward(packet.frame, uplink.id, SwitchClock::now(), uplink.forwarding);
  if (decision.kind == ForwardKind::kDrop) return;
  (void)deliver(decision, uplink.id, flow_hash(packet.frame), packet.header, packet.frame, layout, uplink.delivery, 0);
}

nlohmann::json SwitchHub::stats() const {
  nlohmann::json out = nlohmann::json::object();
  {
    sync::MutexLock lock(mutex_);
    nlohmann::json ports = nlohmann::json::array();
    for (const SwitchBackend* port : ports_) ports.push_back(port->stats());
    out["ports"] = std::move(ports);
    if (uplink_) {
      const ForwardingStats forwarding = uplink_->forwarding.snapshot();
      out["uplink"] = nlohmann::json{{"id", uplink_->id},
                                     {"name", uplink_->name},
                                     {"forwarding", reasons_json(forwarding)},
                                     {"learn", learn_json(forwarding)},
                                     {"delivery", delivery_json(uplink_->delivery)},
                                     {"offload_invalid", offload_invalid_json(uplink_->delivery.offload_invalid)},
                                     {"queue_full", uplink_->link->queue_full()},
                                     {"tap", uplink_->link->tap().stats()}};
    } else {
      out["uplink"] = nullptr;
    }
  }
  const MacTableStats table = switch_.table().stats();
  out["table"] = nlohmann::json{{"capacity", switch_.table().capacity()},
                                {"entries", table.entries},
                                {"learned", table.learned},
                                {"moved", table.moved},
                                {"refreshed", table.refreshed},
                                {"refused_full", table.refused_full},
                                {"evicted_aged", table.evicted_aged},
                                {"flushed", table.flushed},
                                {"read_gave_up", table.read_gave_up},
                                {"writer_lock", switch_.table().writer_lock_name()}};
  out["member_policy"] = std::string(sync::to_string(members_.policy()));
  return out;
}

// ---- SwitchBackend ------------------------------------------------------------------------

SwitchBackend::SwitchBackend(SwitchHub& hub, PortId id, std::string name, uint32_t queue_pairs)
    : hub_(hub),
      id_(id),
      name_(std::move(name)),
      forwarding_(std::make_unique<PairForwarding[]>(queue_pairs)),
      delivery_(queue_pairs),
      steering_(queue_pairs) {}

SwitchBackend::~SwitchBackend() {
  detach();
  hub_.unregister(this);
}

std::string SwitchBackend::describe() const {
  return fmt::format("switch port {} (id {}, {}, {} queue pairs{})", name_, id_, attached() ? "attached" : "detached",
                     queue_pairs(), mtu() != 0 ? fmt::format(", MTU {}", mtu()) : std::string());
}

void SwitchBackend::attach(RxInjector& injector) {
  if (attached()) detach();
  PortBackend::attach(injector);
  hub_.join(SwitchHub::Member{id_, &injector, name_, &guest_features_, &mtu_, &steering_});
  attached_.store(true, std::memory_order_relaxed);  // relaxed: see the member's comment
}

void SwitchBackend::detach() {
  if (!attached()) return;
  attached_.store(false, std::memory_order_relaxed);
  hub_.leave(id_);  // waits until no worker can still inject through us
  const size_t flushed = hub_.switch_.remove_port(id_);
  spdlog::debug("switch port {}: detached, {} MACs flushed", name_, flushed);
  PortBackend::detach();
}

void SwitchBackend::features_changed(uint64_t features) {
  guest_features_.store(features, std::memory_order_relaxed);  // relaxed: see the member's comment
}

void SwitchBackend::mtu_changed(uint32_t mtu) {
  mtu_.store(mtu, std::memory_order_relaxed);  // relaxed: see the member's comment
  spdlog::info("switch port {}: MTU {}", name_, mtu);
}

TxBurstResult SwitchBackend::transmit_burst(uint32_t pair, std::span<const TxFrame> frames) {
  if (pair >= queue_pairs()) {
    bad_pair_.fetch_add(frames.size(), std::memory_order_relaxed);  // relaxed: a statistic
    return {};
  }
  TxBurstResult taken;
  for (const TxFrame& frame : frames) {
    PacketPtr packet = std::make_unique<Packet>();
    packet->header = frame.read_header();
    packet->frame.resize(frame.frame_len);
    (void)frame.copy_frame(0, packet->frame);
    if (!forward_one(pair, std::move(packet))) continue;
    ++taken.frames;
    taken.bytes += frame.frame_len;
  }
  return taken;
}

bool SwitchBackend::forward_one(uint32_t pair, PacketPtr packet) {
  if (!attached()) {
    delivery_.add(pair, switch_delivery::kIngressDetached);
    return false;
  }
  // relaxed: the features are a value on their own (see the member's comment).
  const uint64_t features = guest_features_.load(std::memory_order_relaxed);
  OffloadLayout layout;
  if (!hub_.admit(packet->header, packet->frame, features, mtu(), delivery_, pair, layout)) return false;
  const ForwardDecision decision =
      hub_.switch_.forward(packet->frame, id_, SwitchClock::now(), forwarding_[pair].counters);
  if (decision.kind == ForwardKind::kDrop) return false;
  // This guest sends the flow on `pair`: the flow's other direction comes back on it.
  // Not said by a TCP segment without payload: the guest's kernel sends those (ACKs
  // above all) from whichever CPU handled the event, so their queue alternates with
  // the CPUs; recorded, they would move the flow's receive pair back and forth while
  // its frames are in flight, out of order (see switch_backend.h).
  const FrameFlow flow = frame_flow(packet->frame);
  if (!flow.tcp_without_payload) steering_.record_transmit(flow.hash, pair);
  const virtio::NetHeader header = packet->header;
  return hub_.deliver(decision, id_, flow.hash, header, packet->frame, layout, delivery_, pair, &packet) > 0;
}

ForwardingStats SwitchBackend::forwarding() const noexcept {
  ForwardingStats sum;
  for (uint32_t pair = 0; pair < queue_pairs(); ++pair) sum += forwarding_[pair].counters.snapshot();
  return sum;
}

nlohmann::json SwitchBackend::stats() const {
  const ForwardingStats stats = forwarding();
  return nlohmann::json{{"id", id_},
                        {"name", name_},
                        {"attached", attached()},
                        {"mtu", mtu()},
                        {"forwarding", reasons_json(stats)},
                        {"learn", learn_json(stats)},
                        {"delivery", delivery_json(delivery_)},
                        {"offload_invalid", offload_invalid_json(delivery_.offload_invalid)},
                        {"bad_pair", bad_pair_.load(std::memory_order_relaxed)}};  // relaxed: a statistic
}

}  // namespace uvhost::backends
