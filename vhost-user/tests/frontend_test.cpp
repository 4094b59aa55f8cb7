// frontend_test.cpp - the embedded frontend (Frontend) against our own backend
// (BackendDevice + InlineDatapath) in the same process, over a real socketpair: the
// backend runs on its own thread with the loop a real server runs (poll() on the
// control socket and the kick eventfds, handle_one(), datapath poll(), kicks disabled
// while polling and re-enabled with the re-check before sleeping). Then against a
// scripted backend (a raw Connection) that answers wrongly, late or not at all.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend_test_support.h"
#include "uvhost/testing/frames.h"
#include "uvhost/vhost_user/backend_device.h"
#include "uvhost/vhost_user/frontend.h"
#include "uvhost/testing/inline_datapath.h"
#include "uvhost/virtio/ring_layout.h"

namespace uvhost::vhost_user {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::count_open_fds;
using testing::make_eventfd;

// ------------------------------------------------------------------ the backend thread

// A BackendDevice with an InlineDatapath behind it, served on its own thread by the
// loop `uvhost serve` runs. The device and the datapath belong to that thread: look at
// them through on_loop() (runs there, synchronously) or after the loop ended.
class BackendLoop {
 public:
  BackendLoop(Connection connection, InlineBackend backend, DeviceOptions options = {})
      : datapath_(options.queue_pairs * 2, backend),
        device_(std::move(connection), datapath_, options),
        wake_(make_eventfd()) {
    thread_ = std::thread([this] { run(); });
  }
  ~BackendLoop() { stop(); }
  BackendLoop(const BackendLoop&) = delete;
  BackendLoop& operator=(const BackendLoop&) = delete;

  // Runs `fn` on the loop thread between two passes and waits for it. Once the loop has
  // ended, runs it here (after joining, so everything the loop did is visible).
  void on_loop(const std::function<void()>& fn) {
    {
      std::unique_lock lock(mutex_);
      if (!finished_) {
        task_ = &fn;
        task_done_ = false;
        (void)::eventfd_write(wake_.get(), 1);
        done_.wait(lock, [&] { return task_done_ || finished_; });
        if (task_done_) return;
        task_ = nullptr;
      }
    }
    join();
    fn();
  }

  // Asks `predicate` on the loop thread until it holds (true) or `timeout` passes.
  bool eventually(const std::function<bool()>& predicate, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      bool holds = false;
      on_loop([&] { holds = predicate(); });
      if (holds) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // Tells the loop to stop (the stop eventfd) and joins it.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stop_requested_ = true;
    }
    (void)::eventfd_write(wake_.get(), 1);
    join();
  }

  // Waits for the loop to end by itself (the connection closed). true if it did.
  bool wait_finished(std::chrono::milliseconds timeout) {
    {
      std::unique_lock lock(mutex_);
      if (!done_.wait_for(lock, timeout, [&] { return finished_; })) return false;
    }
    join();
    return true;
  }

  // After the loop ended (stop(), wait_finished()) or from on_loop().
  BackendDevice& device() { return device_; }
  InlineDatapath& datapath() { return datapath_; }
  bool connection_closed() const { return connection_closed_; }
  uint64_t kick_wakeups() const { return kick_wakeups_; }
  const std::string& loop_error() const { return loop_error_; }

 private:
  void join() {
    if (thread_.joinable()) thread_.join();
  }

  // Runs a pending task; true if the loop must stop.
  bool service_wake() {
    std::lock_guard lock(mutex_);
    if (task_ != nullptr) {
      (*task_)();
      task_ = nullptr;
      task_done_ = true;
      done_.notify_all();
    }
    return stop_requested_;
  }

  void run() {
    std::vector<pollfd> entries;
    std::vector<int> kicks;
    bool polling = false;  // the rings had work on the last pass: no sleeping, kicks off
    for (;;) {
      entries.clear();
      entries.push_back({wake_.get(), POLLIN, 0});
      entries.push_back({device_.connection().fd(), POLLIN, 0});
      kicks.clear();
      datapath_.kick_fds(kicks);
      for (int fd : kicks) entries.push_back({fd, POLLIN, 0});
      const int ready = ::poll(entries.data(), entries.size(), polling ? 0 : -1);
      if (ready < 0 && errno != EINTR) {
        loop_error_ = std::string("poll: ") + std::strerror(errno);
        break;
      }
      if (ready > 0) {
        if ((entries[0].revents & POLLIN) != 0) {
          eventfd_t ignored = 0;
          (void)::eventfd_read(wake_.get(), &ignored);
          if (service_wake()) break;
        }
        for (size_t i = 2; i < entries.size(); ++i) {
          if ((entries[i].revents & POLLIN) == 0) continue;
          eventfd_t ignored = 0;
          (void)::eventfd_read(entries[i].fd, &ignored);
          ++kick_wakeups_;
        }
        if (entries[1].revents != 0 && device_.handle_one() == BackendDevice::Progress::kClosed) {
          connection_closed_ = true;
          break;
        }
      }
      if (datapath_.poll() > 0) {
        if (!polling) datapath_.disable_kicks();
        polling = true;
      } else if (polling) {
        polling = datapath_.enable_kicks();
      }
    }
    std::lock_guard lock(mutex_);
    finished_ = true;
    done_.notify_all();
  }

  InlineDatapath datapath_;
  BackendDevice device_;
  base::UniqueFd wake_;
  std::mutex mutex_;
  std::condition_variable done_;
  const std::function<void()>* task_ = nullptr;
  bool task_done_ = false;
  bool stop_requested_ = false;
  bool finished_ = false;
  bool connection_closed_ = false;
  uint64_t kick_wakeups_ = 0;
  std::string loop_error_;
  std::thread thread_;
};

// A frontend and our backend, connected and started.
struct Rig {
  std::unique_ptr<BackendLoop> backend;
  std::unique_ptr<Frontend> frontend;
  std::string error;

  Rig(InlineBackend kind, const FrontendOptions& options, DeviceOptions device = {}) {
    auto pair = Connection::pair();
    EXPECT_TRUE(pair.has_value());
    if (!pair) return;
    backend = std::make_unique<BackendLoop>(std::move(pair->second), kind, device);
    frontend = Frontend::start(std::move(pair->first), options, error);
  }
};

// ------------------------------------------------------------------ frames

constexpr std::array<size_t, 12> kSizes{60, 64, 128, 244, 333, 512, 777, 1000, 1024, 1400, 1500, 1514};
using uvhost::testing::make_frame;
using uvhost::testing::reflected;


struct Received {
  virtio::NetHeader header;
  std::vector<std::byte> frame;
};

// Polls RX (waiting on the call eventfd in between) until `count` packets or `timeout`.
std::vector<Received> receive(Frontend& frontend, size_t count, std::chrono::milliseconds timeout,
                              uint32_t pair = 0) {
  std::vector<Received> out;
  const auto deadline = Clock::now() + timeout;
  while (out.size() < count && !frontend.broken()) {
    frontend.poll_rx(
        [&](const RxPacket& packet) {
          EXPECT_EQ(packet.queue_pair, pair);
          out.push_back(Received{packet.header, {packet.frame.begin(), packet.frame.end()}});
        },
        SIZE_MAX, pair);
    if (out.size() >= count || Clock::now() >= deadline) break;
    (void)frontend.wait_rx(10ms, pair);
  }
  return out;
}

// Reaps TX until nothing is in flight (true) or `timeout` passes.
bool wait_tx_done(Frontend& frontend, std::chrono::milliseconds timeout, uint32_t pair = 0) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    (void)frontend.reap_tx(pair);
    if (frontend.tx_in_flight(pair) == 0) return true;
    if (frontend.broken() || Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(100us);
  }
}

