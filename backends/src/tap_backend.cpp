// tap_backend.cpp - a port on a tap interface, one tap queue per queue pair (see
// tap_backend.h).
#include "uvhost/backends/tap_backend.h"

#include <sys/uio.h>

#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace uvhost::backends {

std::unique_ptr<TapBackend> TapBackend::open(const TapBackendOptions& options, std::string& error) {
  if (options.queue_pairs == 0 || options.queue_pairs > kMaxQueuePairs) {
    error = fmt::format("tap: queue_pairs {} is outside 1..{}", options.queue_pairs, kMaxQueuePairs);
    return nullptr;
  }
  if (!options.create_if_missing && options.name.empty()) {
    error = "tap: attaching to an existing tap (create_if_missing off) needs its name";
    return nullptr;
  }
  TapOptions tap_options;
  tap_options.name = options.name;
  tap_options.vnet_hdr = true;
  tap_options.vnet_hdr_size = kHeaderSize;
  tap_options.multi_queue = options.queue_pairs > 1;
  tap_options.persist = false;
  tap_options.up = true;
  tap_options.mtu = options.mtu;

  std::vector<std::unique_ptr<TapDevice>> queues;
  queues.reserve(options.queue_pairs);
  for (uint32_t pair = 0; pair < options.queue_pairs; ++pair) {
    std::string open_error;
    auto queue = TapDevice::open(tap_options, open_error);
    if (!queue) {
      // Destroying `queues` closes the queues opened so far; a tap we created (not
      // persistent) goes away with its last fd.
      error = pair == 0 ? open_error : fmt::format("tap {}: queue {}: {}", tap_options.name, pair, open_error);
      return nullptr;
    }
    if (pair == 0) {
      if (!options.create_if_missing && queue->created()) {
        error = fmt::format("tap {} does not exist (and creating it was not asked for)", options.name);
        return nullptr;  // the tap just created is deleted with its only fd
      }
      tap_options.name = queue->name();  // the other queues attach to this interface
      tap_options.mtu.reset();
    }
    queues.push_back(std::move(queue));
  }
  return std::unique_ptr<TapBackend>(new TapBackend(std::move(queues), options.mtu));
}

TapBackend::TapBackend(std::vector<std::unique_ptr<TapDevice>> queues, std::optional<uint32_t> mtu)
    : queues_(std::move(queues)),
      scratch_(std::make_unique<PairScratch[]>(queues_.size())),
      tx_(static_cast<uint32_t>(queues_.size())),
      rx_(static_cast<uint32_t>(queues_.size())) {
  for (size_t pair = 0; pair < queues_.size(); ++pair) {
    // Allocated (and zeroed) once here; reads reuse it without clearing.
    scratch_[pair].rx_buffer.resize(queues_[pair]->max_read_bytes());
  }
  const unsigned tun_flags = queues_.front()->probe_offloads();
  using net_feature::mask;
  offered_features_ = mask(net_feature::kCsum) | mask(net_feature::kHostTso4) | mask(net_feature::kHostTso6) |
                      mask(net_feature::kHostEcn) | mask(net_feature::kHostUfo) | guest_features_for(tun_flags);
  if ((tun_flags & tun_offload::kUso4) != 0) offered_features_ |= mask(net_feature::kHostUso);
  if (mtu) mtu_.store(*mtu, std::memory_order_relaxed);
  spdlog::debug("{}; offers {}", describe(), fmt::join(net_feature::names(offered_features_), " "));
}

TapBackend::~TapBackend() = default;

std::string TapBackend::describe() const {
  return fmt::format("tap {} ({}, {} queue{}, vnet header {})", name(), created() ? "created" : "attached",
                     queues_.size(), queues_.size() == 1 ? "" : "s", kHeaderSize);
}

void TapBackend::mark_gone(std::string_view operation, int error_number) noexcept {
  // relaxed: the flag only lets later calls skip the system call (see the contract).
  if (!gone_.exchange(true, std::memory_order_relaxed)) {
    spdlog::error("tap {} disappeared ({} failed: {}); its port drops every frame from now on", name(), operation,
                  std::strerror(error_number));
  }
}

void TapBackend::features_changed(uint64_t features) {
  guest_csum_.store(net_feature::has(features, net_feature::kGuestCsum), std::memory_order_relaxed);
  for (const auto& queue : queues_) {
    std::string error;
    if (!queue->set_offloads(features, error)) {
      spdlog::warn("tap {}: guest receive offloads not applied ({}); the kernel segments and checksums instead",
                   name(), error);
      return;
    }
  }
}

void TapBackend::mtu_changed(uint32_t mtu) {
  std::string error;
  if (!queues_.front()->set_mtu(mtu, error)) {
    mtu_errors_.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("tap {}: the guest's MTU {} not applied ({}); the tap keeps its own", name(), mtu, error);
    return;
  }
  mtu_.store(mtu, std::memory_order_relaxed);
  spdlog::info("tap {}: MTU {} (the guest's, from the frontend)", name(), mtu);
}

TxBurstResult TapBackend::transmit_burst(uint32_t pair, std::span<const TxFrame> frames) {
  if (pair >= queues_.size()) {
    bad_pair_.fetch_add(frames.size(), std::memory_order_relaxed);  // relaxed: a statistic
    return {};
  }
  if (gone()) {
    tx_.add(pair, kTxGone, frames.size());
    return {};
  }
  PairScratch& scratch = scratch_[pair];
  TxBurstResult taken;
  for (const TxFrame& frame : frames) {
    if (!write_one(pair, scratch, frame)) continue;
    ++taken.frames;
    taken.bytes += frame.frame_len;
  }
  return taken;
}

