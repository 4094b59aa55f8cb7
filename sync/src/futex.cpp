// futex.cpp - thin wrappers over the futex(2) system call.
#include "uvhost/sync/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

namespace uvhost::sync {
namespace {
// std::atomic<uint32_t> is layout-compatible with uint32_t on Linux targets we build
// for (lock-free, no padding); the kernel reads the word directly.
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
static_assert(std::atomic<uint32_t>::is_always_lock_free);

long futex_call(std::atomic<uint32_t>& word, int op, uint32_t val, const timespec* timeout) noexcept {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op | FUTEX_PRIVATE_FLAG, val, timeout,
                 nullptr, 0);
}
}  // namespace

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) noexcept {
  (void)futex_call(word, FUTEX_WAIT, expected, nullptr);
}

bool futex_wait_for(std::atomic<uint32_t>& word, uint32_t expected, int64_t timeout_ns) noexcept {
  if (timeout_ns <= 0) return false;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000);
  long rc = futex_call(word, FUTEX_WAIT, expected, &ts);
  return !(rc == -1 && errno == ETIMEDOUT);
}

void futex_wake(std::atomic<uint32_t>& word, int count) noexcept {
  (void)futex_call(word, FUTEX_WAKE, static_cast<uint32_t>(count), nullptr);
}

void futex_wake_all(std::atomic<uint32_t>& word) noexcept {
  (void)futex_call(word, FUTEX_WAKE, static_cast<uint32_t>(INT_MAX), nullptr);
}

}  // namespace uvhost::sync