// Sends every frame, waiting for room when the TX ring is full. false on a timeout.
bool send_all(Frontend& frontend, const std::vector<std::vector<std::byte>>& frames, uint32_t pair = 0) {
  for (const auto& frame : frames) {
    const auto deadline = Clock::now() + 5s;
    while (!frontend.send(frame, pair)) {
      if (frontend.broken() || Clock::now() >= deadline) return false;
      (void)frontend.wait_tx_space(100ms, pair, frame.size());
    }
  }
  return true;
}

size_t total_bytes(const std::vector<std::vector<std::byte>>& frames) {
  size_t total = 0;
  for (const auto& frame : frames) total += frame.size();
  return total;
}

// ------------------------------------------------------------------ handshake

TEST(FrontendTest, HandshakeNegotiatesFeaturesAndReplyAck) {
  Rig rig(InlineBackend::kSink, FrontendOptions{});
  ASSERT_NE(rig.frontend, nullptr) << rig.error;
  Frontend& frontend = *rig.frontend;
  const uint64_t wanted = feature::kVersion1 | feature::kNetMrgRxbuf | feature::kRingEventIdx | feature::kInOrder |
                          feature::kProtocolFeatures;
  EXPECT_EQ(frontend.features(), wanted);  // exactly what we asked that the backend offers
  EXPECT_EQ(frontend.protocol_features(), protocol::kReplyAck | protocol::kMq);
  EXPECT_EQ(frontend.net_header_size(), virtio::kNetHeaderSizeMrg);
  EXPECT_EQ(frontend.queue_pairs(), 1u);
  EXPECT_FALSE(frontend.broken());

  rig.backend->on_loop([&] {
    BackendDevice& device = rig.backend->device();
    EXPECT_TRUE(device.owner_set());
    EXPECT_EQ(device.acked_features(), wanted);
    EXPECT_EQ(device.protocol_features(), protocol::kReplyAck | protocol::kMq);
    EXPECT_EQ(device.memory_slot_count(), 1u);
    EXPECT_EQ(rig.backend->datapath().features(), wanted);
    for (uint32_t vring = 0; vring < 2; ++vring) {
      EXPECT_TRUE(device.vring(vring).started) << vring;
      EXPECT_TRUE(device.vring(vring).enabled) << vring;
      EXPECT_EQ(device.vring(vring).size, 256u);
      EXPECT_TRUE(device.vring(vring).kick.valid());
      EXPECT_TRUE(device.vring(vring).call.valid());
      EXPECT_TRUE(rig.backend->datapath().queue(vring).started);
      EXPECT_TRUE(rig.backend->datapath().queue(vring).enabled);
    }
  });
  EXPECT_TRUE(frontend.stop()) << frontend.error();
}

TEST(FrontendTest, HandshakeWithTwoQueuePairsUsesMq) {
  FrontendOptions options;
  options.queue_pairs = 2;  // MQ is asked for by the frontend itself
  DeviceOptions device_options;
  device_options.queue_pairs = 2;
  Rig rig(InlineBackend::kLoopback, options, device_options);
  ASSERT_NE(rig.frontend, nullptr) << rig.error;
  Frontend& frontend = *rig.frontend;
  EXPECT_NE(frontend.features() & feature::kNetMq, 0u);
  EXPECT_NE(frontend.protocol_features() & protocol::kMq, 0u);
  EXPECT_NE(frontend.protocol_features() & protocol::kReplyAck, 0u);
  EXPECT_EQ(frontend.queue_pairs(), 2u);
  rig.backend->on_loop([&] {
    EXPECT_EQ(rig.backend->device().acked_features(), frontend.features());
    for (uint32_t vring = 0; vring < 4; ++vring) {
      EXPECT_TRUE(rig.backend->device().vring(vring).started) << vring;
      EXPECT_TRUE(rig.backend->device().vring(vring).enabled) << vring;
    }
  });

  // Each pair is its own path: what pair 1 sends comes back on pair 1 only.
  const std::vector<std::vector<std::byte>> on_one{make_frame(100, 1), make_frame(1514, 2), make_frame(60, 3)};
  ASSERT_TRUE(send_all(frontend, on_one, 1));
  const auto got_one = receive(frontend, on_one.size(), 5s, 1);
  ASSERT_EQ(got_one.size(), on_one.size());
  for (size_t i = 0; i < on_one.size(); ++i) EXPECT_EQ(got_one[i].frame, reflected(on_one[i])) << i;
  EXPECT_TRUE(receive(frontend, 1, 20ms, 0).empty());

  const std::vector<std::vector<std::byte>> on_zero{make_frame(200, 4), make_frame(300, 5)};
  ASSERT_TRUE(send_all(frontend, on_zero, 0));
  const auto got_zero = receive(frontend, on_zero.size(), 5s, 0);
  ASSERT_EQ(got_zero.size(), on_zero.size());
  for (size_t i = 0; i < on_zero.size(); ++i) EXPECT_EQ(got_zero[i].frame, reflected(on_zero[i])) << i;
  ASSERT_TRUE(wait_tx_done(frontend, 5s, 0));
  ASSERT_TRUE(wait_tx_done(frontend, 5s, 1));

  rig.backend->on_loop([&] {
    InlineDatapath& datapath = rig.backend->datapath();
    EXPECT_EQ(datapath.queue(1).packets, on_zero.size());
    EXPECT_EQ(datapath.queue(3).packets, on_one.size());
    EXPECT_EQ(datapath.queue(0).packets, on_zero.size());
    EXPECT_EQ(datapath.queue(2).packets, on_one.size());
    EXPECT_EQ(datapath.queue(2).bytes, total_bytes(on_one));
  });
  ASSERT_TRUE(frontend.stop()) << frontend.error();
  EXPECT_EQ(frontend.stopped_base(0), std::optional<uint16_t>(2));
  EXPECT_EQ(frontend.stopped_base(1), std::optional<uint16_t>(2));
  EXPECT_EQ(frontend.stopped_base(2), std::optional<uint16_t>(3));
  EXPECT_EQ(frontend.stopped_base(3), std::optional<uint16_t>(3));
  EXPECT_EQ(frontend.stopped_base(4), std::nullopt);
}

TEST(FrontendTest, SeveralQueuePairsNeedABackendWithEnough) {
  FrontendOptions options;
  options.queue_pairs = 2;
  Rig rig(InlineBackend::kSink, options);  // the device has one pair: no MQ offered
  EXPECT_EQ(rig.frontend, nullptr);
  EXPECT_NE(rig.error.find("queue pairs"), std::string::npos) << rig.error;
}

TEST(FrontendTest, HandshakeWithoutProtocolFeatures) {
  FrontendOptions options;
  options.features &= ~feature::kProtocolFeatures;
  Rig rig(InlineBackend::kSink, options);
  ASSERT_NE(rig.frontend, nullptr) << rig.error;
  Frontend& frontend = *rig.frontend;
  EXPECT_EQ(frontend.features() & feature::kProtocolFeatures, 0u);
  EXPECT_EQ(frontend.protocol_features(), 0u);  // no REPLY_ACK either
  // No REPLY_ACK: start() returned once the last request was sent, perhaps before the
  // backend handled it.
  ASSERT_TRUE(rig.backend->eventually([&] { return rig.backend->device().vring(1).started; }, 5s));
  rig.backend->on_loop([&] {
    EXPECT_EQ(rig.backend->device().protocol_features(), 0u);
    // Without protocol features rings start enabled: no SET_VRING_ENABLE needed.
    for (uint32_t vring = 0; vring < 2; ++vring) {
      EXPECT_TRUE(rig.backend->device().vring(vring).started) << vring;
      EXPECT_TRUE(rig.backend->device().vring(vring).enabled) << vring;
      EXPECT_TRUE(rig.backend->datapath().queue(vring).enabled) << vring;
    }
  });
  const auto frame = make_frame(777, 9);
  ASSERT_TRUE(frontend.send(frame));
  ASSERT_TRUE(wait_tx_done(frontend, 5s));
  rig.backend->on_loop([&] {
    EXPECT_EQ(rig.backend->datapath().queue(1).packets, 1u);
    EXPECT_EQ(rig.backend->datapath().last_frame(), frame);
  });
  EXPECT_TRUE(frontend.stop()) << frontend.error();
}

