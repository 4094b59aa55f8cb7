// lab_choices.h - what the iommu-lock and delegation labs accept on the command line:
//  - add_choice_list(): a list option of enum values named by a base/name_table.h table
//    (`--policies mutex,rcu`): CLI11 checks each name against the table (a usage error,
//    exit 2, listing the choices) and the help shows the choices and the default;
//  - add_bounded(): a number in [low, high], its default shown.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "uvhost/base/name_table.h"

namespace uvhost::cli {

// Binds `flag` (comma-separated names) to `values`; the default is what `values` holds.
template <class E, std::size_t N>
CLI::Option* add_choice_list(CLI::App& cmd, const std::string& flag, std::vector<E>& values,
                             const base::NameTable<E, N>& table, const std::string& description) {
  std::vector<std::string> defaults;
  for (E value : values) defaults.emplace_back(base::name_of(table, value));
  return cmd
      .add_option_function<std::vector<std::string>>(
          flag,
          [&values, table](const std::vector<std::string>& chosen) {
            values.clear();
            for (const auto& name : chosen) values.push_back(*base::parse(table, name));
          },
          description)
      ->delimiter(',')
      ->check(CLI::IsMember(base::names(table)))
      ->default_str(fmt::format("[{}]", fmt::join(defaults, ",")));
}

template <class T>
CLI::Option* add_bounded(CLI::App& cmd, const std::string& flag, T& value, const std::string& description, int low,
                         int high) {
  return cmd.add_option(flag, value, description)->capture_default_str()->check(CLI::Range(low, high));
}

}  // namespace uvhost::cli
