// RoundRobinItems: next() cycles through every item in order; each runs the work.
#include "uvhost/experiments/round_robin_items.h"

#include <gtest/gtest.h>

namespace uvhost::experiments {
namespace {

TEST(RoundRobinItems, NextCyclesThroughEveryItemAndEachRunsTheWork) {
  int runs = 0;
  RoundRobinItems items(3, [&] { ++runs; });
  ASSERT_EQ(items.size(), 3u);
  sync::WorkItem* first = &items.next();
  sync::WorkItem* second = &items.next();
  sync::WorkItem* third = &items.next();
  EXPECT_NE(first, second);
  EXPECT_NE(second, third);
  EXPECT_NE(first, third);
  EXPECT_EQ(&items.next(), first);  // wrapped around

  sync::WorkQueue wq(sync::EnqueueStrategy::kLockless);
  for (int i = 0; i < 3; ++i) wq.queue(items.next());  // three different items: none coalesced
  wq.flush();
  wq.stop();
  EXPECT_EQ(runs, 3);
}

}  // namespace
}  // namespace uvhost::experiments