// ------------------------------------------------------------------ sink

TEST(FrontendTest, SinkCountsEveryFrame) {
  Rig rig(InlineBackend::kSink, FrontendOptions{});
  ASSERT_NE(rig.frontend, nullptr) << rig.error;
  Frontend& frontend = *rig.frontend;

  // More frames than the ring holds, in batches of 32 per flush (one kick at most each).
  constexpr uint32_t kFrames = 700;
  std::vector<std::vector<std::byte>> frames;
  for (uint32_t i = 0; i < kFrames; ++i) frames.push_back(make_frame(kSizes[i % kSizes.size()], i));
  size_t flushes = 0;
  for (size_t next = 0; next < frames.size();) {
    const size_t batch_end = std::min(next + 32, frames.size());
    while (next < batch_end) {
      if (frontend.enqueue_tx(frames[next])) {
        ++next;
        continue;
      }
      ASSERT_FALSE(frontend.broken()) << frontend.error();
      frontend.flush_tx();
      ++flushes;
      ASSERT_TRUE(frontend.wait_tx_space(5s));
    }
    frontend.flush_tx();
    ++flushes;
  }
  ASSERT_TRUE(wait_tx_done(frontend, 5s)) << frontend.error();
  EXPECT_EQ(frontend.tx_in_flight(), 0u);
  EXPECT_EQ(frontend.stats().tx_packets, kFrames);
  EXPECT_GE(frontend.stats().tx_kicks, 1u);
  EXPECT_LE(frontend.stats().tx_kicks, flushes);

  rig.backend->on_loop([&] {
    const InlineDatapath& datapath = rig.backend->datapath();
    EXPECT_EQ(datapath.queue(1).packets, kFrames);
    EXPECT_EQ(datapath.queue(1).bytes, total_bytes(frames));
    EXPECT_EQ(datapath.last_frame(), frames.back());
    EXPECT_FALSE(datapath.queue(1).broken);
    EXPECT_EQ(datapath.queue(0).packets, 0u);  // the sink sends nothing back
    EXPECT_GE(rig.backend->kick_wakeups(), 1u);
  });
  EXPECT_EQ(receive(frontend, 1, 20ms).size(), 0u);
  EXPECT_TRUE(frontend.stop()) << frontend.error();
}

TEST(FrontendTest, FramesLargerThanABufferAreChainedOnTransmit) {
  FrontendOptions options;
  options.buffer_size = 128;
  options.queue_size = 64;
  Rig rig(InlineBackend::kSink, options);
  ASSERT_NE(rig.frontend, nullptr) << rig.error;
  Frontend& frontend = *rig.frontend;
  const auto big = make_frame(1514, 1);  // 12 + 1514 bytes: 12 buffers of 128
  ASSERT_TRUE(frontend.send(big));
  ASSERT_TRUE(wait_tx_done(frontend, 5s));
  rig.backend->on_loop([&] {
    EXPECT_EQ(rig.backend->datapath().queue(1).packets, 1u);
    EXPECT_EQ(rig.backend->datapath().queue(1).bytes, big.size());
    EXPECT_EQ(rig.backend->datapath().last_frame(), big);
  });
  // Five of them need 60 of the 64 descriptors; a sixth waits for completions.
  for (uint32_t i = 0; i < 5; ++i) ASSERT_TRUE(frontend.enqueue_tx(make_frame(1514, 10 + i)));
  EXPECT_FALSE(frontend.enqueue_tx(make_frame(1514, 15)));  // not published: nothing completes
  EXPECT_EQ(frontend.stats().tx_full, 1u);
  EXPECT_TRUE(frontend.enqueue_tx(make_frame(200, 16)));  // two buffers still fit
  frontend.flush_tx();
  ASSERT_TRUE(wait_tx_done(frontend, 5s));
  ASSERT_TRUE(frontend.send(make_frame(1514, 15)));  // the buffers came back
  ASSERT_TRUE(wait_tx_done(frontend, 5s));
  // A frame that needs more buffers than the ring has is refused, not counted as full.
  EXPECT_FALSE(frontend.enqueue_tx(std::vector<std::byte>(64 * 128, std::byte{1})));
  EXPECT_EQ(frontend.stats().tx_full, 1u);
  EXPECT_FALSE(frontend.broken());
  rig.backend->on_loop([&] {
    EXPECT_EQ(rig.backend->datapath().queue(1).packets, 8u);
    EXPECT_EQ(rig.backend->datapath().last_frame(), make_frame(1514, 15));
  });
  EXPECT_TRUE(frontend.stop()) << frontend.error();
  EXPECT_EQ(frontend.stopped_base(1), std::optional<uint16_t>(8));
}

// ------------------------------------------------------------------ loopback

struct LoopbackCase {
  const char* name;
  uint64_t features_removed;
  size_t header_size;
  uint64_t features_added = 0;  // beyond the defaults (RING_PACKED)
};

class FrontendLoopbackTest : public ::testing::TestWithParam<LoopbackCase> {};

TEST_P(FrontendLoopbackTest, EveryFrameComesBackWithMacsSwapped) {
  FrontendOptions options;
  options.features &= ~GetParam().features_removed;
  options.features |= GetParam().features_added;
  Rig rig(InlineBackend::kLoopback, options);
  ASSERT_NE(rig.frontend, nullptr) << rig.error;
  Frontend& frontend = *rig.frontend;
  EXPECT_EQ(frontend.features() & GetParam().features_removed, 0u);
  EXPECT_EQ(frontend.features() & GetParam().features_added, GetParam().features_added);
  EXPECT_EQ(frontend.net_header_size(), GetParam().header_size);

  // Windows of 64 (below the RX ring's 256), more frames than either ring holds.
  constexpr uint32_t kFrames = 640;
  constexpr uint32_t kWindow = 64;
  static_assert(kFrames % kWindow == 0);
  std::vector<std::vector<std::byte>> frames;
  for (uint32_t i = 0; i < kFrames; ++i) frames.push_back(make_frame(kSizes[(i * 5) % kSizes.size()], i));
  size_t received = 0;
  for (uint32_t start = 0; start < kFrames; start += kWindow) {
    const std::vector<std::vector<std::byte>> window(frames.begin() + start, frames.begin() + start + kWindow);
    ASSERT_TRUE(send_all(frontend, window)) << frontend.error();
    const auto got = receive(frontend, window.size(), 5s);
    ASSERT_EQ(got.size(), window.size()) << "window at " << start << ": " << frontend.error();
    for (size_t i = 0; i < window.size(); ++i) {
      EXPECT_EQ(got[i].frame, reflected(window[i])) << "frame " << start + i;
      if (GetParam().header_size == virtio::kNetHeaderSizeMrg) {
        EXPECT_EQ(got[i].header.num_buffers, 1u);
      }
      EXPECT_EQ(got[i].header.flags, 0u);
      EXPECT_EQ(got[i].header.gso_type, 0u);
    }
    received += got.size();
  }
  ASSERT_TRUE(wait_tx_done(frontend, 5s));
  EXPECT_EQ(received, kFrames);
  EXPECT_EQ(frontend.stats().tx_packets, kFrames);
  EXPECT_EQ(frontend.stats().rx_packets, kFrames);
  EXPECT_EQ(frontend.stats().rx_buffers, kFrames);  // 2048-byte buffers: one per frame

  rig.backend->on_loop([&] {
    const InlineDatapath& datapath = rig.backend->datapath();
    EXPECT_EQ(datapath.queue(1).packets, kFrames);
    EXPECT_EQ(datapath.queue(1).bytes, total_bytes(frames));
    EXPECT_EQ(datapath.queue(0).packets, kFrames);
    EXPECT_EQ(datapath.queue(0).bytes, total_bytes(frames));
    EXPECT_EQ(datapath.queue(0).dropped, 0u);
    EXPECT_FALSE(datapath.queue(0).broken);
    EXPECT_FALSE(datapath.queue(1).broken);
  });
  EXPECT_TRUE(frontend.stop()) << frontend.error();
}

