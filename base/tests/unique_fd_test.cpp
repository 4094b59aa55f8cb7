// unique_fd_test.cpp - UniqueFd closes its descriptor exactly once: on destruction,
// reset() and move-assignment over it, and never after release().
#include "uvhost/base/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <utility>

namespace uvhost::base {
namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

int open_null() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

TEST(UniqueFd, DefaultHoldsNothing) {
  const UniqueFd fd;
  EXPECT_FALSE(fd.valid());
  EXPECT_FALSE(fd);
  EXPECT_EQ(fd.get(), -1);
}

TEST(UniqueFd, ClosesOnDestruction) {
  int raw = -1;
  {
    const UniqueFd fd(open_null());
    raw = fd.get();
    ASSERT_TRUE(is_open(raw));
  }
  EXPECT_FALSE(is_open(raw));
}

TEST(UniqueFd, ResetClosesTheOldAndTakesTheNew) {
  UniqueFd fd(open_null());
  const int first = fd.get();
  const int second = open_null();
  fd.reset(second);
  EXPECT_FALSE(is_open(first));
  EXPECT_EQ(fd.get(), second);
}

TEST(UniqueFd, MoveHandsOwnershipOver) {
  UniqueFd from(open_null());
  const int raw = from.get();
  UniqueFd to(open_null());
  const int replaced = to.get();
  to = std::move(from);
  EXPECT_FALSE(is_open(replaced));
  EXPECT_EQ(to.get(), raw);
  EXPECT_TRUE(is_open(raw));
}

TEST(UniqueFd, ReleaseGivesTheFdBackUnclosed) {
  UniqueFd fd(open_null());
  const int raw = fd.release();
  EXPECT_FALSE(fd.valid());
  EXPECT_TRUE(is_open(raw));
  ::close(raw);
}

}  // namespace
}  // namespace uvhost::base
