// source_backend_test.cpp - SourceBackend: valid UDP/IPv4 frames with gap-free
// sequences per pair, the token bucket's rate (generous bounds, not a timing test),
// the timerfd that says when the next token is due, option validation; and the frame
// format itself (source_frame.h).
#include "uvhost/backends/source_backend.h"

#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "uvhost/backends/source_frame.h"

namespace uvhost::backends {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Throws (failing the test with the reason) when the source cannot be opened.
std::unique_ptr<SourceBackend> open_source(const SourceOptions& options) {
  std::string error;
  std::unique_ptr<SourceBackend> source = SourceBackend::open(options, error);
  if (!source) throw std::runtime_error(error);
  return source;
}

bool readable(int fd, int timeout_ms) {
  pollfd entry{fd, POLLIN, 0};
  return ::poll(&entry, 1, timeout_ms) == 1 && (entry.revents & POLLIN) != 0;
}

uint32_t be16(const std::vector<std::byte>& f, size_t at) {
  return (std::to_integer<uint32_t>(f[at]) << 8) | std::to_integer<uint32_t>(f[at + 1]);
}

// An independent check of the IPv4 header checksum (RFC 1071).
bool ipv4_header_checksum_ok(const std::vector<std::byte>& f) {
  uint32_t sum = 0;
  for (size_t i = 14; i < 34; i += 2) sum += be16(f, i);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff;
}

// ---- the frame format ---------------------------------------------------------------

TEST(SourceFrame, FillsValidFramesOfEverySizeWithTheirSequence) {
  for (uint32_t size : {60u, 64u, 65u, 1514u, 9000u, 65535u}) {
    SourceFrameSpec spec;
    spec.frame_size = size;
    spec.stream = 7;
    const SourceFrameTemplate frame_template(spec);
    std::vector<std::byte> frame;
    for (uint64_t sequence : {uint64_t{0}, uint64_t{1}, uint64_t{0xffff}, uint64_t{0x123456789abcdefULL},
                              ~uint64_t{0}}) {
      frame_template.fill(sequence, frame);
      ASSERT_EQ(frame.size(), size);
      EXPECT_TRUE(ipv4_header_checksum_ok(frame)) << size;
      const auto info = parse_source_frame(frame);
      ASSERT_TRUE(info) << "size " << size << " sequence " << sequence;
      EXPECT_EQ(info->stream, 7u);
      EXPECT_EQ(info->sequence, sequence);
    }
  }
}

TEST(SourceFrame, HeadersAreWhatTheSpecSays) {
  SourceFrameSpec spec;
  spec.frame_size = 100;
  const SourceFrameTemplate frame_template(spec);
  std::vector<std::byte> f;
  frame_template.fill(5, f);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(std::to_integer<uint8_t>(f[i]), spec.dst_mac[i]);
    EXPECT_EQ(std::to_integer<uint8_t>(f[6 + i]), spec.src_mac[i]);
  }
  EXPECT_EQ(be16(f, 12), 0x0800u);
  EXPECT_EQ(std::to_integer<uint8_t>(f[14]), 0x45);
  EXPECT_EQ(be16(f, 16), 100u - 14u);  // IPv4 total length
  EXPECT_EQ(std::to_integer<uint8_t>(f[23]), 17);  // UDP
  EXPECT_EQ(be16(f, 34), spec.udp_src_port);
  EXPECT_EQ(be16(f, 36), spec.udp_dst_port);
  EXPECT_EQ(be16(f, 38), 100u - 34u);  // UDP length
  EXPECT_NE(be16(f, 40), 0u);          // UDP checksum present
}

TEST(SourceFrame, ParserRejectsDamagedFrames) {
  const SourceFrameTemplate frame_template(SourceFrameSpec{});
  std::vector<std::byte> good;
  frame_template.fill(42, good);
  ASSERT_TRUE(parse_source_frame(good));
  for (size_t at : {size_t{12}, size_t{16}, size_t{24}, size_t{38}, size_t{42}, size_t{50}, size_t{63}}) {
    std::vector<std::byte> bad = good;
    bad[at] ^= std::byte{0x01};
    EXPECT_FALSE(parse_source_frame(bad)) << "byte " << at << " flipped";
  }
  std::vector<std::byte> shorter(good.begin(), good.end() - 1);
  EXPECT_FALSE(parse_source_frame(shorter));
}

