// run_dir.cpp - see run_dir.h.
#include "uvhost/bench/run_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace uvhost::bench {

RunDir::RunDir(const std::string& given, std::string_view temp_prefix) {
  if (!given.empty()) {
    std::filesystem::create_directories(given);
    path_ = given;
    return;
  }
  std::string pattern = fmt::format("/tmp/{}.XXXXXX", temp_prefix);
  if (::mkdtemp(pattern.data()) == nullptr) throw std::system_error(errno, std::generic_category(), "mkdtemp");
  path_ = pattern;
  owned_ = true;
}

RunDir::~RunDir() {
  if (!owned_) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string RunDir::file(const char* name) const { return (std::filesystem::path(path_) / name).string(); }

}  // namespace uvhost::bench