INSTANTIATE_TEST_SUITE_P(
    Features, FrontendLoopbackTest,
    ::testing::Values(LoopbackCase{"Default", 0, virtio::kNetHeaderSizeMrg},
                      LoopbackCase{"NoEventIdx", feature::kRingEventIdx, virtio::kNetHeaderSizeMrg},
                      LoopbackCase{"NoMrgRxbuf", feature::kNetMrgRxbuf, virtio::kNetHeaderSizeMrg},
                      LoopbackCase{"LegacyHeader", feature::kNetMrgRxbuf | feature::kVersion1,
                                   virtio::kNetHeaderSizeLegacy},
                      LoopbackCase{"NoProtocolFeatures", feature::kProtocolFeatures, virtio::kNetHeaderSizeMrg},
                      LoopbackCase{"Packed", 0, virtio::kNetHeaderSizeMrg, feature::kRingPacked},
                      LoopbackCase{"PackedNoEventIdx", feature::kRingEventIdx, virtio::kNetHeaderSizeMrg,
                                   feature::kRingPacked},
                      LoopbackCase{"PackedNotInOrder", feature::kInOrder, virtio::kNetHeaderSizeMrg,
                                   feature::kRingPacked}),
    [](const ::testing::TestParamInfo<LoopbackCase>& param) { return std::string(param.param.name); });

// The number of RX buffers of `buffer_size` bytes a merged packet of `frame` bytes needs.
uint16_t merged_buffers(size_t frame, size_t buffer_size) {
  const size_t first = buffer_size - virtio::kNetHeaderSizeMrg;
  if (frame <= first) return 1;
  return static_cast<uint16_t>(1 + (frame - first + buffer_size - 1) / buffer_size);
}

TEST(FrontendTest, LoopbackMergeableRxBuffersSpanSeveralBuffers) {
  FrontendOptions options;
  options.buffer_size = 256;
  Rig rig(InlineBackend::kLoopback, options);
  ASSERT_NE(rig.frontend, nullptr) << rig.error;
  Frontend& frontend = *rig.frontend;
  ASSERT_NE(frontend.features() & feature::kNetMrgRxbuf, 0u);

  // 16 frames per window: at most 16 * 7 = 112 RX buffers of the ring's 256.
  constexpr uint32_t kFrames = 320;
  constexpr uint32_t kWindow = 16;
  static_assert(kFrames % kWindow == 0);
  std::vector<std::vector<std::byte>> frames;
  for (uint32_t i = 0; i < kFrames; ++i) {
    frames.push_back(make_frame(i % 4 == 0 ? kSizes[(i / 4) % kSizes.size()] : 1500, i));
  }
  uint64_t buffers = 0;
  size_t multi = 0;
  for (uint32_t start = 0; start < kFrames; start += kWindow) {
    const std::vector<std::vector<std::byte>> window(frames.begin() + start, frames.begin() + start + kWindow);
    ASSERT_TRUE(send_all(frontend, window)) << frontend.error();
    // Half of them now, the rest in a later call: an assembly may straddle calls.
    std::vector<Received> got;
    frontend.poll_rx([&](const RxPacket& packet) {
      got.push_back(Received{packet.header, {packet.frame.begin(), packet.frame.end()}});
    }, kWindow / 2);
    EXPECT_LE(got.size(), kWindow / 2);
    auto rest = receive(frontend, window.size() - got.size(), 5s);
    got.insert(got.end(), rest.begin(), rest.end());
    ASSERT_EQ(got.size(), window.size()) << "window at " << start << ": " << frontend.error();
    for (size_t i = 0; i < window.size(); ++i) {
      EXPECT_EQ(got[i].frame, reflected(window[i])) << "frame " << start + i;
      EXPECT_EQ(got[i].header.num_buffers, merged_buffers(window[i].size(), options.buffer_size))
          << "frame " << start + i << " of " << window[i].size() << " bytes";
      buffers += got[i].header.num_buffers;
      if (got[i].header.num_buffers > 1) ++multi;
    }
  }
  ASSERT_TRUE(wait_tx_done(frontend, 5s));
  EXPECT_GT(multi, kFrames / 2);
  EXPECT_EQ(merged_buffers(1500, 256), 6u);
  EXPECT_EQ(frontend.stats().rx_packets, kFrames);
  EXPECT_EQ(frontend.stats().rx_buffers, buffers);
  EXPECT_FALSE(frontend.broken()) << frontend.error();
  rig.backend->on_loop([&] {
    const InlineDatapath& datapath = rig.backend->datapath();
    EXPECT_EQ(datapath.queue(0).packets, kFrames);
    EXPECT_EQ(datapath.queue(0).bytes, total_bytes(frames));
    EXPECT_EQ(datapath.queue(0).dropped, 0u);
    EXPECT_EQ(datapath.queue(1).packets, kFrames);
  });
  ASSERT_TRUE(frontend.stop()) << frontend.error();
  // The device consumed exactly the RX buffers the frontend reaped.
  EXPECT_EQ(frontend.stopped_base(0), std::optional<uint16_t>(static_cast<uint16_t>(buffers)));
  EXPECT_EQ(frontend.stopped_base(1), std::optional<uint16_t>(kFrames));  // one TX chain per frame
}

TEST(FrontendTest, LoopbackWithoutMergeableRxBuffersDropsFramesLargerThanABuffer) {
  FrontendOptions options;
  options.buffer_size = 256;  // 244 bytes of frame after the 12-byte header
  options.features &= ~feature::kNetMrgRxbuf;
  Rig rig(InlineBackend::kLoopback, options);
  ASSERT_NE(rig.frontend, nullptr) << rig.error;
  Frontend& frontend = *rig.frontend;
  ASSERT_EQ(frontend.features() & feature::kNetMrgRxbuf, 0u);

  std::vector<std::vector<std::byte>> frames;
  std::vector<std::vector<std::byte>> fitting;
  size_t too_large = 0;
  for (uint32_t i = 0; i < 40; ++i) {
    const size_t size = i % 3 == 0 ? 1500 : (i % 3 == 1 ? 60 : 244);
    frames.push_back(make_frame(size, i));
    if (size <= 244) {
      fitting.push_back(frames.back());
    } else {
      ++too_large;
    }
  }
  frames.push_back(make_frame(245, 99));  // one byte too many
  ++too_large;
  ASSERT_TRUE(send_all(frontend, frames)) << frontend.error();
  ASSERT_TRUE(wait_tx_done(frontend, 5s));
  const auto got = receive(frontend, fitting.size(), 5s);
  ASSERT_EQ(got.size(), fitting.size()) << frontend.error();
  for (size_t i = 0; i < fitting.size(); ++i) {
    EXPECT_EQ(got[i].frame, reflected(fitting[i])) << i;
    EXPECT_EQ(got[i].header.num_buffers, 1u);
  }
  EXPECT_TRUE(receive(frontend, 1, 20ms).empty());  // nothing else came
  EXPECT_EQ(frontend.stats().rx_packets, fitting.size());
  EXPECT_FALSE(frontend.broken()) << frontend.error();
  rig.backend->on_loop([&] {
    const InlineDatapath& datapath = rig.backend->datapath();
    EXPECT_EQ(datapath.queue(1).packets, frames.size());
    EXPECT_EQ(datapath.queue(0).packets, fitting.size());
    EXPECT_EQ(datapath.queue(0).dropped, too_large);
    EXPECT_FALSE(datapath.queue(0).broken);  // a drop, not a guest fault
  });
  ASSERT_TRUE(frontend.stop()) << frontend.error();
  // Dropped frames gave their buffer back: only delivered ones consumed RX entries.
  EXPECT_EQ(frontend.stopped_base(0), std::optional<uint16_t>(static_cast<uint16_t>(fitting.size())));
}

