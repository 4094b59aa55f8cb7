// dirty_log.cpp - see dirty_log.h.
#include "uvhost/vhost_user/dirty_log.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "uvhost/virtio/packed_ring_layout.h"

namespace uvhost::vhost_user {

std::unique_ptr<DirtyLog> DirtyLog::map(base::UniqueFd fd, uint64_t size, uint64_t offset, std::string& error) {
  if (size == 0 || size > kMaxBytes) {
    error = fmt::format("log size {:#x} out of range (1..{:#x})", size, kMaxBytes);
    return nullptr;
  }
  if (offset > kMaxBytes) {
    error = fmt::format("log offset {:#x} absurd", offset);
    return nullptr;
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    error = fmt::format("fstat of log fd: {}", std::strerror(errno));
    return nullptr;
  }
  // Mapping past the end of a file "works" and then kills us with SIGBUS on access.
  if (!S_ISREG(info.st_mode) || static_cast<uint64_t>(info.st_size) < offset + size) {
    error = fmt::format("log fd is not a regular file of at least {:#x} bytes", offset + size);
    return nullptr;
  }
  // The offset need not be page aligned: map from 0 and skip it (both are bounded above).
  const auto mapping_len = static_cast<size_t>(offset + size);
  void* mapping = ::mmap(nullptr, mapping_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (mapping == MAP_FAILED) {
    error = fmt::format("mmap of log: {}", std::strerror(errno));
    return nullptr;
  }
  std::unique_ptr<DirtyLog> log(new DirtyLog());
  log->mapping_ = mapping;
  log->mapping_len_ = mapping_len;
  log->bitmap_ = static_cast<uint8_t*>(mapping) + offset;
  log->size_ = size;
  log->fd_ = std::move(fd);
  return log;
}

DirtyLog::~DirtyLog() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_len_);
}

void DirtyLog::mark(uint64_t guest_addr, uint64_t len) noexcept {
  if (len == 0) return;
  const uint64_t first_page = guest_addr / kPageSize;
  // Inclusive last byte, clipped at 2^64 - 1 if the range wraps.
  const uint64_t last_byte = len - 1 > ~uint64_t{0} - guest_addr ? ~uint64_t{0} : guest_addr + (len - 1);
  const uint64_t last_page = last_byte / kPageSize;
  const uint64_t pages_in_log = size_ * 8;
  if (last_page >= pages_in_log) {
    const uint64_t clipped_from = first_page > pages_in_log ? first_page : pages_in_log;
    out_of_range_.fetch_add(last_page - clipped_from + 1, std::memory_order_relaxed);
    if (first_page >= pages_in_log) return;
  }
  const uint64_t end_page = last_page < pages_in_log ? last_page : pages_in_log - 1;
  for (uint64_t page = first_page; page <= end_page; ++page) {
    const auto mask = static_cast<uint8_t>(1u << (page % 8));
    // release: see the header (mark after the data write; the frontend must see both).
    std::atomic_ref<uint8_t>(bitmap_[page / 8]).fetch_or(mask, std::memory_order_release);
  }
}

bool DirtyLog::is_dirty(uint64_t guest_addr) const noexcept {
  const uint64_t page = guest_addr / kPageSize;
  if (page / 8 >= size_) return false;
  const uint8_t byte = std::atomic_ref<uint8_t>(bitmap_[page / 8]).load(std::memory_order_acquire);
  return (byte & (1u << (page % 8))) != 0;
}

void log_used_write(DirtyLog& log, uint64_t log_guest_addr, uint64_t offset, uint64_t len) noexcept {
  // A wrap of log_guest_addr + offset is clipped by mark() like any other range.
  if (offset > ~uint64_t{0} - log_guest_addr) return;
  log.mark(log_guest_addr + offset, len);
}

void log_used_element(DirtyLog& log, uint64_t log_guest_addr, uint32_t slot) noexcept {
  log_used_write(log, log_guest_addr, kUsedRingOffset + uint64_t{slot} * kUsedElementSize, kUsedElementSize);
  log_used_write(log, log_guest_addr, kUsedIdxOffset, sizeof(uint16_t));
}

void log_used_elements(DirtyLog& log, uint64_t log_guest_addr, uint16_t end, uint16_t count,
                       uint32_t ring_size) noexcept {
  for (uint16_t i = 0; i < count; ++i) {
    const uint32_t position = uint32_t{end} + 0x10000u - count + i;  // no unsigned wrap below 0
    log_used_element(log, log_guest_addr, position & (ring_size - 1));
  }
}

void log_kick_fields(DirtyLog& log, uint64_t log_guest_addr, uint32_t ring_size) noexcept {
  log_used_write(log, log_guest_addr, kUsedFlagsOffset, sizeof(uint16_t));
  log_used_write(log, log_guest_addr, kUsedRingOffset + uint64_t{ring_size} * kUsedElementSize, sizeof(uint16_t));
}

void log_packed_device_area(DirtyLog& log, uint64_t log_guest_addr) noexcept {
  log_used_write(log, log_guest_addr, 0, virtio::kPackedEventAreaBytes);
}

void log_host_writes(DirtyLog& log, const virtio::GuestMemoryMap& map,
                     std::span<const virtio::IoPiece> pieces) noexcept {
  for (const virtio::IoPiece& piece : pieces) {
    if (auto guest = map.host_to_guest(piece.data)) log.mark(*guest, piece.len);
  }
}

}  // namespace uvhost::vhost_user
