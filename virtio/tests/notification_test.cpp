// notification_test.cpp - notification suppression both ways: avail/used flags,
// VIRTIO_F_EVENT_IDX (including index wrap-around at 65535), the re-check after
// enabling, eventfd kicks, and a two-thread driver/device run with kicks and signals.
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "test_guest.h"
#include "uvhost/virtio/ring_layout.h"

namespace uvhost::virtio {
namespace {

using testing::QueuePair;
using testing::TestMemory;

TEST(NeedEvent, MatchesTheSpecIncludingWrapAround) {
  // Notify iff the index moved past `event`: event in [old, new).
  EXPECT_TRUE(need_event(0, 1, 0));
  EXPECT_FALSE(need_event(1, 1, 0));
  EXPECT_TRUE(need_event(4, 10, 0));
  EXPECT_FALSE(need_event(10, 10, 0));
  EXPECT_FALSE(need_event(3, 10, 5));   // event before old: already notified
  EXPECT_FALSE(need_event(5, 5, 5));    // nothing moved
  // Wrap-around: indices cross 65535 -> 0.
  EXPECT_TRUE(need_event(65535, 0, 65535));
  EXPECT_TRUE(need_event(65534, 2, 65530));
  EXPECT_TRUE(need_event(1, 2, 65530));
  EXPECT_FALSE(need_event(2, 2, 65530));
  EXPECT_FALSE(need_event(65529, 2, 65530));
  // A full 65536 move is indistinguishable from none (the protocol never does it).
  EXPECT_FALSE(need_event(7, 100, 100));
}

DriverQueue::Buffer one_buffer(TestMemory& mem, bool writable = false) {
  return DriverQueue::Buffer{mem.alloc(64), 64, writable};
}

// One packet through: driver adds+publishes, device pops+uses+publishes.
void round_trip(QueuePair& q, const DriverQueue::Buffer& buf) {
  DescriptorChain chain;
  ASSERT_TRUE(q.driver.add_chain({&buf, 1}).has_value());
  q.driver.publish();
  ASSERT_TRUE(q.device.pop(q.mem.map(), chain));
  q.device.add_used(q.mem.map(), chain.head, 0);
  q.device.publish_used(q.mem.map());
}

TEST(Notification, FlagsModeHonorsNoInterruptAndNoNotify) {
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 8});
  const auto buf = one_buffer(mem);
  round_trip(q, buf);
  EXPECT_EQ(q.driver.kicks(), 1u);
  EXPECT_TRUE(q.device.must_signal_guest(mem.map()));
  EXPECT_FALSE(q.device.must_signal_guest(mem.map())) << "nothing new published";
  ASSERT_TRUE(q.driver.reap().has_value());

  q.driver.disable_interrupts();
  q.device.disable_guest_kicks(mem.map());
  round_trip(q, buf);
  EXPECT_EQ(q.driver.kicks(), 1u) << "NO_NOTIFY set: the driver must not kick";
  EXPECT_FALSE(q.device.must_signal_guest(mem.map())) << "NO_INTERRUPT set";
  EXPECT_TRUE(q.driver.enable_interrupts()) << "a used entry is pending: reap it";
  ASSERT_TRUE(q.driver.reap().has_value());
  EXPECT_FALSE(q.device.enable_guest_kicks(mem.map())) << "nothing arrived meanwhile";
  round_trip(q, buf);
  EXPECT_EQ(q.driver.kicks(), 2u);
  EXPECT_TRUE(q.device.must_signal_guest(mem.map()));
}

