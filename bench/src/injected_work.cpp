// injected_work.cpp - see injected_work.h.
#include "uvhost/bench/injected_work.h"

#include <algorithm>
#include <cmath>

#include "uvhost/bench/cpu_time.h"

namespace uvhost::bench {

namespace {

// A fence that lets no later instruction start before every earlier one is done
// (x86: lfence). Without it an out-of-order core runs the multiply chain in the shadow
// of the cache misses just before it (an rr answer's ring reads), and tens of ns of
// injected work would cost nothing: the slowdown calibrate asks for would not happen.
inline void serialize_execution() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("lfence" ::: "memory");
#elif defined(__aarch64__)
  asm volatile("dsb sy\n\tisb" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}

}  // namespace

void run_injected_iterations(uint64_t iterations) noexcept {
  serialize_execution();
  uint64_t x = iterations | 1;
  for (uint64_t i = 0; i < iterations; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;  // one LCG step: depends on the last
    // The empty asm takes x as input and output: the compiler must assume it changed,
    // so it can neither fold the loop nor compute it in closed form.
    asm volatile("" : "+r"(x));
  }
  serialize_execution();  // and nothing after it overlaps the chain's tail
}

namespace {

double measure_iterations_per_ns() noexcept {
  constexpr uint64_t kBatch = 1u << 18;  // ~0.3 ms at ~1 iteration/ns
  constexpr int kBatches = 15;
  run_injected_iterations(kBatch);  // warm the core up (frequency, caches)
  int64_t fastest_ns = INT64_MAX;
  for (int i = 0; i < kBatches; ++i) {
    const int64_t start = monotonic_ns();
    run_injected_iterations(kBatch);
    fastest_ns = std::min(fastest_ns, monotonic_ns() - start);
  }
  return static_cast<double>(kBatch) / static_cast<double>(std::max<int64_t>(fastest_ns, 1));
}

}  // namespace

double injected_iterations_per_ns() noexcept {
  static const double per_ns = measure_iterations_per_ns();  // C++ static init is thread-safe
  return per_ns;
}

void do_injected_work_ns(uint64_t ns) noexcept {
  if (ns == 0) return;
  run_injected_iterations(
      static_cast<uint64_t>(std::llround(static_cast<double>(ns) * injected_iterations_per_ns())));
}

}  // namespace uvhost::bench
