// dirty_log_e2e_test.cpp - migration's dirty-page log through the daemon's datapath:
// our embedded Frontend turns logging on the way QEMU does (SET_LOG_BASE, LOG_ALL,
// VHOST_VRING_F_LOG on every ring) and checks that every receive buffer the datapath
// wrote (virtio-net header and frame) and both used rings are marked in its bitmap.
// The rings hold 1024 entries, so a used ring spans three pages: enabling and disabling
// kicks marks the first (flags) and the last (avail_event), only the used elements
// written mark the middle one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve_test_support.h"
#include "uvhost/serve/daemon.h"

namespace uvhost::serve {
namespace {

using namespace uvhost::serve::testing;

constexpr uint64_t kPage = 4096;

// Guest-physical ranges [first, last] of the received packets, headers included, as
// the frontend sees them in its buffers.
struct Written {
  uint64_t first = 0;
  uint64_t last = 0;
};

std::vector<Written> receive_ranges(Frontend& frontend, size_t count) {
  std::vector<Written> out;
  const auto deadline = Clock::now() + kPatience;
  while (out.size() < count && !frontend.broken() && Clock::now() < deadline) {
    frontend.poll_rx([&](const RxPacket& packet) {
      const auto frame = frontend.guest_address_of(packet.frame.data());
      ASSERT_TRUE(frame.has_value()) << "a packet not in one buffer";
      out.push_back(Written{*frame - frontend.net_header_size(), *frame + packet.frame.size() - 1});
    });
    if (out.size() < count) (void)frontend.wait_rx(10ms);
  }
  return out;
}

TEST(DirtyLogE2E, EveryReceiveBufferAndUsedRingWrittenWhileLoggingIsMarked) {
  TempDir dir;
  Daemon daemon({port("loop", dir.file("l.sock"), BackendKind::kLoopback)});
  std::string error;
  ASSERT_TRUE(daemon.start(error)) << error;
  FrontendOptions options;
  options.protocol_features |= vhost_user::protocol::kLogShmfd;
  options.guest_phys_base = 0x40000000;
  options.queue_size = 1024;  // guest-physical addresses are not offsets into the memfd
  auto frontend = connect(dir.file("l.sock"), error, options);
  ASSERT_NE(frontend, nullptr) << error;

  // Traffic before logging, then the log on and clean.
  ASSERT_TRUE(send_all(*frontend, make_frames(16, 1)));
  ASSERT_EQ(receive_ranges(*frontend, 16).size(), 16u);
  ASSERT_TRUE(frontend->start_dirty_log()) << frontend->error();
  frontend->clear_dirty_log();
  EXPECT_FALSE(frontend->page_dirty(frontend->used_ring_address(0)));

  // 600 frames of every size through the loopback: more than the receive ring holds, so
  // every buffer is written at least twice while logging.
  const auto frames = make_frames(600, 100);
  size_t received = 0;
  for (size_t first = 0; first < frames.size(); first += 30) {
    const std::vector<std::vector<std::byte>> batch(frames.begin() + static_cast<std::ptrdiff_t>(first),
                                                    frames.begin() + static_cast<std::ptrdiff_t>(first + 30));
    ASSERT_TRUE(send_all(*frontend, batch)) << frontend->error();
    for (const Written& written : receive_ranges(*frontend, batch.size())) {
      ++received;
      for (uint64_t page = written.first / kPage; page <= written.last / kPage; ++page) {
        EXPECT_TRUE(frontend->page_dirty(page * kPage))
            << "receive buffer page " << std::hex << page * kPage << " written but not marked";
      }
    }
  }
  EXPECT_EQ(received, frames.size());
  // Used entries 16..615 of each ring were written while logging: slots 510 and up lie
  // on the used ring's second page.
  for (uint32_t vring : {0u, 1u}) {
    const uint64_t used = frontend->used_ring_address(vring);
    EXPECT_TRUE(frontend->page_dirty(used)) << "used ring " << vring << ": idx";
    EXPECT_TRUE(frontend->page_dirty(used + kPage)) << "used ring " << vring << ": elements";
  }
  EXPECT_FALSE(frontend->broken()) << frontend->error();
  frontend.reset();
  (void)stop_and_report(daemon);
}

}  // namespace
}  // namespace uvhost::serve
