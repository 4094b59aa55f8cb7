// ab_test_model.h - a seeded random model of a machine running one benchmark point,
// for the A/B tests' bookkeeping and the calibration's statistics.
//
// A transaction (rr) or packet costs base_ns plus the frontend's spin (twice for rr:
// one for the request sent, one for the response received); each run's throughput
// carries log-normal noise of `noise` (relative sd), its CPU use likewise. Nothing is
// canned: every figure is drawn from the model, so the statistics see a real
// random process with a known truth.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

#include "uvhost/bench/workload.h"

namespace uvhost::bench {

class ModelMachine {
 public:
  explicit ModelMachine(uint64_t seed, double noise = 0.01, double base_ns = 10'000)
      : rng_(seed), noise_(noise), base_ns_(base_ns) {}

  RunResult run(const Config& config, const Point& point) {
    std::normal_distribution<double> n(0, noise_);
    const double spins = point.workload == Workload::kRr ? 2 : 1;
    const double cost_ns = base_ns_ + spins * static_cast<double>(config.frontend_spin_ns);
    const double rate = 1e9 / cost_ns * std::exp(n(rng_));
    RunResult r;
    r.seconds = 1.0;
    r.packets = static_cast<uint64_t>(std::llround(rate));
    r.bytes = r.packets * point.size;
    if (point.workload == Workload::kRr) {
      r.transactions = r.packets;
      r.p50_us = cost_ns / 1e3 * std::exp(n(rng_));
      r.p99_us = 1.5 * r.p50_us;
      r.p999_us = 2 * r.p50_us;
    }
    r.cpu_seconds = 1.2 * std::exp(n(rng_));
    r.threads.push_back({"frontend", "frontend", 1.0});
    r.threads.push_back({"w0", "backend", r.cpu_seconds - 1.0});
    return r;
  }

 private:
  std::mt19937_64 rng_;
  double noise_;
  double base_ns_;
};

}  // namespace uvhost::bench
