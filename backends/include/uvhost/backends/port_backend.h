// port_backend.h - what a port's packets go to and come from on the host side: the
// interface between the datapath (workers moving packets in and out of guest rings)
// and a backend (sink, source, loopback, tap, switch).
//
// Directions, in virtio-net's terms (the guest's point of view):
//  - transmit: guest -> backend. The datapath pops a burst of chains from transmit
//    vring 2k+1 (queue pair k) and hands them over in one call, in place:
//    transmit_burst(k, frames), each frame a TxFrame (tx_frame.h) pointing into guest
//    memory. The backend consumes them (sends, forwards, counts) and copies only what
//    it must keep or decide on; the datapath completes the chains when it returns.
//  - receive: backend -> guest, two ways, and a backend may use both:
//    * push: the backend (or another port's backend, e.g. the switch) hands a Packet to
//      the port's RxInjector. The datapath queues it for receive vring 2k and wakes the
//      worker; a packet that finds the queue full or stopped is dropped and counted
//      (never a wait: a slow guest must not stall the sender);
//    * pull: while the guest has receive buffers the datapath calls pull_frame(k, view)
//      to take what the backend has now (a tap read, a generated frame), as a view of
//      the backend's own memory, valid until the next pull_frame(k); rx_fd(k),
//      when not -1, becomes readable (edge-triggered is enough) when pull() may have
//      something again, and the datapath's worker waits on it. The edge is promised
//      only after a pull() that returned false: a worker that stopped pulling because
//      the guest ran out of receive buffers (pull() had not said false yet) must pull
//      again when buffers come back, not wait for rx_fd (frames may be waiting and no
//      new edge will come). rx_fd may also report EPOLLERR/EPOLLHUP (a tap that was
//      deleted): pull() then returns false at once; the worker should stop waiting
//      on that fd rather than spin.
//
// Contract
// --------
//  - One PortBackend per port; it outlives every connection of the port (counters and
//    switch membership span frontends). attach() is called once, before any traffic,
//    with the port's injector, which lives as long as the backend is attached;
//    detach() before the injector goes away (after the port's transmit()/pull() calls
//    have stopped). Both from the control thread; neither runs concurrently with this
//    backend's own transmit()/pull() (other backends, e.g. other switch ports, may be
//    injecting into this port's injector meanwhile: a backend that hands the injector
//    to other threads makes detach() wait for them).
//  - transmit_burst(k, ...) and pull_frame(k, ...) run on the worker thread that owns
//    queue pair k (its transmit and receive vrings may be on different workers with
//    some mappings). Calls for different k can run concurrently; calls for the same k
//    and direction never do. They never block: a backend that cannot take a frame now
//    drops it (the datapath counts every frame not taken as a transmit drop).
//  - offered_features(): the virtio-net features this backend honours, offered to the
//    guest on top of every port's base set (vhost_user/features.h; only offload bits
//    count): CSUM and HOST_* when transmit_burst() takes frames whose header asks for
//    a partial checksum or segmentation (as they are: the backend or what it hands them
//    to completes them), GUEST_* when the backend may hand the guest such frames (and
//    then only the kinds the guest negotiated). Fixed for the backend's life; asked
//    from the control thread when a frontend connects. Default: none.
//  - features_changed(): the guest's negotiated virtio features (e.g. tap offloads),
//    from the control thread, before the rings start or while they are stopped. A
//    feature change during traffic (VHOST_F_LOG_ALL only) does not reach here.
//  - mtu_changed(mtu): the frontend told the guest's MTU (vhost-user NET_SET_MTU,
//    68..65535), from the control thread; a backend with a link of its own (a tap)
//    applies it there, or logs why not. Default: nothing.
//  - stats() may be called from any thread at any time (relaxed counters).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "uvhost/backends/packet.h"
#include "uvhost/backends/tx_frame.h"
#include "uvhost/virtio/net_header.h"

namespace uvhost::backends {

// Implemented by the datapath: the way into a port's receive queues.
class RxInjector {
 public:
  virtual ~RxInjector() = default;
  // Queues `packet` for receive queue pair `pair % pairs`. false: dropped (the queue
  // is stopped, disabled, or its frame ring is full), already counted by the datapath.
  // Any thread.
  virtual bool inject(uint32_t pair, PacketPtr packet) noexcept = 0;
  // The same for a frame still in guest memory, with its first bytes replaced:
  // `prefix` followed by source's frame bytes from prefix.size() on (prefix may be
  // empty), with `header`. The way a backend hands a guest's frame on with its
  // addresses rewritten (loopback's MAC swap) without copying it first: the datapath
  // copies it once, straight into the receive ring when this thread serves that ring
  // and nothing is queued ahead of it, else into a Packet that it queues. `source`
  // only needs to live for the call. This default always makes the Packet.
  virtual bool inject_frame(uint32_t pair, const virtio::NetHeader& header, std::span<const std::byte> prefix,
                            const TxFrame& source) noexcept;
  virtual uint32_t queue_pairs() const noexcept = 0;
};

// A frame a backend has for the guest, in the backend's own memory.
struct RxFrameView {
  virtio::NetHeader header{};
  std::span<const std::byte> frame;
};

// What transmit_burst took: frames and their bytes (Ethernet frames, headers excluded).
struct TxBurstResult {
  uint32_t frames = 0;
  uint64_t bytes = 0;
};

class PortBackend {
 public:
  virtual ~PortBackend() = default;

  // "sink", "source", "loopback", "tap", "switch".
  virtual std::string_view kind() const noexcept = 0;
  // One line for logs: "tap uvtap0 (created, vnet header 12)".
  virtual std::string describe() const = 0;

  virtual void attach(RxInjector& injector) { injector_ = &injector; }
  virtual void detach() { injector_ = nullptr; }

  virtual uint64_t offered_features() const noexcept { return 0; }
  virtual void features_changed(uint64_t features) { (void)features; }
  virtual void mtu_changed(uint32_t mtu) { (void)mtu; }

  // Guest -> backend: a burst of frames in guest memory (tx_frame.h), in ring order.
  // Returns what was taken; every other frame was dropped by the backend (the datapath
  // counts a transmit drop for each). A frame handed on to an RxInjector is taken even
  // if inject() refuses it: the datapath counts that as a drop on the receiving queue,
  // and each lost frame must be counted once.
  virtual TxBurstResult transmit_burst(uint32_t pair, std::span<const TxFrame> frames) = 0;

  // One frame from ordinary memory through transmit_burst (tests, tools). true: taken.
  bool transmit(uint32_t pair, const virtio::NetHeader& header, std::span<const std::byte> frame);

  // Backend -> guest, pull side. true when the backend has a frame for queue pair
  // `pair` now: `view` then shows it in the backend's memory, unchanged until the next
  // pull_frame(pair) (the datapath may hold it that long while the guest has no room).
  virtual bool pull_frame(uint32_t pair, RxFrameView& view) {
    (void)pair;
    (void)view;
    return false;
  }
  // pull_frame() copied into `packet` (its storage reused): tests, tools.
  bool pull(uint32_t pair, Packet& packet);
  // Readable (edge) when pull_frame(pair) may succeed again; -1: it never has anything.
  virtual int rx_fd(uint32_t pair) const noexcept {
    (void)pair;
    return -1;
  }

  // Backend-specific counters as a JSON object (e.g. tap write errors, switch
  // decisions), shown by `uvhost ctl stats --json` under the port.
  virtual nlohmann::json stats() const;

 protected:
  RxInjector* injector() const noexcept { return injector_; }

 private:
  RxInjector* injector_ = nullptr;
};

}  // namespace uvhost::backends
