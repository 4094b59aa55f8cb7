// process_threads_test.cpp - per-thread CPU from /proc (process_threads.h), bench frames
// (bench_frame.h) and the frontend's ring sizing (frontend_driver.h).
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "uvhost/bench/bench_frame.h"
#include "uvhost/bench/cpu_time.h"
#include "uvhost/bench/frontend_driver.h"
#include "uvhost/bench/process_threads.h"

namespace uvhost::bench {
namespace {

TEST(ProcessThreads, SeesANamedBusyThreadOfThisProcess) {
  std::atomic<bool> named{false};
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    pthread_setname_np(pthread_self(), "bench-spinner");
    named.store(true);
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  while (!named.load()) std::this_thread::yield();
  const auto start = snapshot_threads(::getpid());
  const int64_t wall0 = monotonic_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds{300});
  const auto end = snapshot_threads(::getpid());
  const double window = static_cast<double>(monotonic_ns() - wall0) * 1e-9;
  stop.store(true);
  spinner.join();

  ASSERT_GE(end.size(), 2u);
  const auto threads = thread_cpu_between(start, end, window, "backend");
  const ThreadCpu* spin = nullptr;
  for (const ThreadCpu& t : threads) {
    EXPECT_EQ(t.side, "backend");
    EXPECT_GE(t.cpu_seconds, 0);
    if (t.name == "bench-spinner") spin = &t;
  }
  ASSERT_NE(spin, nullptr);
  // It spun the whole window, but on a shared machine it may not have had a CPU all
  // along: only "clearly more than nothing, never more than the window".
  EXPECT_GT(spin->cpu_seconds, 0.01);
  EXPECT_LE(spin->cpu_seconds, window * 1.05);
}

TEST(ProcessThreads, GoneProcessIsEmpty) { EXPECT_TRUE(snapshot_threads(0x7ffffff0).empty()); }

TEST(ProcessThreads, DeltasNewThreadsAndMergedSmallOnes) {
  const std::vector<ThreadSample> start{{10, "main", 1'000'000'000}, {11, "w0", 500'000'000}, {12, "idle", 7}};
  const std::vector<ThreadSample> end{{10, "main", 1'001'000'000},   // 1 ms: under 1% of 1 s
                                      {11, "w0", 1'400'000'000},     // 0.9 s
                                      {12, "idle", 7},               // nothing
                                      {13, "new", 200'000'000}};     // born in the window: 0.2 s
  const auto threads = thread_cpu_between(start, end, 1.0, "backend");
  ASSERT_EQ(threads.size(), 3u);
  EXPECT_EQ(threads[0].name, "w0");
  EXPECT_NEAR(threads[0].cpu_seconds, 0.9, 1e-9);
  EXPECT_EQ(threads[1].name, "new");
  EXPECT_NEAR(threads[1].cpu_seconds, 0.2, 1e-9);
  EXPECT_EQ(threads[2].name, "other");
  EXPECT_NEAR(threads[2].cpu_seconds, 0.001, 1e-9);
  // Nothing merged when every thread is above the threshold, or it is 0.
  EXPECT_EQ(thread_cpu_between(start, end, 1.0, "backend", 0).size(), 4u);
}

TEST(BenchFrame, BuildStampParse) {
  std::vector<std::byte> frame(64);
  build_bench_frame(frame);
  stamp_bench_frame(frame, BenchStamp{7, 123456789, 42});
  const auto sent = parse_bench_frame(frame, false);
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->session, 7u);
  EXPECT_EQ(sent->sequence, 123456789u);
  EXPECT_EQ(sent->send_ns, 42u);
  EXPECT_FALSE(parse_bench_frame(frame, true));  // not swapped yet
  // Swap the MACs as a loopback / macswap peer does.
  for (size_t i = 0; i < 6; ++i) std::swap(frame[i], frame[6 + i]);
  EXPECT_TRUE(parse_bench_frame(frame, true));
  EXPECT_FALSE(parse_bench_frame(frame, false));
  frame[12] = std::byte{0x08};  // another EtherType
  EXPECT_FALSE(parse_bench_frame(frame, true));
  EXPECT_FALSE(parse_bench_frame(std::span<const std::byte>(frame).first(kBenchHeaderBytes - 1), true));
}

TEST(FrontendOptionsFor, RingsFitTheWorkload) {
  EXPECT_EQ(frontend_options_for(Point{Workload::kRr, 64, 1}, 1).queue_size, 256);
  EXPECT_EQ(frontend_options_for(Point{Workload::kStreamTx, 1500, 1}, 1).queue_size, 256);
  // 65535 + 12 bytes = 33 buffers of 2048; 32 of them: 1056 -> 2048 entries.
  const auto big = frontend_options_for(Point{Workload::kStreamRx, 65535, 1}, 1);
  EXPECT_EQ(big.queue_size, 2048);
  EXPECT_EQ(big.buffer_size, 2048u);
  // rr: twice the sessions per pair.
  EXPECT_EQ(frontend_options_for(Point{Workload::kRr, 65535, 64}, 2).queue_size, 4096);  // 33 * 64 = 2112
  EXPECT_EQ(frontend_options_for(Point{Workload::kRr, 65535, 128}, 1).queue_size, 16384);
  EXPECT_THROW(frontend_options_for(Point{Workload::kRr, 65535, 1000}, 1), std::runtime_error);
  EXPECT_THROW(frontend_options_for(Point{Workload::kRr, 59, 1}, 1), std::runtime_error);
  EXPECT_THROW(frontend_options_for(Point{Workload::kRr, 65536, 1}, 1), std::runtime_error);
  EXPECT_EQ(frontend_options_for(Point{Workload::kRr, 64, 1}, 4).queue_pairs, 4u);
}

}  // namespace
}  // namespace uvhost::bench
