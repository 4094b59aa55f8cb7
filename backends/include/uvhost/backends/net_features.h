// net_features.h - the backends' name for the virtio-net feature vocabulary: the bits,
// their names and the dependency rules are defined once, in virtio/net_features.h;
// `backends::net_feature::kGuestCsum`, `net_feature::has(...)` are those.
#pragma once

#include "uvhost/virtio/net_features.h"

namespace uvhost::backends {
namespace net_feature = virtio::net_feature;
}  // namespace uvhost::backends
