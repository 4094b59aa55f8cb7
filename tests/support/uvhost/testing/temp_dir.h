// temp_dir.h - a temporary directory for a test's files, removed with everything in it
// (what the test wrote through write(), and what a process it ran made there).
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace uvhost::testing {

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/uvhost-test-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    EXPECT_NE(made, nullptr);
    if (made != nullptr) path_ = made;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes (or replaces) `name` in the directory; returns its path.
  std::string write(const std::string& name, const std::string& contents) {
    const std::string file = path_ + "/" + name;
    std::ofstream out(file, std::ios::trunc);
    out << contents;
    return file;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace uvhost::testing
