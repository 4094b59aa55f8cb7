// AdaptivePollTimeout: the `adaptive` poll mode's timeout, learned from the gaps a
// queue sees between "ring found dry" and "work arrived".
//  - no history: the cap (behave like `busy`);
//  - gaps at or below the cap on average: the whole cap (a shorter poll would turn
//    every slightly long gap into a full sleep and wake-up);
//  - gaps longer than the cap: 0 (do not poll);
//  - polls that time out grow the average until the timeout is 0 (a queue that went
//    quiet stops polling after a few empty polls);
//  - short gaps bring polling back; one very long sleep is forgotten quickly.
#include "uvhost/datapath/adaptive_poll.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace uvhost::datapath {
namespace {

constexpr uint64_t kCap = 50'000;  // busy_us = 50

// Simulates the idle loop's use: poll for timeout_ns(cap); nothing comes; on_timeout.
// Returns the number of empty polls made before the timeout became 0, or -1 if it
// did not within `limit` polls.
int empty_polls_until_no_poll(AdaptivePollTimeout& adaptive, uint64_t cap, int limit = 200) {
  for (int polls = 0; polls < limit; ++polls) {
    const uint64_t timeout = adaptive.timeout_ns(cap);
    if (timeout == 0) return polls;
    EXPECT_LE(timeout, cap);
    adaptive.on_timeout(timeout);
  }
  return adaptive.timeout_ns(cap) == 0 ? limit : -1;
}

TEST(AdaptivePollTest, NoHistoryMeansTheCap) {
  AdaptivePollTimeout adaptive;
  EXPECT_EQ(adaptive.timeout_ns(kCap), kCap);
  EXPECT_EQ(adaptive.timeout_ns(1), 1u);
  EXPECT_EQ(adaptive.timeout_ns(0), 0u);
  EXPECT_EQ(adaptive.timeout_ns(1'000'000), 1'000'000u);
  EXPECT_EQ(adaptive.average_ns(), 0u);
}

TEST(AdaptivePollTest, FirstGapPrimesTheAverage) {
  AdaptivePollTimeout adaptive;
  adaptive.on_gap(3'000);
  EXPECT_EQ(adaptive.average_ns(), 3'000u);
  EXPECT_EQ(adaptive.timeout_ns(kCap), kCap);
}

TEST(AdaptivePollTest, ShortGapsPollForTheWholeCap) {
  // Gaps of about 1 us with an occasional 20 us one (an interrupt on the guest's CPU):
  // the poll must still catch the long one instead of sleeping through it.
  AdaptivePollTimeout adaptive;
  for (int i = 0; i < 200; ++i) adaptive.on_gap(i % 50 == 49 ? 20'000 : (i % 2 == 0 ? 800 : 1'200));
  EXPECT_LT(adaptive.average_ns(), 5'000u);
  EXPECT_EQ(adaptive.timeout_ns(kCap), kCap);
  EXPECT_GT(adaptive.timeout_ns(kCap), 20'000u);
}

TEST(AdaptivePollTest, TimeoutNeverExceedsTheCap) {
  AdaptivePollTimeout adaptive;
  for (int i = 0; i < 100; ++i) adaptive.on_gap(30'000);  // 2 x 30 us > 50 us
  EXPECT_EQ(adaptive.average_ns(), 30'000u);
  EXPECT_EQ(adaptive.timeout_ns(kCap), kCap);
  // The same history under a smaller cap: above it, so no polling at all.
  EXPECT_EQ(adaptive.timeout_ns(20'000), 0u);
  // Exactly at the cap still polls (up to the cap).
  EXPECT_EQ(adaptive.timeout_ns(30'000), 30'000u);
}

TEST(AdaptivePollTest, LongGapsMeanNoPolling) {
  AdaptivePollTimeout adaptive;
  adaptive.on_gap(200'000);  // 200 us between arrivals, cap 50 us
  EXPECT_EQ(adaptive.timeout_ns(kCap), 0u);
  for (int i = 0; i < 20; ++i) adaptive.on_gap(100'000 + static_cast<uint64_t>(i) * 1'000);
  EXPECT_EQ(adaptive.timeout_ns(kCap), 0u);
}

TEST(AdaptivePollTest, TimeoutsGrowTheAverageUntilPollingStops) {
  // A queue with short gaps goes quiet: each poll times out. The average must only
  // grow, and after a few empty polls the timeout must reach 0.
  AdaptivePollTimeout adaptive;
  for (int i = 0; i < 50; ++i) adaptive.on_gap(1'000);
  uint64_t previous = adaptive.average_ns();
  for (int i = 0; i < 5; ++i) {
    const uint64_t timeout = adaptive.timeout_ns(kCap);
    ASSERT_GT(timeout, 0u);
    adaptive.on_timeout(timeout);
    EXPECT_GT(adaptive.average_ns(), previous) << "a timed-out poll did not grow the average";
    previous = adaptive.average_ns();
  }
  const int polls = empty_polls_until_no_poll(adaptive, kCap);
  EXPECT_GE(polls, 0) << "polling never stopped: average " << adaptive.average_ns() << " ns stays under the cap";
  EXPECT_LE(polls, 40) << "took too many empty polls to stop";
  EXPECT_GT(adaptive.average_ns(), kCap);
}

TEST(AdaptivePollTest, TimeoutsAtTheCapStopPolling) {
  // History right at the cap (every poll runs the full busy_us and times out).
  AdaptivePollTimeout adaptive;
  adaptive.on_gap(kCap);
  EXPECT_EQ(adaptive.timeout_ns(kCap), kCap);
  const int polls = empty_polls_until_no_poll(adaptive, kCap);
  EXPECT_GE(polls, 0) << "a queue that went quiet polled at the cap forever";
  EXPECT_LE(polls, 10);
}

TEST(AdaptivePollTest, TimeoutsWithoutHistoryStopPolling) {
  // First use: no history means the cap, and a poll at the cap that times out primes
  // the average; polling must still stop after a few of them.
  for (uint64_t cap : {uint64_t{1'000}, kCap, uint64_t{1'000'000}}) {
    AdaptivePollTimeout adaptive;
    const int polls = empty_polls_until_no_poll(adaptive, cap);
    EXPECT_GE(polls, 1) << "cap " << cap;
    EXPECT_LE(polls, 10) << "cap " << cap;
  }
}

TEST(AdaptivePollTest, OnTimeoutNeverShrinksTheAverage) {
  AdaptivePollTimeout adaptive;
  adaptive.on_gap(40'000);
  const uint64_t before = adaptive.average_ns();
  adaptive.on_timeout(1'000);  // a short timed-out poll: the gap is at least the average
  EXPECT_GE(adaptive.average_ns(), before);
}

TEST(AdaptivePollTest, ShortGapsBringPollingBack) {
  AdaptivePollTimeout adaptive;
  for (int i = 0; i < 50; ++i) adaptive.on_gap(1'000);
  ASSERT_GE(empty_polls_until_no_poll(adaptive, kCap), 0);
  ASSERT_EQ(adaptive.timeout_ns(kCap), 0u);
  // Traffic resumes: gaps measured after sleeping are short again.
  int samples = 0;
  while (adaptive.timeout_ns(kCap) == 0 && samples < 100) {
    adaptive.on_gap(1'000);
    ++samples;
  }
  EXPECT_GT(adaptive.timeout_ns(kCap), 0u);
  EXPECT_LE(samples, 10) << "polling took too long to resume";
  for (int i = 0; i < 150; ++i) adaptive.on_gap(1'000);
  EXPECT_NEAR(static_cast<double>(adaptive.average_ns()), 1'000.0, 100.0);
  EXPECT_EQ(adaptive.timeout_ns(kCap), kCap);
}

TEST(AdaptivePollTest, OneVeryLongSleepIsForgottenQuickly) {
  AdaptivePollTimeout adaptive;
  for (int i = 0; i < 50; ++i) adaptive.on_gap(1'000);
  adaptive.on_gap(5'000'000'000);  // five seconds asleep
  EXPECT_LE(adaptive.average_ns(), 10'000'000u) << "a sample is clamped";
  EXPECT_EQ(adaptive.timeout_ns(kCap), 0u);
  int samples = 0;
  while (adaptive.timeout_ns(kCap) == 0 && samples < 1000) {
    adaptive.on_gap(1'000);
    ++samples;
  }
  EXPECT_LE(samples, 50) << "one long sleep needed " << samples << " short gaps to forget";
}

TEST(AdaptivePollTest, AverageFollowsDownwardAndUpward) {
  AdaptivePollTimeout adaptive;
  adaptive.on_gap(10'000);
  for (int i = 0; i < 100; ++i) adaptive.on_gap(2'000);
  EXPECT_NEAR(static_cast<double>(adaptive.average_ns()), 2'000.0, 20.0);
  for (int i = 0; i < 100; ++i) adaptive.on_gap(8'000);
  EXPECT_NEAR(static_cast<double>(adaptive.average_ns()), 8'000.0, 20.0);
}

}  // namespace
}  // namespace uvhost::datapath