// ---- options -----------------------------------------------------------------------------

TEST(SourceBackend, InvalidOptionsAreRejectedWithAReason) {
  const auto rejected = [](SourceOptions options) {
    const std::string error = SourceBackend::validate(options);
    std::string open_error;
    EXPECT_EQ(SourceBackend::open(options, open_error), nullptr) << error;
    EXPECT_EQ(open_error, error);
    return error;
  };
  SourceOptions options;
  options.frame_size = 59;
  EXPECT_NE(rejected(options).find("frame_size"), std::string::npos);
  options.frame_size = 65536;
  EXPECT_NE(rejected(options).find("frame_size"), std::string::npos);
  options = {};
  options.queue_pairs = 0;
  EXPECT_NE(rejected(options).find("queue_pairs"), std::string::npos);
  options = {};
  options.burst = 0;
  EXPECT_NE(rejected(options).find("burst"), std::string::npos);
  options = {};
  options.udp_src_port = 65535;
  options.queue_pairs = 2;
  EXPECT_NE(rejected(options).find("udp_src_port"), std::string::npos);
  options = {};
  options.frame_size = 60;
  EXPECT_EQ(SourceBackend::validate(options), "");
  options.frame_size = 65535;
  EXPECT_EQ(SourceBackend::validate(options), "");
}

// ---- unlimited -----------------------------------------------------------------------------

TEST(SourceBackend, UnlimitedSourceAlwaysHasAFrameWithGapFreeSequencesPerPair) {
  SourceOptions options;
  options.queue_pairs = 2;
  options.frame_size = 128;
  const auto owned = open_source(options);
  SourceBackend& source = *owned;
  EXPECT_EQ(source.kind(), "source");
  Packet packet;
  packet.header.flags = 0xff;  // overwritten
  for (uint64_t i = 0; i < 1000; ++i) {
    for (uint32_t pair = 0; pair < 2; ++pair) {
      ASSERT_TRUE(source.pull(pair, packet));
      EXPECT_EQ(packet.header, virtio::NetHeader{});
      ASSERT_EQ(packet.frame.size(), 128u);
      const auto info = parse_source_frame(packet.frame);
      ASSERT_TRUE(info);
      EXPECT_EQ(info->stream, pair);
      EXPECT_EQ(info->sequence, i);
      EXPECT_EQ(be16(packet.frame, 34), uint32_t{options.udp_src_port} + pair);  // one flow per pair
    }
  }
  EXPECT_EQ(source.generated(), 2000u);
  EXPECT_EQ(source.throttled(), 0u);
  // Unlimited: the fd is readable from the start (and stays so).
  EXPECT_TRUE(readable(source.rx_fd(0), 1000));
  EXPECT_TRUE(readable(source.rx_fd(1), 0));
  EXPECT_NE(source.rx_fd(0), source.rx_fd(1));
}

TEST(SourceBackend, TransmitSideCountsAndDrops) {
  const auto owned = open_source(SourceOptions{});
  SourceBackend& source = *owned;
  const std::vector<std::byte> frame(300);
  EXPECT_TRUE(source.transmit(0, {}, frame));
  EXPECT_TRUE(source.transmit(0, {}, frame));
  EXPECT_FALSE(source.transmit(1, {}, frame));  // one pair only
  Packet packet;
  EXPECT_FALSE(source.pull(1, packet));
  EXPECT_EQ(source.rx_fd(1), -1);
  const nlohmann::json stats = source.stats();
  EXPECT_EQ(stats.at("tx_frames"), 2);
  EXPECT_EQ(stats.at("tx_bytes"), 600);
  EXPECT_EQ(stats.at("bad_pair"), 2);
}

// ---- rate limiting -------------------------------------------------------------------------

