// tx_delivery.h - how a transmit burst reaches the backend, and what a backend restart
// then does to the frames that were being sent.
//
// Contract
// --------
//  - kInPlace (default): the backend reads each frame where it lies in guest memory (the
//    tap: one writev from the guest's buffers, no copy), and the burst's used entries
//    are published after the backend returns. A daemon killed between the two leaves
//    the burst unpublished; a frontend that restarts the ring from its used index (QEMU
//    does when GET_VRING_BASE cannot be asked) makes it available again, so up to one
//    burst per transmit queue is sent twice: at least once.
//  - kAtMostOnce: each frame is first copied out of guest memory (TxBounce), the
//    burst's used entries are published, and only then does the backend send the
//    copies. A daemon killed before the publication sent nothing of the burst (the
//    frontend replays it: sent once); killed after, the rest of that burst is lost (at
//    most one burst per transmit queue): never sent twice. It costs one copy of every
//    frame.
//  - TxBounce: the copies of one burst, one slot per chain, each slot as large as the
//    largest frame moved; valid until the next burst of the same ring (the backend
//    keeps nothing past its transmit_burst call, tx_frame.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "uvhost/backends/tx_frame.h"
#include "uvhost/base/name_table.h"
#include "uvhost/virtio/io_vector.h"

namespace uvhost::datapath {

using base::to_string;

enum class TxDelivery : uint8_t { kInPlace, kAtMostOnce };

inline constexpr auto kTxDeliveryNames = base::name_table<TxDelivery>(
    {{TxDelivery::kInPlace, "in_place"}, {TxDelivery::kAtMostOnce, "at_most_once"}});

constexpr const auto& enum_names(TxDelivery) noexcept { return kTxDeliveryNames; }


class TxBounce {
 public:
  // `slots` chains per burst, each up to `slot_bytes` (virtio-net header included).
  TxBounce(size_t slots, size_t slot_bytes)
      : slot_bytes_(slot_bytes), memory_(std::make_unique<std::byte[]>(slots * slot_bytes)), pieces_(slots) {}

  size_t slots() const noexcept { return pieces_.size(); }
  size_t slot_bytes() const noexcept { return slot_bytes_; }

  // Copies `total` bytes of `source` (header_size bytes of virtio-net header, then the
  // frame) into `slot`; the returned frame points into the copy. total <= slot_bytes().
  backends::TxFrame stage(size_t slot, std::span<const virtio::IoPiece> source, uint32_t header_size,
                          uint32_t total) noexcept {
    std::byte* copy = memory_.get() + slot * slot_bytes_;
    const size_t copied = virtio::copy_from_pieces(source, 0, std::span<std::byte>(copy, total));
    pieces_[slot] = virtio::IoPiece{copy, copied};
    return backends::TxFrame{std::span<const virtio::IoPiece>(&pieces_[slot], 1), header_size,
                             static_cast<uint32_t>(copied - header_size)};
  }

 private:
  size_t slot_bytes_;
  std::unique_ptr<std::byte[]> memory_;
  std::vector<virtio::IoPiece> pieces_;
};

}  // namespace uvhost::datapath
