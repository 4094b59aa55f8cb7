// backend_factory.cpp - see backend_factory.h.
#include "uvhost/serve/backend_factory.h"

#include <fmt/format.h>

#include "uvhost/backends/loopback_backend.h"
#include "uvhost/backends/sink_backend.h"
#include "uvhost/backends/source_backend.h"
#include "uvhost/backends/tap_backend.h"

namespace uvhost::serve {

namespace {

// Backend::open(options, error) with the port's queue pairs (every backend's options
// take them from the spec), its reason prefixed with the port's name.
template <typename Backend, typename Options>
std::unique_ptr<backends::PortBackend> open_for_port(const PortSpec& spec, Options options, std::string& error) {
  options.queue_pairs = spec.queue_pairs;
  std::unique_ptr<Backend> backend = Backend::open(options, error);
  if (!backend) error = fmt::format("{}: {}", spec.name, error);
  return backend;
}

}  // namespace

std::unique_ptr<backends::PortBackend> make_backend(const PortSpec& spec, backends::SwitchHub* hub,
                                                    std::string& error) {
  switch (spec.backend) {
    case BackendKind::kSink: return std::make_unique<backends::SinkBackend>(spec.queue_pairs);
    case BackendKind::kLoopback: return std::make_unique<backends::LoopbackBackend>(spec.queue_pairs);
    case BackendKind::kSource: {
      backends::SourceOptions options;
      options.rate_pps = spec.source_rate_pps;
      options.frame_size = spec.source_frame_size;
      return open_for_port<backends::SourceBackend>(spec, options, error);
    }
    case BackendKind::kTap: {
      backends::TapBackendOptions options;
      options.name = spec.tap_name;
      options.mtu = spec.mtu;
      return open_for_port<backends::TapBackend>(spec, options, error);
    }
    case BackendKind::kSwitch:
      if (hub == nullptr) {
        error = fmt::format("{}: backend=switch but the daemon has no switch", spec.name);
        return nullptr;
      }
      return hub->add_port(spec.name, spec.queue_pairs, spec.mtu);
  }
  error = fmt::format("{}: unknown backend", spec.name);
  return nullptr;
}

}  // namespace uvhost::serve
