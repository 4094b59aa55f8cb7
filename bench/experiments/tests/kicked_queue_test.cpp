// KickedQueue: both kick sources count every kick exactly once, coalesced or not, and
// each handler run once; run on a real WorkQueue worker.
#include "uvhost/experiments/kicked_queue.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace uvhost::experiments {
namespace {

TEST(KickedQueue, EventfdKicksAreDrainedAndCountedOnce) {
  int work_done = 0;
  KickedQueue q(true, [&] { ++work_done; });
  ASSERT_GE(q.kick_fd(), 0);
  for (int i = 0; i < 5; ++i) q.signal_eventfd();
  q.drain_kick();  // one read takes all five (coalesced)
  EXPECT_EQ(q.consumed(), 5u);
  q.drain_kick();  // nothing left: not counted again
  EXPECT_EQ(q.consumed(), 5u);
  sync::WorkQueue wq(sync::EnqueueStrategy::kLockedWake);
  wq.queue(q.handler());
  wq.flush();
  wq.stop();
  EXPECT_EQ(q.runs(), 1u);
  EXPECT_EQ(work_done, 1);
}

TEST(KickedQueue, PendingKicksAreTakenByTheHandlerOnAWorker) {
  std::vector<std::unique_ptr<KickedQueue>> queues;
  for (int i = 0; i < 3; ++i) queues.push_back(std::make_unique<KickedQueue>(false, [] {}));
  EXPECT_LT(queues[0]->kick_fd(), 0);
  sync::WorkQueue wq(sync::EnqueueStrategy::kLockless);
  for (int round = 0; round < 100; ++round) {
    for (auto& q : queues) {
      q->add_pending();
      wq.queue(q->handler());
    }
  }
  wq.flush();
  wq.stop();
  const KickTotals totals = kick_totals(queues);
  EXPECT_EQ(totals.consumed, 300u);
  EXPECT_GE(totals.runs, 3u);
  EXPECT_LE(totals.runs, 300u);
}

}  // namespace
}  // namespace uvhost::experiments
