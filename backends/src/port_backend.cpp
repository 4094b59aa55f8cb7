// port_backend.cpp - PortBackend's defaults that need a definition (see port_backend.h).
#include "uvhost/backends/port_backend.h"

#include <nlohmann/json.hpp>

namespace uvhost::backends {

nlohmann::json PortBackend::stats() const { return nlohmann::json::object(); }

}  // namespace uvhost::backends
