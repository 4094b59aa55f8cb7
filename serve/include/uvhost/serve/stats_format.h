// stats_format.h - the control socket's "list" and "stats" replies (schema in
// control_server.h) for people (fixed-width text tables) and for Prometheus (text
// exposition format 0.0.4).
//
// Contract
// --------
//  - Pure functions of the JSON they are given; they never throw on an odd reply: a
//    field that is missing or of the wrong type prints "-" in a table and is left out
//    of the Prometheus output (a missing counter is not a zero).
//  - Tables are for people (columns sized to their widest cell, numbers right-aligned);
//    nothing should parse them. Scripts use the JSON reply or the Prometheus text.
//  - format_stats_delta_table(): rates over `seconds` between two stats replies, queues
//    matched by (port name, queue index), workers by name. A rate prints "-" when the
//    counter is missing from either reply, went backwards (a new daemon), or seconds
//    is not positive.
//  - format_prometheus(): every metric family once, with # HELP and # TYPE, its samples
//    together; names and units by Prometheus' conventions (base units: seconds, bytes;
//    counters end in _total; no family mixes units); label values escaped (\\, \",
//    \n). Queue samples are labelled port, pair (queue pair), queue (vring index) and
//    direction (rx: from the guest, tx: to the guest, as DPDK and OVS say: direction.h);
//    worker samples worker; backend values stat (their path in backend_stats). The
//    reply's "process" object gives the process_* families of the client libraries.
//    The families are listed in docs/metrics.md.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace uvhost::serve {

// The "list" reply: one row per port (the guest's MTU in column "mtu", "-" if it set none),
// then a "negotiated by PORT: NAMES" line for each port whose frontend negotiated
// features.
std::string format_ports_table(const nlohmann::json& list);

// The "stats" reply: a port table, a queue table (one row per queue) and a worker table.
std::string format_stats_table(const nlohmann::json& stats);

// Rates between two "stats" replies taken `seconds` apart (for `uvhost ctl stats --watch`).
std::string format_stats_delta_table(const nlohmann::json& previous, const nlohmann::json& current, double seconds);

std::string format_prometheus(const nlohmann::json& stats);

}  // namespace uvhost::serve
