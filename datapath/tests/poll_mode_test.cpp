// Poll modes, exit policies and poll exits: names (parse / to_string round trips),
// describe(), and pack() / unpack() (one word, replaced atomically while the worker
// reads it).
#include "uvhost/datapath/poll_mode.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <set>
#include <string>

namespace uvhost::datapath {
namespace {

constexpr PollMode kModes[] = {PollMode::kNotify, PollMode::kBusy, PollMode::kAlways, PollMode::kAdaptive};
constexpr ExitPolicy kPolicies[] = {ExitPolicy::kAccurate, ExitPolicy::kAnyWork};
constexpr PollExit kExits[] = {PollExit::kWork, PollExit::kOwnKick, PollExit::kOtherQueue, PollExit::kAnyWork,
                               PollExit::kTimeout};

TEST(PollModeTest, ModeNames) {
  EXPECT_EQ(to_string(PollMode::kNotify), "notify");
  EXPECT_EQ(to_string(PollMode::kBusy), "busy");
  EXPECT_EQ(to_string(PollMode::kAlways), "always");
  EXPECT_EQ(to_string(PollMode::kAdaptive), "adaptive");
  for (PollMode mode : kModes) {
    const auto parsed = base::parse_enum<PollMode>(to_string(mode));
    ASSERT_TRUE(parsed.has_value()) << to_string(mode);
    EXPECT_EQ(*parsed, mode);
  }
}

TEST(PollModeTest, UnknownModesAreRejected) {
  for (const char* text : {"", "Busy", "BUSY", "busy ", " notify", "poll", "adaptive(50)", "?", "pmd"}) {
    EXPECT_FALSE(base::parse_enum<PollMode>(text).has_value()) << '"' << text << '"';
  }
}

TEST(PollModeTest, ExitPolicyNames) {
  EXPECT_EQ(to_string(ExitPolicy::kAccurate), "accurate");
  EXPECT_EQ(to_string(ExitPolicy::kAnyWork), "any");
  for (ExitPolicy policy : kPolicies) {
    const auto parsed = base::parse_enum<ExitPolicy>(to_string(policy));
    ASSERT_TRUE(parsed.has_value()) << to_string(policy);
    EXPECT_EQ(*parsed, policy);
  }
  EXPECT_FALSE(base::parse_enum<ExitPolicy>("any_work").has_value());  // one spelling: "any"
  for (const char* text : {"", "Accurate", "anywork", "all", "exact"}) {
    EXPECT_FALSE(base::parse_enum<ExitPolicy>(text).has_value()) << '"' << text << '"';
  }
}

TEST(PollModeTest, PollExitNamesAreDistinct) {
  std::set<std::string> names;
  for (PollExit exit : kExits) {
    const std::string name(to_string(exit));
    EXPECT_NE(name, base::kUnknownEnumName);
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
  }
  EXPECT_EQ(names.size(), kPollExitCount);
  EXPECT_EQ(to_string(PollExit::kWork), "work");
  EXPECT_EQ(to_string(PollExit::kOwnKick), "own_kick");
  EXPECT_EQ(to_string(PollExit::kOtherQueue), "other_queue");
  EXPECT_EQ(to_string(PollExit::kAnyWork), "any_work");
  EXPECT_EQ(to_string(PollExit::kTimeout), "timeout");
  EXPECT_EQ(static_cast<size_t>(PollExit::kTimeout) + 1, kPollExitCount) << "counters are indexed by PollExit";
}

TEST(PollModeTest, Describe) {
  EXPECT_EQ(describe({PollMode::kNotify, 50, ExitPolicy::kAccurate}), "notify");
  EXPECT_EQ(describe({PollMode::kAlways, 50, ExitPolicy::kAnyWork}), "always");
  EXPECT_EQ(describe({PollMode::kBusy, 50, ExitPolicy::kAccurate}), "busy(50us,accurate)");
  EXPECT_EQ(describe({PollMode::kBusy, 0, ExitPolicy::kAnyWork}), "busy(0us,any)");
  EXPECT_EQ(describe({PollMode::kAdaptive, 50, ExitPolicy::kAccurate}), "adaptive(<=50us,accurate)");
  EXPECT_EQ(describe({PollMode::kAdaptive, 4'000'000'000u, ExitPolicy::kAnyWork}), "adaptive(<=4000000000us,any)");
  EXPECT_EQ(describe(PollSettings{}), "notify") << "the default is notify";
}

TEST(PollModeTest, DefaultSettings) {
  const PollSettings settings;
  EXPECT_EQ(settings.mode, PollMode::kNotify);
  EXPECT_EQ(settings.busy_us, 50u);
  EXPECT_EQ(settings.exit, ExitPolicy::kAccurate);
}

TEST(PollModeTest, PackUnpackRoundTrips) {
  const uint32_t busy_values[] = {0, 1, 50, 255, 256, 65'535, 65'536, 1'000'000,
                                  std::numeric_limits<uint32_t>::max()};
  std::set<uint64_t> words;
  for (PollMode mode : kModes) {
    for (ExitPolicy policy : kPolicies) {
      for (uint32_t busy_us : busy_values) {
        const PollSettings settings{mode, busy_us, policy};
        const uint64_t word = pack(settings);
        const PollSettings back = unpack(word);
        EXPECT_EQ(back, settings) << describe(settings);
        EXPECT_EQ(back.mode, mode);
        EXPECT_EQ(back.exit, policy);
        EXPECT_EQ(back.busy_us, busy_us);
        EXPECT_EQ(pack(back), word);
        EXPECT_TRUE(words.insert(word).second) << "two settings packed to the same word: " << describe(settings);
      }
    }
  }
  EXPECT_EQ(unpack(pack(PollSettings{})), PollSettings{});
}

TEST(PollModeTest, PackedFieldsDoNotOverlap) {
  // Changing one field changes only its own bits.
  const PollSettings base{PollMode::kAdaptive, 0xffff'ffffu, ExitPolicy::kAnyWork};
  const uint64_t word = pack(base);
  PollSettings other = base;
  other.busy_us = 0;
  EXPECT_EQ(unpack(pack(other)).mode, base.mode);
  EXPECT_EQ(unpack(pack(other)).exit, base.exit);
  other = base;
  other.mode = PollMode::kNotify;
  EXPECT_EQ(unpack(pack(other)).busy_us, base.busy_us);
  EXPECT_EQ(unpack(pack(other)).exit, base.exit);
  EXPECT_NE(pack(other), word);
}

}  // namespace
}  // namespace uvhost::datapath
