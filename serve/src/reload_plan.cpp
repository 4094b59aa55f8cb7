// reload_plan.cpp - the port-by-port difference of two configurations (see reload_plan.h).
#include "uvhost/serve/reload_plan.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace uvhost::serve {

namespace {

const PortSpec* find_named(const std::vector<PortSpec>& specs, const std::string& name) {
  const auto it = std::find_if(specs.begin(), specs.end(), [&name](const PortSpec& spec) { return spec.name == name; });
  return it == specs.end() ? nullptr : &*it;
}

std::string names(const std::vector<std::string>& list) {
  return list.empty() ? std::string("none") : fmt::format("{}", fmt::join(list, ", "));
}

}  // namespace

ReloadPlan plan_reload(const std::vector<PortSpec>& current, const std::vector<PortSpec>& next) {
  ReloadPlan plan;
  for (const PortSpec& spec : current) {
    if (find_named(next, spec.name) == nullptr) plan.removed.push_back(spec.name);
  }
  for (const PortSpec& spec : next) {
    const PortSpec* before = find_named(current, spec.name);
    if (before == nullptr) {
      plan.added.push_back(spec.name);
    } else if (*before == spec) {
      plan.kept.push_back(spec.name);
    } else {
      plan.restarted.push_back(spec.name);
    }
  }
  return plan;
}

std::string describe(const ReloadPlan& plan) {
  return fmt::format("kept {}; added {}; removed {}; restarted {}", names(plan.kept), names(plan.added),
                     names(plan.removed), names(plan.restarted));
}

}  // namespace uvhost::serve
