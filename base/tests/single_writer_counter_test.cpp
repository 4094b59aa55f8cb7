// single_writer_counter_test.cpp - SingleWriterCounter: one writer's increments all
// count, and a reader on another thread sees a value that never goes back.
#include "uvhost/base/single_writer_counter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>

namespace uvhost::base {
namespace {

TEST(SingleWriterCounter, StartsAtZeroAndAdds) {
  SingleWriterCounter counter;
  EXPECT_EQ(counter.get(), 0u);
  counter.add();
  counter.add(41);
  EXPECT_EQ(counter.get(), 42u);
}

TEST(SingleWriterCounter, ReaderOnAnotherThreadSeesAMonotonicValue) {
  constexpr uint64_t kAdds = 200'000;
  SingleWriterCounter counter;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    uint64_t last = 0;
    while (!done.load(std::memory_order_acquire)) {
      const uint64_t now = counter.get();
      EXPECT_GE(now, last);
      last = now;
    }
  });
  for (uint64_t i = 0; i < kAdds; ++i) counter.add();
  done.store(true, std::memory_order_release);
  reader.join();
  EXPECT_EQ(counter.get(), kAdds);
}

}  // namespace
}  // namespace uvhost::base
