// loopback_backend_test.cpp - LoopbackBackend: a MAC-swapped copy of every frame goes
// back through the injector into the same pair, offload fields intact; drops counted.
#include "uvhost/backends/loopback_backend.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "collecting_injector.h"
#include "uvhost/testing/frames.h"

namespace uvhost::backends {
namespace {

using testing::CollectingInjector;

virtio::NetHeader offload_header() {
  virtio::NetHeader header;
  header.flags = virtio::kNetHdrFlagNeedsCsum;
  header.gso_type = virtio::kNetGsoTcpV4;
  header.hdr_len = 54;
  header.gso_size = 1448;
  header.csum_start = 34;
  header.csum_offset = 16;
  header.num_buffers = 3;  // must not come back
  return header;
}

TEST(LoopbackBackend, ReflectsWithMacsSwappedIntoTheSamePair) {
  LoopbackBackend loopback(2);
  CollectingInjector injector(2);
  loopback.attach(injector);
  EXPECT_EQ(loopback.kind(), "loopback");
  const auto frame0 = uvhost::testing::make_frame(60, 1);
  const auto frame1 = uvhost::testing::make_frame(1514, 2);
  ASSERT_TRUE(loopback.transmit(0, offload_header(), frame0));
  ASSERT_TRUE(loopback.transmit(1, {}, frame1));
  auto got = injector.take();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].pair, 0u);
  EXPECT_EQ(got[0].packet->frame, uvhost::testing::reflected(frame0));
  EXPECT_EQ(got[1].pair, 1u);
  EXPECT_EQ(got[1].packet->frame, uvhost::testing::reflected(frame1));
  // Offload fields passed through, num_buffers zeroed.
  virtio::NetHeader expected = offload_header();
  expected.num_buffers = 0;
  EXPECT_EQ(got[0].packet->header, expected);
  EXPECT_EQ(got[1].packet->header, virtio::NetHeader{});
  EXPECT_EQ(loopback.reflected(), 2u);
  EXPECT_EQ(loopback.stats().at("reflected_bytes"), 60 + 1514);
  loopback.detach();
}

// A refused inject is the receiving queue's drop (the datapath counts it there), so
// transmit() still says "taken": each lost frame is counted once.
TEST(LoopbackBackend, InjectFailureIsCountedOnceOnTheReceiveSide) {
  LoopbackBackend loopback(1);
  CollectingInjector injector(1);
  loopback.attach(injector);
  injector.set_refuse(true);
  EXPECT_TRUE(loopback.transmit(0, {}, uvhost::testing::make_frame(64, 3)));
  EXPECT_TRUE(loopback.transmit(0, {}, uvhost::testing::make_frame(64, 4)));
  EXPECT_EQ(loopback.inject_failed(), 2u);
  EXPECT_EQ(loopback.reflected(), 0u);
  injector.set_refuse(false);
  EXPECT_TRUE(loopback.transmit(0, {}, uvhost::testing::make_frame(64, 5)));
  EXPECT_EQ(loopback.reflected(), 1u);
  EXPECT_EQ(loopback.stats().at("inject_failed"), 2);
}

TEST(LoopbackBackend, WithoutAnInjectorFramesAreDropped) {
  LoopbackBackend loopback(1);
  EXPECT_FALSE(loopback.transmit(0, {}, uvhost::testing::make_frame(64, 6)));
  CollectingInjector injector(1);
  loopback.attach(injector);
  loopback.detach();
  EXPECT_FALSE(loopback.transmit(0, {}, uvhost::testing::make_frame(64, 7)));
  EXPECT_EQ(loopback.stats().at("no_injector"), 2);
  EXPECT_EQ(injector.size(), 0u);
}

TEST(LoopbackBackend, RuntsGiantsAndBadPairsAreDropped) {
  LoopbackBackend loopback(1);
  CollectingInjector injector(1);
  loopback.attach(injector);
  EXPECT_FALSE(loopback.transmit(0, {}, std::vector<std::byte>(13)));
  EXPECT_TRUE(loopback.transmit(0, {}, std::vector<std::byte>(14)));
  EXPECT_TRUE(loopback.transmit(0, {}, std::vector<std::byte>(LoopbackBackend::kMaxFrameBytes)));
  EXPECT_FALSE(loopback.transmit(0, {}, std::vector<std::byte>(LoopbackBackend::kMaxFrameBytes + 1)));
  EXPECT_FALSE(loopback.transmit(1, {}, std::vector<std::byte>(64)));
  const nlohmann::json stats = loopback.stats();
  EXPECT_EQ(stats.at("too_short"), 1);
  EXPECT_EQ(stats.at("too_long"), 1);
  EXPECT_EQ(stats.at("bad_pair"), 1);
  EXPECT_EQ(stats.at("reflected"), 2);
  EXPECT_EQ(injector.size(), 2u);
  EXPECT_THROW(LoopbackBackend(0), std::invalid_argument);
}

TEST(LoopbackBackend, PairsReflectInParallel) {
  constexpr uint32_t kPairs = 4;
  constexpr uint32_t kFrames = 2000;
  LoopbackBackend loopback(kPairs);
  CollectingInjector injector(kPairs);
  loopback.attach(injector);
  std::vector<std::thread> workers;
  for (uint32_t pair = 0; pair < kPairs; ++pair) {
    workers.emplace_back([&, pair] {
      for (uint32_t i = 0; i < kFrames; ++i) loopback.transmit(pair, {}, uvhost::testing::make_frame(64, pair * kFrames + i));
    });
  }
  for (auto& worker : workers) worker.join();
  EXPECT_EQ(loopback.reflected(), uint64_t{kPairs} * kFrames);
  const auto got = injector.take();
  ASSERT_EQ(got.size(), size_t{kPairs} * kFrames);
  std::vector<uint32_t> per_pair(kPairs, 0);
  for (const auto& injected : got) ++per_pair[injected.pair];
  for (uint32_t pair = 0; pair < kPairs; ++pair) EXPECT_EQ(per_pair[pair], kFrames);
}

}  // namespace
}  // namespace uvhost::backends
