// futex.h - the two futex operations every parking primitive in uvhost uses.
//
// Contract:
//  - futex_wait(word, expected) sleeps only while *word == expected (checked by
//    the kernel atomically with going to sleep), so a wake that happens between
//    the caller's last load and the call is never lost. It may return spuriously:
//    callers always re-check their condition in a loop.
//  - futex_wake(word, n) wakes up to n sleepers on `word`.
//  - Both act on a std::atomic<uint32_t>; the futex syscall is a full barrier on
//    x86 but callers must not rely on that: they order their own stores with
//    seq_cst or release/acquire as each primitive documents.
// Private futexes (FUTEX_PRIVATE_FLAG): the words are never shared across processes.
#pragma once

#include <atomic>
#include <cstdint>

namespace uvhost::sync {

// Sleeps while word == expected. Returns on wake, signal, or spuriously.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) noexcept;
// Same, with a relative timeout in nanoseconds; returns false on timeout.
bool futex_wait_for(std::atomic<uint32_t>& word, uint32_t expected, int64_t timeout_ns) noexcept;
// Wakes at most `count` threads sleeping on word.
void futex_wake(std::atomic<uint32_t>& word, int count) noexcept;
inline void futex_wake_one(std::atomic<uint32_t>& word) noexcept { futex_wake(word, 1); }
void futex_wake_all(std::atomic<uint32_t>& word) noexcept;

}  // namespace uvhost::sync
