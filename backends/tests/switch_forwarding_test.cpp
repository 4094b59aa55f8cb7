// switch_forwarding_test.cpp - LearningSwitch::forward(): short frames, learning the
// source (never group addresses), known/unknown unicast, broadcast, multicast,
// hairpin, moves, remove_port, aging, the flood set, per-thread counters, and
// concurrent forwarding.
#include "uvhost/backends/switch_forwarding.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace uvhost::backends {
namespace {

using namespace std::chrono_literals;

const SwitchTime kT0 = SwitchTime{} + 1h;

constexpr MacAddress kMacA{0x52, 0x54, 0x00, 0x00, 0x00, 0x0a};
constexpr MacAddress kMacB{0x52, 0x54, 0x00, 0x00, 0x00, 0x0b};
constexpr MacAddress kMacC{0x52, 0x54, 0x00, 0x00, 0x00, 0x0c};
constexpr MacAddress kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
constexpr MacAddress kIpv4Multicast{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};
constexpr MacAddress kIpv6Multicast{0x33, 0x33, 0x00, 0x00, 0x00, 0x01};

// An Ethernet frame dst, src, ethertype 0x0800, `payload` bytes of zeros.
std::vector<std::byte> frame(const MacAddress& dst, const MacAddress& src, size_t payload = 46) {
  std::vector<std::byte> f;
  for (uint8_t b : dst) f.push_back(std::byte{b});
  for (uint8_t b : src) f.push_back(std::byte{b});
  f.push_back(std::byte{0x08});
  f.push_back(std::byte{0x00});
  f.resize(f.size() + payload);
  return f;
}

MacTableConfig test_config() {
  MacTableConfig config;
  config.capacity = 256;
  config.hash_seed = 3;
  return config;
}

class LearningSwitchTest : public ::testing::Test {
 protected:
  ForwardDecision forward(const MacAddress& dst, const MacAddress& src, PortId ingress,
                          SwitchTime now = kT0) {
    const std::vector<std::byte> f = frame(dst, src);
    return sw.forward(f, ingress, now, counters);
  }

