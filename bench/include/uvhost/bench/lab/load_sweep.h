// load_sweep.h - `uvhost lab load-sweep`: request/response latency and CPU across an
// offered load, poll mode against poll mode and against DPDK's vhost PMD - the question
// of adaptive polling: a polling backend's latency at an idle backend's cost.
//
// Contract
// --------
//  - run_load_sweep(): rr of `size` bytes, open loop at every offered rate of
//    spec.rates (workload.h: Poisson or fixed arrivals, `sessions` requests at most in
//    flight), plus closed loop with `sessions` outstanding (rate 0: the saturation
//    point), every configuration at every point, `rounds` rounds interleaved as
//    run_config_matrix() interleaves them (config_matrix.h); then, with spec.idle, one
//    idle run per configuration and round (RunOptions::idle_window: warm up with rr,
//    then the guest is silent). The runners are run_point() in the lab (anything with
//    its signature in tests); the idle runner gets the idle window set by the caller.
//  - Per run: transactions/s, p50 and p99 (us, from the scheduled arrival), and the
//    backend's CPU per transaction (us; every thread of the backend process: uvhost's
//    workers and control thread, testpmd's lcores) - what the adaptive question is
//    about; the frontend spins in every configuration and is left out.
//  - load_sweep_tables(): (1) per offered rate and configuration: achieved trans/s,
//    p50, p99, backend CPU us per transaction and backend cores, mean ±95% CI;
//    (2) for spec.subject (a configuration's label, e.g. "adaptive"): at every rate its
//    p50, p99 and CPU per transaction against each other configuration, as ratios with
//    paired-t 95% CIs (ab_stats.h, rounds paired), and its saturation throughput; (3)
//    the idle backend's cores per configuration.
//  - load_sweep_charts(): CPU per transaction, p50 and p99 against offered load, one
//    line per configuration (log axes), the closed-loop point left out.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/bench/gnuplot.h"
#include "uvhost/bench/lab/config_matrix.h"
#include "uvhost/bench/workload.h"

namespace uvhost::bench::lab {

struct LoadSweepSpec {
  std::vector<Config> configs;  // each with its label
  std::string subject;          // the label whose ratios table (2) shows; empty: none
  uint32_t size = 64;
  uint32_t sessions = 16;
  std::vector<uint64_t> rates;  // offered transactions/s; 0 adds the closed-loop point
  Arrivals arrivals = Arrivals::kPoisson;
  int rounds = 3;
  bool idle = true;
};

struct LoadSweep {
  LoadSweepSpec spec;
  ConfigMatrix load;  // points: one rr point per rate, in spec.rates order
  ConfigMatrix idle;  // one point; empty without spec.idle
};

LoadSweep run_load_sweep(const LoadSweepSpec& spec, const PointRunner& load_runner, const PointRunner& idle_runner,
                         const MatrixObserver& observer = {});

// The backend's CPU per transaction of one run, in microseconds (0 without transactions).
double backend_us_per_transaction(const RunResult& run);

std::vector<TitledTable> load_sweep_tables(const LoadSweep& sweep);
std::vector<LineChart> load_sweep_charts(const LoadSweep& sweep);
nlohmann::json load_sweep_json(const LoadSweep& sweep, const RunOptions& options);

}  // namespace uvhost::bench::lab
