// copy_bytes.h - the datapath's byte copies (virtio-net headers, MAC
// addresses, 64-byte frames).
//
// Contract: copy_bytes(dst, src, n) copies n bytes from src to dst. Copies of at most
// 64 bytes are done inline with a few unaligned 4-, 8-, 16- or 32-byte moves (the first
// and last of them may overlap inside dst, writing the same bytes twice); longer ones go
// to the C library's memmove through an out-of-line call. Overlapping ranges are
// allowed, because a guest can make two of its buffers overlap: a long copy is then
// exact (memmove), a short one may leave dst with bytes of either version, and neither
// reads or writes outside the two ranges.
//
// Why not std::memcpy: where GCC can bound a memcpy's size (a copy into a 12-byte
// std::array, a frame buffer of known size) it expands it inline as `rep movsq`, whose
// start-up alone costs more cycles than moving 64 bytes with vector registers; and the
// library's memcpy, which does use them, is only called when the size is unknown.
#pragma once

#include <array>
#include <cstddef>
#include <cstring>

namespace uvhost::virtio {

namespace detail {

// n bytes through the C library's memmove: out of line, so the size is unknown to the
// compiler at the call and it cannot choose an inline expansion.
void copy_bytes_out_of_line(std::byte* dst, const std::byte* src, size_t n) noexcept;

// kBytes from src to dst, loaded whole before being stored.
// GCC's -Warray-bounds and -Wstringop-overflow look at the branches of copy_bytes that
// a caller's small fixed buffer can never take (a 32-byte move into a 12-byte array,
// under n > 32) and warn; the size checks in copy_bytes keep every move inside the n
// bytes.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
template <size_t kBytes>
inline void move_block(std::byte* dst, const std::byte* src) noexcept {
  std::array<std::byte, kBytes> block;
  std::memcpy(block.data(), src, kBytes);
  std::memcpy(dst, block.data(), kBytes);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace detail

inline void copy_bytes(std::byte* dst, const std::byte* src, size_t n) noexcept {
  if (n <= 16) {
    if (n >= 8) {
      detail::move_block<8>(dst, src);
      detail::move_block<8>(dst + n - 8, src + n - 8);
    } else if (n >= 4) {
      detail::move_block<4>(dst, src);
      detail::move_block<4>(dst + n - 4, src + n - 4);
    } else if (n > 0) {
      dst[0] = src[0];
      dst[n / 2] = src[n / 2];
      dst[n - 1] = src[n - 1];
    }
    return;
  }
  if (n <= 32) {
    detail::move_block<16>(dst, src);
    detail::move_block<16>(dst + n - 16, src + n - 16);
    return;
  }
  if (n <= 64) {
    detail::move_block<32>(dst, src);
    detail::move_block<32>(dst + n - 32, src + n - 32);
    return;
  }
  detail::copy_bytes_out_of_line(dst, src, n);
}

}  // namespace uvhost::virtio
