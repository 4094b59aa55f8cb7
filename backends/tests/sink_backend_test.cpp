// sink_backend_test.cpp - SinkBackend counts and drops; PortBackend's defaults.
#include "uvhost/backends/sink_backend.h"

#include "uvhost/backends/net_features.h"
#include "uvhost/backends/source_backend.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

namespace uvhost::backends {
namespace {

std::vector<std::byte> bytes(size_t n) { return std::vector<std::byte>(n, std::byte{0x5a}); }

TEST(SinkBackend, CountsFramesAndBytesAndTakesThem) {
  SinkBackend sink(2);
  EXPECT_EQ(sink.kind(), "sink");
  EXPECT_NE(sink.describe().find("sink"), std::string::npos);
  EXPECT_TRUE(sink.transmit(0, {}, bytes(60)));
  EXPECT_TRUE(sink.transmit(1, {}, bytes(1514)));
  EXPECT_TRUE(sink.transmit(1, {}, bytes(100)));
  EXPECT_EQ(sink.frames(), 3u);
  EXPECT_EQ(sink.bytes(), 60u + 1514u + 100u);
  const nlohmann::json stats = sink.stats();
  EXPECT_EQ(stats.at("frames"), 3);
  EXPECT_EQ(stats.at("bytes"), 1674);
  EXPECT_EQ(stats.at("bad_pair"), 0);
}

TEST(SinkBackend, OffersTheHostOffloadsItCountsAsTheyAre) {
  SinkBackend sink(1);
  EXPECT_EQ(sink.offered_features(), net_feature::kHostOffloads);
  EXPECT_EQ(net_feature::offload_dependency_violation(sink.offered_features()), "");
  // A 64 KiB super-frame with a partial checksum is one frame of its size.
  virtio::NetHeader tso;
  tso.flags = virtio::kNetHdrFlagNeedsCsum;
  tso.gso_type = virtio::kNetGsoTcpV4;
  tso.gso_size = 1448;
  EXPECT_TRUE(sink.transmit(0, tso, bytes(65549)));
  EXPECT_EQ(sink.frames(), 1u);
  EXPECT_EQ(sink.bytes(), 65549u);
}

TEST(PortBackendDefaults, SourceOffersNoOffloads) {
  // Its frames for the guest carry no offload and it offers none for what it drops
  // (the loopback's offer is checked in loopback_backend_test.cpp).
  std::string error;
  const auto source = SourceBackend::open(SourceOptions{}, error);
  ASSERT_NE(source, nullptr) << error;
  EXPECT_EQ(source->offered_features(), 0u);
}

TEST(SinkBackend, NothingToPullAndNoFd) {
  SinkBackend sink(1);
  Packet packet;
  EXPECT_FALSE(sink.pull(0, packet));
  EXPECT_EQ(sink.rx_fd(0), -1);
}

TEST(SinkBackend, PairOutOfRangeIsRefusedAndCounted) {
  SinkBackend sink(1);
  EXPECT_FALSE(sink.transmit(1, {}, bytes(64)));
  EXPECT_EQ(sink.frames(), 0u);
  EXPECT_EQ(sink.stats().at("bad_pair"), 1);
}

TEST(SinkBackend, ZeroQueuePairsIsRejected) { EXPECT_THROW(SinkBackend(0), std::invalid_argument); }

TEST(SinkBackend, PairsCountInParallelWithoutLosingIncrements) {
  constexpr uint32_t kPairs = 4;
  constexpr int kFrames = 20000;
  SinkBackend sink(kPairs);
  std::vector<std::thread> workers;
  for (uint32_t pair = 0; pair < kPairs; ++pair) {
    workers.emplace_back([&sink, pair] {
      const auto frame = bytes(64);
      for (int i = 0; i < kFrames; ++i) sink.transmit(pair, {}, frame);
    });
  }
  // A reader at the same time (stats from another thread).
  for (int i = 0; i < 100; ++i) (void)sink.stats();
  for (auto& worker : workers) worker.join();
  EXPECT_EQ(sink.frames(), uint64_t{kPairs} * kFrames);
  EXPECT_EQ(sink.bytes(), uint64_t{kPairs} * kFrames * 64);
}

// PortBackend's defaults: an empty stats object, nothing to pull, no fd, attach keeps
// the injector.
class MinimalBackend final : public PortBackend {
 public:
  std::string_view kind() const noexcept override { return "minimal"; }
  std::string describe() const override { return "minimal"; }
  TxBurstResult transmit_burst(uint32_t, std::span<const TxFrame> frames) override {
    return TxBurstResult{static_cast<uint32_t>(frames.size()), 0};
  }
  RxInjector* current_injector() const { return injector(); }
};

class NullInjector final : public RxInjector {
 public:
  bool inject(uint32_t, PacketPtr) noexcept override { return false; }
  uint32_t queue_pairs() const noexcept override { return 1; }
};

TEST(PortBackend, DefaultsAreEmpty) {
  MinimalBackend backend;
  const nlohmann::json stats = backend.stats();
  EXPECT_TRUE(stats.is_object());
  EXPECT_TRUE(stats.empty());
  Packet packet;
  EXPECT_FALSE(backend.pull(0, packet));
  EXPECT_EQ(backend.rx_fd(0), -1);
  backend.features_changed(~uint64_t{0});
  NullInjector injector;
  EXPECT_EQ(backend.current_injector(), nullptr);
  backend.attach(injector);
  EXPECT_EQ(backend.current_injector(), &injector);
  backend.detach();
  EXPECT_EQ(backend.current_injector(), nullptr);
}

}  // namespace
}  // namespace uvhost::backends
