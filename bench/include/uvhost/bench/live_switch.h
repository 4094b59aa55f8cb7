// live_switch.h - can two bench configurations be swapped while one backend runs?
//
// Why
// ---
// A/B runs that each start their own backend sit seconds apart; on a shared VM the
// machine's speed changes in steps over seconds (docs/BENCHMARKS.md, "Calibration"),
// and a step between A's run and B's run is an error no run count averages away
// cheaply. Most of the mechanisms uvhost compares are switchable at run time through the control socket (poll mode,
// busy_us, exit policy, memory guard, enqueue strategy), and the calibration's injected
// work lives in the frontend. When A and B differ only in those, one backend can run
// both sides in alternating slices of tens of milliseconds (frontend_driver.h,
// drive_frontend_interleaved), and a step in the machine's speed hits A and B alike.
//
// Contract
// --------
//  - live_switch(a, b, why): the control requests that turn a `uvhost serve` started
//    with `a` (uvhost_argv) into one running `b` (`to_b`) and back (`to_a`), and the
//    names of the keys that differ (`keys`, spin_ns included). nullopt with `why` when
//    the sides differ in anything that needs a restart: the backend kind, socket or
//    pid, a port key other than poll, busy_us, exit and memory (compared as written:
//    workers=device on one side and nothing on the other counts as a difference), or a
//    daemon flag other than enqueue. A key one side leaves out has serve's default
//    (parse_port_spec, DaemonOptions). Backend-side differences need backend=uvhost;
//    a frontend-only difference (spin_ns) works with any backend. Configs that differ
//    in nothing at all (an A/A comparison) are switchable with no requests.
//  - Requests only carry the fields that differ: {"cmd":"set","port":"bench",...} for
//    port keys and {"cmd":"set","enqueue":...} for the workers.
//  - Pure function; no I/O.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "uvhost/bench/workload.h"

namespace uvhost::bench {

struct LiveSwitch {
  std::vector<nlohmann::json> to_a;  // requests that make the backend run A's settings
  std::vector<nlohmann::json> to_b;  // ... B's
  std::vector<std::string> keys;     // what differs: "poll", "busy_us", "exit", "memory", "enqueue", "spin_ns"
};

std::optional<LiveSwitch> live_switch(const Config& a, const Config& b, std::string& why);

}  // namespace uvhost::bench
