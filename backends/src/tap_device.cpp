// tap_device.cpp - /dev/net/tun in tap mode with the virtio-net header (see tap_device.h).
#include "uvhost/backends/tap_device.h"

#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "uvhost/base/errno_text.h"

namespace uvhost::backends {
namespace {

using base::errno_message;

constexpr const char* kTunPath = "/dev/net/tun";

int ioctl_retry(int fd, unsigned long request, void* arg) noexcept {
  int rc;
  do {
    rc = ::ioctl(fd, request, arg);
  } while (rc < 0 && errno == EINTR);
  return rc;
}

int ioctl_value(int fd, unsigned long request, unsigned long value) noexcept {
  int rc;
  do {
    rc = ::ioctl(fd, request, value);
  } while (rc < 0 && errno == EINTR);
  return rc;
}

// The kernel's dev_valid_name(), checked here so the error can say what is wrong.
bool valid_interface_name(const std::string& name, std::string& error) {
  if (name.size() >= IFNAMSIZ) {
    error = fmt::format("tap name '{}' is {} characters long; an interface name has at most {}", name, name.size(),
                        IFNAMSIZ - 1);
    return false;
  }
  if (name == "." || name == "..") {
    error = fmt::format("tap name '{}' is not a valid interface name", name);
    return false;
  }
  for (const char c : name) {
    if (c == '/' || c == ':' || c == '\0' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
        c == '\v') {
      error = fmt::format("tap name '{}' contains a character an interface name cannot have ('/', ':' or space)",
                          name);
      return false;
    }
  }
  return true;
}

void copy_name(ifreq& request, const std::string& name) noexcept {
  std::memset(request.ifr_name, 0, sizeof(request.ifr_name));
  std::memcpy(request.ifr_name, name.data(), std::min(name.size(), sizeof(request.ifr_name) - 1));
}

std::string attach_error(const std::string& name, int error_number, bool multi_queue) {
  switch (error_number) {
    case EINVAL:
      return fmt::format(
          "cannot attach to interface '{}': it exists but is not a tap, or it was created {} IFF_MULTI_QUEUE",
          name, multi_queue ? "without" : "with");
    case EBUSY:
      return fmt::format(
          "cannot attach to tap '{}': another file descriptor is attached already (a tap without multi_queue "
          "has one queue)",
          name);
    case EPERM:
      return fmt::format("cannot create or attach tap '{}': permission denied (needs CAP_NET_ADMIN, or to be the "
                         "tap's owner/group)",
                         name);
    default:
      return fmt::format("TUNSETIFF for tap '{}' failed: {}", name.empty() ? "tap%d" : name,
                         errno_message(error_number));
  }
}

bool set_interface_mtu(int control_socket, const std::string& name, uint32_t mtu, std::string& error) {
  ifreq link{};
  copy_name(link, name);
  link.ifr_mtu = static_cast<int>(mtu);
  if (ioctl_retry(control_socket, SIOCSIFMTU, &link) != 0) {
    error = fmt::format("setting MTU {} on tap '{}' failed: {}", mtu, name, errno_message(errno));
    return false;
  }
  return true;
}

}  // namespace

TapDevice::TapDevice(base::UniqueFd fd, std::string name, unsigned ifindex, bool created, bool persistent,
                     size_t vnet_hdr_size)
    : fd_(std::move(fd)),
      name_(std::move(name)),
      ifindex_(ifindex),
      created_(created),
      persistent_(persistent),
      vnet_hdr_size_(vnet_hdr_size) {
  read_iov_.reserve(kMaxPieces + 1);
  write_iov_.reserve(kMaxPieces);
}

TapDevice::~TapDevice() = default;

std::unique_ptr<TapDevice> TapDevice::open(const TapOptions& options, std::string& error) {
  if (!valid_interface_name(options.name, error)) return nullptr;
  if (options.vnet_hdr && options.vnet_hdr_size != virtio::kNetHeaderSizeLegacy &&
      options.vnet_hdr_size != virtio::kNetHeaderSizeMrg) {
    error = fmt::format("vnet header size {} is not supported (10, or 12 with num_buffers)", options.vnet_hdr_size);
    return nullptr;
  }

  base::UniqueFd tun(::open(kTunPath, O_RDWR | O_NONBLOCK | O_CLOEXEC));
  if (tun.get() < 0) {
    const int e = errno;
    error = e == ENOENT ? fmt::format("{} does not exist (no tun driver in this kernel or container)", kTunPath)
                        : fmt::format("cannot open {}: {}", kTunPath, errno_message(e));
    return nullptr;
  }

  int flags = IFF_TAP | IFF_NO_PI;
  if (options.vnet_hdr) flags |= IFF_VNET_HDR;
  if (options.multi_queue) flags |= IFF_MULTI_QUEUE;

  ifreq request{};
  copy_name(request, options.name);
  bool created = true;
  if (options.name.empty()) {
    request.ifr_flags = static_cast<short>(flags);
    if (ioctl_retry(tun.get(), TUNSETIFF, &request) != 0) {
      error = attach_error(options.name, errno, options.multi_queue);
      return nullptr;
    }
  } else {
    // Exclusive create first: EBUSY means the interface exists, so we attach and know
    // exactly which of the two happened.
    request.ifr_flags = static_cast<short>(flags | IFF_TUN_EXCL);
    if (ioctl_retry(tun.get(), TUNSETIFF, &request) != 0) {
      if (errno != EBUSY) {
        error = attach_error(options.name, errno, options.multi_queue);
        return nullptr;
      }
      created = false;
      copy_name(request, options.name);
      request.ifr_flags = static_cast<short>(flags);
      if (ioctl_retry(tun.get(), TUNSETIFF, &request) != 0) {
        error = attach_error(options.name, errno, options.multi_queue);
        return nullptr;
      }
    }
  }
  const std::string name(request.ifr_name, ::strnlen(request.ifr_name, sizeof(request.ifr_name)));

  // From here on a failure must not leave a tap of ours behind: a non-persistent one
  // goes with the fd; one we made persistent is made non-persistent first.
  bool made_persistent = false;
  const auto fail = [&](std::string message) -> std::unique_ptr<TapDevice> {
    if (made_persistent) (void)ioctl_value(tun.get(), TUNSETPERSIST, 0);
    error = std::move(message);
    return nullptr;
  };

  ifreq current{};
  if (ioctl_retry(tun.get(), TUNGETIFF, &current) != 0) {
    return fail(fmt::format("TUNGETIFF on tap '{}' failed: {}", name, errno_message(errno)));
  }
  const auto current_flags = static_cast<unsigned short>(current.ifr_flags);
  if (((current_flags & IFF_VNET_HDR) != 0) != options.vnet_hdr) {
    // Only possible when attaching a further queue of a multi-queue tap whose first
    // queue was opened with the other setting: the device keeps the first one's.
    return fail(fmt::format("tap '{}' has IFF_VNET_HDR {} but {} was asked for (its other queues decide)", name,
                            options.vnet_hdr ? "off" : "on", options.vnet_hdr ? "on" : "off"));
  }
  bool persistent = (current_flags & IFF_PERSIST) != 0;

  if (options.vnet_hdr) {
    int size = static_cast<int>(options.vnet_hdr_size);
    if (ioctl_retry(tun.get(), TUNSETVNETHDRSZ, &size) != 0) {
      return fail(fmt::format("TUNSETVNETHDRSZ {} on tap '{}' failed: {}", size, name, errno_message(errno)));
    }
    // virtio 1.0 headers are little-endian. A no-op on little-endian hosts, where a
    // kernel without TUNSETVNETLE is harmless; required on big-endian ones.
    int little_endian = 1;
    if (ioctl_retry(tun.get(), TUNSETVNETLE, &little_endian) != 0 && std::endian::native != std::endian::little) {
      return fail(fmt::format("TUNSETVNETLE on tap '{}' failed: {}", name, errno_message(errno)));
    }
  }

  if (options.persist && created) {
    if (ioctl_value(tun.get(), TUNSETPERSIST, 1) != 0) {
      return fail(fmt::format("TUNSETPERSIST on tap '{}' failed: {}", name, errno_message(errno)));
    }
    made_persistent = true;
    persistent = true;
  }

  // Interface ioctls go through any socket of the tap's namespace (this thread's).
  base::UniqueFd control(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (control.get() < 0) return fail(fmt::format("control socket for tap '{}': {}", name, errno_message(errno)));

  ifreq link{};
  copy_name(link, name);
  if (ioctl_retry(control.get(), SIOCGIFINDEX, &link) != 0) {
    return fail(fmt::format("SIOCGIFINDEX for tap '{}' failed: {}", name, errno_message(errno)));
  }
  const auto ifindex = static_cast<unsigned>(link.ifr_ifindex);

  if (std::string mtu_error; options.mtu && !set_interface_mtu(control.get(), name, *options.mtu, mtu_error)) {
    return fail(std::move(mtu_error));
  }

  if (options.up) {
    copy_name(link, name);
    if (ioctl_retry(control.get(), SIOCGIFFLAGS, &link) != 0) {
      return fail(fmt::format("SIOCGIFFLAGS for tap '{}' failed: {}", name, errno_message(errno)));
    }
    if ((link.ifr_flags & IFF_UP) == 0) {
      link.ifr_flags = static_cast<short>(link.ifr_flags | IFF_UP);
      if (ioctl_retry(control.get(), SIOCSIFFLAGS, &link) != 0) {
        return fail(fmt::format("bringing tap '{}' up failed: {}", name, errno_message(errno)));
      }
    }
  }

  spdlog::debug("tap {}: {} (ifindex {}, vnet_hdr {}, {}{})", name, created ? "created" : "attached", ifindex,
                options.vnet_hdr ? options.vnet_hdr_size : 0, persistent ? "persistent" : "goes with its fd",
                options.multi_queue ? ", multi_queue" : "");
  return std::unique_ptr<TapDevice>(new TapDevice(std::move(tun), name, ifindex, created, persistent,
                                                  options.vnet_hdr ? options.vnet_hdr_size : 0));
}

bool TapDevice::set_offloads(uint64_t guest_features, std::string& error) {
  unsigned flags = tun_offload_flags(guest_features);
  if (flags != 0 && !vnet_hdr()) {
    error = fmt::format("tap '{}': offloads need the virtio-net header (opened without vnet_hdr)", name_);
    return false;
  }
  if (ioctl_value(fd_.get(), TUNSETOFFLOAD, flags) != 0) {
    constexpr unsigned kUso = tun_offload::kUso4 | tun_offload::kUso6;
    if (errno == EINVAL && (flags & kUso) != 0) {
      // Kernels before 6.2 refuse unknown flags: the guest then gets UDP segmented.
      flags &= ~kUso;
      if (ioctl_value(fd_.get(), TUNSETOFFLOAD, flags) == 0) {
        spdlog::debug("tap {}: kernel has no USO offload; applied {:#x} without it", name_, flags);
        offload_flags_.store(flags, std::memory_order_relaxed);
        return true;
      }
    }
    error = fmt::format("TUNSETOFFLOAD {:#x} on tap '{}' failed: {}", flags, name_, errno_message(errno));
    return false;
  }
  offload_flags_.store(flags, std::memory_order_relaxed);
  return true;
}

unsigned TapDevice::probe_offloads() noexcept {
  if (!vnet_hdr()) return 0;
  using namespace tun_offload;
  constexpr unsigned kCandidates[] = {kCsum, kCsum | kTso4, kCsum | kTso6, kCsum | kTso4 | kTsoEcn,
                                      kCsum | kUfo, kCsum | kUso4 | kUso6};
  unsigned accepted = 0;
  for (const unsigned flags : kCandidates) {
    if (ioctl_value(fd_.get(), TUNSETOFFLOAD, flags) == 0) accepted |= flags;
  }
  (void)ioctl_value(fd_.get(), TUNSETOFFLOAD, offload_flags());
  return accepted;
}

bool TapDevice::set_mtu(uint32_t mtu, std::string& error) {
  base::UniqueFd control(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (control.get() < 0) {
    error = fmt::format("control socket for tap '{}': {}", name_, errno_message(errno));
    return false;
  }
  return set_interface_mtu(control.get(), name_, mtu, error);
}

WriteResult TapDevice::write_frame(std::span<const iovec> pieces) noexcept {
  return write_iov(pieces.data(), pieces.size());
}

WriteResult TapDevice::write_frame(std::span<const virtio::IoPiece> pieces) noexcept {
  if (pieces.size() > kMaxPieces) return {WriteStatus::kBadFrame, 0, EINVAL};
  write_iov_.clear();  // capacity reserved in the constructor: no allocation
  for (const virtio::IoPiece& piece : pieces) write_iov_.push_back(iovec{piece.data, piece.len});
  return write_iov(write_iov_.data(), write_iov_.size());
}

WriteResult TapDevice::write_iov(const iovec* iov, size_t count) noexcept {
  if (count > kMaxPieces) return {WriteStatus::kBadFrame, 0, EINVAL};
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) total += iov[i].iov_len;
  ssize_t written;
  do {
    written = ::writev(fd_.get(), iov, static_cast<int>(count));
  } while (written < 0 && errno == EINTR);
  if (written >= 0) {
    // A tap takes a frame whole or not at all.
    if (static_cast<size_t>(written) == total) return {WriteStatus::kSent, total, 0};
    return {WriteStatus::kError, static_cast<size_t>(written), 0};
  }
  const int e = errno;
  switch (e) {
    case EAGAIN:
    case ENOBUFS:
    case ENOMEM:
      return {WriteStatus::kFull, 0, e};
    case EINVAL:
    case EMSGSIZE:
      return {WriteStatus::kBadFrame, 0, e};
    case EIO:
      return {WriteStatus::kDown, 0, e};
    case EBADFD:
    case ENODEV:
    case ENXIO:
      return {WriteStatus::kGone, 0, e};
    default:
      return {WriteStatus::kError, 0, e};
  }
}

ReadResult TapDevice::read_frame(std::span<const iovec> buffer) noexcept {
  if (buffer.size() > kMaxPieces) return {ReadStatus::kError, 0, EINVAL};
  read_iov_.assign(buffer.begin(), buffer.end());  // capacity reserved: no allocation
  return read_iov(buffer.size());
}

ReadResult TapDevice::read_frame(std::span<const virtio::IoPiece> buffer) noexcept {
  if (buffer.size() > kMaxPieces) return {ReadStatus::kError, 0, EINVAL};
  read_iov_.clear();
  for (const virtio::IoPiece& piece : buffer) read_iov_.push_back(iovec{piece.data, piece.len});
  return read_iov(buffer.size());
}

ReadResult TapDevice::read_iov(size_t count) noexcept {
  size_t capacity = 0;
  for (size_t i = 0; i < count; ++i) capacity += read_iov_[i].iov_len;
  // The kernel would consume (drop) a frame it cannot put a header in front of.
  if (capacity == 0 || capacity < vnet_hdr_size_) return {ReadStatus::kError, 0, EINVAL};
  // The spare byte: the kernel returns min(frame, room), so with one byte more room
  // than the caller's a longer frame shows as capacity + 1.
  read_iov_.push_back(iovec{&read_spare_, 1});
  ssize_t got;
  do {
    got = ::readv(fd_.get(), read_iov_.data(), static_cast<int>(read_iov_.size()));
  } while (got < 0 && errno == EINTR);
  if (got > 0) {
    const auto bytes = static_cast<size_t>(got);
    if (bytes > capacity) return {ReadStatus::kTruncated, capacity, 0};
    return {ReadStatus::kFrame, bytes, 0};
  }
  if (got == 0) return {ReadStatus::kError, 0, 0};
  const int e = errno;
  switch (e) {
    case EAGAIN:
      return {ReadStatus::kEmpty, 0, 0};
    case EIO:  // older kernels, while the interface is being unregistered
    case EBADFD:
    case ENODEV:
    case ENXIO:
      return {ReadStatus::kGone, 0, e};
    default:
      return {ReadStatus::kError, 0, e};
  }
}

}  // namespace uvhost::backends