TEST(FrontendTest, FullRxRingDropsTheExcessWithoutBlocking) {
  FrontendOptions options;
  options.queue_size = 64;
  Rig rig(InlineBackend::kLoopback, options);
  ASSERT_NE(rig.frontend, nullptr) << rig.error;
  Frontend& frontend = *rig.frontend;

  // No RX polling while 100 frames go out: the RX ring holds 64.
  std::vector<std::vector<std::byte>> frames;
  for (uint32_t i = 0; i < 100; ++i) frames.push_back(make_frame(kSizes[i % kSizes.size()], i));
  ASSERT_TRUE(send_all(frontend, frames)) << frontend.error();
  ASSERT_TRUE(wait_tx_done(frontend, 5s));  // TX keeps completing while RX is full
  rig.backend->on_loop([&] {
    EXPECT_EQ(rig.backend->datapath().queue(1).packets, 100u);
    EXPECT_EQ(rig.backend->datapath().queue(0).packets, 64u);
    EXPECT_EQ(rig.backend->datapath().queue(0).dropped, 36u);
  });

  // The first 64 are there, in order; nothing else.
  auto got = receive(frontend, 64, 5s);
  ASSERT_EQ(got.size(), 64u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].frame, reflected(frames[i])) << i;
  EXPECT_TRUE(receive(frontend, 1, 20ms).empty());

  // Buffers reposted: traffic flows again.
  std::vector<std::vector<std::byte>> again;
  for (uint32_t i = 0; i < 32; ++i) again.push_back(make_frame(1000, 1000 + i));
  ASSERT_TRUE(send_all(frontend, again));
  got = receive(frontend, again.size(), 5s);
  ASSERT_EQ(got.size(), again.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].frame, reflected(again[i])) << i;
  ASSERT_TRUE(wait_tx_done(frontend, 5s));
  rig.backend->on_loop([&] {
    EXPECT_EQ(rig.backend->datapath().queue(0).packets, 96u);
    EXPECT_EQ(rig.backend->datapath().queue(0).dropped, 36u);
  });
  EXPECT_EQ(frontend.stats().rx_packets, 96u);
  EXPECT_TRUE(frontend.stop()) << frontend.error();
}

// ------------------------------------------------------------------ stop

