// frontend.h - an embedded vhost-user frontend for virtio-net: plays the VM's side
// (like DPDK's virtio_user) against any vhost-user backend socket.
//
// Contract
// --------
//  What it does
//  - Frontend::start() takes a connected socket (ours: connect_unix / a Listener's
//    accept) and brings the device up in the order the spec (QEMU's
//    docs/interop/vhost-user.rst) asks of a frontend:
//      GET_FEATURES; if the backend offers VHOST_USER_F_PROTOCOL_FEATURES:
//      GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES (and GET_QUEUE_NUM with MQ);
//      SET_OWNER; SET_FEATURES; SET_MEM_TABLE (one memfd region, fd by SCM_RIGHTS);
//      per vring: SET_VRING_NUM, SET_VRING_BASE, SET_VRING_ADDR, SET_VRING_CALL,
//      SET_VRING_KICK (the kick fd starts the ring, so it comes last); then
//      SET_VRING_ENABLE 1 per vring when protocol features were negotiated (rings
//      start disabled then).
//  - Guest memory: one memfd (MAP_SHARED), holding every ring and every packet buffer;
//    guest physical addresses start at options.guest_phys_base, frontend addresses are
//    our own virtual addresses (what SET_VRING_ADDR carries).
//  - Queues: per queue pair p, RX is vring 2p and TX is vring 2p+1, each a virtio
//    DriverRing: split, or packed when options.features asks for RING_PACKED and the
//    backend offers it (SET_VRING_BASE then carries position | wrap << 15 for both
//    sides, as QEMU sends it). A TX frame is one chain: virtio_net_hdr + frame over as many
//    buffers as it needs, one descriptor per buffer (a frame needing more buffers than
//    the ring has is refused). RX buffers are one device-writable descriptor each, all
//    posted at start and reposted as soon as they are reaped. With MRG_RXBUF a packet
//    may span several buffers (num_buffers in its header, reassembled here); without
//    it, one packet per buffer (the backend drops what does not fit one).
//  - Multiqueue: queue_pairs > 1 asks for VIRTIO_NET_F_MQ and the MQ protocol feature
//    (whatever options.features says) and fails if the backend lacks either.
//  - Notifications: kicks go through the kick eventfd and honour the device's
//    suppression (VRING_USED_F_NO_NOTIFY or avail_event); call eventfds are given for
//    every vring; wait_rx() / wait_tx_space() sleep on them, poll_rx() / reap_tx() never
//    block (busy-polling callers just call those).
//  - REPLY_ACK: when negotiated, every request without a reply of its own asks for one
//    (NEED_REPLY) and a nonzero ack fails the step.
//  - Dirty-page log (migration, as QEMU runs it): start_dirty_log() hands the backend a
//    memfd bitmap covering the guest memory (SET_LOG_BASE: needs protocol::kLogShmfd
//    in options.protocol_features), sets VHOST_F_LOG_ALL and gives every ring its used
//    ring's guest address with VHOST_VRING_F_LOG; page_dirty() reads a page's bit,
//    clear_dirty_log() zeroes them (QEMU's sync). Only the backend marks pages.
//  - stop(): SET_VRING_ENABLE 0 (if negotiated), GET_VRING_BASE per vring (which stops
//    it), then closes the socket; stopped_base() keeps each answer. The destructor
//    closes without the messages.
//
//  What it trusts and what not
//  - The backend is not trusted: each reply is checked (parse_reply: version, REPLY bit,
//    request, size, no fds), a reply must arrive within options.reply_timeout, features
//    beyond what we asked are never used, GET_VRING_BASE must answer for the vring
//    asked and answer an index between the first entry not yet reaped and the last
//    made available, and every used entry is checked (id in flight, length within the
//    buffer, at least a header, num_buffers within what is posted). A violation marks
//    the frontend broken (error() says why); nothing is sent or received after that.
//  - Threading: one thread at a time, like the driver rings.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "uvhost/vhost_user/connection.h"
#include "uvhost/vhost_user/features.h"
#include "uvhost/virtio/net_header.h"
#include "uvhost/virtio/split_queue.h"