TEST(Notification, EnableGuestKicksReportsBuffersThatArrivedMeanwhile) {
  for (bool event_idx : {false, true}) {
    SCOPED_TRACE(event_idx ? "event_idx" : "flags");
    TestMemory mem;
    QueuePair q(mem, DriverOptions{.size = 8, .event_idx = event_idx});
    const auto buf = one_buffer(mem);
    round_trip(q, buf);
    q.device.disable_guest_kicks(mem.map());
    const uint32_t kicks = q.driver.kicks();
    ASSERT_TRUE(q.driver.add_chain({&buf, 1}).has_value());
    q.driver.publish();
    EXPECT_EQ(q.driver.kicks(), kicks) << "kicks are disabled";
    EXPECT_TRUE(q.device.enable_guest_kicks(mem.map())) << "the buffer came while kicks were off";
    DescriptorChain chain;
    ASSERT_TRUE(q.device.pop(mem.map(), chain));
    EXPECT_FALSE(q.device.enable_guest_kicks(mem.map()));
    ASSERT_TRUE(q.driver.add_chain({&buf, 1}).has_value());
    q.driver.publish();
    EXPECT_EQ(q.driver.kicks(), kicks + 1) << "kicks are back on";
  }
}

TEST(Notification, EventIdxSignalsOnlyWhenUsedEventIsPassed) {
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 16, .event_idx = true});
  const auto buf = one_buffer(mem);
  round_trip(q, buf);
  EXPECT_TRUE(q.device.must_signal_guest(mem.map()));  // used_event = 0: first entry
  // The driver has not reaped: used_event stays 0, so entries 1.. need no signal.
  round_trip(q, buf);
  EXPECT_FALSE(q.device.must_signal_guest(mem.map()));
  // The driver reaps both and asks for the next one (used_event = 2).
  ASSERT_TRUE(q.driver.reap().has_value());
  ASSERT_TRUE(q.driver.reap().has_value());
  round_trip(q, buf);
  EXPECT_TRUE(q.device.must_signal_guest(mem.map()));
  // Batch of three published at once: used_event (3) lies inside it.
  ASSERT_TRUE(q.driver.reap().has_value());
  DescriptorChain chain;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.driver.add_chain({&buf, 1}).has_value());
  q.driver.publish();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(q.device.pop(mem.map(), chain));
    q.device.add_used(mem.map(), chain.head, 0);
  }
  q.device.publish_used(mem.map());
  EXPECT_TRUE(q.device.must_signal_guest(mem.map()));
}

TEST(Notification, EventIdxAvailEventControlsDriverKicks) {
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 16, .event_idx = true});
  const auto buf = one_buffer(mem);
  round_trip(q, buf);
  EXPECT_EQ(q.driver.kicks(), 1u);  // avail_event = 0 initially
  // The device does not advance avail_event (kicks "disabled"): no more kicks.
  round_trip(q, buf);
  round_trip(q, buf);
  EXPECT_EQ(q.driver.kicks(), 1u);
  EXPECT_FALSE(q.device.enable_guest_kicks(mem.map()));  // avail_event = 3
  round_trip(q, buf);
  EXPECT_EQ(q.driver.kicks(), 2u);
}

TEST(Notification, EventIdxAcrossIndexWrapAt65535) {
  for (bool event_idx : {true, false}) {
    SCOPED_TRACE(event_idx ? "event_idx" : "flags");
    TestMemory mem;
    QueuePair q(mem, DriverOptions{.size = 8, .event_idx = event_idx, .initial_index = 65530});
    const auto buf = one_buffer(mem);
    EXPECT_EQ(q.device.last_avail_index(), 65530);
    EXPECT_EQ(q.device.used_index(), 65530);
    uint32_t signals = 0;
    for (int i = 0; i < 20; ++i) {  // crosses 65535 -> 0
      SCOPED_TRACE(::testing::Message() << "packet " << i);
      const uint32_t kicks_before = q.driver.kicks();
      round_trip(q, buf);
      ASSERT_FALSE(q.device.enable_guest_kicks(q.mem.map()));  // keep the driver kicking every time
      EXPECT_EQ(q.driver.kicks(), kicks_before + 1);
      if (q.device.must_signal_guest(q.mem.map())) ++signals;
      ASSERT_TRUE(q.driver.reap().has_value());  // advances used_event to the next entry
    }
    EXPECT_EQ(signals, 20u) << "the driver asked for every entry";
    EXPECT_EQ(q.device.last_avail_index(), static_cast<uint16_t>(65530 + 20));
    EXPECT_FALSE(q.device.is_broken());
  }
}

