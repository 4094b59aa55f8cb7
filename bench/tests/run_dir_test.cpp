// run_dir_test.cpp - RunDir: a given folder is made and kept, a temporary one is
// made under /tmp with the prefix and removed with its files.
#include "uvhost/bench/run_dir.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace uvhost::bench {
namespace {

namespace fs = std::filesystem;

TEST(RunDirTest, AGivenFolderIsMadeAndKept) {
  const fs::path given = fs::path(::testing::TempDir()) / "uvhost-run-dir-given" / "nested";
  fs::remove_all(given.parent_path());
  {
    RunDir dir(given.string(), "unused-prefix");
    EXPECT_EQ(fs::path(dir.file("a.log")), given / "a.log");
    std::ofstream(dir.file("a.log")) << "kept";
  }
  EXPECT_TRUE(fs::exists(given / "a.log"));
  fs::remove_all(given.parent_path());
}

TEST(RunDirTest, ATemporaryFolderIsRemovedWithItsFiles) {
  fs::path made;
  {
    RunDir dir("", "uvhost-run-dir-test");
    made = fs::path(dir.file("a.log")).parent_path();
    EXPECT_EQ(made.parent_path(), fs::path("/tmp"));
    EXPECT_EQ(made.filename().string().rfind("uvhost-run-dir-test.", 0), 0u) << made;
    EXPECT_TRUE(fs::is_directory(made));
    std::ofstream(dir.file("a.log")) << "removed";
  }
  EXPECT_FALSE(fs::exists(made));
}

}  // namespace
}  // namespace uvhost::bench
