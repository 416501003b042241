// The cost model's XGBoost wrapper learns a ranking (rank:pairwise) and predicts it back.
#include "cost_model/xgb_booster.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace kiln::cost_model {
namespace {

// The hidden quality of a candidate: feature 0 helps, feature 1 hurts, feature 2 is noise.
float quality(const float *x) { return 2.0f * x[0] - x[1]; }

// Indices of `scores`, best (highest) first.
std::vector<int> order_of(const std::vector<float> &scores) {
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  return order;
}

const XgbParams kParams = {
    {"objective", "rank:pairwise"},
    {"max_depth", "4"},
    {"eta", "0.3"},
    {"nthread", "1"},
    {"seed", "7"},
    {"verbosity", "0"},
};

struct RankingSet {
  std::vector<float> features;
  std::vector<float> labels;
  std::vector<unsigned> groups;
  size_t rows = 0;
};

// 40 groups of 16 random candidates; the label is the candidate's rank within its group by
// quality (0 = worst), as a tuner would label measured candidates of one task.
RankingSet make_training_set() {
  constexpr int kGroups = 40;
  constexpr int kPerGroup = 16;
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  RankingSet set;
  for (int g = 0; g < kGroups; ++g) {
    std::vector<float> group_features(kPerGroup * 3);
    for (float &v : group_features) v = uniform(rng);
    std::vector<float> q(kPerGroup);
    for (int i = 0; i < kPerGroup; ++i) q[i] = quality(&group_features[i * 3]);
    std::vector<int> order = order_of(q);
    std::vector<float> labels(kPerGroup);
    for (int rank = 0; rank < kPerGroup; ++rank) labels[order[rank]] = kPerGroup - 1 - rank;
    set.features.insert(set.features.end(), group_features.begin(), group_features.end());
    set.labels.insert(set.labels.end(), labels.begin(), labels.end());
    set.groups.push_back(kPerGroup);
  }
  set.rows = set.labels.size();
  return set;
}

TEST(XgbBoosterTest, RankPairwisePredictsTheRightOrder) {
  RankingSet set = make_training_set();
  XgbBooster booster = XgbBooster::train({set.features.data(), set.rows, 3}, set.labels, set.groups, kParams, 60);
  EXPECT_EQ(booster.num_features(), 3u);

  // Five unseen candidates with well-separated quality, given in scrambled order.
  std::vector<float> test = {
      0.50f, 0.50f, 0.9f,  // quality 0.5
      0.95f, 0.05f, 0.1f,  // 1.85 (best)
      0.05f, 0.90f, 0.5f,  // -0.8 (worst)
      0.80f, 0.30f, 0.3f,  // 1.3
      0.25f, 0.60f, 0.7f,  // -0.1
  };
  std::vector<float> scores = booster.predict({test.data(), 5, 3});
  ASSERT_EQ(scores.size(), 5u);
  EXPECT_EQ(order_of(scores), (std::vector<int>{1, 3, 0, 4, 2}));

  // A saved and reloaded model predicts the same scores.
  XgbBooster reloaded = XgbBooster::load(booster.save());
  EXPECT_EQ(reloaded.predict({test.data(), 5, 3}), scores);
}

TEST(XgbBoosterTest, ErrorsBecomeExceptions) {
  RankingSet set = make_training_set();
  XgbParams bad = {{"objective", "rank:no_such_objective"}};
  EXPECT_THROW(XgbBooster::train({set.features.data(), set.rows, 3}, set.labels, set.groups, bad, 1), XgbError);
  EXPECT_THROW(XgbBooster::train({set.features.data(), set.rows, 3}, set.labels, set.groups, bad, 1), kiln::UserError);

  std::vector<unsigned> wrong_groups = {3, 4};
  EXPECT_THROW(XgbBooster::train({set.features.data(), set.rows, 3}, set.labels, wrong_groups, kParams, 1), XgbError);

  XgbBooster booster = XgbBooster::train({set.features.data(), set.rows, 3}, set.labels, set.groups, kParams, 2);
  std::vector<float> two_columns(4);
  EXPECT_THROW(booster.predict({two_columns.data(), 2, 2}), XgbError);
}

}  // namespace
}  // namespace kiln::cost_model
