// latency_histogram.h - a log-bucketed histogram of latencies in nanoseconds (HDR-like).
//
// Contract
// --------
//  - record(ns): O(1), no allocation. Buckets: every nanosecond below 128 ns is its own
//    bucket (exact); from 128 ns up, each power of two is split into 64 equal buckets,
//    so a bucket is at most 1/64 (1.6%) of its lower bound wide. Values at or above
//    kMaxTrackable (2^34 ns, about 17 s) land in the last bucket; min/max/sum stay exact.
//  - percentile(p), p in [0, 100]: the value at rank ceil(p/100 * count) (at least 1),
//    reported as the middle of that rank's bucket, clamped to the exact [min, max]
//    recorded. Error: at most half a bucket, i.e. under 0.8% above 128 ns, 0.5 ns below.
//    0 when empty.
//  - merge(other) adds another histogram's counts (same bucket layout by construction).
//  - reset() empties it (a measurement window's start).
//  - Plain data: one thread at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace uvhost::bench {

class LatencyHistogram {
 public:
  static constexpr unsigned kSubBits = 6;                         // 64 buckets per octave
  static constexpr uint64_t kLinearLimit = uint64_t{2} << kSubBits;  // 128: exact below
  static constexpr unsigned kMaxExponent = 34;                    // 2^34 ns ~ 17.2 s
  static constexpr uint64_t kMaxTrackable = uint64_t{1} << kMaxExponent;
  static constexpr size_t kBucketCount =
      kLinearLimit + (kMaxExponent - (kSubBits + 1)) * (size_t{1} << kSubBits);

  void record(uint64_t ns) noexcept;
  void merge(const LatencyHistogram& other) noexcept;
  void reset() noexcept;

  uint64_t count() const noexcept { return count_; }
  uint64_t min_ns() const noexcept { return count_ ? min_ : 0; }
  uint64_t max_ns() const noexcept { return max_; }
  double mean_ns() const noexcept { return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0; }
  // Nanoseconds; see the contract.
  double percentile(double p) const noexcept;

  // The bucket layout, public for tests: index of a value, and a bucket's [low, high).
  static size_t bucket_of(uint64_t ns) noexcept;
  static uint64_t bucket_low(size_t index) noexcept;
  static uint64_t bucket_high(size_t index) noexcept;

 private:
  std::array<uint64_t, kBucketCount> counts_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

}  // namespace uvhost::bench
