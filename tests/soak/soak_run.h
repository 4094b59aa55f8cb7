// soak_run.h - the soak: many ports with traffic, connect/disconnect cycles on some of
// them, the daemon's /proc figures sampled between cycles.
//
// Contract
// --------
//  - Every port is a listening `uvhost serve` port with backend=loopback (one queue
//    pair); its socket path is `socket_pattern` with "{}" replaced by the port index.
//  - `churn_ports` ports, spread evenly over the index range, are churned; the others
//    are steady: connected once, they carry traffic for the whole run.
//  - After a warm-up, `cycles` churn cycles are spread evenly over `duration`. Cycle i
//    takes churned port i % churn_ports and ends its connection one of three ways, in
//    turn: every frame back then a graceful stop (GET_VRING_BASE), every frame back
//    then an abrupt close, an abrupt close with frames in flight. It then reconnects
//    the port at once; its next connection starts its own sequence. Traffic goes on on
//    every other port meanwhile (one thread drives them all).
//  - With `daemon_pid`: the baseline figures are read after the warm-up; after each
//    cycle the daemon's fds, threads and maps must come back to the baseline within
//    `settle` (else a finding); a sample is taken every `sample_interval` (between
//    cycles) and given to `on_sample` as it is taken; judge_flatness() (flatness.h)
//    rules on them at the end.
//  - At the end every port's frames are drained and checked: a steady port must have
//    had exactly one connection and received exactly what it sent, in order, with
//    every payload intact; a churned port's connections each check their own frames
//    (exact count except for the in-flight closes). Any error is a finding.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "flatness.h"
#include "soak_port.h"

namespace uvhost::soak {

struct SoakOptions {
  uint32_t ports = 64;
  std::string socket_pattern;
  uint32_t churn_ports = 16;
  uint64_t cycles = 1000;
  std::chrono::seconds duration{600};
  std::chrono::seconds warmup{3};
  std::chrono::seconds sample_interval{10};
  uint32_t pps = 500;     // per port
  uint32_t window = 32;   // frames unanswered per port
  std::optional<pid_t> daemon_pid;
  std::chrono::milliseconds settle{3000};
  std::chrono::milliseconds connect_timeout{10000};
  long rss_growth_kib = 4096;
};

struct PortResult {
  uint16_t index = 0;
  bool steady = false;
  PortTraffic traffic;
};

struct SoakReport {
  std::vector<Sample> samples;
  std::optional<ProcFigures> baseline;
  std::vector<PortResult> ports;
  uint64_t cycles_done = 0;
  double seconds = 0;                // from the baseline to the end of the last cycle or duration
  double max_settle_ms = 0;          // slowest return of the daemon's figures to the baseline
  std::vector<std::string> findings;  // empty: passed
};

SoakReport run_soak(const SoakOptions& options, const std::function<void(const Sample&)>& on_sample);

}  // namespace uvhost::soak
