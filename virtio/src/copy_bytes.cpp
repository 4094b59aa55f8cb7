// copy_bytes.cpp - the out-of-line half of copy_bytes (see copy_bytes.h).
#include "uvhost/virtio/copy_bytes.h"

namespace uvhost::virtio::detail {

void copy_bytes_out_of_line(std::byte* dst, const std::byte* src, size_t n) noexcept { std::memmove(dst, src, n); }

}  // namespace uvhost::virtio::detail
