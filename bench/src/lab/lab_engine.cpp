// lab_engine.cpp - see lab_engine.h.
#include "uvhost/bench/lab/lab_engine.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>

#include <fmt/format.h>

#include "uvhost/bench/cpu_time.h"

namespace uvhost::bench::lab {

std::string ci_text(const Summary& s) { return with_ci(s.mean, s.ci95_half); }

std::string ci_with_ratio_text(const Summary& value, const Summary* base) {
  std::string text = ci_text(value);
  if (base == nullptr) return text;
  const Ratio r = ratio_of_means(value, *base);
  return text + fmt::format(" (×{} ±{})", significant(r.value, 3), significant(r.ci95_half, 2));
}

std::vector<std::string> baseline_cells(const BaselineRatio& r, bool is_baseline) {
  if (is_baseline) return {"baseline", "-"};
  return {ratio_text(r), std::string(to_string(r.verdict))};
}

void require_counts(const std::vector<int>& counts, int low, int high, const char* noun) {
  require(!counts.empty(), fmt::format("no {} counts", noun));
  for (int n : counts)
    require(n >= low && n <= high, fmt::format("{} count {} not in [{}, {}]", noun, n, low, high));
}

std::string count_label(int count, const char* noun) {
  return fmt::format("{} {}{}", count, noun, count == 1 ? "" : "s");
}

uint64_t burn(uint64_t iterations) noexcept {
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (uint64_t i = 0; i < iterations; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    asm volatile("" : "+r"(x));  // keep the loop: the result is "used"
  }
  return x;
}

double burn_iterations_per_ns() {
  static const double rate = [] {
    constexpr uint64_t kIterations = 2'000'000;
    double best = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {  // best of 3: least disturbed
      const int64_t start = thread_cpu_ns();
      burn(kIterations);
      const int64_t elapsed = std::max<int64_t>(thread_cpu_ns() - start, 1);
      best = std::max(best, static_cast<double>(kIterations) / static_cast<double>(elapsed));
    }
    return best;
  }();
  return rate;
}

uint64_t burn_iterations_for(int ns) {
  return static_cast<uint64_t>(static_cast<double>(ns) * burn_iterations_per_ns());
}

void sleep_until_ns(int64_t deadline_ns) noexcept {
  timespec ts{deadline_ns / 1'000'000'000, deadline_ns % 1'000'000'000};
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
}

void fine_timer_slack() noexcept { prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL); }

}  // namespace uvhost::bench::lab