TEST(Notification, EventIdxSuppressedAcrossWrapThenRequested) {
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 8, .event_idx = true, .initial_index = 65534});
  const auto buf = one_buffer(mem);
  q.driver.disable_interrupts();  // used_event stays at 65534
  round_trip(q, buf);             // used idx 65534 -> 65535: passes used_event 65534
  EXPECT_TRUE(q.device.must_signal_guest(mem.map()));  // first check after start signals anyway
  round_trip(q, buf);  // 65535 -> 0
  EXPECT_FALSE(q.device.must_signal_guest(mem.map()));
  round_trip(q, buf);  // 0 -> 1
  EXPECT_FALSE(q.device.must_signal_guest(mem.map()));
  EXPECT_TRUE(q.driver.enable_interrupts()) << "entries are pending";
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.driver.reap().has_value());  // used_event -> 1
  round_trip(q, buf);  // 1 -> 2: entry 1 written, equals used_event
  EXPECT_TRUE(q.device.must_signal_guest(mem.map()));
}

TEST(Notification, KickThroughAnEventfd) {
  const int fd = ::eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(fd, 0);
  TestMemory mem;
  QueuePair q(mem, DriverOptions{.size = 8}, eventfd_kick(fd));
  const auto buf = one_buffer(mem);
  round_trip(q, buf);
  eventfd_t value = 0;
  ASSERT_EQ(::eventfd_read(fd, &value), 0);
  EXPECT_EQ(value, 1u);
  ::close(fd);
}

// Two threads, the real protocol: the device sleeps on the kick eventfd and uses the
// disable / drain / enable-and-recheck loop; the driver sleeps on the call eventfd.
// A lost wake-up would hang (bounded by poll timeouts and reported as a failure).
TEST(Notification, TwoThreadsNoLostWakeups) {
  for (bool event_idx : {false, true}) {
    SCOPED_TRACE(event_idx ? "event_idx" : "flags");
    const int kick_fd = ::eventfd(0, 0);
    const int call_fd = ::eventfd(0, 0);
    TestMemory mem;
    QueuePair q(mem, DriverOptions{.size = 64, .event_idx = event_idx}, eventfd_kick(kick_fd));
    constexpr uint32_t kPackets = 20000;
    std::atomic<bool> device_stalled{false};
    std::thread device([&] {
      DescriptorChain chain;
      uint32_t done = 0;
      while (done < kPackets) {
        eventfd_t v = 0;
        (void)::eventfd_read(kick_fd, &v);  // blocks until the driver kicks
        for (;;) {
          q.device.disable_guest_kicks(mem.map());
          while (q.device.pop(mem.map(), chain)) {
            q.device.add_used(mem.map(), chain.head, 0);
            ++done;
          }
          q.device.publish_used(mem.map());
          if (q.device.must_signal_guest(mem.map())) (void)::eventfd_write(call_fd, 1);
          if (!q.device.enable_guest_kicks(mem.map())) break;
        }
        if (q.device.is_broken()) {
          device_stalled = true;
          return;
        }
      }
    });
    const auto buf = one_buffer(mem);
    uint32_t sent = 0, reaped = 0;
    while (reaped < kPackets) {
      while (sent < kPackets && q.driver.add_chain({&buf, 1})) ++sent;
      q.driver.publish();
      while (q.driver.reap()) ++reaped;
      if (reaped == kPackets) break;
      if (q.driver.free_descriptors() == 0 || sent == kPackets) {
        q.driver.disable_interrupts();
        if (q.driver.enable_interrupts()) continue;  // something arrived meanwhile
        eventfd_t v = 0;
        (void)::eventfd_read(call_fd, &v);  // blocks until the device signals
      }
    }
    device.join();
    EXPECT_FALSE(device_stalled.load());
    EXPECT_EQ(reaped, kPackets);
    ::close(kick_fd);
    ::close(call_fd);
  }
}

}  // namespace
}  // namespace uvhost::virtio
