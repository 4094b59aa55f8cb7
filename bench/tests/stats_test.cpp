// Tests for the statistics helpers: known values from textbook tables.
#include "uvhost/bench/stats.h"
#include "uvhost/bench/table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace uvhost::bench {
namespace {

TEST(Stats, TQuantileMatchesTables) {
  EXPECT_NEAR(t_quantile_975(1), 12.706, 1e-3);
  EXPECT_NEAR(t_quantile_975(4), 2.776, 1e-3);
  EXPECT_NEAR(t_quantile_975(30), 2.042, 1e-3);
}

TEST(Stats, SummaryOfKnownSample) {
  std::vector<double> xs{2, 4, 4, 4, 5, 5, 7, 9};
  Summary s = summarize(xs);
  EXPECT_EQ(s.n, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_NEAR(s.stddev, 2.138, 1e-3);
  EXPECT_NEAR(s.ci95_half, 2.365 * 2.138 / std::sqrt(8.0), 1e-2);
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_DOUBLE_EQ(s.min, 2);
  EXPECT_DOUBLE_EQ(s.max, 9);
}

TEST(Stats, SingleSampleHasNoInterval) {
  std::vector<double> xs{3};
  Summary s = summarize(xs);
  EXPECT_EQ(s.ci95_half, 0);
  EXPECT_EQ(s.mean, 3);
}

TEST(Stats, RatioOfIdenticalSamplesIsOneWithInterval) {
  std::vector<double> a{10, 11, 9, 10, 10};
  Summary sa = summarize(a);
  Ratio r = ratio_of_means(sa, sa);
  EXPECT_DOUBLE_EQ(r.value, 1.0);
  EXPECT_GT(r.ci95_half, 0);
  EXPECT_LT(r.ci95_half, 0.2);
}

TEST(Stats, RatioDetectsDoubling) {
  std::vector<double> a{20, 21, 19, 20}, b{10, 10.5, 9.5, 10};
  Ratio r = ratio_of_means(summarize(a), summarize(b));
  EXPECT_NEAR(r.value, 2.0, 1e-9);
  EXPECT_LT(r.value - r.ci95_half, 2.0);
  EXPECT_GT(r.value - r.ci95_half, 1.5);
}

TEST(Stats, Percentiles) {
  std::vector<double> xs{1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(percentile(xs, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(xs, 50), 3);
  EXPECT_DOUBLE_EQ(percentile(xs, 100), 5);
  EXPECT_DOUBLE_EQ(percentile(xs, 25), 2);
}

TEST(Table, AlignsColumns) {
  TextTable t({"lock", "ops/s"});
  t.add_row({"std::mutex", "10.2 M"});
  t.add_row({"ck-mcs", "310 k"});
  const std::string s = t.str();
  EXPECT_NE(s.find("std::mutex | 10.2 M"), std::string::npos) << s;
  EXPECT_NE(s.find("ck-mcs     |  310 k"), std::string::npos) << s;
}

}  // namespace
}  // namespace uvhost::bench

namespace uvhost::bench {
namespace {
TEST(Format, SignificantDigitsWithoutExponent) {
  EXPECT_EQ(significant(1920.4, 3), "1920");
  EXPECT_EQ(significant(3.14159, 3), "3.14");
  EXPECT_EQ(significant(0.012345, 2), "0.012");
  EXPECT_EQ(with_ci(1920.4, 260.2), "1920 ±260");
}
}  // namespace
}  // namespace uvhost::bench
