// tap_device.h - one queue of a Linux tap interface (/dev/net/tun, IFF_TAP) carrying
// the virtio-net header: the host side of a port whose backend is `tap`.
//
// Contract
// --------
//  Opening (TapDevice::open)
//  - Opens /dev/net/tun (O_NONBLOCK | O_CLOEXEC) and attaches it with TUNSETIFF:
//    IFF_TAP | IFF_NO_PI, plus IFF_VNET_HDR and IFF_MULTI_QUEUE when asked. With the
//    vnet header it sets TUNSETVNETHDRSZ (10 or 12; 12 = virtio 1.0 / MRG_RXBUF) and
//    TUNSETVNETLE, so the header is little-endian as virtio 1.0 wants on any host.
//  - Name empty: the kernel creates "tapN". Name given: the tap is created, or, when
//    an interface of that name exists, attached to (it must be a tap with the same
//    multi_queue setting, and a single-queue tap must have no other fd attached).
//    created() says which (an exclusive create is tried first, so it is exact).
//  - Lifetime: a tap we created without `persist` disappears when this object (its
//    last fd) closes. With `persist` (TUNSETPERSIST) it stays until `ip link del` or
//    until its network namespace goes away. Attaching never changes persistence.
//  - The tap lives in the network namespace of the thread that calls open(); `up`
//    (SIOCSIFFLAGS) and `mtu` (SIOCSIFMTU) are applied there, also when attaching;
//    set_mtu() later the same way (the calling thread's namespace must be the tap's).
//  - With multi_queue, every open() of the same name adds one queue (one fd).
//  - Failure: nullptr and `error` says what and why (bad name, not a tap, busy, no
//    permission, ...). Nothing is left behind: a tap we created is deleted again.
//
//  Offloads (set_offloads / tun_offload_flags)
//  - TUNSETOFFLOAD says which offloaded packets the tap may hand *us* (the guest's
//    receive side): partial checksums, TSO4/6 (+ECN), UFO, USO4/6. We pass exactly
//    what the guest negotiated (VIRTIO_NET_F_GUEST_*), minus what the spec's
//    dependency rules forbid; anything else the kernel segments and checksums in
//    software before we read it. Kernels without USO (before 6.2) get the flags
//    without USO (offload_flags() tells what was applied). probe_offloads() tells
//    beforehand which flags the kernel takes (guest_features_for() turns them into the
//    GUEST_* features worth offering).
//  - Frames we write (the guest's transmit side) may always carry GSO / NEEDS_CSUM
//    headers: the tap accepts them whatever TUNSETOFFLOAD says (the kernel segments
//    in software where needed). A header the kernel cannot use (unknown gso_type,
//    checksum range outside the frame, hdr_len past the end) is refused: kBadFrame.
//
//  I/O (non-blocking, one frame per call, no copies in user space)
//  - write_frame: writev of [vnet header][ethernet frame] from the given pieces.
//    Outcomes: kSent; kFull (EAGAIN/ENOBUFS: dropped, never blocks; rare, the tap's
//    sndbuf - drops inside the kernel's backlog are silent, counted in the tap's
//    rx_dropped); kBadFrame (EINVAL/EMSGSIZE: shorter than header + 14 bytes, or a
//    header the kernel refuses); kDown (EIO: the link is administratively down,
//    dropped; transient); kGone (EBADFD/ENODEV/ENXIO: the interface was deleted
//    under us, permanent: close and reopen); kError (anything else, errno kept).
//  - read_frame: readv of one frame into the given pieces. kFrame: `bytes` = vnet
//    header + frame. kEmpty: nothing queued (EAGAIN), immediately. kTruncated: the
//    frame was larger than the buffer; the buffer holds its first bytes, the rest
//    is lost (the kernel consumes the whole frame); drop it. Detected exactly: one
//    private spare byte is appended to the read, so a frame that fills the buffer
//    exactly is kFrame, a longer one kTruncated. kGone and kError as for writes.
//    A buffer of max_read_bytes() (header + 65535 + 14 + 4) is never truncated: a
//    tap's frame is at most MTU 65535 plus ethernet and VLAN headers, and a GSO
//    frame at most 64 KiB.
//  - With a 12-byte header the kernel writes flags, gso_type, hdr_len (a hint),
//    gso_size, csum_start and csum_offset; num_buffers (bytes 10-11) means nothing:
//    older kernels skip those bytes, newer ones zero them. The receive path fills
//    num_buffers in itself.
//  - Buffers smaller than the vnet header, and more than kMaxPieces pieces, are
//    refused before any system call (kError / kBadFrame, errno EINVAL), so no frame
//    is consumed by a call that could not hold it.
//
//  Threads
//  - One thread may read while another writes (each direction has its own scratch
//    space); set_offloads may run concurrently with both. Two concurrent readers, or
//    two concurrent writers, on one TapDevice are not allowed: open one queue each
//    (multi_queue) instead.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "uvhost/backends/net_features.h"
#include "uvhost/base/name_table.h"
#include "uvhost/base/unique_fd.h"
#include "uvhost/virtio/io_vector.h"
#include "uvhost/virtio/net_header.h"

