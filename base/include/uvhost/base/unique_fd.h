// unique_fd.h - sole ownership of one file descriptor.
//
// Contract
// --------
//  - A UniqueFd closes its descriptor exactly once: in the destructor, on reset(), or
//    on move-assignment over it. release() gives ownership back to the caller.
//  - -1 means "no descriptor"; a default-constructed UniqueFd holds none.
//  - Every fd that arrives over a vhost-user socket, and every fd a layer opens for
//    itself, is wrapped in one of these at once, so an early return cannot leak it.
#pragma once

#include <unistd.h>

#include <utility>

namespace uvhost::base {

class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { reset(); }

  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  // Gives up ownership without closing.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }

  // Closes the current descriptor (if any) and takes `fd`. close() errors are ignored:
  // on Linux the descriptor is gone either way, and retrying could close a reused one.
  void reset(int fd = -1) noexcept {
    const int old = std::exchange(fd_, fd);
    if (old >= 0) (void)::close(old);
  }

 private:
  int fd_ = -1;
};

}  // namespace uvhost::base
