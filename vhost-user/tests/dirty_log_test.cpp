// dirty_log_test.cpp - the dirty-page bitmap: mapping checks, page arithmetic,
// clipping of hostile ranges, concurrent marking, used ring helpers.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "backend_test_support.h"
#include "uvhost/vhost_user/dirty_log.h"

namespace uvhost::vhost_user {
namespace {

using testing::GuestRam;

std::unique_ptr<DirtyLog> map_log(GuestRam& ram, uint64_t size, uint64_t offset, std::string& error) {
  return DirtyLog::map(base::UniqueFd(::fcntl(ram.fd.get(), F_DUPFD_CLOEXEC, 0)), size, offset, error);
}

bool bit(const GuestRam& ram, uint64_t offset, uint64_t page) {
  return ((std::to_integer<unsigned>(ram.host[offset + page / 8]) >> (page % 8)) & 1u) != 0;
}

TEST(DirtyLogTest, RefusesBadAreas) {
  GuestRam ram(4096);
  std::string error;
  EXPECT_FALSE(map_log(ram, 0, 0, error));
  EXPECT_FALSE(map_log(ram, 4096, 1, error));  // past the end of the fd
  EXPECT_NE(error.find("regular file"), std::string::npos);
  EXPECT_FALSE(map_log(ram, DirtyLog::kMaxBytes + 1, 0, error));
  EXPECT_FALSE(DirtyLog::map(testing::make_eventfd(), 8, 0, error));
  EXPECT_TRUE(map_log(ram, 4000, 96, error)) << error;  // unaligned offset is fine
}

TEST(DirtyLogTest, MarksEveryTouchedPageAndClipsTheRest) {
  GuestRam ram(4096);
  std::string error;
  auto log = map_log(ram, 16, 100, error);  // 128 pages
  ASSERT_TRUE(log) << error;
  log->mark(0x3fff, 2);  // the last byte of page 3 and the first of page 4
  EXPECT_TRUE(bit(ram, 100, 3));
  EXPECT_TRUE(bit(ram, 100, 4));
  EXPECT_FALSE(bit(ram, 100, 2));
  EXPECT_FALSE(bit(ram, 100, 5));
  log->mark(0, 0);  // nothing
  EXPECT_FALSE(bit(ram, 100, 0));
  // 126..129: two pages inside, two clipped.
  log->mark(126 * DirtyLog::kPageSize, 4 * DirtyLog::kPageSize);
  EXPECT_TRUE(bit(ram, 100, 126));
  EXPECT_TRUE(bit(ram, 100, 127));
  EXPECT_EQ(log->out_of_range_pages(), 2u);
  EXPECT_EQ(std::to_integer<unsigned>(ram.host[100 + 16]), 0u);  // nothing past the bitmap
  EXPECT_EQ(std::to_integer<unsigned>(ram.host[99]), 0u);        // nor before it
  // A wrapping, enormous range ends the loop at the bitmap's end.
  log->mark(0x10, ~uint64_t{0});
  EXPECT_TRUE(bit(ram, 100, 0));
  EXPECT_TRUE(bit(ram, 100, 127));
}

TEST(DirtyLogTest, UsedRingHelpersLogElementAndIndex) {
  GuestRam ram(4096);
  std::string error;
  auto log = map_log(ram, 64, 0, error);
  ASSERT_TRUE(log);
  // Used ring logged at 0x10000 (page 16); element 600 lies at 0x10000 + 4 + 4800 (page 17).
  log_used_element(*log, 0x10000, 600);
  EXPECT_TRUE(log->is_dirty(0x10000));
  EXPECT_TRUE(log->is_dirty(0x11000));
  EXPECT_FALSE(log->is_dirty(0x12000));
  log_used_write(*log, ~uint64_t{0} - 1, 16, 8);  // address + offset wraps: ignored
}

TEST(DirtyLogTest, KickFieldsLogFlagsAndAvailEvent) {
  GuestRam ram(4096);
  std::string error;
  auto log = map_log(ram, 64, 0, error);
  ASSERT_TRUE(log);
  // A 1024-entry used ring at 0x10000: flags on page 16, avail_event after the last
  // element at 0x10000 + 4 + 8 * 1024 = 0x12004 (page 18); the elements between are not
  // written by enabling or disabling kicks.
  log_kick_fields(*log, 0x10000, 1024);
  EXPECT_TRUE(log->is_dirty(0x10000));
  EXPECT_FALSE(log->is_dirty(0x11000));
  EXPECT_TRUE(log->is_dirty(0x12000));
  EXPECT_FALSE(log->is_dirty(0x13000));
}

TEST(DirtyLogTest, ConcurrentMarksAreNotLost) {
  GuestRam ram(4096);
  std::string error;
  auto log = map_log(ram, 8, 0, error);  // 64 pages, all in 8 shared bytes
  ASSERT_TRUE(log);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([&log, t] {
      for (uint64_t page = t; page < 64; page += 4) log->mark(page * DirtyLog::kPageSize, 1);
    });
  }
  for (auto& thread : threads) thread.join();
  for (uint64_t page = 0; page < 64; ++page) EXPECT_TRUE(log->is_dirty(page * DirtyLog::kPageSize)) << page;
}

}  // namespace
}  // namespace uvhost::vhost_user
