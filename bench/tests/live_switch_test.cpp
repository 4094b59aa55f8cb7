// live_switch_test.cpp - which config differences a running backend takes, and the
// control requests that switch it (the daemon's side of `set` is tested in serve).
#include "uvhost/bench/live_switch.h"

#include <gtest/gtest.h>

#include <string>

namespace uvhost::bench {
namespace {

Config parse(const char* text) {
  std::string error;
  const std::optional<Config> c = parse_config(text, error);
  EXPECT_TRUE(c) << text << ": " << error;
  return c.value_or(Config{});
}

TEST(LiveSwitch, IdenticalConfigsNeedNoRequests) {
  std::string why;
  const auto sw = live_switch(parse("poll=always,workers=pair"), parse("poll=always,workers=pair"), why);
  ASSERT_TRUE(sw) << why;
  EXPECT_TRUE(sw->to_a.empty());
  EXPECT_TRUE(sw->to_b.empty());
  EXPECT_TRUE(sw->keys.empty());
}

TEST(LiveSwitch, PortKeysBecomeOneSetRequestWithOnlyWhatDiffers) {
  std::string why;
  const auto sw = live_switch(parse("poll=notify,workers=pair"), parse("poll=busy,busy_us=20,workers=pair"), why);
  ASSERT_TRUE(sw) << why;
  ASSERT_EQ(sw->to_b.size(), 1u);
  ASSERT_EQ(sw->to_a.size(), 1u);
  const nlohmann::json want_b{{"cmd", "set"}, {"port", "bench"}, {"poll", "busy"}, {"busy_us", 20}};
  const nlohmann::json want_a{{"cmd", "set"}, {"port", "bench"}, {"poll", "notify"}, {"busy_us", 50}};
  EXPECT_EQ(sw->to_b[0], want_b);
  EXPECT_EQ(sw->to_a[0], want_a);  // A left busy_us out: serve's default
  EXPECT_EQ(sw->keys, (std::vector<std::string>{"poll", "busy_us"}));
}

TEST(LiveSwitch, DefaultsOnOneSideAreSpelledOut) {
  std::string why;
  const auto sw = live_switch(parse(""), parse("exit=any,memory=mutex,enqueue=locked_wake"), why);
  ASSERT_TRUE(sw) << why;
  ASSERT_EQ(sw->to_a.size(), 2u);
  EXPECT_EQ(sw->to_a[0], (nlohmann::json{{"cmd", "set"}, {"port", "bench"}, {"exit", "accurate"}, {"memory", "rcu"}}));
  EXPECT_EQ(sw->to_a[1], (nlohmann::json{{"cmd", "set"}, {"enqueue", "lockless"}}));
  EXPECT_EQ(sw->to_b[0], (nlohmann::json{{"cmd", "set"}, {"port", "bench"}, {"exit", "any"}, {"memory", "mutex"}}));
  EXPECT_EQ(sw->to_b[1], (nlohmann::json{{"cmd", "set"}, {"enqueue", "locked_wake"}}));
  EXPECT_EQ(sw->keys, (std::vector<std::string>{"exit", "memory", "enqueue"}));
}

TEST(LiveSwitch, ExplicitDefaultIsNoDifference) {
  std::string why;
  const auto sw = live_switch(parse("poll=notify,memory=rcu"), parse(""), why);
  ASSERT_TRUE(sw) << why;
  EXPECT_TRUE(sw->to_b.empty());
}

TEST(LiveSwitch, FrontendSpinWorksWithAnyBackend) {
  std::string why;
  auto sw = live_switch(parse("backend=testpmd"), parse("backend=testpmd,spin_ns=300"), why);
  ASSERT_TRUE(sw) << why;
  EXPECT_TRUE(sw->to_b.empty());
  EXPECT_EQ(sw->keys, (std::vector<std::string>{"spin_ns"}));
  sw = live_switch(parse("socket=/run/x.sock"), parse("socket=/run/x.sock,spin_ns=1"), why);
  ASSERT_TRUE(sw) << why;
}

TEST(LiveSwitch, RestartKeysAreRefusedWithAReason) {
  struct Case {
    const char* a;
    const char* b;
    const char* reason;
  };
  for (const Case& c : {Case{"workers=pair", "workers=device", "port key"},
                        Case{"workers=device", "", "port key"},  // compared as written
                        Case{"burst=32", "burst=64", "port key"},
                        Case{"pool_workers=2", "pool_workers=3", "daemon flag"},
                        Case{"", "backend=testpmd", "different backends"},
                        Case{"socket=/a.sock", "socket=/b.sock", "different backends"},
                        Case{"uvhost=/bin/true", "uvhost=/bin/false", "different uvhost binaries"},
                        Case{"", "uvhost=/bin/true", "different uvhost binaries"},
                        Case{"", "in_order=0", "in_order or ring, negotiated when it connects"},
                        Case{"backend=testpmd,in_order=0", "backend=testpmd", "in_order"},
                        Case{"", "ring=packed", "in_order or ring, negotiated when it connects"}}) {
    std::string why;
    EXPECT_FALSE(live_switch(parse(c.a), parse(c.b), why)) << c.a << " vs " << c.b;
    EXPECT_NE(why.find(c.reason), std::string::npos) << c.a << " vs " << c.b << ": " << why;
  }
}

}  // namespace
}  // namespace uvhost::bench
