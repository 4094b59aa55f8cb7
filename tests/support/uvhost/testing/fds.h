// fds.h - the fd-leak check shared by the layers' tests. Test-only.
#pragma once

#include <dirent.h>

namespace uvhost::testing {

// Open descriptors of this process (the directory stream's own fd not counted).
inline int count_open_fds() {
  int count = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count - 1;
}

}  // namespace uvhost::testing
