// split_queue.h - the device side of one virtqueue: split, or packed
// (VIRTIO_F_RING_PACKED, QueueConfig::packed).
//
// Contract
// --------
//  What it guarantees
//  - pop() and pop_burst() hand out descriptor chains the driver made available, in
//    ring order, each fully validated: every descriptor lies inside guest memory,
//    chains end, indirect tables are well formed, readable parts come before writable
//    parts, the caller's ChainDirection holds. add_used() + publish_used() return
//    chains to the driver.
//  - Bursts: pop_burst() reads avail->idx at most once, loads the burst's heads and
//    prefetches their descriptors before walking any chain. add_used() only fills a
//    shadow of the used ring (host memory); publish_used() copies the shadow entries
//    into the used ring back to back and then stores used->idx once, so the driver's
//    cache lines are written in one short run per burst, not one entry at a time.
//  - Any spec violation by the guest (see queue_error.h) is logged once and puts the
//    queue in the broken state: pop() returns false, add_used/publish/notification
//    calls do nothing, until reset(). Nothing is read or written outside the mapped
//    regions, and every loop is bounded by the queue size.
//  - Ring state for vhost-user GET/SET_VRING_BASE: last_avail_index() and the setters.
//  - VIRTIO_F_ACCESS_PLATFORM (config().translation_misses set): addresses are IOVAs
//    and the map is an IOVA view (guest_memory.h). An address no range translates is a
//    miss, not a violation (translation_miss.h): the sink hears of it, the chain stays
//    available, the queue stays whole. start() then succeeds even when the rings are
//    not translatable yet: they are resolved (and a split ring's used index read) on
//    the first operation whose map translates them. A range that is mapped but does not
//    grant the access (a writable buffer in a read-only mapping) is still a violation.
//    While a miss is outstanding under the same map, enable_guest_kicks() and
//    enable_guest_kicks_for_more() do not report available chains (a caller would only
//    spin on them): the owner runs the queue again when a new map is published.
//    Accesses: descriptors, indirect tables and the driver's ring or area are read;
//    writable buffers and the used ring or device area written; a packed descriptor
//    ring both.
//
//  What it trusts and what it does not
//  - Trusted: the caller (one thread per queue; DeviceQueue is not thread-safe), the
//    GuestMemoryMap (its regions really are mapped), and `head` values passed to
//    add_used() (they must come from pop(); checked only by a debug misuse check).
//  - Not trusted: every byte of guest memory, including rings and descriptors, which
//    the guest may change while we read them. Each shared field is read once with a
//    single atomic access (detail/ring_access.h) into a local, validated, then used:
//    no double fetch.
//
//  Memory orders (each is commented where it happens)
//  - avail->idx is loaded with acquire, once per batch: it pairs with the driver's
//    write barrier / release store after it filled descriptors and ring entries, so
//    the relaxed loads of those that follow see them.
//  - used ring elements are stored relaxed (from the shadow, in publish_used); used->idx
//    is stored with release right after them, once per batch: the driver that sees the new index (after its read barrier)
//    sees the elements and the bytes we wrote into its buffers.
//  - must_signal_guest() and enable_guest_kicks() each do one full fence
//    (detail::full_barrier(), a seq_cst fence), because each
//    is a store followed by a load of a field the other side stores before loading
//    ours (a Dekker pattern): without store-load ordering both sides can miss each
//    other and the queue stalls with work pending. Nothing else needs a fence.
//
//  Packed rings (config().packed; packed_queue.cpp, packed_ring_layout.h)
//  - The same interface and guarantees. desc_addr is the descriptor ring, avail_addr the
//    driver's event suppression area, used_addr the device's. pop_burst() takes each
//    chain whose first descriptor is available (its flags loaded with acquire, which
//    pairs with the driver's release store of them after the rest of the chain) and
//    walks it (packed_chain_walker.h). publish_used() writes each used descriptor's id
//    and length, then (one release fence) the flags of all but the first, then the
//    first's flags with a release store: the driver, which reads the first, sees the
//    whole run. Chains are used in the order they were popped (the datapath's rule), so
//    each used descriptor goes where its chain started. With config().in_order a run
//    of chains only read goes back as one used descriptor in the run's first slot,
//    naming the run's last chain (the spec's batched update; the driver skips the
//    run's other slots).
//  - Notifications: the driver's area says DISABLE, ENABLE or (EVENT_IDX) DESC with a
//    position; ours gets DISABLE, or ENABLE / DESC at the next position we will pop.
//  - last_avail_index() and set_last_avail_index() (before start()): the vhost-user base,
//    position | wrap counter << 15. start() takes the used position equal to it (the
//    ring is drained whenever it stops, as DPDK's vhost library also assumes); a base
//    whose position is beyond the queue size breaks the queue.
//
//  Memory map changes
//  - Every operation takes the current GuestMemoryMap (read inside the guard's read()
//    section). Ring pointers are cached per map generation and re-translated when a
//    different map is passed; chains popped under one map must be finished (copied,
//    used) before that map's read section ends.
#pragma once

