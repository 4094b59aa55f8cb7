// compare_setup_test.cpp - how compare and calibrate choose between whole runs and
// live-switched slices (the policy the CLI hands to the bench library).
#include "uvhost/bench/compare_setup.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace uvhost::bench {
namespace {

Config with_port_key(const char* key, const char* value) {
  Config config;
  config.port_keys.emplace_back(key, value);
  return config;
}

TEST(CompareSetup, ParsesTheInterleaveFlag) {
  EXPECT_EQ(base::parse_enum<InterleaveRequest>("auto"), InterleaveRequest::kAuto);
  EXPECT_EQ(base::parse_enum<InterleaveRequest>("runs"), InterleaveRequest::kRuns);
  EXPECT_EQ(base::parse_enum<InterleaveRequest>("slices"), InterleaveRequest::kSlices);
  EXPECT_EQ(base::parse_enum<InterleaveRequest>("processes"), InterleaveRequest::kProcesses);
  EXPECT_FALSE(base::parse_enum<InterleaveRequest>("sometimes"));
}

// A against B = A with poll=busy, a difference a running backend switches live.
InterleaveChoice choose_for_poll_busy(InterleaveRequest request, Frontend frontend) {
  return choose_interleave(request, frontend, Config{}, with_port_key("poll", "busy"));
}

TEST(CompareSetup, RunsWhenAskedForWithoutAReason) {
  const InterleaveChoice choice = choose_for_poll_busy(InterleaveRequest::kRuns, Frontend::kEmbedded);
  EXPECT_EQ(choice.interleave, Interleave::kRuns);
  EXPECT_TRUE(choice.why.empty() && !choice.refused);
}

TEST(CompareSetup, LiveSwitchableDifferenceGoesInSlices) {
  const InterleaveChoice choice = choose_for_poll_busy(InterleaveRequest::kAuto, Frontend::kEmbedded);
  EXPECT_EQ(choice.interleave, Interleave::kSlices);
  EXPECT_EQ(choice.live_keys, std::vector<std::string>{"poll"});
  EXPECT_TRUE(choice.why.empty());
}

TEST(CompareSetup, TheQemuFrontendRunsTwoGuestsSideBySide) {
  const InterleaveChoice automatic = choose_for_poll_busy(InterleaveRequest::kAuto, Frontend::kQemu);
  EXPECT_EQ(automatic.interleave, Interleave::kProcesses);
  EXPECT_FALSE(automatic.why.empty() || automatic.refused) << "auto says why not slices";
  const InterleaveChoice asked = choose_for_poll_busy(InterleaveRequest::kSlices, Frontend::kQemu);
  EXPECT_EQ(asked.interleave, Interleave::kRuns);
  EXPECT_TRUE(asked.refused);
  // A guest runs only on its own uvhost serve, and cannot do injected frontend work.
  Config testpmd;
  testpmd.backend = BackendKind::kTestpmd;
  const InterleaveChoice with_testpmd = choose_interleave(InterleaveRequest::kProcesses, Frontend::kQemu, Config{}, testpmd);
  EXPECT_TRUE(with_testpmd.refused);
  EXPECT_NE(with_testpmd.why.find("backend=uvhost"), std::string::npos) << with_testpmd.why;
  EXPECT_TRUE(choose_calibrate_interleave(InterleaveRequest::kAuto, Frontend::kQemu, Config{}).refused);
  EXPECT_TRUE(choose_calibrate_interleave(InterleaveRequest::kProcesses, Frontend::kQemu, Config{}).refused);
}

TEST(CompareSetup, ADifferenceNoLiveSwitchMakesGoesSideBySide) {
  Config testpmd;
  testpmd.backend = BackendKind::kTestpmd;
  for (const Config& b : {testpmd, with_port_key("workers", "device")}) {
    const InterleaveChoice automatic = choose_interleave(InterleaveRequest::kAuto, Frontend::kEmbedded, Config{}, b);
    EXPECT_EQ(automatic.interleave, Interleave::kProcesses) << describe(b);
    EXPECT_FALSE(automatic.why.empty()) << "auto says why not slices";
    EXPECT_FALSE(automatic.refused);
    const InterleaveChoice asked = choose_interleave(InterleaveRequest::kProcesses, Frontend::kEmbedded, Config{}, b);
    EXPECT_EQ(asked.interleave, Interleave::kProcesses);
    EXPECT_TRUE(asked.why.empty() && !asked.refused);
  }
  // Asked for, processes also take what slices could do.
  EXPECT_EQ(choose_for_poll_busy(InterleaveRequest::kProcesses, Frontend::kEmbedded).interleave,
            Interleave::kProcesses);
  EXPECT_TRUE(in_one_call(Interleave::kProcesses) && in_one_call(Interleave::kSlices));
  EXPECT_FALSE(in_one_call(Interleave::kRuns));
}

TEST(CompareSetup, SideBySideNeedsBackendsTheRunStarts) {
  Config running;
  running.backend = BackendKind::kSocket;
  running.socket = "/tmp/some.sock";
  const InterleaveChoice automatic = choose_interleave(InterleaveRequest::kAuto, Frontend::kEmbedded, Config{}, running);
  EXPECT_EQ(automatic.interleave, Interleave::kRuns);
  EXPECT_NE(automatic.why.find("socket="), std::string::npos) << automatic.why;
  const InterleaveChoice asked =
      choose_interleave(InterleaveRequest::kProcesses, Frontend::kEmbedded, Config{}, running);
  EXPECT_TRUE(asked.refused);
  EXPECT_EQ(asked.interleave, Interleave::kRuns);
  EXPECT_FALSE(choose_interleave(InterleaveRequest::kProcesses, Frontend::kQemu, Config{}, Config{}).refused);
}

TEST(CompareSetup, CalibrateCanRunItsTrialsInTwoProcesses) {
  const InterleaveChoice choice =
      choose_calibrate_interleave(InterleaveRequest::kProcesses, Frontend::kEmbedded, Config{});
  EXPECT_EQ(choice.interleave, Interleave::kProcesses);
  EXPECT_FALSE(choice.refused);
}

TEST(CompareSetup, CalibrateSlicesItsInjectedWork) {
  const InterleaveChoice choice = choose_calibrate_interleave(InterleaveRequest::kAuto, Frontend::kEmbedded, Config{});
  EXPECT_EQ(choice.interleave, Interleave::kSlices);
  EXPECT_EQ(choice.live_keys, std::vector<std::string>{"spin_ns"});
}

}  // namespace
}  // namespace uvhost::bench