bool TapBackend::write_one(uint32_t pair, PairScratch& scratch, const TxFrame& frame) {
  virtio::NetHeader wire = frame.read_header();
  wire.num_buffers = 0;
  virtio::encode_net_header(wire, kHeaderSize, scratch.tx_header);
  scratch.tx_pieces[0] = iovec{scratch.tx_header.data(), kHeaderSize};
  const size_t frame_pieces = frame.frame_iovecs(0, std::span(scratch.tx_pieces).subspan(1));
  if (frame_pieces == 0) {  // more pieces than a writev takes: a guest's pathological chain
    tx_.add(pair, kBadFrame);
    return false;
  }
  const WriteResult wrote =
      queues_[pair]->write_frame(std::span<const iovec>(scratch.tx_pieces.data(), 1 + frame_pieces));
  switch (wrote.status) {
    case WriteStatus::kSent:
      tx_.add(pair, kSent);
      tx_.add(pair, kSentBytes, frame.frame_len);
      return true;
    case WriteStatus::kFull:
      tx_.add(pair, kFull);
      return false;
    case WriteStatus::kBadFrame:
      tx_.add(pair, kBadFrame);
      return false;
    case WriteStatus::kDown:
      tx_.add(pair, kDown);
      return false;
    case WriteStatus::kGone:
      mark_gone("write", wrote.error_number);
      tx_.add(pair, kTxGone);
      return false;
    case WriteStatus::kError:
      break;
  }
  tx_.add(pair, kTxError);
  if (uint64_t suppressed = 0; tx_error_log_.allow(suppressed)) {
    spdlog::error("tap {}: write failed: {} ({} similar errors not logged)", name(), std::strerror(wrote.error_number),
                  suppressed);
  }
  return false;
}

bool TapBackend::pull_frame(uint32_t pair, RxFrameView& view) {
  if (pair >= queues_.size()) {
    bad_pair_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
    return false;
  }
  if (gone()) {
    rx_.add(pair, kRxGone);
    return false;
  }
  std::vector<std::byte>& buffer = scratch_[pair].rx_buffer;
  const iovec piece{buffer.data(), buffer.size()};
  for (;;) {
    const ReadResult got = queues_[pair]->read_frame(std::span<const iovec>(&piece, 1));
    switch (got.status) {
      case ReadStatus::kFrame: {
        if (got.bytes < kHeaderSize) {  // the tap always writes the header; never seen
          rx_.add(pair, kTruncated);
          continue;
        }
        view.header = virtio::decode_net_header(std::span<const std::byte>(buffer).first(kHeaderSize), kHeaderSize);
        view.header.num_buffers = 0;  // meaningless from a tap (tap_device.h)
        view.header.flags = flags_for_guest(view.header.flags, guest_csum_.load(std::memory_order_relaxed));
        const size_t frame_bytes = got.bytes - kHeaderSize;
        view.frame = std::span<const std::byte>(buffer).subspan(kHeaderSize, frame_bytes);
        rx_.add(pair, kFrames);
        rx_.add(pair, kBytes, frame_bytes);
        return true;
      }
      case ReadStatus::kEmpty:
        return false;
      case ReadStatus::kTruncated:
        rx_.add(pair, kTruncated);
        continue;  // consumed; read the next one (keeps the edge of rx_fd)
      case ReadStatus::kGone:
        mark_gone("read", got.error_number);
        rx_.add(pair, kRxGone);
        return false;
      case ReadStatus::kError:
        break;
    }
    rx_.add(pair, kRxError);
    if (uint64_t suppressed = 0; rx_error_log_.allow(suppressed)) {
      spdlog::error("tap {}: read failed: {} ({} similar errors not logged)", name(), std::strerror(got.error_number),
                    suppressed);
    }
    return false;
  }
}

int TapBackend::rx_fd(uint32_t pair) const noexcept { return pair < queues_.size() ? queues_[pair]->fd() : -1; }

nlohmann::json TapBackend::stats() const {
  return nlohmann::json{
      {"name", name()},
      {"ifindex", ifindex()},
      {"created", created()},
      {"queues", queues_.size()},
      {"gone", gone()},
      {"offload_flags", queues_.front()->offload_flags()},
      {"mtu", mtu_.load(std::memory_order_relaxed)},              // relaxed: reporting
      {"mtu_errors", mtu_errors_.load(std::memory_order_relaxed)},
      {"tx",
       {{"sent", tx_sent()},
        {"bytes", tx_.total(kSentBytes)},
        {"full", tx_.total(kFull)},
        {"bad_frame", tx_.total(kBadFrame)},
        {"down", tx_.total(kDown)},
        {"error", tx_.total(kTxError)},
        {"gone", tx_gone()}}},
      {"rx",
       {{"frames", rx_frames()},
        {"bytes", rx_.total(kBytes)},
        {"truncated", rx_.total(kTruncated)},
        {"error", rx_.total(kRxError)},
        {"gone", rx_gone()}}},
      {"bad_pair", bad_pair_.load(std::memory_order_relaxed)}};  // relaxed: a statistic
}

}  // namespace uvhost::backends
