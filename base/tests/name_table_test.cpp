#include "uvhost/base/name_table.h"

#include <gtest/gtest.h>

// An enum of another namespace, named by the enum_names hook (as every layer's are).
namespace uvhost::name_table_test_layer {

enum class Shape { kCircle, kSquare, kUnlisted };
inline constexpr auto kShapeNames =
    base::name_table<Shape>({{Shape::kCircle, "circle"}, {Shape::kSquare, "square"}});
constexpr const auto& enum_names(Shape) noexcept { return kShapeNames; }
using base::to_string;

}  // namespace uvhost::name_table_test_layer

namespace uvhost::base {
namespace {

using name_table_test_layer::Shape;

static_assert(NamedEnum<Shape>);
static_assert(!NamedEnum<int>);
static_assert(to_string(Shape::kSquare) == "square");
static_assert(parse_enum<Shape>("circle") == Shape::kCircle);

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

TEST(NameTableTest, NamedEnumPrintsAndParsesFromItsTable) {
  for (Shape shape : values_of(name_table_test_layer::kShapeNames)) {
    EXPECT_EQ(parse_enum<Shape>(to_string(shape)), shape);
  }
  EXPECT_EQ(to_string(Shape::kUnlisted), kUnknownEnumName);
  EXPECT_FALSE(parse_enum<Shape>("Circle").has_value());
  EXPECT_FALSE(parse_enum<Shape>("").has_value());
}

}  // namespace
}  // namespace uvhost::base

// Unqualified to_string() from an unrelated namespace finds the generic one by ADL.
namespace uvhost::name_table_test_caller {
namespace {

TEST(NameTableTest, NamedEnumToStringFoundByArgumentDependentLookup) {
  EXPECT_EQ(to_string(name_table_test_layer::Shape::kCircle), "circle");
  EXPECT_EQ(name_table_test_layer::to_string(name_table_test_layer::Shape::kSquare), "square");
}

}  // namespace
}  // namespace uvhost::name_table_test_caller
