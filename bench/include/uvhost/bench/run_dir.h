// run_dir.h - the folder a measured run keeps its files in (sockets, logs).
//
// Contract
// --------
//  - RunDir(given, temp_prefix): a non-empty `given` is used as is (created if
//    missing) and kept afterwards; an empty one means a fresh folder
//    /tmp/<temp_prefix>.XXXXXX (mkdtemp) that the destructor removes with everything
//    in it. Throws std::system_error (mkdtemp) or std::filesystem::filesystem_error
//    when the folder cannot be made.
//  - file(name): the path of `name` inside the folder.
#pragma once

#include <string>
#include <string_view>

namespace uvhost::bench {

class RunDir {
 public:
  RunDir(const std::string& given, std::string_view temp_prefix);
  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;

  std::string file(const char* name) const;

 private:
  std::string path_;
  bool owned_ = false;
};

}  // namespace uvhost::bench
