// features.cpp - feature names with vhost-user's own bits (see features.h).
#include "uvhost/vhost_user/features.h"

namespace uvhost::vhost_user {

std::vector<std::string> feature_names(uint64_t features) {
  std::vector<std::string> out = virtio::net_feature::names(features & ~(feature::kLogAll | feature::kProtocolFeatures));
  if ((features & feature::kLogAll) != 0) out.emplace_back("LOG_ALL");
  if ((features & feature::kProtocolFeatures) != 0) out.emplace_back("PROTOCOL_FEATURES");
  return out;
}

}  // namespace uvhost::vhost_user
