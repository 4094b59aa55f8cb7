// latency_histogram.cpp - see latency_histogram.h.
#include "uvhost/bench/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace uvhost::bench {

size_t LatencyHistogram::bucket_of(uint64_t ns) noexcept {
  if (ns < kLinearLimit) return static_cast<size_t>(ns);
  if (ns >= kMaxTrackable) return kBucketCount - 1;
  // exponent >= kSubBits + 1; the kSubBits bits below the leading one pick the sub-bucket.
  const unsigned exponent = static_cast<unsigned>(std::bit_width(ns)) - 1;
  const uint64_t sub = (ns >> (exponent - kSubBits)) & ((uint64_t{1} << kSubBits) - 1);
  return static_cast<size_t>(kLinearLimit + (exponent - (kSubBits + 1)) * (uint64_t{1} << kSubBits) + sub);
}

uint64_t LatencyHistogram::bucket_low(size_t index) noexcept {
  if (index < kLinearLimit) return index;
  const size_t rel = index - kLinearLimit;
  const unsigned exponent = static_cast<unsigned>(rel >> kSubBits) + kSubBits + 1;
  const uint64_t sub = rel & ((size_t{1} << kSubBits) - 1);
  return (uint64_t{1} << exponent) + (sub << (exponent - kSubBits));
}

uint64_t LatencyHistogram::bucket_high(size_t index) noexcept {
  if (index + 1 >= kBucketCount) return kMaxTrackable;
  return bucket_low(index + 1);
}

void LatencyHistogram::record(uint64_t ns) noexcept {
  ++counts_[bucket_of(ns)];
  ++count_;
  sum_ += ns;
  min_ = std::min(min_, ns);
  max_ = std::max(max_, ns);
}

void LatencyHistogram::merge(const LatencyHistogram& other) noexcept {
  for (size_t i = 0; i < kBucketCount; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

void LatencyHistogram::reset() noexcept { *this = LatencyHistogram{}; }

double LatencyHistogram::percentile(double p) const noexcept {
  if (count_ == 0) return 0;
  p = std::clamp(p, 0.0, 100.0);
  // p / 100 * count carries rounding error (99.9 has no exact double): a relative
  // 1e-12 off keeps 99.9% of 1000 at rank 999 instead of 1000.
  const double exact_rank = p / 100.0 * static_cast<double>(count_);
  const auto rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(exact_rank - exact_rank * 1e-12)));
  uint64_t seen = 0;
  for (size_t i = 0; i < kBucketCount; ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      // The linear buckets hold one value each: that value, exactly.
      const double middle = i < kLinearLimit ? static_cast<double>(i)
                                             : (static_cast<double>(bucket_low(i)) + static_cast<double>(bucket_high(i))) / 2;
      return std::clamp(middle, static_cast<double>(min_), static_cast<double>(max_));
    }
  }
  return static_cast<double>(max_);
}

}  // namespace uvhost::bench
