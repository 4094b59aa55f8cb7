// backend_channel.cpp - the back-end channel and its IOTLB misses (see backend_channel.h).
#include "uvhost/vhost_user/backend_channel.h"

#include <sys/socket.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "uvhost/vhost_user/message.h"

namespace uvhost::vhost_user {

namespace {

constexpr uint64_t kPageMask = ~uint64_t{0xfff};

}  // namespace

void BackendChannel::set(base::UniqueFd socket) {
  sync::MutexLock lock(mutex_);
  socket_ = std::move(socket);
  remembered_count_ = 0;
  unreported_logged_ = false;
}

void BackendChannel::reset() {
  sync::MutexLock lock(mutex_);
  socket_.reset();
  remembered_count_ = 0;
  unreported_logged_ = false;
}

void BackendChannel::translation_arrived(uint64_t iova, uint64_t size) {
  const uint64_t first = iova & kPageMask;
  const uint64_t last = size == 0 || size - 1 > ~uint64_t{0} - iova ? ~uint64_t{0} : iova + (size - 1);
  sync::MutexLock lock(mutex_);
  size_t kept = 0;
  for (size_t i = 0; i < remembered_count_; ++i) {
    if (remembered_[i].page >= first && remembered_[i].page <= last) continue;  // answered
    remembered_[kept++] = remembered_[i];
  }
  remembered_count_ = kept;
}

void BackendChannel::translation_missed(uint64_t iova, virtio::Access access) noexcept {
  const auto now = std::chrono::steady_clock::now();
  const Miss miss{iova & kPageMask, access, now};
  sync::MutexLock lock(mutex_);
  Miss* slot = nullptr;  // where this miss is remembered once sent
  for (size_t i = 0; i < remembered_count_; ++i) {
    Miss& known = remembered_[i];
    if (known.page != miss.page || known.access != miss.access) continue;
    if (now - known.sent < kResendAfter) return;  // sent already, not answered yet
    slot = &known;  // sent long ago and never answered: once more
    break;
  }
  if (!socket_.valid()) {
    misses_unreported_.fetch_add(1, std::memory_order_relaxed);
    if (!unreported_logged_) {
      unreported_logged_ = true;
      spdlog::error("{}: IOTLB miss at iova {:#x} ({}) cannot be reported: no back-end channel "
                    "(VHOST_USER_SET_BACKEND_REQ_FD); the queue waits for a translation",
                    device_name_, iova, virtio::to_string(access));
    }
    return;
  }
  IotlbMessage message;
  message.iova = iova;
  message.perm = static_cast<uint8_t>(access);
  message.type = static_cast<uint8_t>(IotlbType::kMiss);
  std::vector<std::byte> bytes;
  try {
    bytes = encode(BackendRequest::kIotlbMsg, 0, message);
  } catch (...) {  // allocation: the miss is simply retried later
    misses_unreported_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const ssize_t sent = ::send(socket_.get(), bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (sent == static_cast<ssize_t>(bytes.size())) {
    misses_sent_.fetch_add(1, std::memory_order_relaxed);
    spdlog::debug("{}: IOTLB miss sent: iova {:#x} ({})", device_name_, iova, virtio::to_string(access));
    if (slot == nullptr) {
      if (remembered_count_ < remembered_.size()) {
        slot = &remembered_[remembered_count_++];
      } else {
        slot = &*std::min_element(remembered_.begin(), remembered_.end(),
                                  [](const Miss& a, const Miss& b) { return a.sent < b.sent; });
      }
    }
    *slot = miss;
    return;
  }
  misses_unreported_.fetch_add(1, std::memory_order_relaxed);
  if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // full: retried later
  // A partial send or a dead peer: the stream cannot be trusted any more.
  spdlog::error("{}: back-end channel failed ({}); closing it, IOTLB misses go unreported", device_name_,
                sent < 0 ? std::strerror(errno) : "partial message");
  socket_.reset();
}

}  // namespace uvhost::vhost_user