namespace uvhost::vhost_user {

struct FrontendOptions {
  uint16_t queue_size = 256;     // per vring; a power of two
  uint32_t queue_pairs = 1;      // > 1 needs VIRTIO_NET_F_MQ and protocol MQ
  uint32_t buffer_size = 2048;   // bytes per TX/RX buffer, header included
  // Asked for; the negotiated set is this AND what the backend offers. Add
  // feature::kRingPacked for packed rings.
  uint64_t features = feature::kVersion1 | feature::kNetMrgRxbuf | feature::kRingEventIdx | feature::kInOrder |
                      feature::kProtocolFeatures;
  uint64_t protocol_features = protocol::kReplyAck | protocol::kMq;
  std::chrono::milliseconds reply_timeout{5000};
  uint64_t guest_phys_base = 0;
  // Where guest memory lives: empty for a memfd; else a directory (a hugetlbfs mount)
  // in which an unlinked file holds it, its size rounded up to the file system's block
  // size (the huge page size there).
  std::string memory_dir;
  // SET_VRING_KICK without an fd (VHOST_USER_VRING_NOFD_MASK) for every vring: the
  // backend must poll the rings. Our kicks then go to an eventfd nobody reads.
  bool no_kick_fd = false;
  // SET_VRING_ERR with an eventfd per vring (err_fd()).
  bool err_fds = false;
};

// A received packet, valid only during the poll_rx callback.
struct RxPacket {
  virtio::NetHeader header;
  std::span<const std::byte> frame;  // the Ethernet frame, header stripped
  uint32_t queue_pair = 0;
};

struct FrontendStats {
  uint64_t tx_packets = 0, tx_kicks = 0, tx_full = 0;
  uint64_t rx_packets = 0, rx_buffers = 0, rx_calls_waited = 0;
};

struct FrontendQueuePair;  // frontend_queue.h: one RX and one TX DriverRing

class Frontend {
 public:
  // Runs the handshake on `connection`. nullptr on failure, with `error` set (the
  // connection is closed then).
  static std::unique_ptr<Frontend> start(Connection connection, const FrontendOptions& options,
                                         std::string& error);

  ~Frontend();
  Frontend(const Frontend&) = delete;
  Frontend& operator=(const Frontend&) = delete;

  // ---- transmit (TX vring 2p+1) ----
  // Copies header + frame into free TX buffers (as many as it takes) and adds them as
  // one chain, unpublished. false when the ring lacks the buffers (even after reaping
  // completions; counted in tx_full), the frame needs more buffers than the ring has,
  // or the frontend is broken.
  bool enqueue_tx(std::span<const std::byte> frame, uint32_t pair = 0, const virtio::NetHeader& header = {});
  // Publishes what was enqueued; kicks if the device asks for it.
  void flush_tx(uint32_t pair = 0);
  bool send(std::span<const std::byte> frame, uint32_t pair = 0) {
    if (!enqueue_tx(frame, pair)) return false;
    flush_tx(pair);
    return true;
  }
  // Reaps TX completions (frees buffers). Returns how many.
  size_t reap_tx(uint32_t pair = 0);
  // Sleeps on the TX call fd until completions free room for a frame of `frame_bytes`
  // (0: any frame that fits one buffer), or `timeout` passes; true if there is room.
  // Publishes what was enqueued first (the device cannot complete what it cannot see).
  // A stale or spurious call does not end the wait early.
  bool wait_tx_space(std::chrono::milliseconds timeout, uint32_t pair = 0, size_t frame_bytes = 0);
  uint16_t tx_in_flight(uint32_t pair = 0) const;
  // The kick eventfd of vring `index` (2p: RX, 2p+1: TX), -1 if there is none. For
  // tests that play a misbehaving guest (a kick flood); the frontend keeps owning it.
  int kick_fd(uint32_t index) const noexcept;
  // The err eventfd of vring `index` (options.err_fds), -1 if there is none.
  int err_fd(uint32_t index) const noexcept;
  // The fd holding guest memory, for tests that play a hostile frontend (one that cuts
  // its memory short). After such a cut, nothing but the destructor may be called.
  int memory_fd() const noexcept { return memfd_.get(); }
  size_t memory_bytes() const noexcept { return memory_bytes_; }
  // Guest memory as we map it, and where vring `index`'s rings lie in it (guest
  // physical addresses, options.guest_phys_base included): for tests that play a guest
  // writing garbage into its own rings. nullopt for no such vring.
  std::byte* guest_memory() const noexcept { return memory_; }
  std::optional<virtio::QueueConfig> vring_config(uint32_t index) const;