#include <array>
#include <initializer_list>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "uvhost/sync/misuse.h"
#include "uvhost/virtio/descriptor_chain.h"
#include "uvhost/virtio/guest_memory.h"
#include "uvhost/virtio/packed_ring_layout.h"
#include "uvhost/virtio/queue_error.h"
#include "uvhost/virtio/ring_layout.h"
#include "uvhost/virtio/translation_miss.h"

namespace uvhost::virtio {

enum class AddressSpace {
  kGuestPhysical,    // addresses as the device sees them (virtio-pci, tests)
  kFrontendVirtual,  // vhost-user SET_VRING_ADDR: the frontend process's addresses
};

struct QueueConfig {
  uint32_t size = 0;
  uint64_t desc_addr = 0;
  uint64_t avail_addr = 0;  // "driver area"
  uint64_t used_addr = 0;   // "device area"
  AddressSpace address_space = AddressSpace::kGuestPhysical;
  bool event_idx = false;      // VIRTIO_F_EVENT_IDX negotiated
  bool indirect_desc = false;  // VIRTIO_F_INDIRECT_DESC negotiated
  bool in_order = false;       // VIRTIO_F_IN_ORDER negotiated: publish_used() batches read-only chains
  bool packed = false;         // VIRTIO_F_RING_PACKED: the three addresses are the packed ring's
  // VIRTIO_F_ACCESS_PLATFORM: addresses are IOVAs; misses go here (see the contract).
  // Not owned; outlives the queue.
  TranslationMissSink* translation_misses = nullptr;
};

class DeviceQueue {
 public:
  explicit DeviceQueue(std::string name = "virtq");

  // Validates the configuration (size, alignment, rings inside memory) and starts the
  // queue; the used index continues from used->idx in the ring, the last avail index
  // keeps its value (set it first with set_last_avail_index for SET_VRING_BASE).
  // false: broken (logged).
  bool start(const QueueConfig& config, const GuestMemoryMap& memory);
  // Stops the queue and forgets everything, including the broken state.
  void reset();

  bool is_started() const noexcept { return started_; }
  bool is_broken() const noexcept { return error_ != QueueError::kNone; }
  QueueError error() const noexcept { return error_; }
  const std::string& name() const noexcept { return name_; }
  const QueueConfig& config() const noexcept { return config_; }

  // For device-type code on top (virtio-net) that finds a violation of its own rules:
  // logs and breaks the queue exactly as an internal check would. kGuestMemoryFault is
  // not logged: the caller found the faulted region and reports it (one line per device).
  // A violation found while a ring lies in memory that faulted (guest_memory_fault.h)
  // breaks the queue as kGuestMemoryFault, unlogged, for the same reason.
  void mark_broken(QueueError error, const std::string& detail) { fail(error, detail); }

  // Ring state (vhost-user GET/SET_VRING_BASE).
  uint16_t last_avail_index() const noexcept { return last_avail_; }
  void set_last_avail_index(uint16_t index) noexcept;
  uint16_t used_index() const noexcept { return used_idx_; }  // including unpublished entries
  void set_used_index(uint16_t index) noexcept;

  // Number of chains the driver has made available and we have not popped (one acquire
  // load of avail->idx). 0 when broken. A packed ring counts by reading descriptors'
  // flags and stops once it has counted `enough`.
  uint16_t available(const GuestMemoryMap& memory, uint16_t enough = UINT16_MAX);

  // Pops the next chain into `chain`. false when none is available or the queue is (or
  // just became) broken. Reloads avail->idx only when the batch seen last is used up.
  bool pop(const GuestMemoryMap& memory, DescriptorChain& chain, ChainDirection direction = ChainDirection::kAny);

  // Pops up to chains.size() chains into chains[0..n) and returns n. Reloads
  // avail->idx (once) only when the chains seen last cannot fill the burst. A chain
  // that breaks the queue ends the burst: the n chains before it are valid and popped,
  // and is_broken() is true.
  size_t pop_burst(const GuestMemoryMap& memory, std::span<DescriptorChain> chains,
                   ChainDirection direction = ChainDirection::kAny);

