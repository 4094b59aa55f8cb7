// ring_access.h - loads and stores of ring fields that the other side may access at the
// same time.
//
// Contract
// --------
//  - Every ring field shared with the guest (flags, idx, ring entries, used_event,
//    avail_event, descriptors) is accessed through std::atomic_ref, never through a
//    plain load/store: the guest writes them concurrently (legitimately, or to attack
//    us), and a plain access would be a data race (UB, and a real double-fetch hazard:
//    the compiler may re-read a plain field after we validated it). Each call here is
//    one single-copy-atomic access, so a value we validated is the value we use.
//  - The memory order is the caller's choice and is commented at each call site.
//  - Pointers must be naturally aligned for the access (16-bit fields at even
//    addresses, etc.); the queue checks ring alignment before using them. Descriptor
//    tables reached through an indirect descriptor need not be aligned: load_descriptor
//    falls back to byte loads there.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "uvhost/virtio/ring_layout.h"

namespace uvhost::virtio::detail {

template <class T>
inline T ring_load(const std::byte* p, std::memory_order order) noexcept {
  // atomic_ref<const T> does not exist in C++20; the access is still a load.
  return std::atomic_ref<T>(*reinterpret_cast<T*>(const_cast<std::byte*>(p))).load(order);
}

template <class T>
inline void ring_store(std::byte* p, T value, std::memory_order order) noexcept {
  std::atomic_ref<T>(*reinterpret_cast<T*>(p)).store(value, order);
}

// Full store-load barrier (the Dekker cases of notification suppression; each call site
// says which store it orders before which load). It is the seq_cst fence itself, spelled
// as the builtin so that GCC's -Wtsan ("atomic_thread_fence is not supported with
// -fsanitize=thread") can be silenced here: ThreadSanitizer does not model fences, but
// the fence must stay in TSan builds so that they behave like the real program, and
// TSan does not need it to check us (every shared ring field is atomic, and payload
// bytes are ordered by the release/acquire pairs on the ring indices).
inline void full_barrier() noexcept {
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
}

// Copies one descriptor out of guest memory with relaxed loads (ordering comes from
// the acquire load of avail->idx that made its chain visible). Validate the copy;
// never read the guest's descriptor again.
// A descriptor in the ring's own table (16-byte aligned: DeviceQueue::start checks it).
inline Descriptor load_aligned_descriptor(const std::byte* p) noexcept {
  const uint64_t addr = ring_load<uint64_t>(p, std::memory_order_relaxed);
  const uint64_t rest = ring_load<uint64_t>(p + 8, std::memory_order_relaxed);
  return Descriptor{addr, static_cast<uint32_t>(rest), static_cast<uint16_t>(rest >> 32),
                    static_cast<uint16_t>(rest >> 48)};
}

inline Descriptor load_descriptor(const std::byte* p) noexcept {
  Descriptor d;
  if ((reinterpret_cast<uintptr_t>(p) & 7u) == 0) {
    const uint64_t addr = ring_load<uint64_t>(p, std::memory_order_relaxed);
    const uint64_t rest = ring_load<uint64_t>(p + 8, std::memory_order_relaxed);
    d.addr = addr;
    d.len = static_cast<uint32_t>(rest);
    d.flags = static_cast<uint16_t>(rest >> 32);
    d.next = static_cast<uint16_t>(rest >> 48);
    return d;
  }
  std::byte bytes[kDescriptorSize];
  for (size_t i = 0; i < kDescriptorSize; ++i) bytes[i] = ring_load<std::byte>(p + i, std::memory_order_relaxed);
  std::memcpy(&d, bytes, sizeof d);
  return d;
}

// Writes one descriptor (driver side) with relaxed stores; the release store of
// avail->idx publishes it.
inline void store_descriptor(std::byte* p, const Descriptor& d) noexcept {
  const uint64_t rest = uint64_t{d.len} | (uint64_t{d.flags} << 32) | (uint64_t{d.next} << 48);
  ring_store<uint64_t>(p, d.addr, std::memory_order_relaxed);
  ring_store<uint64_t>(p + 8, rest, std::memory_order_relaxed);
}

}  // namespace uvhost::virtio::detail
