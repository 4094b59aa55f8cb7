// direction.h - the names of a port's two traffic directions, as DPDK's vhost PMD and
// Open vSwitch name those of a vhost-user port: the port's own point of view.
//
//  - rx: received from the guest (the guest's transmit vrings: odd indexes).
//  - tx: transmitted to the guest (the guest's receive vrings: even indexes).
//
// Every name a person or a script sees (JSON keys such as "rx_packets", the
// "direction" field and label, table columns, log lines) is made from these; the C++
// code underneath says from_guest / to_guest, which cannot be misread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "uvhost/base/name_table.h"

namespace uvhost::serve {

using base::to_string;

enum class Direction { kRx, kTx };

inline constexpr auto kDirectionNames =
    base::name_table<Direction>({{Direction::kRx, "rx"}, {Direction::kTx, "tx"}});

constexpr const auto& enum_names(Direction) noexcept { return kDirectionNames; }

// `guest_transmit`: the vring is one the guest transmits on (virtio's TX queue).
inline constexpr Direction direction_of(bool guest_transmit) {
  return guest_transmit ? Direction::kRx : Direction::kTx;
}

inline constexpr Direction direction_of_vring(uint32_t index) { return direction_of(index % 2 == 1); }

// "rx_packets", "tx_dropped": a per-direction counter's name.
inline std::string direction_key(Direction direction, std::string_view counter) {
  std::string key(to_string(direction));
  key += '_';
  key += counter;
  return key;
}

}  // namespace uvhost::serve
