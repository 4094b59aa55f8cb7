// config_value.h - how a value of the JSON config file becomes the text the command
// line would have given for the same key, so that the file and the flags share one
// parser per key (and one set of error messages).
//
// Types are strict: each key has one JSON type (a port's queue count is a number, its
// backend a string, client a boolean), and a value of another type is refused naming
// both, as `"queues": "2"` is. Booleans become "1"/"0", numbers their shortest decimal
// form (a negative or fractional one is then refused by the key's own range check,
// which names it).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "uvhost/base/name_table.h"

namespace uvhost::serve {

using base::to_string;

enum class ConfigType { kString, kNumber, kBoolean };

// How an error message names each type ("'queues' must be a number, ...").
inline constexpr auto kConfigTypeNames =
    base::name_table<ConfigType>({{ConfigType::kString, "a string"},
                                  {ConfigType::kNumber, "a number"},
                                  {ConfigType::kBoolean, "true or false"}});

constexpr const auto& enum_names(ConfigType) noexcept { return kConfigTypeNames; }

inline std::optional<std::string> config_value_text(std::string_view key, const nlohmann::json& value,
                                                    ConfigType expected, std::string& error) {
  const bool right_type = (expected == ConfigType::kString && value.is_string()) ||
                          (expected == ConfigType::kNumber && value.is_number()) ||
                          (expected == ConfigType::kBoolean && value.is_boolean());
  if (!right_type) {
    error = fmt::format("'{}' must be {}, not {} ({})", key, to_string(expected), value.type_name(),
                        value.dump().substr(0, 40));
    return std::nullopt;
  }
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return std::string(value.get<bool>() ? "1" : "0");
  if (value.is_number_unsigned()) return std::to_string(value.get<uint64_t>());
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  return fmt::format("{}", value.get<double>());
}

}  // namespace uvhost::serve
