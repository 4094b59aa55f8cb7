// reload_plan.h - what a reload of the configuration does to each port: the difference
// between the ports a daemon runs and the ports a new configuration asks for.
//
// Contract
// --------
//  - Ports are matched by name (a port's identity: logs, `uvhost ctl --port`, its
//    workers' names, its socket-activation FileDescriptorName). Unnamed ports are
//    named by position (port_spec.h, finish_ports), so a configuration that is reloaded
//    should name its ports: removing an unnamed port renames the ones after it.
//  - kept: in both, with every key equal (PortSpec's ==): untouched by the reload,
//    its connection and traffic continue. restarted: in both with some key changed:
//    stopped and opened again with the new keys (its frontend reconnects). added: only
//    in the new set. removed: only in the current set (stopped, socket removed).
//  - Each list is in the order the ports appear (current order for removed, new order
//    for the others). Both inputs must have unique names (finish_ports).
#pragma once

#include <string>
#include <vector>

#include "uvhost/serve/port_spec.h"

namespace uvhost::serve {

struct ReloadPlan {
  std::vector<std::string> kept;
  std::vector<std::string> added;
  std::vector<std::string> removed;
  std::vector<std::string> restarted;

  bool changes_nothing() const noexcept { return added.empty() && removed.empty() && restarted.empty(); }
};

ReloadPlan plan_reload(const std::vector<PortSpec>& current, const std::vector<PortSpec>& next);

// "kept a, b; added c; removed d; restarted none": for the log.
std::string describe(const ReloadPlan& plan);

}  // namespace uvhost::serve