  // ---- receive (RX vring 2p) ----
  // Hands up to `max` received packets to `on_packet`, reposts their buffers, returns
  // how many. Never blocks.
  size_t poll_rx(const std::function<void(const RxPacket&)>& on_packet, size_t max = SIZE_MAX, uint32_t pair = 0);
  // Sleeps on the RX call fd until something was received (or timeout); true if so (a
  // stale or spurious call does not count: the used ring is checked).
  bool wait_rx(std::chrono::milliseconds timeout, uint32_t pair = 0);

  // ---- teardown ----
  // GET_VRING_BASE for every vring (after SET_VRING_ENABLE 0 when negotiated), then
  // closes the socket. false (error() set) if the backend misbehaved on the way; the
  // socket is closed either way.
  bool stop();

  // See the contract. false (and broken) if the backend refused a step.
  bool start_dirty_log();
  bool page_dirty(uint64_t guest_addr) const noexcept;
  void clear_dirty_log() noexcept;
  // The guest-physical address of a byte of guest memory (e.g. RxPacket::frame.data()
  // when the packet came in one buffer); nullopt outside it.
  std::optional<uint64_t> guest_address_of(const std::byte* host) const noexcept;
  // The guest-physical address of vring `index`'s used ring.
  uint64_t used_ring_address(uint32_t index) const;
  // What GET_VRING_BASE answered for `vring` during stop() (nullopt before, or if stop()
  // did not get that far).
  std::optional<uint16_t> stopped_base(uint32_t vring) const;

  bool broken() const noexcept { return !error_.empty(); }
  const std::string& error() const noexcept { return error_; }
  uint64_t features() const noexcept { return features_; }
  uint64_t protocol_features() const noexcept { return protocol_features_; }
  size_t net_header_size() const noexcept { return header_size_; }
  uint32_t queue_pairs() const noexcept { return options_.queue_pairs; }
  const FrontendStats& stats() const noexcept { return stats_; }

 private:
  Frontend(Connection connection, const FrontendOptions& options);

  // The steps of start(); each returns false with error_ set.
  bool negotiate();
  bool setup_memory();
  bool setup_vrings();
  bool enable_vrings(bool enable);

  // One request. With a reply kind, waits for and checks the reply; without one, asks
  // for an ack when REPLY_ACK is negotiated and checks it.
  bool request(Request request, const Payload& payload, std::span<const int> fds = {});
  // A request whose reply is its answer (no ack asked): a uint64_t or a VringState.
  template <class Reply>
  bool request_reply(Request request, const Payload& payload, Reply& reply);
  bool await_reply(Request expected, ReplyKind kind, Payload& reply);
  bool fail(std::string why);
  // TX buffers (descriptors) a frame of `frame_bytes` takes, header included.
  size_t tx_buffers_for(size_t frame_bytes) const noexcept;

  Connection connection_;
  FrontendOptions options_;
  uint64_t features_ = 0;
  uint64_t protocol_features_ = 0;
  size_t header_size_ = virtio::kNetHeaderSizeMrg;
  bool mrg_rxbuf_ = false;

  // Guest memory: one shared memfd mapping.
  base::UniqueFd memfd_;
  std::byte* memory_ = nullptr;
  size_t memory_bytes_ = 0;

  // The dirty-page log handed to the backend (start_dirty_log).
  base::UniqueFd log_fd_;
  uint8_t* log_ = nullptr;
  size_t log_bytes_ = 0;

  std::vector<std::unique_ptr<FrontendQueuePair>> pairs_;
  std::vector<std::optional<uint16_t>> vring_bases_;  // per vring, filled by stop()
  FrontendStats stats_;
  std::string error_;
};

// Client mode: connects to a listening backend (retrying until `total` passes) and
// starts. Server mode: binds `path`, waits up to `accept_timeout` for the backend.
std::unique_ptr<Frontend> connect_frontend(const std::string& path, const FrontendOptions& options,
                                           std::chrono::milliseconds total, std::string& error);
std::unique_ptr<Frontend> listen_frontend(const std::string& path, const FrontendOptions& options,
                                          std::chrono::milliseconds accept_timeout, std::string& error);

}  // namespace uvhost::vhost_user
