// offload_counters.h - the frames a backend refused for their offload header
// (validate_offload, offload_validate.h), counted per queue pair and per reason, and
// their JSON for a backend's stats().
//
// Contract
// --------
//  - OffloadInvalidCounters: PairCounters (pair_counters.h: one writer per pair, read
//    from anywhere) indexed by OffloadReason.
//  - offload_invalid_json(counters): {"<reason>": n} summed over the pairs, for every
//    reason but ok, named by to_string(OffloadReason).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "uvhost/backends/offload_validate.h"
#include "uvhost/backends/pair_counters.h"

namespace uvhost::backends {

using OffloadInvalidCounters = PairCounters<kOffloadReasonCount>;

nlohmann::json offload_invalid_json(const OffloadInvalidCounters& counters);

}  // namespace uvhost::backends
