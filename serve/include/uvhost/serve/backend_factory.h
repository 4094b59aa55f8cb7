// backend_factory.h - the PortBackend a port spec asks for.
//
// Contract: make_backend() returns the backend of `spec` (for backend=switch, a new
// member of `hub`, which must then be non-null), or nullptr with `error` saying why
// (a tap that cannot be opened, a switch port without a hub, bad source options).
#pragma once

#include <memory>
#include <string>

#include "uvhost/backends/port_backend.h"
#include "uvhost/backends/switch_backend.h"
#include "uvhost/serve/port_spec.h"

namespace uvhost::serve {

std::unique_ptr<backends::PortBackend> make_backend(const PortSpec& spec, backends::SwitchHub* hub, std::string& error);

}  // namespace uvhost::serve
