// Tests for the delegation lab's critical section and its invariant check: the
// check must catch the damage an overlapping pair of critical sections does.
#include "uvhost/experiments/slab_pool.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace uvhost::experiments {
namespace {

TEST(SlabPool, RefillAndFlushKeepInvariants) {
  SharedPool pool(1000, 32);
  std::vector<uint32_t> a, b;
  EXPECT_EQ(pool.refill(a, 16), 16u);
  EXPECT_EQ(pool.refill(b, 16), 16u);
  EXPECT_EQ(pool.flush(a, 8), 8u);
  std::vector<uint32_t> held(a);
  held.insert(held.end(), b.begin(), b.end());
  std::string why;
  EXPECT_TRUE(pool.check_invariants(held, why)) << why;
  EXPECT_EQ(pool.free_count(), 1000u - 24u);
}

TEST(SlabPool, RefillStopsWhenEmpty) {
  SharedPool pool(10, 4);
  std::vector<uint32_t> a;
  EXPECT_EQ(pool.refill(a, 16), 10u);
  EXPECT_EQ(pool.refill(a, 16), 0u);
  std::string why;
  EXPECT_TRUE(pool.check_invariants(a, why)) << why;
}

TEST(SlabPool, DetectsDuplicatedObject) {
  SharedPool pool(100, 10);
  std::vector<uint32_t> a;
  pool.refill(a, 4);
  a.push_back(a.front());  // what a torn refill in two threads would leave
  std::string why;
  EXPECT_FALSE(pool.check_invariants(a, why));
  EXPECT_FALSE(why.empty());
}

TEST(SlabPool, DetectsLostObject) {
  SharedPool pool(100, 10);
  std::vector<uint32_t> a;
  pool.refill(a, 4);
  a.pop_back();  // an object nobody holds and the pool does not have
  std::string why;
  EXPECT_FALSE(pool.check_invariants(a, why));
}

}  // namespace
}  // namespace uvhost::experiments
