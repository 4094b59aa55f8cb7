// stats_json.h - private to serve/src: tolerant reads of the control replies' fields
// for stats_format.cpp and stats_prometheus.cpp. Each returns nothing (nullopt, or an
// empty array) for a missing field or one of the wrong type; none throws.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace uvhost::serve::detail {

using nlohmann::json;

// `value[key]` when value is an object that has it, else nullptr.
inline const json* member(const json& value, std::string_view key) {
  if (!value.is_object()) return nullptr;
  const auto it = value.find(key);
  return it == value.end() ? nullptr : &*it;
}

// `value[key]` when it is an array, else an empty one (loops over it do nothing).
inline const json& array_member(const json& value, std::string_view key) {
  static const json empty = json::array();
  const json* found = member(value, key);
  return found != nullptr && found->is_array() ? *found : empty;
}

// A non-negative integer counter (a float is accepted when whole and in range).
inline std::optional<uint64_t> counter(const json& value, std::string_view key) {
  const json* found = member(value, key);
  if (found == nullptr) return std::nullopt;
  if (found->is_number_unsigned()) return found->get<uint64_t>();
  if (found->is_number_integer()) {
    const auto number = found->get<int64_t>();
    if (number >= 0) return static_cast<uint64_t>(number);
  } else if (found->is_number_float()) {
    const double number = found->get<double>();
    if (number >= 0 && number < 1.8e19 && std::floor(number) == number) return static_cast<uint64_t>(number);
  }
  return std::nullopt;
}

inline std::optional<double> number(const json& value, std::string_view key) {
  const json* found = member(value, key);
  if (found == nullptr || !found->is_number()) return std::nullopt;
  return found->get<double>();
}

inline std::optional<std::string> text(const json& value, std::string_view key) {
  const json* found = member(value, key);
  if (found == nullptr || !found->is_string()) return std::nullopt;
  return found->get<std::string>();
}

inline std::optional<bool> flag(const json& value, std::string_view key) {
  const json* found = member(value, key);
  if (found == nullptr || !found->is_boolean()) return std::nullopt;
  return found->get<bool>();
}

}  // namespace uvhost::serve::detail
