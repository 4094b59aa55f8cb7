// config_value.h - how a value of the JSON config file becomes the text the command
// line would have given for the same key, so that the file and the flags share one
// parser per key (and one set of error messages).
//
// Strings are taken as they are, booleans as "1"/"0", numbers in their shortest
// decimal form (a negative or fractional one is then refused by the key's own range
// check, which names it). null, arrays and objects have no text: nullopt.
#pragma once

#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace uvhost::serve {

inline std::optional<std::string> config_value_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return std::string(value.get<bool>() ? "1" : "0");
  if (value.is_number_unsigned()) return std::to_string(value.get<uint64_t>());
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  if (value.is_number_float()) return fmt::format("{}", value.get<double>());
  return std::nullopt;
}

}  // namespace uvhost::serve
