// temp_dir.h - a temporary directory for a test's files, removed with what the test
// wrote into it through write().
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

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
    for (const std::string& file : files_) (void)::unlink(file.c_str());
    if (!path_.empty()) (void)::rmdir(path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes (or replaces) `name` in the directory; returns its path.
  std::string write(const std::string& name, const std::string& contents) {
    const std::string file = path_ + "/" + name;
    std::ofstream out(file, std::ios::trunc);
    out << contents;
    files_.push_back(file);
    return file;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

}  // namespace uvhost::testing
