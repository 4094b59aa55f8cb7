// guest_memory_fault.h - surviving guest memory that shrinks under the daemon: the
// process-wide SIGBUS handler and the async-signal-safe registry of guest mappings it
// consults.
//
// The problem
// -----------
//  A frontend hands its guest memory over as an fd (a memfd, a file on hugetlbfs) and
//  we mmap it MAP_SHARED. If the frontend then cuts the file short (ftruncate), every
//  page of our mapping beyond the new end is gone: the next load or store there raises
//  SIGBUS, whose default action kills the whole daemon - every port, every VM. Refusing
//  unsealed memfds cannot close this: hugetlbfs files take no seals at all (QEMU's
//  memory-backend-file, DPDK's --huge-dir), and DPDK's virtio_user hands memfds without
//  F_SEAL_SHRINK. So the fault itself must become survivable.
//
// Design
// ------
//  - register_mapping() records [begin, begin + length) of each guest mapping in a
//    fixed table of atomics (no allocation, no lock: the handler may read it at any
//    instant, on any thread). unregister_mapping() frees the slot before the munmap.
//  - The SIGBUS handler (sigaction SA_SIGINFO, installed once by the first
//    registration) looks si_addr up in the table. Inside a guest mapping, it maps
//    anonymous zero pages over the whole mapping (mmap MAP_FIXED | MAP_PRIVATE |
//    MAP_ANONYMOUS | MAP_NORESERVE, same protection), sets the mapping's `faulted`
//    flag, counts the fault and returns: the faulting instruction runs again against
//    harmless memory. No longjmp through C++ frames, and nothing on the fast path: a
//    reader pays nothing until a fault happens.
//  - Whoever reads guest memory then notices: fault_count() is one load (the
//    datapath compares it after each burst); when it moved, faulted() of the mappings
//    in use tells which one. The device is then broken and its connection ended; its
//    rings read zeros until then, which may look like ring violations: DeviceQueue
//    reports those as the memory fault, not as the guest's ring error.
//  - A SIGBUS elsewhere (not in a registered mapping, or not from a fault: kill -BUS)
//    goes to the handler that was installed before ours (e.g. ASan's) if there was one,
//    else the default action is restored and the signal raised again: the process dies
//    as it would have without us.
//  - The zero mapping stays until the owner munmaps the range (MemoryRegion's
//    destructor), so /proc/PID/maps returns to what it was before the region came.
//
// Contract
// --------
//  - register_mapping(): thread-safe; nullopt when the table is full (kMaxMappings
//    live mappings in the process). `begin` and `length` must cover whole pages of the
//    mapping (for hugetlbfs: whole huge pages), since the replacement is mmapped over
//    exactly that range.
//  - unregister_mapping(): thread-safe; call it before munmapping the range, after the
//    last reader of the mapping is gone.
//  - faulted(): any thread; true from the handler's return on (release/acquire: a reader
//    that sees the flag also sees the zero mapping in place).
//  - The handler only uses async-signal-safe operations: atomic loads/stores of
//    lock-free atomics, mmap, sigaction, raise. If the replacement mmap fails (no
//    memory), the process dies as before, by the default action.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace uvhost::virtio::guest_memory_fault {

// Live guest mappings the process can protect at once (every port's memory slots).
inline constexpr size_t kMaxMappings = 4096;

using MappingId = uint32_t;

// Records a mapping (and installs the SIGBUS handler on first use).
std::optional<MappingId> register_mapping(void* begin, size_t length) noexcept;
void unregister_mapping(MappingId id) noexcept;

// Has a SIGBUS in this mapping been absorbed (the mapping now reads zeros)?
bool faulted(MappingId id) noexcept;

// Faults absorbed by the handler in this process so far; a change is the cue to look at
// faulted() of the mappings in use. Acquire (a plain load on x86 and as cheap as a
// relaxed one): the handler increments it with release after setting the flag, so a
// reader that saw the count move sees the flag.
uint64_t fault_count() noexcept;

// Is `address` inside a registered mapping that faulted? (Slow path: scans the table.)
bool address_faulted(const void* address) noexcept;

}  // namespace uvhost::virtio::guest_memory_fault
