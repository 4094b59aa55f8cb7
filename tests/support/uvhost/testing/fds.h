// fds.h - the fd-leak check shared by the layers' tests. Test-only.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>

namespace uvhost::testing {

// This process's open descriptors and what each one is (readlink of /proc/self/fd/N:
// a path, "socket:[inode]", "anon_inode:[eventfd]", ...), the directory stream's own
// fd not included. A leak check compares two of these, so a failure names the fd.
inline std::map<int, std::string> open_fds() {
  std::map<int, std::string> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  const int own = ::dirfd(dir);
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd == own) continue;
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    char target[256];
    const ssize_t length = ::readlink(link.c_str(), target, sizeof target - 1);
    fds[fd] = length > 0 ? std::string(target, static_cast<size_t>(length)) : std::string("?");
  }
  ::closedir(dir);
  return fds;
}

// Open descriptors of this process (the directory stream's own fd not counted).
inline int count_open_fds() { return static_cast<int>(open_fds().size()); }

// "3 -> socket:[123]\n4 -> anon_inode:[eventfd]\n..." for a failure message.
inline std::string describe_fds(const std::map<int, std::string>& fds) {
  std::string out;
  for (const auto& [fd, target] : fds) out += std::to_string(fd) + " -> " + target + "\n";
  return out;
}

}  // namespace uvhost::testing
