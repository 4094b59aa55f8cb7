// latency_histogram_test.cpp - bucket layout, percentiles on known inputs, merge, reset.
#include <gtest/gtest.h>

#include <random>

#include "uvhost/bench/latency_histogram.h"

namespace uvhost::bench {
namespace {

TEST(LatencyHistogram, EmptyIsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.percentile(50), 0);
  EXPECT_EQ(h.min_ns(), 0u);
  EXPECT_EQ(h.max_ns(), 0u);
}

TEST(LatencyHistogram, BucketsTileTheRangeWithBoundedWidth) {
  // Every bucket starts where the previous one ended, holds its own bounds, and is at
  // most 1/64 of its lower bound wide above the linear part.
  for (size_t i = 0; i + 1 < LatencyHistogram::kBucketCount; ++i) {
    const uint64_t low = LatencyHistogram::bucket_low(i);
    const uint64_t high = LatencyHistogram::bucket_high(i);
    ASSERT_LT(low, high) << i;
    ASSERT_EQ(high, LatencyHistogram::bucket_low(i + 1)) << i;
    ASSERT_EQ(LatencyHistogram::bucket_of(low), i) << i;
    ASSERT_EQ(LatencyHistogram::bucket_of(high - 1), i) << i;
    if (low >= LatencyHistogram::kLinearLimit) {
      ASSERT_LE(static_cast<double>(high - low) / static_cast<double>(low), 1.0 / 64 + 1e-12) << i;
    } else {
      ASSERT_EQ(high - low, 1u) << i;
    }
  }
  EXPECT_EQ(LatencyHistogram::bucket_of(0), 0u);
  EXPECT_EQ(LatencyHistogram::bucket_of(127), 127u);
  EXPECT_EQ(LatencyHistogram::bucket_of(128), 128u);
  EXPECT_EQ(LatencyHistogram::bucket_of(LatencyHistogram::kMaxTrackable), LatencyHistogram::kBucketCount - 1);
  EXPECT_EQ(LatencyHistogram::bucket_of(UINT64_MAX), LatencyHistogram::kBucketCount - 1);
  // 10 s is inside the tracked range.
  EXPECT_LT(LatencyHistogram::bucket_of(10'000'000'000ull), LatencyHistogram::kBucketCount - 1);
}

TEST(LatencyHistogram, ExactBelow128) {
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 100; ++v) h.record(v);
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.percentile(50), 50);
  EXPECT_EQ(h.percentile(99), 99);
  EXPECT_EQ(h.percentile(100), 100);
  EXPECT_EQ(h.percentile(0), 1);
  EXPECT_DOUBLE_EQ(h.mean_ns(), 50.5);
}

TEST(LatencyHistogram, PercentilesOfAUniformRangeWithinBucketError) {
  // 1..100000 us in 1 us steps: the p-th percentile is p * 1000 us.
  LatencyHistogram h;
  for (uint64_t us = 1; us <= 100000; ++us) h.record(us * 1000);
  for (double p : {1.0, 10.0, 50.0, 90.0, 99.0, 99.9}) {
    const double exact = p * 1000.0 * 1000.0;
    EXPECT_NEAR(h.percentile(p), exact, exact / 128 + 1000) << p;  // half a bucket, plus one step of rank
  }
  EXPECT_EQ(h.percentile(100), 100'000'000);  // clamped to the exact max
  EXPECT_EQ(h.min_ns(), 1000u);
  EXPECT_EQ(h.max_ns(), 100'000'000u);
}

TEST(LatencyHistogram, TailIsFound) {
  // 999 fast answers and one slow one: p99.9 and below see the fast ones, p100 the slow.
  LatencyHistogram h;
  for (int i = 0; i < 999; ++i) h.record(10'000);
  h.record(5'000'000);
  EXPECT_NEAR(h.percentile(50), 10'000, 10'000 / 128.0);
  EXPECT_NEAR(h.percentile(99.9), 10'000, 10'000 / 128.0);
  EXPECT_EQ(h.percentile(100), 5'000'000);
  // 0.2% slow: p99.9 lands in the slow ones.
  h.record(5'000'000);
  h.record(5'000'000);
  EXPECT_NEAR(h.percentile(99.9), 5'000'000, 5'000'000 / 128.0);
}

TEST(LatencyHistogram, MergeEqualsRecordingEverything) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(10.0, 1.5);  // median ~22 us, long tail
  LatencyHistogram a, b, all;
  for (int i = 0; i < 20000; ++i) {
    const auto v = static_cast<uint64_t>(dist(rng));
    (i % 3 == 0 ? a : b).record(v);
    all.record(v);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min_ns(), all.min_ns());
  EXPECT_EQ(a.max_ns(), all.max_ns());
  EXPECT_DOUBLE_EQ(a.mean_ns(), all.mean_ns());
  for (double p : {50.0, 90.0, 99.0, 99.9}) EXPECT_EQ(a.percentile(p), all.percentile(p)) << p;
}

TEST(LatencyHistogram, ResetEmpties) {
  LatencyHistogram h;
  h.record(123456);
  h.reset();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.percentile(99), 0);
  h.record(500);
  EXPECT_EQ(h.min_ns(), 500u);
  EXPECT_EQ(h.max_ns(), 500u);
}

TEST(LatencyHistogram, HugeValuesStayExactAtTheExtremes) {
  LatencyHistogram h;
  h.record(100'000'000'000ull);  // 100 s: past the tracked range
  EXPECT_EQ(h.percentile(50), 100'000'000'000.0);
}

}  // namespace
}  // namespace uvhost::bench