// Sends `count` frames through a loopback backend in windows of `window`, each window
// received back (MAC addresses swapped) before the next is sent.
::testing::AssertionResult loop_back_in_windows(Frontend& frontend, uint32_t count, uint32_t window) {
  std::vector<std::vector<std::byte>> frames;
  for (uint32_t i = 0; i < count; ++i) frames.push_back(make_frame(kSizes[i % kSizes.size()], i));
  for (size_t start = 0; start < frames.size(); start += window) {
    const size_t end = std::min<size_t>(start + window, frames.size());
    const std::vector<std::vector<std::byte>> sent(frames.begin() + static_cast<ptrdiff_t>(start),
                                                   frames.begin() + static_cast<ptrdiff_t>(end));
    if (!send_all(frontend, sent)) return ::testing::AssertionFailure() << "send: " << frontend.error();
    const auto got = receive(frontend, sent.size(), 5s);
    if (got.size() != sent.size()) {
      return ::testing::AssertionFailure() << "window at " << start << ": " << got.size() << " of " << sent.size()
                                           << " came back: " << frontend.error();
    }
    for (size_t i = 0; i < sent.size(); ++i) {
      if (got[i].frame != reflected(sent[i])) return ::testing::AssertionFailure() << "frame " << start + i;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(FrontendTest, StopAnswersVringBasesAndClosesTheConnection) {
  Rig rig(InlineBackend::kLoopback, FrontendOptions{});
  ASSERT_NE(rig.frontend, nullptr) << rig.error;
  Frontend& frontend = *rig.frontend;
  ASSERT_TRUE(loop_back_in_windows(frontend, 300, 100));
  ASSERT_TRUE(wait_tx_done(frontend, 5s));
  EXPECT_EQ(frontend.stopped_base(0), std::nullopt);

  ASSERT_TRUE(frontend.stop()) << frontend.error();
  EXPECT_EQ(frontend.stopped_base(0), std::optional<uint16_t>(300));  // RX buffers the device used
  EXPECT_EQ(frontend.stopped_base(1), std::optional<uint16_t>(300));  // TX chains it consumed
  EXPECT_TRUE(frontend.stop());  // a second stop has nothing to do

  // The backend thread saw the connection close and ended by itself.
  ASSERT_TRUE(rig.backend->wait_finished(5s));
  EXPECT_TRUE(rig.backend->connection_closed());
  EXPECT_TRUE(rig.backend->loop_error().empty());
  BackendDevice& device = rig.backend->device();
  EXPECT_FALSE(device.is_open());
  EXPECT_EQ(device.close_reason(), "frontend closed the connection");
  for (uint32_t vring = 0; vring < 2; ++vring) {
    EXPECT_FALSE(device.vring(vring).started) << vring;
    EXPECT_FALSE(rig.backend->datapath().queue(vring).started) << vring;
    EXPECT_EQ(device.vring(vring).base, 300u) << vring;
  }
}

// Packed rings: SET_VRING_BASE carried position 0 with wrap counter 1 (the RX buffers
// posted before the ring started do not move it), and GET_VRING_BASE answers position
// and wrap counter after the rings went round once.
TEST(FrontendTest, PackedStopAnswersPositionsWithTheirWrapCounters) {
  FrontendOptions options;
  options.features |= feature::kRingPacked;
  Rig rig(InlineBackend::kLoopback, options);
  ASSERT_NE(rig.frontend, nullptr) << rig.error;
  Frontend& frontend = *rig.frontend;
  ASSERT_NE(frontend.features() & feature::kRingPacked, 0u);
  ASSERT_TRUE(loop_back_in_windows(frontend, 300, 100));
  ASSERT_TRUE(wait_tx_done(frontend, 5s));
  ASSERT_TRUE(frontend.stop()) << frontend.error();
  // 300 one-slot chains through a ring of 256: position 44 on the second lap (wrap 0).
  EXPECT_EQ(frontend.stopped_base(0), std::optional<uint16_t>(44));
  EXPECT_EQ(frontend.stopped_base(1), std::optional<uint16_t>(44));
  ASSERT_TRUE(rig.backend->wait_finished(5s));
  for (uint32_t vring = 0; vring < 2; ++vring) EXPECT_EQ(rig.backend->device().vring(vring).base, 44u) << vring;
}

TEST(FrontendTest, IndicesWrapAroundAndStopReportsThemModulo65536) {
  FrontendOptions options;
  options.queue_size = 128;
  Rig rig(InlineBackend::kSink, options);
  ASSERT_NE(rig.frontend, nullptr) << rig.error;
  Frontend& frontend = *rig.frontend;
  // 70000 chains: the 16-bit avail and used indices wrap once.
  constexpr uint32_t kFrames = 70000;
  const auto frame = make_frame(60, 0);
  for (uint32_t sent = 0; sent < kFrames;) {
    const uint32_t batch_end = std::min(sent + 64, kFrames);
    while (sent < batch_end) {
      if (frontend.enqueue_tx(frame)) {
        ++sent;
        continue;
      }
      ASSERT_FALSE(frontend.broken()) << frontend.error();
      frontend.flush_tx();
      ASSERT_TRUE(frontend.wait_tx_space(5s));
    }
    frontend.flush_tx();
  }
  ASSERT_TRUE(wait_tx_done(frontend, 10s)) << frontend.error();
  rig.backend->on_loop([&] { EXPECT_EQ(rig.backend->datapath().queue(1).packets, kFrames); });
  ASSERT_TRUE(frontend.stop()) << frontend.error();
  EXPECT_EQ(frontend.stopped_base(0), std::optional<uint16_t>(0));  // the sink never touches RX
  EXPECT_EQ(frontend.stopped_base(1), std::optional<uint16_t>(kFrames % 65536));
  ASSERT_TRUE(rig.backend->wait_finished(5s));
  EXPECT_EQ(rig.backend->device().vring(1).base, kFrames % 65536);
}

// ------------------------------------------------------------------ a scripted backend

// A backend played by hand on a raw Connection: it answers as a correct backend would
// (offering what ours offers) unless the hook handles a request itself. Runs on its own
// thread; what it saw is read after join().
class ScriptedBackend {
 public:
  // Return true when the hook dealt with the message (answered, or chose not to).
  using Hook = std::function<bool(ScriptedBackend&, const Message&)>;

  struct Seen {
    Request request = Request::kNone;
    uint32_t flags = 0;
    Payload payload;
    size_t fds = 0;
  };

  ScriptedBackend(Connection connection, uint32_t queue_pairs, Hook hook)
      : connection_(std::move(connection)), queue_pairs_(queue_pairs), hook_(std::move(hook)) {
    thread_ = std::thread([this] { run(); });
  }
  ~ScriptedBackend() {
    join();
    if (memory_ != nullptr) ::munmap(memory_, region_.size);
  }
  ScriptedBackend(const ScriptedBackend&) = delete;
  ScriptedBackend& operator=(const ScriptedBackend&) = delete;

  void join() {
    if (thread_.joinable()) thread_.join();
  }

  // For hooks (the backend thread).
  void reply(Request request, const Payload& payload, std::span<const int> fds = {}) {
    (void)connection_.send(encode_reply(request, payload), fds);
  }
  void send_raw(const Header& header, std::span<const std::byte> payload) {
    std::vector<std::byte> bytes(kHeaderSize + payload.size());
    std::memcpy(bytes.data(), &header.request, 4);
    std::memcpy(bytes.data() + 4, &header.flags, 4);
    std::memcpy(bytes.data() + 8, &header.size, 4);
    if (!payload.empty()) std::memcpy(bytes.data() + kHeaderSize, payload.data(), payload.size());
    (void)connection_.send(bytes);
  }
  void close() { connection_.close(); }
  // The frontend's memory at frontend address `user_addr` (SET_VRING_ADDR carries those).
  std::byte* frontend_memory(uint64_t user_addr) const { return memory_ + (user_addr - region_.user_addr); }
  const std::vector<VringAddress>& addresses() const { return addresses_; }
  // Signals every call eventfd received so far (a call with nothing behind it).
  void signal_calls() {
    for (const base::UniqueFd& fd : call_fds_) (void)::eventfd_write(fd.get(), 1);
  }

  // After join().
  const std::vector<Seen>& seen() const { return seen_; }
  bool saw_close() const { return saw_close_; }
  const std::string& error() const { return error_; }

 private:
  void run() {
    for (;;) {
      // Bounded: a test that goes wrong must not hang here forever.
      if (!connection_.is_open() || !connection_.wait_readable(10s)) break;
      ReceiveResult received = connection_.receive();
      if (received.status == ReceiveStatus::kClosed) {
        saw_close_ = true;
        break;
      }
      if (received.status != ReceiveStatus::kMessage) {
        error_ = received.error;
        break;
      }
      ParseResult parsed = parse_request(std::move(received.message), ParseLimits{queue_pairs_ * 2});
      if (auto* bad = std::get_if<ParseError>(&parsed)) {
        error_ = bad->reason;
        break;
      }
      Message& message = std::get<Message>(parsed);
      seen_.push_back(Seen{message.request, message.flags, message.payload, message.fds.size()});
      remember(message);
      if (hook_ && hook_(*this, message)) continue;
      answer(message);
    }
  }

  void remember(Message& message) {
    if (message.request == Request::kSetMemTable && memory_ == nullptr) {
      region_ = std::get<MemoryTable>(message.payload).regions[0];
      void* mapping = ::mmap(nullptr, region_.size, PROT_READ | PROT_WRITE, MAP_SHARED, message.fds[0].get(), 0);
      if (mapping != MAP_FAILED) memory_ = static_cast<std::byte*>(mapping);
    }
    if (message.request == Request::kSetVringAddr) addresses_.push_back(std::get<VringAddress>(message.payload));
    if (message.request == Request::kSetVringCall && !message.fds.empty()) {
      call_fds_.push_back(std::move(message.fds[0]));
    }
    if (message.request == Request::kSetProtocolFeatures) protocol_ = std::get<uint64_t>(message.payload);
  }

  void answer(const Message& message) {
    switch (message.request) {
      case Request::kGetFeatures: reply(message.request, offered_net_features(queue_pairs_)); return;
      case Request::kGetProtocolFeatures: reply(message.request, protocol::kImplemented); return;
      case Request::kGetQueueNum: reply(message.request, uint64_t{queue_pairs_}); return;
      case Request::kGetVringBase:
        reply(message.request, VringState{std::get<VringState>(message.payload).index, 0});
        return;
      default:
        if (message.need_reply() && (protocol_ & protocol::kReplyAck) != 0) reply(message.request, uint64_t{0});
        return;
    }
  }

  Connection connection_;
  uint32_t queue_pairs_;
  Hook hook_;
  uint64_t protocol_ = 0;
  MemoryRegionDesc region_;
  std::byte* memory_ = nullptr;
  std::vector<VringAddress> addresses_;
  std::vector<base::UniqueFd> call_fds_;
  std::vector<Seen> seen_;
  bool saw_close_ = false;
  std::string error_;
  std::thread thread_;
};

struct ScriptedRun {
  std::unique_ptr<Frontend> frontend;
  std::string error;
  std::chrono::milliseconds took{0};
};

ScriptedRun start_against(ScriptedBackend::Hook hook, std::unique_ptr<ScriptedBackend>& backend,
                          FrontendOptions options = {}, uint32_t backend_pairs = 1) {
  ScriptedRun run;
  auto pair = Connection::pair();
  EXPECT_TRUE(pair.has_value());
  if (!pair) return run;
  backend = std::make_unique<ScriptedBackend>(std::move(pair->second), backend_pairs, std::move(hook));
  const auto started = Clock::now();
  run.frontend = Frontend::start(std::move(pair->first), options, run.error);
  run.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  return run;
}

TEST(FrontendScriptedTest, HandshakeFollowsTheSpecOrderWithNeedReply) {
  std::unique_ptr<ScriptedBackend> backend;
  ScriptedRun run = start_against({}, backend);
  ASSERT_NE(run.frontend, nullptr) << run.error;
  ASSERT_TRUE(run.frontend->stop()) << run.frontend->error();
  backend->join();
  EXPECT_TRUE(backend->saw_close());
  EXPECT_TRUE(backend->error().empty()) << backend->error();

  const std::vector<ScriptedBackend::Seen>& seen = backend->seen();
  std::vector<Request> order;
  for (const auto& s : seen) order.push_back(s.request);
  const std::vector<Request> expected{
      Request::kGetFeatures,     Request::kGetProtocolFeatures, Request::kSetProtocolFeatures,
      Request::kGetQueueNum,     Request::kSetOwner,            Request::kSetFeatures,
      Request::kSetMemTable,     Request::kSetVringNum,         Request::kSetVringBase,
      Request::kSetVringAddr,    Request::kSetVringCall,        Request::kSetVringKick,
      Request::kSetVringNum,     Request::kSetVringBase,        Request::kSetVringAddr,
      Request::kSetVringCall,    Request::kSetVringKick,        Request::kSetVringEnable,
      Request::kSetVringEnable,  Request::kSetVringEnable,      Request::kSetVringEnable,
      Request::kGetVringBase,    Request::kGetVringBase};
  ASSERT_EQ(order, expected);
  for (size_t i = 0; i < seen.size(); ++i) {
    const bool own_reply = seen[i].request == Request::kGetFeatures ||
                           seen[i].request == Request::kGetProtocolFeatures ||
                           seen[i].request == Request::kGetQueueNum || seen[i].request == Request::kGetVringBase;
    // REPLY_ACK applies from the request after SET_PROTOCOL_FEATURES on, and never to
    // requests that have a reply of their own.
    const bool acked = i > 2 && !own_reply;
    EXPECT_EQ((seen[i].flags & kFlagNeedReply) != 0, acked) << to_string(seen[i].request) << " at " << i;
  }
  EXPECT_EQ(std::get<uint64_t>(seen[2].payload), protocol::kReplyAck | protocol::kMq);
  EXPECT_EQ(std::get<uint64_t>(seen[5].payload), feature::kVersion1 | feature::kNetMrgRxbuf |
                                                     feature::kRingEventIdx | feature::kInOrder |
                                                     feature::kProtocolFeatures);
  EXPECT_EQ(seen[6].fds, 1u);   // the memfd
  EXPECT_EQ(seen[10].fds, 1u);  // call eventfd
  EXPECT_EQ(seen[11].fds, 1u);  // kick eventfd
  EXPECT_EQ(std::get<VringState>(seen[17].payload).num, 1u);  // enable
  EXPECT_EQ(std::get<VringState>(seen[19].payload).num, 0u);  // stop(): disable first
}

TEST(FrontendScriptedTest, WrongRequestInReplyFailsTheStart) {
  const int fds_before = count_open_fds();
  {
    std::unique_ptr<ScriptedBackend> backend;
    ScriptedRun run = start_against(
        [](ScriptedBackend& b, const Message& m) {
          if (m.request != Request::kGetFeatures) return false;
          b.reply(Request::kGetProtocolFeatures, offered_net_features(1));
          return true;
        },
        backend);
    EXPECT_EQ(run.frontend, nullptr);
    EXPECT_NE(run.error.find("reply to VHOST_USER_GET_FEATURES: answers request 15 instead"), std::string::npos)
        << run.error;
    backend->join();
    EXPECT_TRUE(backend->saw_close());  // the frontend closed its end
    EXPECT_EQ(backend->seen().size(), 1u);
  }
  EXPECT_EQ(count_open_fds(), fds_before);
}

TEST(FrontendScriptedTest, ReplyWithoutReplyFlagFailsTheStart) {
  const int fds_before = count_open_fds();
  {
    std::unique_ptr<ScriptedBackend> backend;
    ScriptedRun run = start_against(
        [](ScriptedBackend& b, const Message& m) {
          if (m.request != Request::kGetFeatures) return false;
          const uint64_t features = offered_net_features(1);
          b.send_raw(Header{static_cast<uint32_t>(Request::kGetFeatures), kVersion1, 8},
                     std::as_bytes(std::span(&features, 1)));
          return true;
        },
        backend);
    EXPECT_EQ(run.frontend, nullptr);
    EXPECT_NE(run.error.find("reply to VHOST_USER_GET_FEATURES: bad flags 0x1"), std::string::npos) << run.error;
    backend->join();
    EXPECT_TRUE(backend->saw_close());
  }
  EXPECT_EQ(count_open_fds(), fds_before);
}

TEST(FrontendScriptedTest, ShortReplyFailsTheStart) {
  std::unique_ptr<ScriptedBackend> backend;
  ScriptedRun run = start_against(
      [](ScriptedBackend& b, const Message& m) {
        if (m.request != Request::kGetQueueNum) return false;
        const uint32_t queues = 1;
        b.send_raw(Header{static_cast<uint32_t>(Request::kGetQueueNum), kVersion1 | kFlagReply, 4},
                   std::as_bytes(std::span(&queues, 1)));
        return true;
      },
      backend);
  EXPECT_EQ(run.frontend, nullptr);
  EXPECT_NE(run.error.find("payload is 4 bytes, must be 8"), std::string::npos) << run.error;
}

TEST(FrontendScriptedTest, ReplyCarryingAnFdFailsTheStartWithoutLeakingIt) {
  const int fds_before = count_open_fds();
  {
    base::UniqueFd stray = make_eventfd();
    const int stray_fd = stray.get();
    std::unique_ptr<ScriptedBackend> backend;
    ScriptedRun run = start_against(
        [stray_fd](ScriptedBackend& b, const Message& m) {
          if (m.request != Request::kGetProtocolFeatures) return false;
          const int fds[] = {stray_fd};
          b.reply(m.request, protocol::kImplemented, fds);
          return true;
        },
        backend);
    EXPECT_EQ(run.frontend, nullptr);
    EXPECT_NE(run.error.find("carries 1 fds"), std::string::npos) << run.error;
  }
  EXPECT_EQ(count_open_fds(), fds_before);  // the received copy of the fd was closed too
}

TEST(FrontendScriptedTest, SilentBackendTimesOut) {
  const int fds_before = count_open_fds();
  {
    FrontendOptions options;
    options.reply_timeout = 150ms;
    std::unique_ptr<ScriptedBackend> backend;
    ScriptedRun run = start_against(
        [](ScriptedBackend&, const Message& m) { return m.request == Request::kGetFeatures; }, backend, options);
    EXPECT_EQ(run.frontend, nullptr);
    EXPECT_EQ(run.error, "frontend: no reply to VHOST_USER_GET_FEATURES within 150 ms");
    EXPECT_GE(run.took, 150ms);
    EXPECT_LT(run.took, 3s);
    backend->join();
    EXPECT_TRUE(backend->saw_close());
  }
  EXPECT_EQ(count_open_fds(), fds_before);
}

TEST(FrontendScriptedTest, SilenceLaterInTheHandshakeTimesOutToo) {
  const int fds_before = count_open_fds();
  {
    FrontendOptions options;
    options.reply_timeout = 100ms;
    std::unique_ptr<ScriptedBackend> backend;
    // The memory table is never acknowledged: the frontend has its memfd and eventfds
    // by then, and the backend holds the received memfd.
    ScriptedRun run = start_against(
        [](ScriptedBackend&, const Message& m) { return m.request == Request::kSetMemTable; }, backend, options);
    EXPECT_EQ(run.frontend, nullptr);
    EXPECT_EQ(run.error, "frontend: no reply to VHOST_USER_SET_MEM_TABLE within 100 ms");
    EXPECT_LT(run.took, 3s);
  }
  EXPECT_EQ(count_open_fds(), fds_before);
}

TEST(FrontendScriptedTest, BackendClosingInsteadOfAnsweringFailsTheStart) {
  std::unique_ptr<ScriptedBackend> backend;
  ScriptedRun run = start_against(
      [](ScriptedBackend& b, const Message& m) {
        if (m.request != Request::kSetOwner) return false;
        b.close();
        return true;
      },
      backend);
  EXPECT_EQ(run.frontend, nullptr);
  EXPECT_NE(run.error.find("closed the socket instead of answering VHOST_USER_SET_OWNER"), std::string::npos)
      << run.error;
}

TEST(FrontendScriptedTest, NegativeAckFailsTheStart) {
  std::unique_ptr<ScriptedBackend> backend;
  ScriptedRun run = start_against(
      [](ScriptedBackend& b, const Message& m) {
        if (m.request != Request::kSetVringAddr) return false;
        b.reply(m.request, uint64_t{1});
        return true;
      },
      backend);
  EXPECT_EQ(run.frontend, nullptr);
  EXPECT_EQ(run.error, "frontend: backend refused VHOST_USER_SET_VRING_ADDR (ack 1)");
}

TEST(FrontendScriptedTest, TooFewQueuePairsFailsTheStart) {
  FrontendOptions options;
  options.queue_pairs = 4;
  std::unique_ptr<ScriptedBackend> backend;
  ScriptedRun run = start_against({}, backend, options, 2);
  EXPECT_EQ(run.frontend, nullptr);
  EXPECT_EQ(run.error, "frontend: backend has 2 queue pairs, 4 asked for");
}

TEST(FrontendScriptedTest, FeaturesNotAskedForAreNeverUsed) {
  std::unique_ptr<ScriptedBackend> backend;
  ScriptedRun run = start_against(
      [](ScriptedBackend& b, const Message& m) {
        if (m.request != Request::kGetFeatures) return false;
        b.reply(m.request, ~uint64_t{0});  // everything, including bits nobody defined
        return true;
      },
      backend);
  ASSERT_NE(run.frontend, nullptr) << run.error;
  EXPECT_EQ(run.frontend->features(), FrontendOptions{}.features);
  run.frontend->stop();
  backend->join();
  const auto& seen = backend->seen();
  const auto set = std::find_if(seen.begin(), seen.end(), [](const auto& s) { return s.request == Request::kSetFeatures; });
  ASSERT_NE(set, seen.end());
  EXPECT_EQ(std::get<uint64_t>(set->payload), FrontendOptions{}.features);
}

TEST(FrontendScriptedTest, GetVringBaseForAnotherVringFailsTheStop) {
  std::unique_ptr<ScriptedBackend> backend;
  ScriptedRun run = start_against(
      [](ScriptedBackend& b, const Message& m) {
        if (m.request != Request::kGetVringBase) return false;
        b.reply(m.request, VringState{std::get<VringState>(m.payload).index + 1, 0});
        return true;
      },
      backend);
  ASSERT_NE(run.frontend, nullptr) << run.error;
  EXPECT_FALSE(run.frontend->stop());
  EXPECT_EQ(run.frontend->error(), "frontend: GET_VRING_BASE for vring 0 answered for vring 1");
  EXPECT_EQ(run.frontend->stopped_base(0), std::nullopt);
  backend->join();
  EXPECT_TRUE(backend->saw_close());  // closed either way
}

TEST(FrontendScriptedTest, GetVringBaseOutsideTheRingFailsTheStop) {
  std::unique_ptr<ScriptedBackend> backend;
  ScriptedRun run = start_against(
      [](ScriptedBackend& b, const Message& m) {
        if (m.request != Request::kGetVringBase) return false;
        // RX has 256 buffers posted and none used: 257 was never made available.
        b.reply(m.request, VringState{std::get<VringState>(m.payload).index, 257});
        return true;
      },
      backend);
  ASSERT_NE(run.frontend, nullptr) << run.error;
  EXPECT_FALSE(run.frontend->stop());
  EXPECT_EQ(run.frontend->error(), "frontend: GET_VRING_BASE for vring 0 answered 0x101, which the ring cannot have reached");
}

// Writes used element {id, len} at position `position` of the used ring at `used` and
// publishes used->idx = position + 1 (what a device does, done wrong on purpose).
void forge_used(std::byte* used, uint16_t position, uint16_t ring_size, uint32_t id, uint32_t len) {
  std::byte* element = used + virtio::used_entry_offset(position % ring_size);
  std::memcpy(element, &id, 4);
  std::memcpy(element + 4, &len, 4);
  std::atomic_ref<uint16_t>(*reinterpret_cast<uint16_t*>(used + virtio::kRingIdxOffset))
      .store(static_cast<uint16_t>(position + 1), std::memory_order_release);
}

TEST(FrontendScriptedTest, UsedIdNotInFlightBreaksTheFrontend) {
  std::unique_ptr<ScriptedBackend> backend;
  // Before acknowledging the last enable, return a TX chain that was never made available.
  ScriptedRun run = start_against(
      [](ScriptedBackend& b, const Message& m) {
        if (m.request != Request::kSetVringEnable || std::get<VringState>(m.payload).index != 1) return false;
        forge_used(b.frontend_memory(b.addresses().at(1).used_user_addr), 0, 256, 7, 0);
        b.reply(m.request, uint64_t{0});
        return true;
      },
      backend);
  ASSERT_NE(run.frontend, nullptr) << run.error;
  EXPECT_EQ(run.frontend->reap_tx(), 0u);
  EXPECT_TRUE(run.frontend->broken());
  EXPECT_EQ(run.frontend->error(), "frontend: device returned a used id on TX vring 1 that was not in flight");
  EXPECT_FALSE(run.frontend->send(make_frame(60, 0)));  // nothing is sent after that
}

TEST(FrontendScriptedTest, RxUsedLengthBeyondTheBufferBreaksTheFrontend) {
  std::unique_ptr<ScriptedBackend> backend;
  ScriptedRun run = start_against(
      [](ScriptedBackend& b, const Message& m) {
        if (m.request != Request::kSetVringEnable || std::get<VringState>(m.payload).index != 1) return false;
        // Head 0 is an RX buffer in flight, but 4096 bytes do not fit its 2048.
        forge_used(b.frontend_memory(b.addresses().at(0).used_user_addr), 0, 256, 0, 4096);
        b.reply(m.request, uint64_t{0});
        return true;
      },
      backend);
  ASSERT_NE(run.frontend, nullptr) << run.error;
  size_t packets = 0;
  EXPECT_EQ(run.frontend->poll_rx([&](const RxPacket&) { ++packets; }), 0u);
  EXPECT_EQ(packets, 0u);
  EXPECT_TRUE(run.frontend->broken());
  EXPECT_EQ(run.frontend->error(), "frontend: device wrote 4096 bytes into a 2048-byte RX buffer");
}

TEST(FrontendScriptedTest, StaleCallsDoNotEndWaitsEarly) {
  std::unique_ptr<ScriptedBackend> backend;
  // A backend that signals every call fd once during the handshake and then never
  // uses a ring: the signals are stale, nothing was received or completed.
  ScriptedRun run = start_against(
      [](ScriptedBackend& b, const Message& m) {
        if (m.request != Request::kSetVringEnable || std::get<VringState>(m.payload).index != 1) return false;
        b.signal_calls();
        b.reply(m.request, uint64_t{0});
        return true;
      },
      backend);
  ASSERT_NE(run.frontend, nullptr) << run.error;
  Frontend& frontend = *run.frontend;

  auto started = Clock::now();
  EXPECT_FALSE(frontend.wait_rx(100ms));
  EXPECT_GE(Clock::now() - started, 100ms);

  // Fill the TX ring (the backend never consumes), then wait for room that never comes.
  uint32_t queued = 0;
  while (frontend.enqueue_tx(make_frame(60, queued))) ++queued;
  EXPECT_EQ(queued, 256u);
  EXPECT_EQ(frontend.stats().tx_full, 1u);
  started = Clock::now();
  EXPECT_FALSE(frontend.wait_tx_space(100ms));
  EXPECT_GE(Clock::now() - started, 100ms);
  EXPECT_FALSE(frontend.broken());
  // A frame that can never fit the ring is answered at once.
  started = Clock::now();
  EXPECT_FALSE(frontend.wait_tx_space(1s, 0, 256 * 2048));
  EXPECT_LT(Clock::now() - started, 500ms);
}

}  // namespace
}  // namespace uvhost::vhost_user
