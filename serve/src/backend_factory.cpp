// backend_factory.cpp - see backend_factory.h.
#include "uvhost/serve/backend_factory.h"

#include <fmt/format.h>

#include "uvhost/backends/loopback_backend.h"
#include "uvhost/backends/sink_backend.h"
#include "uvhost/backends/source_backend.h"
#include "uvhost/backends/tap_backend.h"

namespace uvhost::serve {

std::unique_ptr<backends::PortBackend> make_backend(const PortSpec& spec, backends::SwitchHub* hub,
                                                    std::string& error) {
  switch (spec.backend) {
    case BackendKind::kSink: return std::make_unique<backends::SinkBackend>(spec.queue_pairs);
    case BackendKind::kLoopback: return std::make_unique<backends::LoopbackBackend>(spec.queue_pairs);
    case BackendKind::kSource: {
      backends::SourceOptions options;
      options.rate_pps = spec.source_rate_pps;
      options.frame_size = spec.source_frame_size;
      options.queue_pairs = spec.queue_pairs;
      if (std::string why = backends::SourceBackend::validate(options); !why.empty()) {
        error = fmt::format("{}: source: {}", spec.name, why);
        return nullptr;
      }
      return std::make_unique<backends::SourceBackend>(options);
    }
    case BackendKind::kTap: {
      backends::TapBackendOptions options;
      options.name = spec.tap_name;
      options.queue_pairs = spec.queue_pairs;
      options.mtu = spec.mtu;
      auto tap = backends::TapBackend::open(options, error);
      if (!tap) error = fmt::format("{}: {}", spec.name, error);
      return tap;
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
