// reload_plan_test.cpp - plan_reload(): which ports a reload keeps, adds, removes and
// restarts, matched by name, with every key compared.
#include "uvhost/serve/reload_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace uvhost::serve {
namespace {

using Names = std::vector<std::string>;

PortSpec spec(const std::string& name, const std::string& path, BackendKind backend = BackendKind::kSink) {
  PortSpec s;
  s.name = name;
  s.socket_path = path;
  s.backend = backend;
  return s;
}

TEST(ReloadPlanTest, SameSetChangesNothing) {
  const std::vector<PortSpec> ports = {spec("a", "/r/a.sock"), spec("b", "/r/b.sock", BackendKind::kLoopback)};
  const ReloadPlan plan = plan_reload(ports, ports);
  EXPECT_TRUE(plan.changes_nothing());
  EXPECT_EQ(plan.kept, (Names{"a", "b"}));
  EXPECT_EQ(describe(plan), "kept a, b; added none; removed none; restarted none");
}

TEST(ReloadPlanTest, RemoveOneAddAnotherKeepTheRest) {
  const std::vector<PortSpec> current = {spec("a", "/r/a.sock"), spec("b", "/r/b.sock")};
  const std::vector<PortSpec> next = {spec("c", "/r/c.sock"), spec("a", "/r/a.sock")};
  const ReloadPlan plan = plan_reload(current, next);
  EXPECT_FALSE(plan.changes_nothing());
  EXPECT_EQ(plan.kept, Names{"a"});
  EXPECT_EQ(plan.added, Names{"c"});
  EXPECT_EQ(plan.removed, Names{"b"});
  EXPECT_TRUE(plan.restarted.empty());
  EXPECT_EQ(describe(plan), "kept a; added c; removed b; restarted none");
}

TEST(ReloadPlanTest, AnyChangedKeyRestartsThePort) {
  const std::vector<PortSpec> current = {spec("a", "/r/a.sock")};
  auto changed = [&](auto edit) {
    std::vector<PortSpec> next = current;
    edit(next[0]);
    return plan_reload(current, next);
  };
  const std::vector<ReloadPlan> plans = {
      changed([](PortSpec& s) { s.queue_pairs = 2; }),
      changed([](PortSpec& s) { s.socket_path = "/r/other.sock"; }),
      changed([](PortSpec& s) { s.client = true; }),
      changed([](PortSpec& s) { s.backend = BackendKind::kLoopback; }),
      changed([](PortSpec& s) { s.socket_mode = 0660; }),
      changed([](PortSpec& s) { s.poll.mode = datapath::PollMode::kBusy; }),
      changed([](PortSpec& s) { s.poll.busy_us = 7; }),
      changed([](PortSpec& s) { s.mtu = 1400; }),
      changed([](PortSpec& s) { s.workers = datapath::WorkerMapping::kPool; }),
      changed([](PortSpec& s) { s.burst = 32; }),
      changed([](PortSpec& s) { s.memory_policy = sync::GuardPolicy::kMutex; }),
  };
  for (size_t i = 0; i < plans.size(); ++i) {
    EXPECT_EQ(plans[i].restarted, Names{"a"}) << "edit " << i;
    EXPECT_TRUE(plans[i].kept.empty() && plans[i].added.empty() && plans[i].removed.empty()) << "edit " << i;
  }
}

TEST(ReloadPlanTest, ARenamedPortIsRemovedAndAdded) {
  const ReloadPlan plan = plan_reload({spec("a", "/r/a.sock")}, {spec("z", "/r/a.sock")});
  EXPECT_EQ(plan.removed, Names{"a"});
  EXPECT_EQ(plan.added, Names{"z"});
}

TEST(ReloadPlanTest, ListsFollowTheConfigurationsOrder) {
  const std::vector<PortSpec> current = {spec("r1", "/1"), spec("k1", "/2"), spec("r2", "/3"), spec("k2", "/4")};
  std::vector<PortSpec> next = {spec("k2", "/4"), spec("n1", "/5"), spec("k1", "/2"), spec("n2", "/6")};
  const ReloadPlan plan = plan_reload(current, next);
  EXPECT_EQ(plan.kept, (Names{"k2", "k1"}));
  EXPECT_EQ(plan.added, (Names{"n1", "n2"}));
  EXPECT_EQ(plan.removed, (Names{"r1", "r2"}));
}

TEST(ReloadPlanTest, FromAndToNothing) {
  const std::vector<PortSpec> ports = {spec("a", "/a")};
  EXPECT_EQ(plan_reload({}, ports).added, Names{"a"});
  EXPECT_EQ(plan_reload(ports, {}).removed, Names{"a"});
  EXPECT_TRUE(plan_reload({}, {}).changes_nothing());
}

}  // namespace
}  // namespace uvhost::serve
