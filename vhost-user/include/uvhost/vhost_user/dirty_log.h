// dirty_log.h - the dirty-page bitmap of live migration (VHOST_F_LOG_ALL).
//
// Contract
// --------
//  - A DirtyLog maps the frontend's log (SET_LOG_BASE: an fd, a size in bytes and an
//    offset where the bitmap starts) and marks pages: one bit per 4 KiB page of guest
//    physical memory, bit (page % 8) of byte (page / 8), as the spec's pseudo-code.
//  - mark() sets the bit of every page that [addr, addr + len) touches, with an atomic
//    fetch_or per byte (the frontend and other queues write the same bitmap), using
//    release order: whoever writes guest memory marks AFTER writing, and a frontend
//    that sees the bit then sees the data (it clears bits and copies pages; marking
//    before the write could let it copy the old contents and lose the write).
//  - Nothing in the arguments is trusted: a range that wraps or reaches past the end
//    of the bitmap is clipped to it (never a write outside the mapping); the clipped
//    pages are counted in out_of_range_pages() so tests and statistics can see them.
//  - Thread safety: mark() and is_dirty() may run concurrently from any thread.
//  - Logging a used ring write: the spec logs it at the ring's log_guest_addr (from
//    SET_VRING_ADDR with VHOST_VRING_F_LOG), which need not be a mapped guest address;
//    log_used_write() turns (ring offset, length) into that range.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "uvhost/base/unique_fd.h"
#include "uvhost/virtio/guest_memory.h"
#include "uvhost/virtio/io_vector.h"

namespace uvhost::vhost_user {

class DirtyLog {
 public:
  static constexpr uint64_t kPageSize = 0x1000;  // VHOST_LOG_PAGE
  // A log beyond this is absurd (it would cover 2^48 bytes of guest memory).
  static constexpr uint64_t kMaxBytes = uint64_t{1} << 33;

  // Maps [offset, offset + size) of `fd` (which must be a regular file at least that
  // large: memfd or hugetlbfs, so no SIGBUS on access). nullptr with `error` set if not.
  static std::unique_ptr<DirtyLog> map(base::UniqueFd fd, uint64_t size, uint64_t offset, std::string& error);

  ~DirtyLog();
  DirtyLog(const DirtyLog&) = delete;
  DirtyLog& operator=(const DirtyLog&) = delete;

  void mark(uint64_t guest_addr, uint64_t len) noexcept;
  bool is_dirty(uint64_t guest_addr) const noexcept;

  uint64_t size_bytes() const noexcept { return size_; }
  uint64_t out_of_range_pages() const noexcept { return out_of_range_.load(std::memory_order_relaxed); }

 private:
  DirtyLog() = default;

  uint8_t* bitmap_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;
  size_t mapping_len_ = 0;
  base::UniqueFd fd_;
  std::atomic<uint64_t> out_of_range_{0};
};

// Offsets inside a split ring's used area (virtio 1.2, 2.7.8).
inline constexpr uint64_t kUsedFlagsOffset = 0;
inline constexpr uint64_t kUsedIdxOffset = 2;
inline constexpr uint64_t kUsedRingOffset = 4;
inline constexpr uint64_t kUsedElementSize = 8;

// Marks a write of `len` bytes at byte `offset` of a used ring logged at
// `log_guest_addr`. Wrap-safe (clipped like mark()).
void log_used_write(DirtyLog& log, uint64_t log_guest_addr, uint64_t offset, uint64_t len) noexcept;
// Marks used element `slot` (ring position, already reduced modulo the size) and the
// used->idx field: what one add_used + publish_used writes.
void log_used_element(DirtyLog& log, uint64_t log_guest_addr, uint32_t slot) noexcept;
// Marks the `count` used elements that end (exclusive) at free-running used index `end`
// of a ring of `ring_size` entries, and used->idx: what deliver() added for one packet.
void log_used_elements(DirtyLog& log, uint64_t log_guest_addr, uint16_t end, uint16_t count,
                       uint32_t ring_size) noexcept;
// Marks used->flags and the used ring's avail_event (after the last element): what
// enabling or disabling guest kicks writes (NO_NOTIFY, or EVENT_IDX's avail_event).
void log_kick_fields(DirtyLog& log, uint64_t log_guest_addr, uint32_t ring_size) noexcept;
// A packed ring's device area (event suppression, logged at log_guest_addr as the spec
// logs a split ring's used ring): what enabling or disabling guest kicks writes there.
// Its used descriptors go into the descriptor ring: log_host_writes() with
// DeviceQueue::last_published_ring_bytes().
void log_packed_device_area(DirtyLog& log, uint64_t log_guest_addr) noexcept;
// Marks the guest pages behind host ranges the device wrote (receive buffers), found
// through `map` (a range outside every region is not guest memory: nothing to mark).
void log_host_writes(DirtyLog& log, const virtio::GuestMemoryMap& map,
                     std::span<const virtio::IoPiece> pieces) noexcept;

}  // namespace uvhost::vhost_user