TEST(SourceBackend, ThrottledPullArmsTheTimerfdForTheNextToken) {
  SourceOptions options;
  options.rate_pps = 50;  // one token every 20 ms
  options.burst = 1;
  const auto owned = open_source(options);
  SourceBackend& source = *owned;
  const int fd = source.rx_fd(0);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(readable(fd, 0));
  Packet packet;
  ASSERT_TRUE(source.pull(0, packet));   // the bucket starts full
  ASSERT_FALSE(source.pull(0, packet));  // empty now: timer armed
  ASSERT_FALSE(source.pull(0, packet));  // armed already: no system call, still counted
  EXPECT_EQ(source.throttled(), 2u);
  EXPECT_FALSE(readable(fd, 0));  // not due yet (20 ms)
  const auto before = Clock::now();
  ASSERT_TRUE(readable(fd, 2000)) << "the timerfd never fired";
  const auto waited = Clock::now() - before;
  EXPECT_LT(waited, 1000ms);
  ASSERT_TRUE(source.pull(0, packet));  // the token is there, and the fd is cleared
  EXPECT_FALSE(readable(fd, 0));
  EXPECT_EQ(parse_source_frame(packet.frame)->sequence, 1u);
  ASSERT_FALSE(source.pull(0, packet));  // throttled again, re-armed
  EXPECT_TRUE(readable(fd, 2000));
}

// Each pair on its own thread, waiting on its timerfd whenever pull() says no, for
// 300 ms: the total is the rate within generous bounds (loaded CI machines, sanitizers).
TEST(SourceBackend, RateIsRoughlyRightAndSplitOverPairs) {
  SourceOptions options;
  options.rate_pps = 10000;
  options.queue_pairs = 2;
  options.burst = 16;
  const auto owned = open_source(options);
  SourceBackend& source = *owned;
  constexpr auto kDuration = 300ms;
  std::vector<uint64_t> generated(2, 0);
  std::vector<bool> in_order(2, true);
  std::vector<std::thread> workers;
  const auto start = Clock::now();
  for (uint32_t pair = 0; pair < 2; ++pair) {
    workers.emplace_back([&, pair] {
      Packet packet;
      uint64_t expected = 0;
      while (Clock::now() - start < kDuration) {
        if (source.pull(pair, packet)) {
          const auto info = parse_source_frame(packet.frame);
          if (!info || info->sequence != expected || info->stream != pair) in_order[pair] = false;
          ++expected;
        } else {
          readable(source.rx_fd(pair), 50);
        }
      }
      generated[pair] = expected;
    });
  }
  for (auto& worker : workers) worker.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double expected_total = 10000.0 * seconds;
  const uint64_t total = generated[0] + generated[1];
  EXPECT_TRUE(in_order[0] && in_order[1]);
  EXPECT_GE(static_cast<double>(total), 0.6 * expected_total) << total << " frames in " << seconds << " s";
  EXPECT_LE(static_cast<double>(total), 1.2 * expected_total + 2 * 16) << total << " frames in " << seconds << " s";
  // Split evenly: each pair gets about half.
  EXPECT_GE(static_cast<double>(generated[0]), 0.35 * static_cast<double>(total));
  EXPECT_GE(static_cast<double>(generated[1]), 0.35 * static_cast<double>(total));
  EXPECT_GT(source.throttled(), 0u);
  EXPECT_EQ(source.generated(), total);
}

TEST(SourceBackend, IdleBucketRefillsToTheBurstOnly) {
  SourceOptions options;
  options.rate_pps = 1000;
  options.burst = 8;
  const auto owned = open_source(options);
  SourceBackend& source = *owned;
  Packet packet;
  std::this_thread::sleep_for(50ms);  // 50 tokens' worth, but the bucket holds 8
  int burst = 0;
  const auto start = Clock::now();
  while (source.pull(0, packet)) ++burst;
  // Tokens that accrued while the loop ran (1 per ms) may come on top of the 8.
  const auto loop_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  EXPECT_GE(burst, 8);
  EXPECT_LE(burst, 9 + loop_ms);
}

}  // namespace
}  // namespace uvhost::backends
