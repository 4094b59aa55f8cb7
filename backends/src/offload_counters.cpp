// offload_counters.cpp - offload refusals as JSON (see offload_counters.h).
#include "uvhost/backends/offload_counters.h"

#include <string>

#include <nlohmann/json.hpp>

namespace uvhost::backends {

nlohmann::json offload_invalid_json(const OffloadInvalidCounters& counters) {
  nlohmann::json out = nlohmann::json::object();
  for (size_t i = 1; i < kOffloadReasonCount; ++i) {  // every reason but kOk
    out[std::string(to_string(static_cast<OffloadReason>(i)))] = counters.total(i);
  }
  return out;
}

}  // namespace uvhost::backends
