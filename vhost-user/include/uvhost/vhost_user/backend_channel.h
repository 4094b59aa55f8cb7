// backend_channel.h - the back-end communication channel (VHOST_USER_PROTOCOL_F_BACKEND_REQ):
// the socket the frontend handed over with SET_BACKEND_REQ_FD, on which the backend
// sends its own requests. uvhost sends one kind: IOTLB misses
// (VHOST_USER_BACKEND_IOTLB_MSG, type 1), for the queues of a device with
// VIRTIO_F_ACCESS_PLATFORM (translation_miss.h).
//
// Contract
// --------
//  - set() / reset() run on the device's control thread; translation_missed() on any
//    datapath worker, concurrently. The socket is behind a mutex.
//  - A miss is sent without NEED_REPLY and without blocking (MSG_DONTWAIT): a frontend
//    that does not read its end costs the datapath nothing; a miss that does not fit in
//    the socket is dropped and counted, and sent again on the queue's next retry.
//  - The same (page, access) is sent once until an update covers that page
//    (translation_arrived(), on every IOTLB update) or kResendAfter has passed without
//    one (the frontend may have found the IOVA invalid and sent nothing): queues
//    retrying their chains after every map change do not send their outstanding misses
//    again, which would make the frontend answer each one many times over. At most
//    kRememberedMisses are remembered; a new one replaces the oldest.
//  - Without a channel (the frontend never sent SET_BACKEND_REQ_FD) a miss cannot be
//    reported: it is counted and logged once per channel state, and the queue waits.
//  - A send that fails for another reason (the frontend closed its end) closes our end;
//    later misses count as unreported.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "uvhost/base/unique_fd.h"
#include "uvhost/sync/thread_annotations.h"
#include "uvhost/virtio/translation_miss.h"

namespace uvhost::vhost_user {

class BackendChannel final : public virtio::TranslationMissSink {
 public:
  static constexpr size_t kRememberedMisses = 64;
  static constexpr std::chrono::milliseconds kResendAfter{200};

  explicit BackendChannel(std::string device_name) : device_name_(std::move(device_name)) {}

  void set(base::UniqueFd socket) UVHOST_EXCLUDES(mutex_);
  void reset() UVHOST_EXCLUDES(mutex_);
  // An IOTLB update for [iova, iova + size) (size 0: to the end) arrived.
  void translation_arrived(uint64_t iova, uint64_t size) UVHOST_EXCLUDES(mutex_);

  void translation_missed(uint64_t iova, virtio::Access access) noexcept override UVHOST_EXCLUDES(mutex_);

  // relaxed counters: reporting only.
  uint64_t misses_sent() const noexcept { return misses_sent_.load(std::memory_order_relaxed); }
  uint64_t misses_unreported() const noexcept { return misses_unreported_.load(std::memory_order_relaxed); }

 private:
  struct Miss {
    uint64_t page = 0;
    virtio::Access access = virtio::Access::kRead;
    std::chrono::steady_clock::time_point sent;
  };

  const std::string device_name_;
  sync::Mutex mutex_;
  base::UniqueFd socket_ UVHOST_GUARDED_BY(mutex_);
  std::array<Miss, kRememberedMisses> remembered_ UVHOST_GUARDED_BY(mutex_){};
  size_t remembered_count_ UVHOST_GUARDED_BY(mutex_) = 0;
  bool unreported_logged_ UVHOST_GUARDED_BY(mutex_) = false;
  std::atomic<uint64_t> misses_sent_{0};
  std::atomic<uint64_t> misses_unreported_{0};
};

}  // namespace uvhost::vhost_user
