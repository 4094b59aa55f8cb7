// guest_memory_fault_test.cpp - guest memory whose file is cut short under us
// (guest_memory_fault.h, MemoryRegion::map_fd): a real memfd, a real SIGBUS.
#include "uvhost/virtio/guest_memory_fault.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "uvhost/virtio/guest_memory.h"

namespace uvhost::virtio {
namespace {

constexpr size_t kBytes = 64 * 1024;

int make_memfd(size_t bytes, unsigned flags = MFD_CLOEXEC) {
  const int fd = ::memfd_create("fault-test", flags);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0);
  return fd;
}

std::unique_ptr<GuestMemoryMap> map_of(int fd, uint64_t size = kBytes) {
  std::vector<std::unique_ptr<MemoryRegion>> regions;
  regions.push_back(MemoryRegion::map_fd(RegionSpec{0x1000, size, 0x7f0000001000, 0, fd}));
  if (!regions.back()) return nullptr;
  return GuestMemoryMap::create(std::move(regions));
}

// Reads through a pointer the compiler must not cache or elide (the fault is the point).
uint8_t load(const std::byte* p) { return reinterpret_cast<const std::atomic<uint8_t>*>(p)->load(); }

TEST(GuestMemoryFault, CutShortRegionReadsZerosAndIsReported) {
  const int fd = make_memfd(kBytes);
  const int keep = ::dup(fd);  // the frontend's copy of the fd
  auto map = map_of(fd);
  ASSERT_NE(map, nullptr);
  std::byte* host = map->translate_contiguous(0x1000, kBytes);
  ASSERT_NE(host, nullptr);
  host[100] = std::byte{7};
  EXPECT_EQ(load(host + 100), 7);
  EXPECT_EQ(map->faulted_region(), nullptr);

  const uint64_t faults = guest_memory_fault::fault_count();
  ASSERT_EQ(::ftruncate(keep, 0), 0);
  EXPECT_EQ(load(host + 100), 0);  // SIGBUS absorbed: zeros now
  host[200] = std::byte{9};        // and a store lands harmlessly
  EXPECT_EQ(guest_memory_fault::fault_count(), faults + 1);
  ASSERT_NE(map->faulted_region(), nullptr);
  EXPECT_EQ(map->faulted_region()->guest_phys_addr(), 0x1000u);
  EXPECT_EQ(map->faulted_region()->backing_size_now(), 0);
  EXPECT_EQ(map->faulted_region()->required_backing_size(), kBytes);
  EXPECT_TRUE(guest_memory_fault::address_faulted(host));
  ::close(keep);
}

TEST(GuestMemoryFault, FileShorterThanTheRegionIsRefused) {
  const int fd = make_memfd(kBytes / 2);
  EXPECT_EQ(map_of(fd), nullptr);  // map_fd closed the fd
}

TEST(GuestMemoryFault, SealsAreReported) {
  const int fd = make_memfd(kBytes, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  auto map = map_of(fd);
  ASSERT_NE(map, nullptr);
  EXPECT_TRUE(map->region(0).sealed_against_shrink());
  EXPECT_EQ(map->region(0).backing(), MemoryRegion::Backing::kMemfd);

  auto unsealed = map_of(make_memfd(kBytes));
  ASSERT_NE(unsealed, nullptr);
  EXPECT_FALSE(unsealed->region(0).sealed_against_shrink());
}

TEST(GuestMemoryFault, UnmappedRegionLeavesTheRegistry) {
  const int fd = make_memfd(kBytes);
  auto map = map_of(fd);
  ASSERT_NE(map, nullptr);
  const std::byte* host = map->translate_contiguous(0x1000, 1);
  map.reset();
  EXPECT_FALSE(guest_memory_fault::address_faulted(host));
}

// The process died (by SIGBUS's default action, or by a sanitizer's handler that was
// installed before ours and reports the fault): anything but a clean exit.
bool died(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

// A SIGBUS outside guest memory kills the process as it would without the handler.
TEST(GuestMemoryFaultDeathTest, SigbusElsewhereStillKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto map = map_of(make_memfd(kBytes));  // the handler is installed
  ASSERT_NE(map, nullptr);
  EXPECT_EXIT(
      {
        // A shared mapping of our own, not registered, cut short: a real fault.
        const int fd = ::memfd_create("not-guest", MFD_CLOEXEC);
        (void)::ftruncate(fd, 4096);
        auto* p = static_cast<std::byte*>(::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0));
        (void)::ftruncate(fd, 0);
        (void)load(p);
        ::_exit(0);
      },
      died, "");
  EXPECT_EXIT(
      {
        ::kill(::getpid(), SIGBUS);
        ::_exit(0);
      },
      died, "");
}

}  // namespace
}  // namespace uvhost::virtio
