#include "uvhost/base/errno_text.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace uvhost::base {
namespace {

TEST(ErrnoText, NamesTheCallAndTheError) {
  EXPECT_EQ(errno_text("open /x", ENOENT), "open /x: No such file or directory");
  EXPECT_EQ(errno_message(EAGAIN), "Resource temporarily unavailable");
}

TEST(ErrnoText, ReadsErrnoWhenNoNumberIsGiven) {
  errno = EPERM;
  EXPECT_EQ(errno_text("bind"), "bind: Operation not permitted");
}

}  // namespace
}  // namespace uvhost::base
