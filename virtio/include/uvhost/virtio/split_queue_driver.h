// split_queue_driver.h - the driver (guest) side of one split virtqueue.
//
// Contract
// --------
//  - DriverQueue lays out a descriptor table, avail ring, used ring and a pool of
//    indirect tables in one memory area that the device can also reach (shared memory,
//    or a test buffer registered in a GuestMemoryMap), and plays the guest: add chains
//    (direct or indirect), publish them, kick the device when its suppression state
//    asks for it, reap used entries, enable/disable used-buffer interrupts.
//  - It is the trusted side: it is used by tests and by our own embedded frontend, so
//    misuse by its caller (adding more than fits) aborts via a misuse check rather
//    than being handled gracefully. The device is a peer we do not trust: what reap()
//    reads from the used ring is checked (id range, in flight); a used entry that
//    fails the check stops reaping for good and device_misbehaved() turns true, so
//    the owner (e.g. the embedded frontend) can report it and give up on the device.
//  - Memory orders, mirror images of the device side: descriptors and avail entries are
//    stored relaxed, avail->idx with release (publish); used->idx is loaded with
//    acquire before used elements are read (reap); a full fence sits between the
//    avail->idx store and the load of the device's suppression field (publish), and
//    between re-enabling interrupts and re-checking used->idx.
//  - VIRTIO_F_IN_ORDER (options.in_order): reap() also takes the device's batched used
//    update: one used entry, in the batch's first slot, naming the batch's last head.
//    The batch's earlier chains are those made available before it, in order; reap()
//    returns each of them with length 0 (the spec gives the device no way to say what
//    it wrote there, so a device batches only chains it did not write into) and the
//    last with the entry's length. An entry naming a head that is not among the
//    chains made available and not yet used counts as device misbehaviour.
//  - One thread at a time; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "uvhost/virtio/ring_layout.h"
#include "uvhost/virtio/split_queue.h"

namespace uvhost::virtio {

struct DriverRingArea {
  std::byte* host = nullptr;  // 16-byte aligned
  uint64_t guest_addr = 0;    // 16-byte aligned; the same bytes as the device sees them
  size_t bytes = 0;
};

struct DriverOptions {
  uint16_t size = 256;                 // power of two
  bool event_idx = false;
  bool indirect_desc = false;
  uint16_t max_indirect_entries = 16;  // per indirect table (one table per head)
  uint16_t initial_index = 0;          // start avail/used indices here (wrap-around tests)
  bool in_order = false;               // VIRTIO_F_IN_ORDER: accept batched used entries
};

class DriverQueue {
 public:
  using Kick = std::function<void()>;

  struct Buffer {
    uint64_t guest_addr = 0;
    uint32_t len = 0;
    bool device_writable = false;
  };

  // Bytes of DriverRingArea needed for these options.
  static size_t required_bytes(const DriverOptions& options);

  DriverQueue(const DriverOptions& options, DriverRingArea area, Kick kick = {});

  // The configuration to start the matching DeviceQueue with.
  QueueConfig device_config() const;

  // Adds one chain (not yet visible to the device). Readable buffers must come before
  // writable ones. nullopt when there are not enough free descriptors (for an indirect
  // chain: no free head, or more buffers than max_indirect_entries).
  std::optional<uint16_t> add_chain(std::span<const Buffer> buffers, bool indirect = false);

  // Makes every added chain visible (release store of avail->idx) and kicks the device
  // if its suppression state asks for it. Returns whether it kicked.
  bool publish();

  // Next used chain, if the device published one. nullopt as well once the device
  // returned a bad entry (see device_misbehaved()). With in_order, a batched entry is
  // returned as one element per chain of its batch (see the contract).
  std::optional<UsedElement> reap();
  // True once the device returned a used id out of range or not in flight.
  bool device_misbehaved() const noexcept { return device_misbehaved_; }

  // Used-buffer interrupt suppression (VIRTQ_AVAIL_F_NO_INTERRUPT, or used_event).
  void disable_interrupts();
  // Re-enables interrupts and returns whether used entries are already pending (reap
  // them: no interrupt may come for those).
  [[nodiscard]] bool enable_interrupts();

  // Whether a device stopped at avail index `index` (GET_VRING_BASE) can have got
  // there: between the first chain not yet reaped and the last made available.
  bool stopped_base_plausible(uint16_t index) const noexcept {
    const auto reaped = static_cast<uint16_t>(avail_idx_ - in_flight_);
    return static_cast<uint16_t>(index - reaped) <= in_flight_;
  }

  uint16_t free_descriptors() const noexcept { return free_count_; }
  uint16_t in_flight() const noexcept { return in_flight_; }
  uint16_t avail_index() const noexcept { return avail_idx_; }
  uint16_t initial_index() const noexcept { return options_.initial_index; }
  uint32_t kicks() const noexcept { return kicks_; }

  // Raw access for tests that play a hostile guest.
  std::byte* desc_table() const noexcept { return desc_; }
  std::byte* avail_ring() const noexcept { return avail_; }
  std::byte* used_ring() const noexcept { return used_; }
  void write_descriptor(uint16_t index, const Descriptor& desc);
  void write_avail_entry(uint16_t position, uint16_t head);
  void store_avail_index(uint16_t index);  // release store, bypassing bookkeeping

 private:
  uint16_t take_free_descriptor();
  void release_chain(uint16_t head);
  // Returns `head` to the free list and the caller (reap()'s common end).
  UsedElement complete(UsedElement used);
  // With in_order: where the used entry at last_used_ naming `id` ends its batch (the
  // position after it), or nullopt if `id` is not pending within `published` entries.
  std::optional<uint16_t> in_order_batch_end(uint32_t id, uint16_t published) const;

  DriverOptions options_;
  DriverRingArea area_;
  Kick kick_;
  std::byte* desc_ = nullptr;
  std::byte* avail_ = nullptr;
  std::byte* used_ = nullptr;
  std::byte* indirect_ = nullptr;
  uint64_t desc_guest_ = 0, avail_guest_ = 0, used_guest_ = 0, indirect_guest_ = 0;

  std::vector<Descriptor> shadow_;       // our own copy of the descriptor table
  std::vector<uint8_t> head_in_flight_;  // per head: 1 while the device owns it
  std::vector<uint16_t> avail_heads_;    // in_order: the head made available at each position (mod size)
  uint16_t batch_end_ = 0;               // in_order: position after the batch being reaped
  UsedElement batch_last_{};             // in_order: the batch's used entry (its last chain)
  uint16_t free_head_ = 0;
  uint16_t free_count_ = 0;
  uint16_t in_flight_ = 0;
  uint16_t avail_idx_ = 0;        // next avail entry to fill
  uint16_t published_avail_ = 0;  // avail->idx as stored last
  uint16_t last_used_ = 0;        // next used entry to reap
  bool interrupts_enabled_ = true;
  bool device_misbehaved_ = false;
  uint32_t kicks_ = 0;
};

// A Kick that writes 1 to an eventfd (the vhost-user kick fd).
DriverQueue::Kick eventfd_kick(int fd);

}  // namespace uvhost::virtio
