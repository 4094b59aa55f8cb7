// guest_memory_test.cpp - regions, translation bounds, spanning, fd mapping, and the
// read-mostly publication of maps.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "uvhost/virtio/guarded_guest_memory.h"
#include "uvhost/virtio/guest_memory.h"

namespace uvhost::virtio {
namespace {

struct TwoRegions {
  std::vector<std::byte> a = std::vector<std::byte>(4096);
  std::vector<std::byte> b = std::vector<std::byte>(8192);
  std::unique_ptr<GuestMemoryMap> map;
  TwoRegions() {
    std::vector<std::unique_ptr<MemoryRegion>> regions;
    // b is listed first: create() sorts. a: [0x1000, 0x2000), b: [0x2000, 0x4000) adjacent.
    regions.push_back(MemoryRegion::borrow(0x2000, 0x900000, b));
    regions.push_back(MemoryRegion::borrow(0x1000, 0x800000, a));
    map = GuestMemoryMap::create(std::move(regions));
  }
};

TEST(GuestMemory, TranslatesInsideOneRegion) {
  TwoRegions m;
  IoVector out;
  ASSERT_EQ(m.map->translate(0x1010, 16, out), TranslateStatus::kOk);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, m.a.data() + 0x10);
  EXPECT_EQ(out[0].len, 16u);
  EXPECT_EQ(m.map->translate_contiguous(0x3ff0, 16), m.b.data() + 0x1ff0);
}

TEST(GuestMemory, SpanningAdjacentRegionsGivesTwoPieces) {
  TwoRegions m;
  IoVector out;
  ASSERT_EQ(m.map->translate(0x1ff0, 0x20, out), TranslateStatus::kOk);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].data, m.a.data() + 0xff0);
  EXPECT_EQ(out[0].len, 0x10u);
  EXPECT_EQ(out[1].data, m.b.data());
  EXPECT_EQ(out[1].len, 0x10u);
  EXPECT_EQ(out.total_bytes(), 0x20u);
  // A contiguous pointer cannot describe it.
  EXPECT_EQ(m.map->translate_contiguous(0x1ff0, 0x20), nullptr);
}

TEST(GuestMemory, RefusesRangesThatLeaveMemory) {
  TwoRegions m;
  IoVector out;
  EXPECT_EQ(m.map->translate(0x0fff, 2, out), TranslateStatus::kUnmapped);     // starts before
  EXPECT_EQ(m.map->translate(0x3fff, 2, out), TranslateStatus::kUnmapped);     // runs past the end
  EXPECT_EQ(m.map->translate(0x1000, 0x3001, out), TranslateStatus::kUnmapped);  // whole + 1
  EXPECT_EQ(m.map->translate(0x5000, 1, out), TranslateStatus::kUnmapped);
  EXPECT_TRUE(out.empty()) << "a failed translation must not leave partial pieces";
  EXPECT_EQ(m.map->translate(0x1000, 0x3000, out), TranslateStatus::kOk);
}

TEST(GuestMemory, RefusesWrapAround) {
  TwoRegions m;
  IoVector out;
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(m.map->translate(max, 2, out), TranslateStatus::kWraps);
  EXPECT_EQ(m.map->translate(0x1000, max, out), TranslateStatus::kWraps);
  EXPECT_EQ(m.map->translate_contiguous(max - 1, 0x10), nullptr);
  EXPECT_EQ(m.map->translate(max, 1, out), TranslateStatus::kUnmapped);  // the last byte itself is legal to ask
  EXPECT_TRUE(out.empty());
}

TEST(GuestMemory, ZeroLengthIsEmpty) {
  TwoRegions m;
  IoVector out;
  EXPECT_EQ(m.map->translate(0xdead0000, 0, out), TranslateStatus::kOk);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(m.map->translate_contiguous(0x1000, 0), nullptr);
}

TEST(GuestMemory, PieceLimitIsAnErrorNotATruncation) {
  TwoRegions m;
  IoVector out(1);
  EXPECT_EQ(m.map->translate(0x1ff0, 0x20, out), TranslateStatus::kTooManyPieces);
  EXPECT_TRUE(out.empty());
}

TEST(GuestMemory, FrontendAddressTranslation) {
  TwoRegions m;
  EXPECT_EQ(m.map->translate_frontend_contiguous(0x900010, 8), m.b.data() + 0x10);
  EXPECT_EQ(m.map->translate_frontend_contiguous(0x800ff8, 16), nullptr);  // past a's end in frontend space
  EXPECT_EQ(m.map->frontend_to_guest(0x800004), 0x1004u);
  EXPECT_FALSE(m.map->frontend_to_guest(0x7fffff).has_value());
}

TEST(GuestMemory, RefusesOverlappingRegions) {
  std::vector<std::byte> a(4096), b(4096);
  {
    std::vector<std::unique_ptr<MemoryRegion>> regions;
    regions.push_back(MemoryRegion::borrow(0x1000, 0x10000, a));
    regions.push_back(MemoryRegion::borrow(0x1800, 0x20000, b));
    EXPECT_EQ(GuestMemoryMap::create(std::move(regions)), nullptr);
  }
  {
    std::vector<std::unique_ptr<MemoryRegion>> regions;
    regions.push_back(MemoryRegion::borrow(0x1000, 0x10000, a));
    regions.push_back(MemoryRegion::borrow(0x8000, 0x10800, b));
    EXPECT_EQ(GuestMemoryMap::create(std::move(regions)), nullptr);
  }
  EXPECT_EQ(MemoryRegion::borrow(std::numeric_limits<uint64_t>::max() - 10, 0, a), nullptr);
}

int make_memfd(size_t bytes) {
  const int fd = ::memfd_create("uvhost-test", 0);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0);
  return fd;
}

