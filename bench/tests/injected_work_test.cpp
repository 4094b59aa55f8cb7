// injected_work_test.cpp - the calibration's injected work costs what it was asked to.
#include "uvhost/bench/injected_work.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "uvhost/bench/cpu_time.h"

namespace uvhost::bench {
namespace {

// CPU time of the calling thread for `ns` of injected work; the least of a few tries
// (preemption only ever adds wall time, and CPU time leaves it out, but migrations and
// a shared core still cost some).
int64_t cpu_ns_for(uint64_t ns) {
  int64_t least = INT64_MAX;
  for (int i = 0; i < 5; ++i) {
    const int64_t start = thread_cpu_ns();
    do_injected_work_ns(ns);
    least = std::min(least, thread_cpu_ns() - start);
  }
  return least;
}

TEST(InjectedWorkTest, IterationRateIsMeasuredOnceAndPositive) {
  const double rate = injected_iterations_per_ns();
  EXPECT_GT(rate, 0.0);
  EXPECT_EQ(rate, injected_iterations_per_ns());
}

TEST(InjectedWorkTest, TakesAboutTheAskedCpuTime) {
  constexpr uint64_t kAsked = 5'000'000;  // 5 ms
  const int64_t spent = cpu_ns_for(kAsked);
  // The rate is the fastest of several batches, so the work is never much shorter than
  // asked; a loaded or sanitized build may take longer.
  EXPECT_GE(spent, static_cast<int64_t>(kAsked * 7 / 10));
  EXPECT_LE(spent, static_cast<int64_t>(kAsked * 4));
}

TEST(InjectedWorkTest, ScalesWithTheAskedTime) {
  const int64_t one = cpu_ns_for(2'000'000);
  const int64_t four = cpu_ns_for(8'000'000);
  const double ratio = static_cast<double>(four) / static_cast<double>(one);
  EXPECT_GT(ratio, 2.5);
  EXPECT_LT(ratio, 6.0);
}

TEST(InjectedWorkTest, ZeroIsNothing) {
  const int64_t start = thread_cpu_ns();
  do_injected_work_ns(0);
  EXPECT_LT(thread_cpu_ns() - start, 1'000'000);
}

}  // namespace
}  // namespace uvhost::bench
