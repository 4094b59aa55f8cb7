// datapath_hooks.h - what the protocol tells the datapath. The device (backend_device.h)
// speaks vhost-user; whoever moves packets implements DatapathHooks and never sees a
// message. This keeps workers, polling and backends out of the protocol layer.
//
// Contract (the device's promises to the hooks)
// --------
//  - Every hook is called on the device's control thread, one at a time, in protocol
//    order. A hook must not call back into the device.
//  - queue_started(): the ring is configured (size, addresses, base, kick) and the
//    memory holds its rings as far as the protocol can tell. The fds in QueueStart are
//    owned by the device and stay open until queue_stopped() for that index returns,
//    or until call_fd_changed() / err_fd_changed() replaced the call / err fd (the
//    old one is closed after that hook returns: stop using it before returning). `memory` and the DirtyLog passed
//    in log_changed() live until the device is destroyed / the next log_changed().
//    Return false if the queue cannot start (e.g. its rings are not in memory): the
//    device reports the request as failed and considers the ring stopped.
//  - queue_stopped(): stop touching the ring before returning, and return the index of
//    the next avail entry to process (GET_VRING_BASE's answer).
//  - memory_changed(): a new GuestMemoryMap was published in `memory` (the same object
//    as in queue_started); queues pick it up by generation. Only for information.
//  - What the hooks are trusted with: to really stop using a ring/fd when told. The
//    device does not check.
#pragma once

#include <array>
#include <cstdint>

#include "uvhost/virtio/guarded_guest_memory.h"
#include "uvhost/virtio/split_queue.h"

namespace uvhost::vhost_user {

class DirtyLog;

struct QueueStart {
  uint32_t index = 0;          // virtio-net: 2k = receive queue k, 2k+1 = transmit queue k
  virtio::QueueConfig config;  // frontend-virtual addresses, EVENT_IDX/INDIRECT per features
  uint16_t last_avail_index = 0;  // SET_VRING_BASE
  int kick_fd = -1;            // -1: no fd, poll the ring (NOFD)
  int call_fd = -1;            // -1: no interrupt fd, the frontend polls
  int err_fd = -1;             // SET_VRING_ERR: written (1) when the queue breaks; -1: none
  bool enabled = false;        // SET_VRING_ENABLE state (enabled from the start without PROTOCOL_FEATURES)
  bool log_used = false;       // VHOST_VRING_F_LOG: log used ring writes at log_guest_addr
  uint64_t log_guest_addr = 0;
};

class DatapathHooks {
 public:
  virtual ~DatapathHooks() = default;

  virtual bool queue_started(const QueueStart& start, virtio::GuardedGuestMemory& memory) = 0;
  virtual uint16_t queue_stopped(uint32_t index) = 0;
  // Started but disabled: process and discard transmit, supply nothing on receive.
  virtual void queue_enabled(uint32_t index, bool enabled) = 0;
  virtual void call_fd_changed(uint32_t index, int call_fd) = 0;
  // SET_VRING_ERR on a started ring; the same lifetime rule as call_fd_changed().
  virtual void err_fd_changed(uint32_t index, int err_fd) { (void)index, (void)err_fd; }
  // SET_VRING_ADDR on a running ring that only toggles VHOST_VRING_F_LOG (migration).
  virtual void used_log_changed(uint32_t index, bool log_used, uint64_t log_guest_addr) = 0;
  virtual void memory_changed() = 0;
  virtual void features_changed(uint64_t features) = 0;
  // nullptr: logging stopped or no log. Valid until the next call.
  virtual void log_changed(DirtyLog* log) = 0;
  virtual void rarp_requested(const std::array<uint8_t, 6>& mac) = 0;
  virtual void mtu_changed(uint16_t mtu) { (void)mtu; }
  virtual void status_changed(uint8_t status) { (void)status; }
};

}  // namespace uvhost::vhost_user