TEST(GuestMemory, MapsAnFdAtAnOffsetAndUnmapsOnDestruction) {
  const int fd = make_memfd(3 * 4096);
  const int check_fd = ::dup(fd);
  // Write a marker through a separate mapping at file offset 0x1000 + 0x20.
  void* view = ::mmap(nullptr, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, check_fd, 0);
  ASSERT_NE(view, MAP_FAILED);
  static_cast<unsigned char*>(view)[0x1020] = 0x5a;

  auto region = MemoryRegion::map_fd(RegionSpec{0x40000, 0x2000, 0x7000000, 0x1000, fd});
  ASSERT_NE(region, nullptr);
  std::vector<std::unique_ptr<MemoryRegion>> regions;
  regions.push_back(std::move(region));
  auto map = GuestMemoryMap::create(std::move(regions));
  ASSERT_NE(map, nullptr);
  std::byte* p = map->translate_contiguous(0x40020, 1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(std::to_integer<int>(*p), 0x5a);
  *p = std::byte{0x33};
  EXPECT_EQ(static_cast<unsigned char*>(view)[0x1020], 0x33);

  map.reset();  // munmap + close
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the region must close its fd";
  ::munmap(view, 3 * 4096);
  ::close(check_fd);
}

TEST(GuestMemory, MapFdRefusesBadSpecsAndClosesTheFd) {
  const int fd = make_memfd(4096);
  EXPECT_EQ(MemoryRegion::map_fd(RegionSpec{0x1000, 0, 0, 0, fd}), nullptr);
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);
  const int fd2 = make_memfd(4096);
  EXPECT_EQ(MemoryRegion::map_fd(RegionSpec{std::numeric_limits<uint64_t>::max() - 100, 4096, 0, 0, fd2}), nullptr);
  EXPECT_EQ(MemoryRegion::map_fd(RegionSpec{0x1000, 4096, 0, 0, -1}), nullptr);  // mmap fails
}

TEST(GuestMemory, ManyRegionsUseTheBinarySearchAndStillSpan) {
  // More regions than the linear-scan limit; every other gap is a hole.
  constexpr size_t kRegions = 20;
  std::vector<std::vector<std::byte>> storage(kRegions, std::vector<std::byte>(256));
  std::vector<std::unique_ptr<MemoryRegion>> regions;
  for (size_t i = 0; i < kRegions; ++i) {
    const uint64_t gpa = 0x10000 + i * 0x100 + (i / 2) * 0x1000;  // pairs adjacent, holes between pairs
    regions.push_back(MemoryRegion::borrow(gpa, 0x900000 + i * 0x100, storage[i]));
  }
  auto map = GuestMemoryMap::create(std::move(regions));
  ASSERT_NE(map, nullptr);
  for (size_t i = 0; i < kRegions; ++i) {
    const uint64_t gpa = 0x10000 + i * 0x100 + (i / 2) * 0x1000;
    SCOPED_TRACE(i);
    EXPECT_EQ(map->translate_contiguous(gpa + 0x10, 0x20), storage[i].data() + 0x10);
    EXPECT_EQ(map->translate_contiguous(gpa - 1, 1), i % 2 == 1 ? storage[i - 1].data() + 255 : nullptr);
    IoVector out;
    const TranslateStatus spanning = map->translate(gpa + 0xf0, 0x20, out);
    if (i % 2 == 0) {
      ASSERT_EQ(spanning, TranslateStatus::kOk);  // into its pair partner
      ASSERT_EQ(out.size(), 2u);
      EXPECT_EQ(out[1].data, storage[i + 1].data());
    } else {
      EXPECT_EQ(spanning, TranslateStatus::kUnmapped);  // into the hole
      EXPECT_TRUE(out.empty());
    }
  }
}

TEST(GuestMemory, GenerationsDiffer) {
  TwoRegions a, b;
  EXPECT_NE(a.map->generation(), b.map->generation());
}

// The map is replaced while readers translate; no reader may see an unmapped region.
class GuardedMemory : public ::testing::TestWithParam<sync::GuardPolicy> {};

TEST_P(GuardedMemory, ReplaceWhileReading) {
  auto make_map = [](uint8_t marker) {
    const int fd = make_memfd(4096);
    auto region = MemoryRegion::map_fd(RegionSpec{0x1000, 4096, 0x1000, 0, fd});
    std::memset(region->host(), marker, 4096);
    std::vector<std::unique_ptr<MemoryRegion>> regions;
    regions.push_back(std::move(region));
    return GuestMemoryMap::create(std::move(regions));
  };
  GuardedGuestMemory guarded(GetParam(), make_map(1));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        const int value = guarded.read([](const GuestMemoryMap& map) {
          IoVector out;
          if (map.translate(0x1800, 64, out) != TranslateStatus::kOk) return -1;
          int sum = 0;
          for (size_t i = 0; i < 64; ++i) sum += std::to_integer<int>(out[0].data[i]);
          return sum / 64;
        });
        EXPECT_GE(value, 1);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  // Interleave: each replace waits until readers made progress on the current map.
  for (uint8_t i = 2; i < 40; ++i) {
    const uint64_t seen = reads.load();
    while (reads.load() == seen) std::this_thread::yield();
    guarded.replace(make_map(i));
  }
  stop.store(true);
  for (auto& t : readers) t.join();
  EXPECT_GT(reads.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, GuardedMemory, ::testing::ValuesIn(sync::kAllGuardPolicies),
                         [](const ::testing::TestParamInfo<sync::GuardPolicy>& param_info) {
                           std::string name(sync::to_string(param_info.param));
                           for (auto& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace uvhost::virtio
