// flatness_test.cpp - the soak's verdict (flatness.h) on made-up series: a flat one
// passes, one leaked fd / thread / mapping at any sample fails, RSS growth or a late
// trend beyond the bound fails, too few samples cannot pass.
#include "flatness.h"

#include <gtest/gtest.h>

namespace uvhost::soak {
namespace {

const ProcFigures kSteady{650, 49000, 67, 326};

std::vector<Sample> flat_series(size_t count) {
  std::vector<Sample> samples;
  for (size_t i = 0; i < count; ++i) {
    Sample s{static_cast<double>(i) * 30, i * 45, kSteady};
    s.figures.rss_kib += (i % 2 == 0) ? 300 : -300;  // noise within the bound
    samples.push_back(s);
  }
  return samples;
}

TEST(Flatness, AFlatSeriesPasses) { EXPECT_TRUE(judge_flatness(flat_series(20), kSteady, 1024).empty()); }

TEST(Flatness, OneLeakedDescriptorAtOneSampleFails) {
  auto samples = flat_series(20);
  samples[13].figures.fds += 1;
  const auto findings = judge_flatness(samples, kSteady, 1024);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_NE(findings[0].find("fds 651"), std::string::npos) << findings[0];
}

TEST(Flatness, AThreadOrAMappingMoreFails) {
  auto samples = flat_series(20);
  samples[19].figures.threads += 1;
  samples[5].figures.maps += 2;
  EXPECT_EQ(judge_flatness(samples, kSteady, 1024).size(), 2u);
}

TEST(Flatness, SteadyRssGrowthFails) {
  auto samples = flat_series(20);
  for (size_t i = 0; i < samples.size(); ++i) samples[i].figures.rss_kib += static_cast<long>(i) * 200;
  const auto findings = judge_flatness(samples, kSteady, 1024);
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].find("RSS grew"), std::string::npos) << findings[0];
}

TEST(Flatness, ALateRiseFailsAsATrend) {
  auto samples = flat_series(20);
  samples[18].figures.rss_kib += 4096;  // inside the last quarter, but not its median
  const auto findings = judge_flatness(samples, kSteady, 1024);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_NE(findings[0].find("RSS trend"), std::string::npos) << findings[0];
}

TEST(Flatness, TooFewSamplesCannotPass) { EXPECT_FALSE(judge_flatness(flat_series(3), kSteady, 1024).empty()); }

}  // namespace
}  // namespace uvhost::soak
