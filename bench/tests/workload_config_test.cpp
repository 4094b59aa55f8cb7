// workload_config_test.cpp - parse_config / describe / workload names (workload.h).
#include <gtest/gtest.h>

#include "uvhost/bench/bench_report.h"
#include "uvhost/bench/workload.h"

namespace uvhost::bench {
namespace {

Config parse_ok(std::string_view text) {
  std::string error;
  std::optional<Config> config = parse_config(text, error);
  EXPECT_TRUE(config.has_value()) << text << ": " << error;
  return config.value_or(Config{});
}

std::string parse_error(std::string_view text) {
  std::string error;
  std::optional<Config> config = parse_config(text, error);
  EXPECT_FALSE(config.has_value()) << text << " was accepted";
  EXPECT_FALSE(error.empty()) << text;
  return error;
}

TEST(WorkloadNames, RoundTrip) {
  for (Workload w : {Workload::kRr, Workload::kStreamTx, Workload::kStreamRx}) {
    EXPECT_EQ(base::parse_enum<Workload>(to_string(w)), w);
  }
  EXPECT_EQ(base::parse_enum<Workload>("stream-tx"), Workload::kStreamTx);
  EXPECT_FALSE(base::parse_enum<Workload>("stream"));
  EXPECT_FALSE(base::parse_enum<Workload>(""));
  EXPECT_FALSE(base::parse_enum<Workload>("RR"));
}

TEST(Points, DescribeNamesTheOfferedRate) {
  EXPECT_EQ(describe(Point{Workload::kRr, 64, 1}), "rr 64B x1");
  EXPECT_EQ(describe(Point{Workload::kRr, 64, 16, 10'000, Arrivals::kPoisson}), "rr 64B x16 @10 k/s poisson");
  EXPECT_EQ(describe(Point{Workload::kRr, 1500, 2, 500, Arrivals::kFixed}), "rr 1500B x2 @500/s fixed");
  EXPECT_EQ(base::parse_enum<Arrivals>("fixed"), Arrivals::kFixed);
  EXPECT_FALSE(base::parse_enum<Arrivals>("uniform"));
}

TEST(Points, RatesExpandRrOnly) {
  const auto points = expand_points({Workload::kRr, Workload::kStreamTx}, {64}, {1, 4}, {1000, 0}, Arrivals::kFixed);
  ASSERT_EQ(points.size(), 6u);  // rr: 2 sessions x 2 rates; stream-tx: 2 sessions, closed
  EXPECT_EQ(describe(points[0]), "rr 64B x1 @1 k/s fixed");
  EXPECT_EQ(describe(points[1]), "rr 64B x1");
  EXPECT_EQ(describe(points[3]), "rr 64B x4");
  EXPECT_EQ(describe(points[4]), "stream-tx 64B x1");
  EXPECT_EQ(points[5].rate, 0u);
}

TEST(ParseConfig, EmptyIsUvhostDefaults) {
  const Config c = parse_ok("");
  EXPECT_EQ(c.backend, BackendKind::kUvhost);
  EXPECT_TRUE(c.port_keys.empty());
  EXPECT_TRUE(c.serve_args.empty());
  EXPECT_EQ(c.frontend_spin_ns, 0u);
  EXPECT_EQ(describe(c), "backend=uvhost");
}

TEST(ParseConfig, PortKeysAndDaemonFlags) {
  const Config c = parse_ok("poll=busy,busy_us=50,enqueue=lockless,workers=pair,label=busy50,pool_workers=2");
  EXPECT_EQ(c.backend, BackendKind::kUvhost);
  EXPECT_EQ(c.label, "busy50");
  ASSERT_EQ(c.port_keys.size(), 3u);
  EXPECT_EQ(c.port_keys[0], (std::pair<std::string, std::string>{"poll", "busy"}));
  EXPECT_EQ(c.port_keys[1], (std::pair<std::string, std::string>{"busy_us", "50"}));
  EXPECT_EQ(c.port_keys[2], (std::pair<std::string, std::string>{"workers", "pair"}));
  EXPECT_EQ(c.serve_args, (std::vector<std::string>{"--enqueue", "lockless", "--pool-workers", "2"}));
  EXPECT_EQ(describe(c), "poll=busy,busy_us=50,workers=pair,enqueue=lockless,pool_workers=2");
}

TEST(ParseConfig, EnqueueTakesOnlyTheStrategyNames) {
  const Config c = parse_ok("enqueue=unlock_wake");
  EXPECT_EQ(c.serve_args, (std::vector<std::string>{"--enqueue", "unlock_wake"}));
  EXPECT_NE(parse_error("enqueue=b").find("lock_wake"), std::string::npos);
}

TEST(ParseConfig, TestpmdSocketSpin) {
  EXPECT_EQ(parse_ok("backend=testpmd").backend, BackendKind::kTestpmd);
  EXPECT_EQ(parse_ok("backend=uvhost").backend, BackendKind::kUvhost);
  const Config s = parse_ok("socket=/tmp/x.sock,pid=123");
  EXPECT_EQ(s.backend, BackendKind::kSocket);
  EXPECT_EQ(s.socket, "/tmp/x.sock");
  EXPECT_EQ(s.backend_pid, 123);
  EXPECT_EQ(parse_ok("spin_ns=500").frontend_spin_ns, 500u);
  EXPECT_EQ(parse_ok("spin_ns=500,backend=testpmd").frontend_spin_ns, 500u);
  EXPECT_TRUE(parse_ok("").frontend_in_order);
  EXPECT_TRUE(parse_ok("in_order=1").frontend_in_order);
  EXPECT_FALSE(parse_ok("in_order=0").frontend_in_order);
  EXPECT_FALSE(parse_ok("in_order=0,backend=testpmd").frontend_in_order);
  EXPECT_EQ(parse_ok("").frontend_ring, RingFormat::kSplit);
  EXPECT_EQ(parse_ok("ring=packed").frontend_ring, RingFormat::kPacked);
  EXPECT_EQ(parse_ok("ring=split,poll=always").frontend_ring, RingFormat::kSplit);
  std::string error;
  EXPECT_FALSE(parse_config("ring=ring", error).has_value());
  EXPECT_NE(error.find("not split or packed"), std::string::npos) << error;
}

TEST(ParseConfig, DescribeParsesBack) {
  for (const char* text : {"poll=adaptive,busy_us=20,memory=mutex", "backend=testpmd,spin_ns=100",
                           "in_order=0,poll=always", "ring=packed,poll=busy", "socket=/run/vu.sock,pid=42", "burst=32,weight=64,exit=any,enqueue=locked_wake"}) {
    const Config c = parse_ok(text);
    const Config again = parse_ok(describe(c));
    EXPECT_EQ(again.backend, c.backend) << text;
    EXPECT_EQ(again.port_keys, c.port_keys) << text;
    EXPECT_EQ(again.serve_args, c.serve_args) << text;
    EXPECT_EQ(again.socket, c.socket) << text;
    EXPECT_EQ(again.backend_pid, c.backend_pid) << text;
    EXPECT_EQ(again.frontend_spin_ns, c.frontend_spin_ns) << text;
    EXPECT_EQ(again.frontend_in_order, c.frontend_in_order) << text;
    EXPECT_EQ(again.frontend_ring, c.frontend_ring) << text;
  }
}

TEST(ParseConfig, RefusesBadValuesThroughServeRules) {
  EXPECT_NE(parse_error("poll=sometimes").find("poll"), std::string::npos);
  EXPECT_NE(parse_error("burst=0").find("burst"), std::string::npos);
  EXPECT_NE(parse_error("memory=lockfree").find("memory"), std::string::npos);
  EXPECT_NE(parse_error("frobnicate=1").find("frobnicate"), std::string::npos);
}

TEST(ParseConfig, UvhostNamesTheBinaryThatServes) {
  const Config config = parse_ok("uvhost=/bin/true,poll=always");
  EXPECT_EQ(config.backend, BackendKind::kUvhost);
  EXPECT_EQ(config.uvhost_binary, "/bin/true");
  EXPECT_EQ(describe(config), "poll=always,uvhost=/bin/true");
  EXPECT_EQ(parse_ok(describe(config)).uvhost_binary, "/bin/true");
  EXPECT_NE(parse_error("uvhost=/nonexistent/uvhost").find("not an executable"), std::string::npos);
  EXPECT_NE(parse_error("uvhost=/tmp").find("not an executable"), std::string::npos);  // a directory
  parse_error("uvhost=");
  EXPECT_NE(parse_error("backend=testpmd,uvhost=/bin/true").find("backend=uvhost only"), std::string::npos);
}

TEST(ParseConfig, RefusesKeysTheBenchOwns) {
  for (const char* text : {"sock=/x", "path=/x", "client", "queues=2", "name=p", "size=64", "rate=100", "tap=t0"}) {
    parse_error(text);
  }
}

TEST(ParseConfig, RefusesMalformedAndConflicting) {
  parse_error("backend=sink");  // a serve backend name: the bench picks it per workload
  parse_error("backend=dpdk");
  parse_error("backend");
  parse_error("poll=busy,poll=notify");
  parse_error("poll=busy,");
  parse_error(",poll=busy");
  parse_error("poll=busy,,burst=4");
  parse_error("=3");
  parse_error("spin_ns=-1");
  parse_error("spin_ns=abc");
  parse_error("in_order=2");
  parse_error("in_order");
  parse_error("in_order=yes");
  parse_error("pid=12");                          // pid without socket
  parse_error("socket=/x,pid=0");
  parse_error("socket=/x,backend=testpmd");
  parse_error("backend=testpmd,poll=busy");       // port keys are uvhost's
  parse_error("socket=/x,enqueue=lockless");
  parse_error("enqueue=fastest");
  parse_error("pool_workers=0");
  parse_error("pool_workers=65");
  parse_error("label");
}

}  // namespace
}  // namespace uvhost::bench
