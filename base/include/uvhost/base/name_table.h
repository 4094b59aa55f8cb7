// name_table.h - one table of {value, name} per enum, from which printing, parsing and
// the lists of choices (error messages, usage text, CLI11's IsMember) are all derived,
// so that each value is spelled once.
//
// Contract:
//  - A table is a constexpr std::array<NameEntry<E>, N>; make one with
//    name_table<E>({{E::kA, "a"}, ...}). Its order is the order choices are listed in.
//  - name_of(table, value) gives the value's name, or `unknown` for a value not in it.
//  - parse(table, text) gives the value named exactly `text` (case-sensitive), or
//    nullopt.
//  - names(table) gives the names as strings (what CLI::IsMember takes);
//    join_names(table, ", ") joins them; choice_list(table) reads "a, b or c".
//  - unknown_name(what, text, table) is the error for a name not in the table:
//    "WHAT 'TEXT' unknown (a, b, c)".
//  - Everything but names/join_names/choice_list is constexpr and noexcept.
//
// An enum's own table: E names its table once, next to it and in E's namespace, with
//     constexpr const auto& enum_names(E) noexcept { return kENames; }
// Found by argument-dependent lookup (the customization-point style of std::ranges and
// abseil's AbslStringify), that hook makes E a NamedEnum, and then
//  - to_string(value) is name_of(enum_names(value), value, kUnknownEnumName);
//  - parse_enum<E>(text) is parse(enum_names(E{}), text).
// A namespace holding NamedEnums says `using base::to_string;` so that unqualified
// to_string(value) finds it by the same lookup, from any namespace.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace uvhost::base {

template <typename E>
struct NameEntry {
  E value;
  std::string_view name;
};

template <typename E, std::size_t N>
using NameTable = std::array<NameEntry<E>, N>;

// Builds a table with its size deduced: name_table<E>({{E::kA, "a"}, {E::kB, "b"}}).
template <typename E, std::size_t N>
constexpr NameTable<E, N> name_table(const NameEntry<E> (&entries)[N]) noexcept {
  NameTable<E, N> table{};
  for (std::size_t i = 0; i < N; ++i) table[i] = entries[i];
  return table;
}

template <typename E, std::size_t N>
constexpr std::string_view name_of(const NameTable<E, N>& table, E value,
                                   std::string_view unknown = "unknown") noexcept {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return unknown;
}

template <typename E, std::size_t N>
constexpr std::optional<E> parse(const NameTable<E, N>& table, std::string_view text) noexcept {
  for (const auto& entry : table) {
    if (entry.name == text) return entry.value;
  }
  return std::nullopt;
}

// The values in table order (for "every policy" loops).
template <typename E, std::size_t N>
constexpr std::array<E, N> values_of(const NameTable<E, N>& table) noexcept {
  std::array<E, N> values{};
  for (std::size_t i = 0; i < N; ++i) values[i] = table[i].value;
  return values;
}

template <typename E, std::size_t N>
std::vector<std::string> names(const NameTable<E, N>& table) {
  std::vector<std::string> result;
  result.reserve(N);
  for (const auto& entry : table) result.emplace_back(entry.name);
  return result;
}

// "a, b, c" with separator ", ", "a|b|c" with "|".
template <typename E, std::size_t N>
std::string join_names(const NameTable<E, N>& table, std::string_view separator) {
  std::string result;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) result += separator;
    result += table[i].name;
  }
  return result;
}

// "a, b or c" (for error messages that list the accepted names).
template <typename E, std::size_t N>
std::string choice_list(const NameTable<E, N>& table) {
  std::string result;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) result += i + 1 == N ? " or " : ", ";
    result += table[i].name;
  }
  return result;
}

// "WHAT 'TEXT' unknown (a, b, c)": the error for a name parse() did not find.
template <typename E, std::size_t N>
std::string unknown_name(std::string_view what, std::string_view text, const NameTable<E, N>& table) {
  std::string result(what);
  result += " '";
  result += text;
  result += "' unknown (";
  result += join_names(table, ", ");
  result += ')';
  return result;
}

// What to_string() prints for a value missing from its enum's table.
inline constexpr std::string_view kUnknownEnumName = "unknown";

template <typename E>
concept NamedEnum = std::is_enum_v<E> && requires(E value) {
  name_of(enum_names(value), value);  // the hook gives a table of E
};

template <NamedEnum E>
constexpr std::string_view to_string(E value) noexcept {
  return name_of(enum_names(value), value, kUnknownEnumName);
}

// nullopt for a name not in E's table.
template <NamedEnum E>
constexpr std::optional<E> parse_enum(std::string_view text) noexcept {
  return parse(enum_names(E{}), text);
}

}  // namespace uvhost::base
