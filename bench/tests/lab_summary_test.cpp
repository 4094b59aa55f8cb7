// The pieces the sync-level labs share (lab_summary.h): field tables summarize and
// write every figure, and a variant's ratio to the baseline gets the verdict its CI
// says - on data with a known answer.
#include "uvhost/bench/lab/lab_summary.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace uvhost::bench::lab {
namespace {

Summary of(std::vector<double> values) {
  return summarize(values);
}

TEST(LabSummary, ClearlyDifferentRunsGetBetterOrWorseByDirection) {
  const Summary base = of({100, 102, 98, 101, 99});
  const Summary half = of({50, 51, 49, 50.5, 49.5});
  const BaselineRatio lower = ratio_vs_baseline(half, base, Direction::kLowerIsBetter);
  EXPECT_EQ(lower.verdict, Verdict::kBetter);
  EXPECT_NEAR(lower.value, 0.5, 0.01);
  EXPECT_GT(lower.ci95_half, 0);
  EXPECT_EQ(ratio_vs_baseline(half, base, Direction::kHigherIsBetter).verdict, Verdict::kWorse);
  EXPECT_EQ(ratio_vs_baseline(base, half, Direction::kHigherIsBetter).verdict, Verdict::kBetter);
  EXPECT_EQ(ratio_vs_baseline(base, half, Direction::kLowerIsBetter).verdict, Verdict::kWorse);
}

TEST(LabSummary, IdenticalOrOverlappingRunsAreNoise) {
  const Summary base = of({100, 102, 98, 101, 99});
  EXPECT_EQ(ratio_vs_baseline(base, base, Direction::kHigherIsBetter).verdict, Verdict::kNoise);
  EXPECT_EQ(ratio_vs_baseline(of({5, 5, 5}), of({5, 5, 5}), Direction::kLowerIsBetter).verdict,
            Verdict::kNoise);
  // 1% apart with +-20% spread: the CI contains 1.
  EXPECT_EQ(
      ratio_vs_baseline(of({80, 120, 101, 103}), of({120, 80, 100, 100}), Direction::kHigherIsBetter).verdict,
      Verdict::kNoise);
}

TEST(LabSummary, TooFewRunsOrNoBaselineIsNotAVerdict) {
  const Summary base = of({100, 101});
  EXPECT_EQ(ratio_vs_baseline(of({50}), base, Direction::kLowerIsBetter).verdict, Verdict::kInvalid);
  EXPECT_EQ(ratio_vs_baseline(base, of({0, 0}), Direction::kLowerIsBetter).verdict, Verdict::kInvalid);
  EXPECT_EQ(ratio_vs_baseline(of({0, 0}), base, Direction::kLowerIsBetter).verdict, Verdict::kInvalid);
  const BaselineRatio invalid = ratio_vs_baseline(base, Summary{}, Direction::kHigherIsBetter);
  EXPECT_EQ(ratio_text(invalid), "-");
  EXPECT_EQ(ratio_json(invalid)["verdict"], "n/a");
}

TEST(LabSummary, RatioTextAndJsonCarryTheVerdict) {
  const BaselineRatio r = ratio_vs_baseline(of({50, 51, 49}), of({100, 101, 99}), Direction::kLowerIsBetter);
  EXPECT_EQ(ratio_text(r).rfind("×0.5", 0), 0u) << ratio_text(r);
  const nlohmann::json j = ratio_json(r);
  EXPECT_EQ(j["verdict"], "better");
  EXPECT_EQ(j["better"], "lower");
  EXPECT_NEAR(j["value"].get<double>(), 0.5, 0.01);
  EXPECT_TRUE(j.contains("ci95_half"));
}

struct Sample {
  double a = 0, b = 0;
};
struct Cell {
  std::vector<Sample> samples;
  Summary a, b;
};

TEST(LabSummary, FieldTablesSummarizeAndWriteEveryFigure) {
  constexpr std::array<LabField<Sample, Cell>, 2> kFields{
      {{"a", &Sample::a, &Cell::a}, {"b", &Sample::b, &Cell::b}}};
  Cell cell;
  cell.samples = {{1, 10}, {3, 30}};
  summarize_fields(cell, kFields);
  EXPECT_EQ(cell.a.n, 2u);
  EXPECT_DOUBLE_EQ(cell.a.mean, 2);
  EXPECT_DOUBLE_EQ(cell.b.mean, 20);
  const nlohmann::json summaries = fields_json(cell, kFields);
  EXPECT_DOUBLE_EQ(summaries["b"]["mean"].get<double>(), 20);
  EXPECT_TRUE(summaries["a"].contains("ci95_half"));
  EXPECT_DOUBLE_EQ(sample_json(cell.samples[1], kFields)["a"].get<double>(), 3);

  BarSeries series{"x", {}, {}};
  add_bar(series, cell.b);
  EXPECT_EQ(series.mean, std::vector<double>{20});
  EXPECT_EQ(series.half, std::vector<double>{cell.b.ci95_half});
  EXPECT_DOUBLE_EQ(per_second(50, 500'000'000), 100);
  EXPECT_DOUBLE_EQ(per_second(50, 0), 0);
}

}  // namespace
}  // namespace uvhost::bench::lab
