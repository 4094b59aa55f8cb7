// frontend_dirty_log.cpp - the embedded frontend's side of migration's dirty-page log
// (see frontend.h): what QEMU's vhost_migration_log() sends, in its order.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "uvhost/vhost_user/dirty_log.h"
#include "uvhost/vhost_user/frontend.h"
#include "uvhost/vhost_user/frontend_queue.h"

namespace uvhost::vhost_user {

bool Frontend::start_dirty_log() {
  if (broken()) return false;
  if ((protocol_features_ & protocol::kLogShmfd) == 0) return fail("frontend: the dirty log needs LOG_SHMFD");
  if (log_ != nullptr) return fail("frontend: the dirty log is already on");
  // One bit per page of [0, guest_phys_base + memory): the log is indexed from 0.
  const uint64_t pages = (options_.guest_phys_base + memory_bytes_ + DirtyLog::kPageSize - 1) / DirtyLog::kPageSize;
  log_bytes_ = static_cast<size_t>((pages + 7) / 8);
  log_fd_.reset(::memfd_create("uvhost-frontend-log", MFD_CLOEXEC));
  if (!log_fd_ || ::ftruncate(log_fd_.get(), static_cast<off_t>(log_bytes_)) != 0) {
    return fail(fmt::format("frontend: log memfd: {}", std::strerror(errno)));
  }
  void* mapping = ::mmap(nullptr, log_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, log_fd_.get(), 0);
  if (mapping == MAP_FAILED) return fail(fmt::format("frontend: mmap of the log: {}", std::strerror(errno)));
  log_ = static_cast<uint8_t*>(mapping);

  // SET_LOG_BASE has a reply of its own with LOG_SHMFD (the backend mapped the log).
  const int fds[] = {log_fd_.get()};
  SendResult sent = connection_.send(encode(Request::kSetLogBase, 0, LogArea{log_bytes_, 0}), fds);
  if (!sent.ok) return fail(fmt::format("frontend: sending SET_LOG_BASE: {}", sent.error));
  Payload reply;
  if (!await_reply(Request::kSetLogBase, ReplyKind::kU64, reply)) return false;
  if (!request(Request::kSetFeatures, features_ | feature::kLogAll)) return false;
  for (const auto& pair : pairs_) {
    for (const FrontendVring* vring : {&pair->rx, &pair->tx}) {
      const virtio::QueueConfig config = vring->queue->device_config();
      auto user_addr = [&](uint64_t guest) {
        return reinterpret_cast<uint64_t>(memory_) + (guest - options_.guest_phys_base);
      };
      if (!request(Request::kSetVringAddr,
                   VringAddress{vring->index, kVringFlagLog, user_addr(config.desc_addr), user_addr(config.used_addr),
                                user_addr(config.avail_addr), config.used_addr})) {
        return false;
      }
    }
  }
  return true;
}

bool Frontend::page_dirty(uint64_t guest_addr) const noexcept {
  const uint64_t page = guest_addr / DirtyLog::kPageSize;
  if (log_ == nullptr || page / 8 >= log_bytes_) return false;
  // acquire: pairs with the backend's release marks (dirty_log.h).
  return (std::atomic_ref<uint8_t>(log_[page / 8]).load(std::memory_order_acquire) & (1u << (page % 8))) != 0;
}

void Frontend::clear_dirty_log() noexcept {
  for (size_t i = 0; i < log_bytes_; ++i) std::atomic_ref<uint8_t>(log_[i]).store(0, std::memory_order_relaxed);
}

std::optional<uint64_t> Frontend::guest_address_of(const std::byte* host) const noexcept {
  if (memory_ == nullptr || host < memory_ || host >= memory_ + memory_bytes_) return std::nullopt;
  return options_.guest_phys_base + static_cast<uint64_t>(host - memory_);
}

uint64_t Frontend::used_ring_address(uint32_t index) const {
  const FrontendQueuePair& pair = *pairs_.at(index / 2);
  const FrontendVring& vring = index % 2 == 0 ? pair.rx : pair.tx;
  return vring.queue->device_config().used_addr;
}

}  // namespace uvhost::vhost_user
