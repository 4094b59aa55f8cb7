// cpu_relax.h - the spin-loop hint.
//
// Contract: cpu_relax() tells the CPU that the caller is spinning (x86 PAUSE,
// aarch64 YIELD). No memory ordering; callers re-load what they wait on.
#pragma once

namespace uvhost::sync {
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}
}  // namespace uvhost::sync