namespace uvhost::backends {

using base::to_string;

// TUNSETOFFLOAD flags (<linux/if_tun.h>; USO4/USO6 since Linux 6.2).
namespace tun_offload {
inline constexpr unsigned kCsum = 0x01;
inline constexpr unsigned kTso4 = 0x02;
inline constexpr unsigned kTso6 = 0x04;
inline constexpr unsigned kTsoEcn = 0x08;
inline constexpr unsigned kUfo = 0x10;
inline constexpr unsigned kUso4 = 0x20;
inline constexpr unsigned kUso6 = 0x40;
}  // namespace tun_offload

// The TUNSETOFFLOAD flags for a guest that negotiated `guest_features`: each GUEST_*
// bit maps to its TUN_F_* flag, and what the spec forbids is dropped (TSO4, TSO6,
// UFO, USO4, USO6 without GUEST_CSUM; ECN without TSO4 or TSO6). USO4 and USO6 go
// together or not at all (the kernel refuses one without the other: a guest with only
// one gets UDP segmented in software). Other bits ignored.
constexpr unsigned tun_offload_flags(uint64_t guest_features) noexcept {
  const auto has = [guest_features](unsigned bit) { return net_feature::has(guest_features, bit); };
  if (!has(net_feature::kGuestCsum)) return 0;
  unsigned flags = tun_offload::kCsum;
  if (has(net_feature::kGuestTso4)) flags |= tun_offload::kTso4;
  if (has(net_feature::kGuestTso6)) flags |= tun_offload::kTso6;
  if (has(net_feature::kGuestEcn) && (flags & (tun_offload::kTso4 | tun_offload::kTso6)) != 0) {
    flags |= tun_offload::kTsoEcn;
  }
  if (has(net_feature::kGuestUfo)) flags |= tun_offload::kUfo;
  if (has(net_feature::kGuestUso4) && has(net_feature::kGuestUso6)) flags |= tun_offload::kUso4 | tun_offload::kUso6;
  return flags;
}

// The GUEST_* features a tap can serve when TUNSETOFFLOAD accepts `tun_flags` (the
// inverse of tun_offload_flags): TUN_F_CSUM -> GUEST_CSUM, TSO4/TSO6/TSO_ECN ->
// GUEST_TSO4/TSO6/ECN, UFO -> GUEST_UFO, USO4+USO6 -> GUEST_USO4+GUEST_USO6.
constexpr uint64_t guest_features_for(unsigned tun_flags) noexcept {
  if ((tun_flags & tun_offload::kCsum) == 0) return 0;
  uint64_t features = net_feature::mask(net_feature::kGuestCsum);
  if ((tun_flags & tun_offload::kTso4) != 0) features |= net_feature::mask(net_feature::kGuestTso4);
  if ((tun_flags & tun_offload::kTso6) != 0) features |= net_feature::mask(net_feature::kGuestTso6);
  if ((tun_flags & tun_offload::kTsoEcn) != 0 && (tun_flags & (tun_offload::kTso4 | tun_offload::kTso6)) != 0) {
    features |= net_feature::mask(net_feature::kGuestEcn);
  }
  if ((tun_flags & tun_offload::kUfo) != 0) features |= net_feature::mask(net_feature::kGuestUfo);
  constexpr unsigned kUso = tun_offload::kUso4 | tun_offload::kUso6;
  if ((tun_flags & kUso) == kUso) {
    features |= net_feature::mask(net_feature::kGuestUso4) | net_feature::mask(net_feature::kGuestUso6);
  }
  return features;
}

struct TapOptions {
  std::string name;                                   // empty: the kernel picks "tapN"
  bool vnet_hdr = true;                               // IFF_VNET_HDR
  size_t vnet_hdr_size = virtio::kNetHeaderSizeMrg;   // 12 (virtio 1.0 / MRG_RXBUF) or 10
  bool multi_queue = false;                           // IFF_MULTI_QUEUE
  bool persist = false;                               // TUNSETPERSIST on a tap we create
  bool up = true;                                     // set IFF_UP
  std::optional<uint32_t> mtu;                        // SIOCSIFMTU when given
};

enum class WriteStatus { kSent, kFull, kBadFrame, kDown, kGone, kError };
enum class ReadStatus { kFrame, kEmpty, kTruncated, kGone, kError };

struct WriteResult {
  WriteStatus status = WriteStatus::kError;
  size_t bytes = 0;      // header + frame, when kSent
  int error_number = 0;  // errno behind any other status
};

struct ReadResult {
  ReadStatus status = ReadStatus::kError;
  size_t bytes = 0;      // header + frame (kFrame), or the buffer's size (kTruncated)
  int error_number = 0;  // errno behind kGone / kError
};

inline constexpr auto kWriteStatusNames = base::name_table<WriteStatus>({
    {WriteStatus::kSent, "sent"},
    {WriteStatus::kFull, "full"},
    {WriteStatus::kBadFrame, "bad frame"},
    {WriteStatus::kDown, "link down"},
    {WriteStatus::kGone, "tap gone"},
    {WriteStatus::kError, "error"},
});
inline constexpr auto kReadStatusNames = base::name_table<ReadStatus>({
    {ReadStatus::kFrame, "frame"},
    {ReadStatus::kEmpty, "empty"},
    {ReadStatus::kTruncated, "truncated"},
    {ReadStatus::kGone, "tap gone"},
    {ReadStatus::kError, "error"},
});
constexpr const auto& enum_names(WriteStatus) noexcept { return kWriteStatusNames; }
constexpr const auto& enum_names(ReadStatus) noexcept { return kReadStatusNames; }

class TapDevice {
 public:
  // Largest ethernet frame a tap hands out: MTU 65535 + ethernet header + VLAN tag.
  static constexpr size_t kMaxFrameBytes = 65535 + 14 + 4;
  // Most pieces one read or write may have (IOV_MAX, less the read's spare byte).
  static constexpr size_t kMaxPieces = 1023;

