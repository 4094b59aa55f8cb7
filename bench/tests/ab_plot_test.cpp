// Tests for `uvhost bench compare --plot`: gnuplot (a declared dependency,
// scripts/setup.sh) really draws the comparison into PNG and SVG files.
#include "uvhost/bench/ab_plot.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "ab_test_model.h"

namespace uvhost::bench {
namespace {

CompareResult model_result() {
  ModelMachine machine(9);
  CompareSpec spec;
  spec.a.label = "A";
  spec.b.label = "B";
  spec.b.frontend_spin_ns = 300;
  spec.points = {Point{Workload::kRr, 64, 1}, Point{Workload::kRr, 1500, 8},
                 Point{Workload::kStreamTx, 64, 1}};
  spec.runs = 4;
  return run_compare(spec, [&](const Config& c, const Point& p) { return machine.run(c, p); });
}

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class AbPlot : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/uvhost-ab-plot-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(AbPlot, DrawsSvgAndPng) {
  const CompareResult result = model_result();
  std::string error;
  ASSERT_TRUE(plot_compare(result, (dir_ / "ab.svg").string(), error)) << error;
  const std::string svg = slurp(dir_ / "ab.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("normalize"), std::string::npos);  // the second panel's title
  EXPECT_NE(svg.find("stream-tx"), std::string::npos);  // the second workload's row

  ASSERT_TRUE(plot_compare(result, (dir_ / "ab.png").string(), error)) << error;
  const std::string png = slurp(dir_ / "ab.png");
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
}

TEST_F(AbPlot, UnwritablePathIsAnError) {
  std::string error;
  EXPECT_FALSE(plot_compare(model_result(), (dir_ / "missing" / "ab.png").string(), error));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace uvhost::bench
