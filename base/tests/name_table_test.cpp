#include "uvhost/base/name_table.h"

#include <gtest/gtest.h>

namespace uvhost::base {
namespace {

enum class Colour { kRed, kGreen, kBlue, kUnlisted };

constexpr auto kColourNames =
    name_table<Colour>({{Colour::kRed, "red"}, {Colour::kGreen, "green"}, {Colour::kBlue, "blue"}});

static_assert(name_of(kColourNames, Colour::kGreen) == "green");
static_assert(parse(kColourNames, "blue") == Colour::kBlue);
static_assert(!parse(kColourNames, "purple").has_value());

TEST(NameTableTest, NameOfEveryValueParsesBack) {
  for (Colour colour : values_of(kColourNames)) {
    EXPECT_EQ(parse(kColourNames, name_of(kColourNames, colour)), colour);
  }
}

TEST(NameTableTest, UnlistedValueGetsTheUnknownName) {
  EXPECT_EQ(name_of(kColourNames, Colour::kUnlisted), "unknown");
  EXPECT_EQ(name_of(kColourNames, Colour::kUnlisted, "?"), "?");
}

TEST(NameTableTest, ParseIsExact) {
  EXPECT_FALSE(parse(kColourNames, "Red").has_value());
  EXPECT_FALSE(parse(kColourNames, "re").has_value());
  EXPECT_FALSE(parse(kColourNames, "").has_value());
}

TEST(NameTableTest, ChoiceListsComeFromTheTableInOrder) {
  EXPECT_EQ(names(kColourNames), (std::vector<std::string>{"red", "green", "blue"}));
  EXPECT_EQ(join_names(kColourNames, ", "), "red, green, blue");
  EXPECT_EQ(join_names(kColourNames, "|"), "red|green|blue");
  EXPECT_EQ(choice_list(kColourNames), "red, green or blue");
}

TEST(NameTableTest, UnknownNameErrorListsTheChoices) {
  EXPECT_EQ(unknown_name("colour", "purple", kColourNames), "colour 'purple' unknown (red, green, blue)");
}

TEST(NameTableTest, ChoiceListOfOneOrTwo) {
  constexpr auto one = name_table<Colour>({{Colour::kRed, "red"}});
  constexpr auto two = name_table<Colour>({{Colour::kRed, "red"}, {Colour::kBlue, "blue"}});
  EXPECT_EQ(choice_list(one), "red");
  EXPECT_EQ(choice_list(two), "red or blue");
}

}  // namespace
}  // namespace uvhost::base