  // A hint that the next chain will be popped and written soon (a receive ring about
  // to take a frame): starts loading the next known-available chain's descriptor and
  // the used slot it will fill, so those cache misses overlap the caller's other work.
  // Reads avail->idx never (only chains already seen available count), validates
  // nothing and changes no state: pop_burst() reads everything again and checks it.
  void prefetch_next_chain(const GuestMemoryMap& memory);

  // Gives back the last `count` popped chains that were not added as used (e.g. a
  // receive that found too few buffers); they will be popped again.
  void unpop(uint16_t count) noexcept;

  // Records one used element in the shadow ring (not yet visible to the driver). It
  // touches no guest memory, so `memory` is not consulted (the map may even be about
  // to change: publish_used() writes the ring under the map current then).
  void add_used(const GuestMemoryMap& memory, uint16_t head, uint32_t written_len) {
    (void)memory;
    if (!started_ || is_broken()) [[unlikely]] return;
    UVHOST_MISUSE_CHECK(head < config_.size, "virtio: add_used() with a head that pop() cannot have returned");
    shadow_[used_idx_ & index_mask_] = UsedElement{head, written_len};
    ++used_idx_;
  }
  // add_used(chain.head, written_len) for each chain, in order (a transmit burst:
  // every chain read, none written).
  void add_used(std::span<const DescriptorChain> chains, uint32_t written_len) {
    if (!started_ || is_broken()) [[unlikely]] return;
    UsedElement* const shadow = shadow_.get();
    const uint16_t mask = index_mask_;
    uint16_t index = used_idx_;
    for (const DescriptorChain& chain : chains) shadow[index++ & mask] = UsedElement{chain.head, written_len};
    used_idx_ = index;
  }
  // Writes the shadow's elements into the used ring and makes them visible (one
  // release store of used->idx). With config().in_order, consecutive elements of
  // written length 0 (chains only read: a transmit burst) go out as a single used
  // entry in the first slot of their run, carrying the run's last head, as
  // VIRTIO_F_IN_ORDER allows; used->idx still advances by one per chain.
  void publish_used(const GuestMemoryMap& memory);
  // used->idx as last published (the elements from here to used_index() are pending).
  // On a packed ring both count chains.
  uint16_t published_used_index() const noexcept { return published_used_; }
  // Packed rings: the host bytes of the descriptor ring the last publish_used() wrote
  // (one or two pieces: it may wrap), for dirty-page logging. Empty for a split ring.
  std::span<const IoPiece> last_published_ring_bytes() const noexcept {
    return {published_bytes_.data(), published_pieces_};
  }

  // After publish_used(): must the guest be signalled (call eventfd) now? Honors
  // VIRTQ_AVAIL_F_NO_INTERRUPT, or used_event with VIRTIO_F_EVENT_IDX. false when
  // nothing was published since the last call.
  bool must_signal_guest(const GuestMemoryMap& memory);

  // Guest kick (available buffer notification) suppression: while disabled the driver
  // is told not to kick (used->flags NO_NOTIFY; with EVENT_IDX avail_event is simply no
  // longer advanced). enable_guest_kicks() re-enables and then re-checks the avail ring:
  // true means buffers arrived meanwhile, for which no kick may come - process them.
  void disable_guest_kicks(const GuestMemoryMap& memory);
  [[nodiscard]] bool enable_guest_kicks(const GuestMemoryMap& memory);
  // For a receiver that needs more buffers than are available (a packet that did not
  // fit): asks for a kick once `more` (>= 1) buffers beyond those available now have
  // been made available (EVENT_IDX: avail_event = avail->idx as seen now + more - 1;
  // without it every kick is enabled) and re-checks: true if that many arrived
  // meanwhile (try again). A large frame thus costs one kick, not one per buffer.
  [[nodiscard]] bool enable_guest_kicks_for_more(const GuestMemoryMap& memory, uint16_t more = 1);

