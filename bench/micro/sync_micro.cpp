// sync_micro.cpp - uncontended cost of every sync primitive (Google Benchmark).
//
// One thread, no contention: this is the fast path each primitive adds to a
// datapath that rarely contends (a memory-table read per descriptor, a lock
// around a per-queue structure). Contended behaviour is what `uvhost lab` measures.
// Run: build/release/bench/uvhost-microbench [--benchmark_filter=REGEX]
#include <benchmark/benchmark.h>

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "uvhost/sync/baseline_locks.h"
#include "uvhost/sync/delegation_lock.h"
#include "uvhost/sync/qspinlock.h"
#include "uvhost/sync/read_mostly.h"
#include "uvhost/sync/rw_semaphore.h"
#include "uvhost/sync/spin_then_park.h"
#include "uvhost/sync/work_queue.h"

namespace {
using namespace uvhost::sync;

// glibc takes a mutex without the lock prefix while the process has never had a second
// thread (its single-thread shortcut), which makes std::mutex and the pthread locks look
// three times cheaper than they are in the daemon, a process with many threads. So a
// thread is started and joined before any benchmark runs: every figure is the
// multi-threaded cost.
const bool kProcessIsMultiThreaded = [] {
  std::thread([] {}).join();
  return true;
}();

// enter(); one increment; leave() per iteration - the cost of an empty critical
// section, for any pair of entry and exit calls (exclusive or shared side).
template <class Enter, class Leave>
void time_empty_sections(benchmark::State& state, Enter enter, Leave leave) {
  uint64_t counter = 0;
  for (auto _ : state) {
    enter();
    ++counter;
    leave();
  }
  benchmark::DoNotOptimize(counter);
}

template <class Lock>
void BM_LockUnlock(benchmark::State& state) {
  Lock lock;
  time_empty_sections(state, [&] { lock.lock(); }, [&] { lock.unlock(); });
  state.SetLabel(Lock::kName);
}
BENCHMARK(BM_LockUnlock<StdMutexLock>);
BENCHMARK(BM_LockUnlock<PthreadSpinLock>);
BENCHMARK(BM_LockUnlock<QSpinLock>);
BENCHMARK(BM_LockUnlock<CkTicketLock>);
BENCHMARK(BM_LockUnlock<CkMcsLock>);
BENCHMARK(BM_LockUnlock<CkClhLock>);
BENCHMARK(BM_LockUnlock<RwSemaphore>);

void BM_RwSemaphoreShared(benchmark::State& state) {
  RwSemaphore sem;
  time_empty_sections(state, [&] { sem.lock_shared(); }, [&] { sem.unlock_shared(); });
}
BENCHMARK(BM_RwSemaphoreShared);

void BM_DelegationRun(benchmark::State& state) {
  DelegationLock lock;
  uint64_t counter = 0;
  for (auto _ : state) lock.run([&] { ++counter; });
  benchmark::DoNotOptimize(counter);
}
BENCHMARK(BM_DelegationRun);

void BM_DelegationRunWithResult(benchmark::State& state) {
  DelegationLock lock;
  uint64_t counter = 0;
  for (auto _ : state) benchmark::DoNotOptimize(lock.run([&] { return ++counter; }));
}
BENCHMARK(BM_DelegationRunWithResult);

// submit() + get(): the asynchronous form when nobody else holds the lock.
void BM_DelegationSubmitGet(benchmark::State& state) {
  DelegationLock lock;
  uint64_t counter = 0;
  for (auto _ : state) {
    auto completion = lock.submit([&] { return ++counter; });
    benchmark::DoNotOptimize(completion.get());
  }
}
BENCHMARK(BM_DelegationSubmitGet);

// One read of a read-mostly table under each guard policy (no writer running).
void BM_ReadMostlyRead(benchmark::State& state) {
  const auto policy = static_cast<GuardPolicy>(state.range(0));
  ReadMostly<uint64_t> table(policy, std::make_unique<uint64_t>(42));
  uint64_t sum = 0;
  for (auto _ : state) sum += table.read([](const uint64_t& value) { return value; });
  benchmark::DoNotOptimize(sum);
  state.SetLabel(std::string(to_string(policy)));
}
BENCHMARK(BM_ReadMostlyRead)
    ->Arg(static_cast<int>(GuardPolicy::kMutex))
    ->Arg(static_cast<int>(GuardPolicy::kRwSem))
    ->Arg(static_cast<int>(GuardPolicy::kPthreadRwlock))
    ->Arg(static_cast<int>(GuardPolicy::kRcu));

// set() with nobody parked + is_set(): the hand-off cost when the waiter spins.
void BM_EventSetNoWaiter(benchmark::State& state) {
  SpinThenParkEvent event;
  for (auto _ : state) {
    event.set();
    benchmark::DoNotOptimize(event.is_set());
    event.reset();
  }
}
BENCHMARK(BM_EventSetNoWaiter);

// queue() of an item that is already queued: the coalescing fast path a burst
// of kicks takes. The worker is kept busy so the item stays queued.
void BM_WorkQueueAlreadyQueued(benchmark::State& state) {
  const auto strategy = static_cast<EnqueueStrategy>(state.range(0));
  WorkQueue queue(strategy);
  SpinThenParkEvent release;
  WorkItem blocker([&] { release.wait(); });
  WorkItem item([] {});
  queue.queue(blocker);
  while (blocker.is_queued()) {
  }  // the worker took the blocker and now waits inside it
  queue.queue(item);
  uint64_t queued = 0;
  for (auto _ : state) queued += queue.queue(item) ? 1u : 0u;
  release.set();
  queue.flush();
  benchmark::DoNotOptimize(queued);
  state.SetLabel(std::string(to_string(strategy)));
}
BENCHMARK(BM_WorkQueueAlreadyQueued)->Arg(0)->Arg(1)->Arg(2);

// queue() + flush() round trip through the worker thread (wake-up included).
void BM_WorkQueueRoundTrip(benchmark::State& state) {
  const auto strategy = static_cast<EnqueueStrategy>(state.range(0));
  WorkQueue queue(strategy);
  uint64_t runs = 0;
  WorkItem item([&] { ++runs; });
  for (auto _ : state) {
    queue.queue(item);
    queue.flush();
  }
  benchmark::DoNotOptimize(runs);
  state.SetLabel(std::string(to_string(strategy)));
}
BENCHMARK(BM_WorkQueueRoundTrip)->Arg(0)->Arg(1)->Arg(2)->UseRealTime();

}  // namespace
