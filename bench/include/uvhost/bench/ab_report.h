// ab_report.h - how a CompareResult is shown: tables for people, JSON and CSV for tools.
//
//  - print_compare_report(): a header (A's and B's configs as describe() writes them,
//    how A and B were interleaved (interleave_line), the method and its assumption),
//    then one table per
//    workload in the shape of the vhost_net busy-polling threads' netperf tables
//    (size/session/+thu%/+normalize%):
//      size | sessions | A thu | B thu | +thu% [95% CI] | verdict | +normalize% [95% CI]
//      | verdict | CPU A/B (cores) [| p99 A/B (us), rr only]
//    A and B thu are means +- the 95% CI half-width of the mean.
//  - compare_json(): every raw run of both sides (with its round and whether A went
//    first) and every summary and comparison, both methods, for every metric.
//  - write_compare_csv(): one row per run (point, round, side, order, raw figures).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "uvhost/bench/ab_compare.h"

namespace uvhost::bench {

void print_compare_report(const CompareResult& result, std::ostream& out);
// "20 runs per side and point, each its own backend process, ..." or the slices' line.
std::string interleave_line(const CompareSpec& spec);
nlohmann::json compare_json(const CompareResult& result);
void write_compare_csv(const CompareResult& result, std::ostream& out);

// JSON of one comparison / summary, shared with the calibration report (runs:
// bench_report.h run_to_json).
nlohmann::json to_json(const AbComparison& comparison);
nlohmann::json to_json(const Summary& summary);

}  // namespace uvhost::bench