 private:
  // Started, not broken, rings resolved for this map.
  bool usable(const GuestMemoryMap& memory) {
    if (!started_ || is_broken()) [[unlikely]] return false;
    if (memory.generation() == rings_generation_) [[likely]] return true;
    return resolve_rings(memory);
  }
  bool resolve_rings(const GuestMemoryMap& memory);
  // A ring that did not translate: a miss reported (true, the queue waits) or a
  // violation (false, the caller fails the queue).
  bool ring_translation_missed(const GuestMemoryMap& memory, std::initializer_list<TranslationNeed> areas);
  // The chain walk's last failed translation (failed_translation_): true if it is a
  // miss, reported; false if it is a violation.
  bool chain_translation_missed(const GuestMemoryMap& memory);
  // A miss was reported under this very map: nothing more can be taken before it changes.
  bool waiting_for_translation(const GuestMemoryMap& memory) const noexcept {
    return miss_generation_ == memory.generation();
  }
  [[gnu::always_inline]] inline void store_used_element(uint16_t slot, UsedElement element);
  void store_in_order_batches();  // publish_used() with VIRTIO_F_IN_ORDER and more than one pending
  void fail(QueueError error, const std::string& detail);

  // The packed ring's side of each operation (packed_queue.cpp).
  bool start_packed(const GuestMemoryMap& memory);
  bool resolve_packed_rings(const GuestMemoryMap& memory);
  uint16_t available_packed(uint16_t enough, uint32_t* slots_counted = nullptr);
  size_t pop_burst_packed(const GuestMemoryMap& memory, std::span<DescriptorChain> chains, ChainDirection direction);
  // pop_burst() from chain `from` on, for a chain the fast walk did not take (any
  // shape, or a violation): every chain from there takes the full walk if the fast one
  // fails. Out of line so the common burst keeps its registers.
  [[gnu::noinline]] size_t pop_burst_walking(const GuestMemoryMap& memory, std::span<DescriptorChain> chains,
                                             ChainDirection direction, size_t from, size_t count);
  void unpop_packed(uint16_t count) noexcept;
  void publish_used_packed();
  bool must_signal_guest_packed();
  void disable_guest_kicks_packed();
  bool enable_guest_kicks_packed();
  bool enable_guest_kicks_for_more_packed(uint16_t more);

  std::string name_;
  QueueConfig config_{};
  bool started_ = false;
  QueueError error_ = QueueError::kNone;

  // Host pointers of the rings for map generation rings_generation_.
  std::byte* desc_ = nullptr;
  std::byte* avail_ = nullptr;
  std::byte* used_ = nullptr;
  uint64_t rings_generation_ = 0;
  bool rings_read_ = false;  // split: used->idx read (at the first resolve of a start)
  uint64_t miss_generation_ = 0;  // the map of the last translation miss (0: none; generations start at 1)
  uint16_t index_mask_ = 0;

  uint16_t last_avail_ = 0;     // next avail ring entry to pop
  uint16_t avail_shadow_ = 0;   // avail->idx as loaded last (end of the current batch)
  uint16_t used_idx_ = 0;       // next used ring entry to write
  uint16_t published_used_ = 0; // used->idx as we last stored it
  uint16_t signalled_used_ = 0; // published_used_ when must_signal_guest() last ran
  bool signalled_valid_ = false;

  IoVector indirect_table_;     // scratch: host pieces of the indirect table being walked
  // The memory region the last chain's buffer lay in, kept from one burst to the next
  // while the map is the same (walk_cursor_generation_): a burst of chains in the
  // region of the chain before needs no region lookup.
  GuestMemoryMap::RegionCursor walk_cursor_;
  uint64_t walk_cursor_generation_ = 0;
  TranslationNeed failed_translation_;  // what the last failed chain walk could not translate
  std::unique_ptr<UsedElement[]> shadow_;  // used elements by slot, until publish_used()
  bool used_elements_aligned8_ = false;    // each used element is 8-byte aligned in host memory

  // Packed rings: desc_ is the descriptor ring, avail_ the driver's event area, used_
  // the device's; used_idx_ / published_used_ count chains; index_mask_ masks chain
  // counts into shadow_ and popped_slots_ (both sized to the power of two >= size).
  PackedPosition packed_avail_;             // next descriptor to pop
  PackedPosition packed_used_;              // where the next used descriptor goes
  uint16_t popped_ = 0;                     // chains popped (free-running)
  uint32_t slots_held_ = 0;                 // ring slots popped and not yet published as used
  uint32_t slots_since_signal_ = 0;         // slots published since must_signal_guest() last ran
  std::unique_ptr<uint16_t[]> popped_slots_;  // ring slots of each popped chain, by pop count
  std::array<IoPiece, 2> published_bytes_{};  // what the last publish_used() wrote
  size_t published_pieces_ = 0;
};

}  // namespace uvhost::virtio