  // nullptr with `error` filled in on failure (see the contract above).
  static std::unique_ptr<TapDevice> open(const TapOptions& options, std::string& error);

  ~TapDevice();
  TapDevice(const TapDevice&) = delete;
  TapDevice& operator=(const TapDevice&) = delete;

  const std::string& name() const noexcept { return name_; }
  unsigned ifindex() const noexcept { return ifindex_; }
  int fd() const noexcept { return fd_.get(); }
  bool created() const noexcept { return created_; }        // false: attached to an existing tap
  bool persistent() const noexcept { return persistent_; }  // as of open()
  bool vnet_hdr() const noexcept { return vnet_hdr_size_ != 0; }
  size_t vnet_hdr_size() const noexcept { return vnet_hdr_size_; }  // 0 without IFF_VNET_HDR
  size_t max_read_bytes() const noexcept { return vnet_hdr_size_ + kMaxFrameBytes; }

  // Applies tun_offload_flags(guest_features) with TUNSETOFFLOAD. false (error filled
  // in) when the kernel refuses, or offloads are asked for without the vnet header.
  bool set_offloads(uint64_t guest_features, std::string& error);
  // The TUN_F_* flags last applied (0 after open: the kernel's default).
  unsigned offload_flags() const noexcept { return offload_flags_.load(std::memory_order_relaxed); }
  // Which TUN_F_* flags this kernel's TUNSETOFFLOAD takes: each offload is tried with
  // TUN_F_CSUM (USO4 and USO6 together), then the flags last applied are put back.
  // 0 without the vnet header. Control thread, before traffic (it changes the tap's
  // offloads for a moment).
  unsigned probe_offloads() noexcept;
  // SIOCSIFMTU on the interface (through a socket of the calling thread's namespace).
  bool set_mtu(uint32_t mtu, std::string& error);

  // One frame: [vnet header (vnet_hdr_size() bytes)][ethernet frame], in pieces.
  WriteResult write_frame(std::span<const iovec> pieces) noexcept;
  WriteResult write_frame(std::span<const virtio::IoPiece> pieces) noexcept;

  // One frame into the pieces (header first). Never blocks.
  ReadResult read_frame(std::span<const iovec> buffer) noexcept;
  ReadResult read_frame(std::span<const virtio::IoPiece> buffer) noexcept;

 private:
  TapDevice(base::UniqueFd fd, std::string name, unsigned ifindex, bool created, bool persistent,
            size_t vnet_hdr_size);

  WriteResult write_iov(const iovec* iov, size_t count) noexcept;
  ReadResult read_iov(size_t count) noexcept;  // read_iov_[0, count) filled, spare byte appended here

  base::UniqueFd fd_;
  std::string name_;
  unsigned ifindex_;
  bool created_;
  bool persistent_;
  size_t vnet_hdr_size_;
  std::atomic<unsigned> offload_flags_{0};

  std::vector<iovec> read_iov_;   // the reader's scratch: caller's pieces + the spare byte
  std::vector<iovec> write_iov_;  // the writer's scratch (IoPiece -> iovec)
  std::byte read_spare_{};        // receives byte capacity+1 of an oversized frame
};

}  // namespace uvhost::backends