  LearningSwitch sw{test_config()};
  ForwardingCounters counters;
};

void expect_decision(const ForwardDecision& d, ForwardKind kind, ForwardReason reason,
                     PortId port = kNoPort) {
  EXPECT_EQ(d.kind, kind) << to_string(d.kind) << " " << to_string(d.reason);
  EXPECT_EQ(d.reason, reason) << to_string(d.reason);
  EXPECT_EQ(d.port, port);
}

TEST(ForwardingStrings, Names) {
  EXPECT_EQ(to_string(ForwardKind::kFlood), "flood");
  EXPECT_EQ(to_string(ForwardReason::kHairpin), "hairpin");
  EXPECT_EQ(to_string(ForwardReason::kShortFrame), "short-frame");
  EXPECT_EQ(to_string(ForwardReason::kUnknownUnicast), "unknown-unicast");
}

TEST_F(LearningSwitchTest, ShortFrameIsDroppedAndTeachesNothing) {
  std::vector<std::byte> f = frame(kMacB, kMacA, 0);
  ASSERT_EQ(f.size(), kEthernetHeaderSize);
  const std::span<const std::byte> whole(f);
  expect_decision(sw.forward(whole.first(13), 1, kT0, counters), ForwardKind::kDrop,
                  ForwardReason::kShortFrame);
  expect_decision(sw.forward({}, 1, kT0, counters), ForwardKind::kDrop, ForwardReason::kShortFrame);
  EXPECT_EQ(sw.table().size(), 0u);
  EXPECT_EQ(counters.snapshot().count(ForwardReason::kShortFrame), 2u);
  EXPECT_EQ(counters.snapshot().count(LearnResult::kLearned), 0u);
  // Exactly a header is enough.
  expect_decision(sw.forward(whole, 1, kT0, counters), ForwardKind::kFlood, ForwardReason::kUnknownUnicast);
  EXPECT_EQ(sw.table().lookup(kMacA, kT0), std::optional<PortId>(1));
}

TEST_F(LearningSwitchTest, LearnsSourcesThenForwardsUnicast) {
  // A (port 1) -> B: B unknown, flood; A learned.
  expect_decision(forward(kMacB, kMacA, 1), ForwardKind::kFlood, ForwardReason::kUnknownUnicast);
  // B (port 2) answers A: unicast to 1; B learned.
  expect_decision(forward(kMacA, kMacB, 2), ForwardKind::kUnicast, ForwardReason::kKnownUnicast, 1);
  // A -> B again: unicast to 2.
  expect_decision(forward(kMacB, kMacA, 1), ForwardKind::kUnicast, ForwardReason::kKnownUnicast, 2);
  // C is still unknown.
  expect_decision(forward(kMacC, kMacA, 1), ForwardKind::kFlood, ForwardReason::kUnknownUnicast);
  const ForwardingStats s = counters.snapshot();
  EXPECT_EQ(s.count(ForwardReason::kKnownUnicast), 2u);
  EXPECT_EQ(s.count(ForwardReason::kUnknownUnicast), 2u);
  EXPECT_EQ(s.count(LearnResult::kLearned), 2u);
  EXPECT_EQ(s.count(LearnResult::kFresh), 2u);
  EXPECT_EQ(s.frames(), 4u);
}

TEST_F(LearningSwitchTest, BroadcastAndMulticastAreFlooded) {
  forward(kMacC, kMacA, 1);  // A on port 1
  expect_decision(forward(kBroadcast, kMacB, 2), ForwardKind::kFlood, ForwardReason::kBroadcast);
  expect_decision(forward(kIpv4Multicast, kMacB, 2), ForwardKind::kFlood, ForwardReason::kMulticast);
  expect_decision(forward(kIpv6Multicast, kMacB, 2), ForwardKind::kFlood, ForwardReason::kMulticast);
  const ForwardingStats s = counters.snapshot();
  EXPECT_EQ(s.count(ForwardReason::kBroadcast), 1u);
  EXPECT_EQ(s.count(ForwardReason::kMulticast), 2u);
}

TEST_F(LearningSwitchTest, GroupSourceAddressesAreNeverLearned) {
  for (const MacAddress& src : {kBroadcast, kIpv4Multicast, kIpv6Multicast, MacAddress{}}) {
    expect_decision(forward(kMacA, src, 1), ForwardKind::kFlood, ForwardReason::kUnknownUnicast);
  }
  EXPECT_EQ(sw.table().size(), 0u);
  EXPECT_EQ(counters.snapshot().count(LearnResult::kNotUnicast), 4u);
  EXPECT_EQ(counters.snapshot().count(LearnResult::kLearned), 0u);
  // A frame to one of those addresses is still a group frame, not unicast to port 1.
  expect_decision(forward(kIpv4Multicast, kMacB, 2), ForwardKind::kFlood, ForwardReason::kMulticast);
  expect_decision(forward(kBroadcast, kMacB, 2), ForwardKind::kFlood, ForwardReason::kBroadcast);
}

TEST_F(LearningSwitchTest, DestinationOnIngressPortIsHairpinDrop) {
  forward(kMacC, kMacA, 1);  // A on port 1
  forward(kMacC, kMacB, 1);  // B on port 1 (same segment behind port 1)
  expect_decision(forward(kMacA, kMacB, 1), ForwardKind::kDrop, ForwardReason::kHairpin);
  // A frame to itself is a hairpin too.
  expect_decision(forward(kMacA, kMacA, 1), ForwardKind::kDrop, ForwardReason::kHairpin);
  EXPECT_EQ(counters.snapshot().count(ForwardReason::kHairpin), 2u);
}

TEST_F(LearningSwitchTest, MoveRedirectsTraffic) {
  forward(kMacC, kMacA, 1);
  forward(kMacC, kMacB, 3);
  expect_decision(forward(kMacA, kMacB, 3), ForwardKind::kUnicast, ForwardReason::kKnownUnicast, 1);
  // A shows up on port 2 (the VM migrated, or a guest spoofs A): traffic follows.
  forward(kMacC, kMacA, 2);
  EXPECT_EQ(counters.snapshot().count(LearnResult::kMoved), 1u);
  expect_decision(forward(kMacA, kMacB, 3), ForwardKind::kUnicast, ForwardReason::kKnownUnicast, 2);
  EXPECT_EQ(sw.table().stats().moved, 1u);
}

TEST_F(LearningSwitchTest, RemovedPortsMacsAreFloodedAgain) {
  forward(kMacC, kMacA, 1);
  forward(kMacC, kMacB, 2);
  EXPECT_EQ(sw.remove_port(1), 1u);
  expect_decision(forward(kMacA, kMacB, 2), ForwardKind::kFlood, ForwardReason::kUnknownUnicast);
  expect_decision(forward(kMacB, kMacC, 3), ForwardKind::kUnicast, ForwardReason::kKnownUnicast, 2);
}

TEST_F(LearningSwitchTest, AgedDestinationIsFlooded) {
  forward(kMacC, kMacA, 1);
  expect_decision(forward(kMacA, kMacB, 2, kT0 + 299s), ForwardKind::kUnicast, ForwardReason::kKnownUnicast,
                  1);
  expect_decision(forward(kMacA, kMacB, 2, kT0 + 300s), ForwardKind::kFlood, ForwardReason::kUnknownUnicast);
}

TEST(FloodSet, ExcludesIngress) {
  const std::array<PortId, 4> ports{1, 2, 3, 4};
  std::vector<PortId> out;
  for_each_flood_port(ports, 3, [&](PortId p) { out.push_back(p); });
  EXPECT_EQ(out, (std::vector<PortId>{1, 2, 4}));
  out.clear();
  for_each_flood_port(ports, 9, [&](PortId p) { out.push_back(p); });  // ingress not in the set
  EXPECT_EQ(out, (std::vector<PortId>{1, 2, 3, 4}));
  out.clear();
  const std::array<PortId, 1> lonely{5};
  for_each_flood_port(lonely, 5, [&](PortId p) { out.push_back(p); });
  EXPECT_TRUE(out.empty());
}

TEST(ForwardingStats, SumsAcrossWorkers) {
  ForwardingCounters a;
  ForwardingCounters b;
  a.count(ForwardReason::kHairpin);
  a.count(LearnResult::kMoved);
  b.count(ForwardReason::kHairpin);
  b.count(ForwardReason::kBroadcast);
  ForwardingStats total = a.snapshot();
  total += b.snapshot();
  EXPECT_EQ(total.count(ForwardReason::kHairpin), 2u);
  EXPECT_EQ(total.count(ForwardReason::kBroadcast), 1u);
  EXPECT_EQ(total.count(LearnResult::kMoved), 1u);
  EXPECT_EQ(total.frames(), 3u);
}

// Workers forward concurrently, each with its own counters; MAC i lives on port i % 4
// (1..4 after the first frame), and every unicast decision must name that port.
TEST(LearningSwitchConcurrency, WorkersForwardWithPrivateCounters) {
  LearningSwitch sw(test_config());
  constexpr int kWorkers = 4;
  constexpr uint32_t kMacs = 32;
  constexpr int kFrames = 20000;
  auto mac = [](uint32_t i) { return MacAddress{0x02, 0, 0, 0, 0, static_cast<uint8_t>(i)}; };
  auto home = [](uint32_t i) { return PortId{1 + i % 4}; };

  std::vector<ForwardingCounters> counters(kWorkers);
  std::vector<uint64_t> wrong(kWorkers, 0);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (int n = 0; n < kFrames; ++n) {
        const auto src = static_cast<uint32_t>(n * 7 + w) % kMacs;
        const auto dst = static_cast<uint32_t>(n * 13 + w * 5) % kMacs;
        const std::vector<std::byte> f = frame(mac(dst), mac(src), 0);
        const ForwardDecision d =
            sw.forward(f, home(src), kT0 + std::chrono::microseconds(n), counters[static_cast<size_t>(w)]);
        if (d.kind == ForwardKind::kUnicast && d.port != home(dst)) ++wrong[static_cast<size_t>(w)];
        if (d.kind == ForwardKind::kDrop && home(src) != home(dst)) ++wrong[static_cast<size_t>(w)];
      }
    });
  }
  for (auto& th : workers) th.join();
  ForwardingStats total;
  for (const auto& c : counters) total += c.snapshot();
  for (uint64_t n : wrong) EXPECT_EQ(n, 0u);
  EXPECT_EQ(total.frames(), static_cast<uint64_t>(kWorkers) * kFrames);
  EXPECT_GT(total.count(ForwardReason::kKnownUnicast), 0u);
  EXPECT_EQ(total.count(LearnResult::kLearned), kMacs);
  EXPECT_EQ(total.count(LearnResult::kMoved), 0u);
  EXPECT_EQ(sw.table().size(), kMacs);
}

}  // namespace
}  // namespace uvhost::backends
