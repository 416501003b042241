// The static memory planner: tensors live at the same time never share bytes (checked here pair by
// pair, independently of the planner's own check), buffers are reused once dead, in-place pairs
// share one buffer only when legal, and every offset is 64-byte aligned.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "compiler/driver/memory_plan.h"

namespace kiln::driver {
namespace {

// Pairs of requests whose lifetimes and bytes both overlap, other than in-place pairs that share
// one offset.
int overlapping_pairs(const std::vector<BufferRequest> &rs, const MemoryPlan &p) {
  int bad = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    for (size_t j = i + 1; j < rs.size(); ++j) {
      const bool live = rs[i].first <= rs[j].last && rs[j].first <= rs[i].last;
      const bool bytes = p.offsets[i] < p.offsets[j] + rs[j].bytes && p.offsets[j] < p.offsets[i] + rs[i].bytes;
      const bool in_place =
          p.offsets[i] == p.offsets[j] && ((rs[j].in_place_of == static_cast<int>(i) && rs[i].last == rs[j].first) ||
                                           (rs[i].in_place_of == static_cast<int>(j) && rs[j].last == rs[i].first));
      if (live && bytes && !in_place) ++bad;
    }
  }
  return bad;
}

TEST(MemoryPlan, AChainReusesTheBuffersOfDeadTensors) {
  // t0 -> t1 -> t2 -> t3, each read only by the next step: two buffers suffice.
  std::vector<BufferRequest> rs;
  for (int s = 0; s < 4; ++s) rs.push_back({1000, s, s + 1, -1});
  const MemoryPlan p = plan_memory(rs);
  EXPECT_EQ(overlapping_pairs(rs, p), 0);
  EXPECT_EQ(p.unplanned_bytes, 4 * 1024);
  EXPECT_EQ(p.arena_bytes, 2 * 1024);
  EXPECT_EQ(p.offsets[0], p.offsets[2]);
  EXPECT_NE(p.offsets[0], p.offsets[1]);
  EXPECT_EQ(find_plan_conflict(rs, p), "");
}

TEST(MemoryPlan, EveryOffsetIsAlignedAndInsideTheArena) {
  std::vector<BufferRequest> rs = {{3, 0, 5, -1}, {65, 1, 2, -1}, {1, 2, 3, -1}, {130, 0, 1, -1}};
  const MemoryPlan p = plan_memory(rs);
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % 64, 0) << i;
    EXPECT_LE(p.offsets[i] + rs[i].bytes, p.arena_bytes) << i;
  }
  EXPECT_EQ(overlapping_pairs(rs, p), 0);
}

TEST(MemoryPlan, RandomLifetimesNeverOverlap) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferRequest> rs;
    const int n = 2 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      BufferRequest r;
      r.first = static_cast<int>(rng() % 30);
      r.last = r.first + static_cast<int>(rng() % 8);
      r.bytes = 1 + static_cast<int64_t>(rng() % 5000);
      // Sometimes a legal in-place candidate: an earlier request of the same size that dies here.
      if (i > 0 && rng() % 3 == 0) {
        const int src = static_cast<int>(rng() % static_cast<unsigned>(i));
        r.bytes = rs[static_cast<size_t>(src)].bytes;
        r.first = rs[static_cast<size_t>(src)].last;
        r.last = r.first + static_cast<int>(rng() % 4);
        r.in_place_of = src;
      }
      rs.push_back(r);
    }
    const MemoryPlan p = plan_memory(rs);
    ASSERT_EQ(overlapping_pairs(rs, p), 0) << "trial " << trial;
    ASSERT_EQ(find_plan_conflict(rs, p), "") << "trial " << trial;
    ASSERT_LE(p.arena_bytes, p.unplanned_bytes);
  }
}

TEST(MemoryPlan, InPlaceSharesTheBufferOnlyWhenTheInputDiesThereWithTheSameSize) {
  // r1 takes over r0 (r0 is last read at step 1, which writes r1).
  std::vector<BufferRequest> ok = {{4096, 0, 1, -1}, {4096, 1, 2, 0}};
  MemoryPlan p = plan_memory(ok);
  EXPECT_EQ(p.in_place, 1);
  EXPECT_EQ(p.offsets[0], p.offsets[1]);
  EXPECT_EQ(p.arena_bytes, 4096);
  EXPECT_EQ(overlapping_pairs(ok, p), 0);
  // r0 is still read after step 1: no sharing.
  std::vector<BufferRequest> lives_on = {{4096, 0, 3, -1}, {4096, 1, 2, 0}};
  p = plan_memory(lives_on);
  EXPECT_EQ(p.in_place, 0);
  EXPECT_NE(p.offsets[0], p.offsets[1]);
  // Another size: no sharing.
  std::vector<BufferRequest> other_size = {{4096, 0, 1, -1}, {8192, 1, 2, 0}};
  p = plan_memory(other_size);
  EXPECT_EQ(p.in_place, 0);
  EXPECT_EQ(overlapping_pairs(other_size, p), 0);
  // Two claimants of one buffer: only the first gets it.
  std::vector<BufferRequest> twice = {{64, 0, 1, -1}, {64, 1, 2, 0}, {64, 1, 2, 0}};
  p = plan_memory(twice);
  EXPECT_EQ(p.in_place, 1);
  EXPECT_EQ(overlapping_pairs(twice, p), 0);
}

TEST(MemoryPlan, TheCheckFindsOverlappingLiveBuffers) {
  std::vector<BufferRequest> rs = {{128, 0, 2, -1}, {128, 1, 3, -1}};
  MemoryPlan broken;
  broken.offsets = {0, 64};
  broken.arena_bytes = 192;
  const std::string m = find_plan_conflict(rs, broken);
  EXPECT_NE(m.find("live together and overlap"), std::string::npos) << m;
  EXPECT_EQ(overlapping_pairs(rs, broken), 1);
}

}  // namespace
}  // namespace kiln::driver
