// The cost model: the ranking metrics, sample validation, the random baseline, XgbCostModel's
// ranking quality, early stopping, transfer learning, thread safety and the model file.
#include "cost_model/cost_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cost_model/history.h"
#include "cost_model/model_file.h"
#include "tests/temp_dir.h"

namespace kiln::cost_model {
namespace {

using ::testing::HasSubstr;

constexpr size_t kFeatures = 12;
const FeatureSpec kSpec{"ir", 1, kFeatures};

// Runs `body`, expecting a CostModelError whose message contains every one of `parts`.
template <typename Body>
void expect_error(Body body, const std::vector<std::string> &parts) {
  try {
    body();
    ADD_FAILURE() << "no CostModelError; expected one mentioning '" << parts.front() << "'";
  } catch (const CostModelError &e) {
    for (const std::string &part : parts) EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

std::vector<double> as_doubles(const std::vector<float> &v) { return std::vector<double>(v.begin(), v.end()); }

// ---------------------------------------------------------------------------------------------
// Metrics, against values computed by hand.

TEST(SpearmanTest, MatchesHandComputedValues) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4, 5}, {10, 20, 30, 40, 50}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4, 5}, {5, 4, 3, 2, 1}), -1.0);
  // Monotone transformations do not matter, only ranks.
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {1, 100, 1000, 1e9}), 1.0);
  // Ties: b's ranks are 1, 2, 3.5, 5, 3.5; cov = 8, var(a) = 10, var(b) = 9.5.
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}), 8 / std::sqrt(95.0), 1e-12);
  // Constant input, or too few rows: 0.
  EXPECT_EQ(spearman({1, 2, 3}, {7, 7, 7}), 0.0);
  EXPECT_EQ(spearman({4, 4}, {1, 2}), 0.0);
  EXPECT_EQ(spearman({1}, {2}), 0.0);
  EXPECT_EQ(spearman({}, {}), 0.0);
}

TEST(RecallAtKTest, MatchesHandComputedValues) {
  const std::vector<double> truth = {5, 4, 3, 2, 1};
  EXPECT_DOUBLE_EQ(recall_at_k(truth, {9, 8, 0, 0, 0}, 2), 1.0);
  EXPECT_DOUBLE_EQ(recall_at_k(truth, {1, 2, 3, 4, 5}, 2), 0.0);
  // Top 2 by truth {0, 1}, by prediction {1, 2}: one of two found.
  EXPECT_DOUBLE_EQ(recall_at_k(truth, {1, 5, 4, 0, 0}, 2), 0.5);
  // Top 3 {0, 1, 2} vs {1, 2, 4}.
  EXPECT_NEAR(recall_at_k(truth, {1, 5, 4, 0, 3}, 3), 2.0 / 3, 1e-12);
  // k is capped at the row count; k = 0 finds nothing.
  EXPECT_DOUBLE_EQ(recall_at_k(truth, {1, 2, 3, 4, 5}, 10), 1.0);
  EXPECT_DOUBLE_EQ(recall_at_k(truth, {9, 8, 0, 0, 0}, 0), 0.0);
  EXPECT_DOUBLE_EQ(recall_at_k({}, {}, 3), 0.0);
}

TEST(RecallAtKTest, TiesCountInPart) {
  const std::vector<double> truth = {5, 4, 3, 2, 1};
  // A constant prediction finds k/n of the top k, whatever the order of the rows.
  EXPECT_DOUBLE_EQ(recall_at_k(truth, {1, 1, 1, 1, 1}, 2), 0.4);
  EXPECT_DOUBLE_EQ(recall_at_k({1, 2, 3, 4, 5}, {1, 1, 1, 1, 1}, 2), 0.4);
  // Row 0 surely in; rows 1 and 2 tie for the last slot: (1 + 0.5) / 2.
  EXPECT_DOUBLE_EQ(recall_at_k(truth, {3, 2, 2, 0, 0}, 2), 0.75);
  // Ties in the truth: rows 0 and 1 tie for the top 1; the prediction picks row 0.
  EXPECT_DOUBLE_EQ(recall_at_k({1, 1, 0, 0}, {4, 3, 2, 1}, 1), 0.5);
  // Both tied: 2 slots among 3 tied truth rows (2/3 each), prediction's row 1 and half of rows 2, 3.
  EXPECT_NEAR(recall_at_k({7, 7, 7, 0}, {0, 5, 4, 4}, 2), (2.0 / 3 * (1 + 0.5)) / 2, 1e-12);
}

// ---------------------------------------------------------------------------------------------
// A synthetic tuning problem: 12 features in [0, 1); the throughput of a candidate is a nonlinear
// function of four of them, times the workload's scale, with small noise. A few candidates fail.

struct Workload {
  std::string name;
  double scale;  // FLOP/s of a median candidate: workloads differ by orders of magnitude
  double twist;  // how the workload departs from the family's shape
};

// log-throughput shape of the family.
double shape(const float *x, double twist) {
  return 2.0 * x[0] * x[1] + std::sin(3.0 * x[2]) - 4.0 * (x[3] - 0.5) * (x[3] - 0.5) + twist * (x[5] - 0.5);
}

// `rows` candidates of each workload, drawn with `seed`.
Samples make_samples(const std::vector<Workload> &workloads, size_t rows, uint32_t seed, double fail_rate = 0.03) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::normal_distribution<double> noise(0.0, 0.05);
  Samples s;
  s.spec = kSpec;
  for (const Workload &w : workloads) {
    for (size_t i = 0; i < rows; ++i) {
      std::vector<float> x(kFeatures);
      for (float &v : x) v = uniform(rng);
      double throughput = w.scale * std::exp(shape(x.data(), w.twist) + noise(rng));
      if (uniform(rng) < fail_rate) throughput = 0;
      s.add(x, throughput, w.name);
    }
  }
  return s;
}

// The features and throughputs of one workload's rows of `s`.
Samples rows_of(const Samples &s, const std::string &workload) {
  Samples out;
  out.spec = s.spec;
  for (size_t i = 0; i < s.rows(); ++i) {
    if (s.workloads[s.group[i]] != workload) continue;
    std::vector<float> row(s.features.begin() + i * kFeatures, s.features.begin() + (i + 1) * kFeatures);
    out.add(row, s.throughput[i], workload);
  }
  return out;
}

// The model's ranking quality on `test`: Spearman's rho per workload, averaged.
double ranking_quality(const CostModel &model, const Samples &test) {
  double sum = 0;
  for (const std::string &w : test.workloads) {
    Samples part = rows_of(test, w);
    sum += spearman(part.throughput, as_doubles(model.predict(part.spec, part.features)));
  }
  return sum / static_cast<double>(test.workloads.size());
}

const std::vector<Workload> kWorkloads = {{"conv_a", 1e9, 0.0}, {"conv_b", 3e11, 0.3}, {"dense_c", 2e7, -0.3}};

XgbOptions fast_options(Objective objective = Objective::kRank) {
  XgbOptions o;
  o.objective = objective;
  // One thread: on a small training set more only add synchronisation, and tests share the cores.
  o.threads = 1;
  o.seed = 1;
  return o;
}

// ---------------------------------------------------------------------------------------------
// Samples.

TEST(SamplesTest, AddRecordsWorkloadsAndGroups) {
  Samples s;
  s.spec = {"knob", 1, 2};
  s.add({1, 2}, 5.0, "a");
  s.add({3, 4}, 0.0, "b");
  s.add({5, 6}, 7.0, "a");
  EXPECT_EQ(s.rows(), 3u);
  EXPECT_EQ(s.features, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(s.throughput, (std::vector<double>{5, 0, 7}));
  EXPECT_EQ(s.workloads, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.group, (std::vector<uint32_t>{0, 1, 0}));
  EXPECT_NO_THROW(s.check());
}

// A task's transfer prior is fit on the history of every other workload of its template.
TEST(SamplesTest, WithoutDropsOneWorkloadsRows) {
  Samples s;
  s.spec = {"knob", 1, 2};
  s.add({1, 2}, 5.0, "a");
  s.add({3, 4}, 0.0, "b");
  s.add({5, 6}, 7.0, "a");
  s.add({7, 8}, 9.0, "c");
  const Samples w = s.without("a");
  EXPECT_EQ(w.rows(), 2u);
  EXPECT_EQ(w.features, (std::vector<float>{3, 4, 7, 8}));
  EXPECT_EQ(w.throughput, (std::vector<double>{0, 9}));
  EXPECT_EQ(w.workloads, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(w.group, (std::vector<uint32_t>{0, 1}));
  EXPECT_NO_THROW(w.check());
  EXPECT_EQ(s.without("z").rows(), 4u);
  EXPECT_EQ(s.rows(), 4u) << "the set itself is unchanged";
}

// The prior's history is thinned per workload: the fastest rows kept, the rest spread over the
// range (the slowest and a failure included), the order of the log kept, small workloads whole.
TEST(ThinHistoryTest, KeepsTheFastestAndASpreadOfTheRestPerWorkload) {
  std::vector<HistoryRow> rows;
  for (int i = 0; i < 100; ++i) rows.push_back({"t", "{\"n\":1}", {}, static_cast<double>((i * 37) % 100)});
  for (int i = 0; i < 5; ++i) rows.push_back({"t", "{\"n\":2}", {}, static_cast<double>(i)});
  const std::vector<HistoryRow> out = thin_history(rows, 8);
  std::vector<double> big, small;
  for (const HistoryRow &r : out) (r.args_json == "{\"n\":1}" ? big : small).push_back(r.throughput);
  EXPECT_EQ(small, (std::vector<double>{0, 1, 2, 3, 4}));
  ASSERT_EQ(big.size(), 8u);
  std::vector<double> sorted = big;
  std::sort(sorted.rbegin(), sorted.rend());
  EXPECT_EQ(sorted[0], 99);  // the fastest two (a quarter of 8)
  EXPECT_EQ(sorted[1], 98);
  EXPECT_EQ(sorted.back(), 0);  // the slowest (a failed measurement) is kept
  // In the log's order: row i has throughput i*37 % 100.
  std::vector<double> in_order;
  for (const HistoryRow &r : rows)
    if (r.args_json == "{\"n\":1}" && std::count(big.begin(), big.end(), r.throughput))
      in_order.push_back(r.throughput);
  EXPECT_EQ(big, in_order);
  EXPECT_EQ(thin_history(rows, 0).size(), rows.size());
  EXPECT_EQ(thin_history(rows, 1).size(), 2u);  // one per workload: the fastest
}

TEST(SamplesTest, AddRefusesBadRowsAndKeepsTheSet) {
  Samples s;
  s.spec = {"ir", 1, 164};
  expect_error([&] { s.add(std::vector<float>(10), 1.0, "w"); }, {"sample 0: 10 features, the spec says 164"});
  s.add(std::vector<float>(164), 1.0, "w");
  std::vector<float> row(164);
  row[17] = std::numeric_limits<float>::infinity();
  expect_error([&] { s.add(row, 1.0, "w"); }, {"sample 1: feature 17 is inf"});
  row[17] = std::nanf("");
  expect_error([&] { s.add(row, 1.0, "w"); }, {"sample 1: feature 17 is NaN"});
  row[17] = 0;
  expect_error([&] { s.add(row, std::nan(""), "w"); }, {"sample 1: throughput is NaN"});
  expect_error([&] { s.add(row, INFINITY, "w"); }, {"sample 1: throughput is inf"});
  expect_error([&] { s.add(row, -2.5, "other"); }, {"sample 1: throughput is negative"});
  // None of the refused rows (nor the workload of the last) went in.
  EXPECT_EQ(s.rows(), 1u);
  EXPECT_EQ(s.features.size(), 164u);
  EXPECT_EQ(s.workloads, (std::vector<std::string>{"w"}));
}

TEST(SamplesTest, CheckNamesTheFirstProblem) {
  Samples good = make_samples(kWorkloads, 4, 1);
  EXPECT_NO_THROW(good.check());

  Samples s = good;
  s.throughput[5] = std::nan("");
  expect_error([&] { s.check(); }, {"sample 5: throughput is NaN"});
  s = good;
  s.throughput[2] = -1;
  expect_error([&] { s.check(); }, {"sample 2: throughput is negative"});
  s = good;
  s.throughput[7] = -INFINITY;
  expect_error([&] { s.check(); }, {"sample 7: throughput is -inf"});
  s = good;
  s.features[3 * kFeatures + 4] = std::nanf("");
  expect_error([&] { s.check(); }, {"sample 3: feature 4 is NaN"});
  s = good;
  s.features.pop_back();
  expect_error([&] { s.check(); }, {"143 feature values for 12 rows of 12"});
  s = good;
  s.group.pop_back();
  expect_error([&] { s.check(); }, {"11 group indices for 12 rows"});
  s = good;
  s.group[9] = 3;
  expect_error([&] { s.check(); }, {"sample 9: workload index 3 is out of range (3 workloads)"});
  s = good;
  s.group.clear();
  expect_error([&] { s.check(); }, {"3 workloads but no group index"});
}

// ---------------------------------------------------------------------------------------------
// The random baseline.

TEST(RandomModelTest, SeededUniformAndUninformed) {
  Samples train = make_samples(kWorkloads, 64, 1);
  Samples test = make_samples({kWorkloads[0]}, 512, 2);
  RandomModel a(7), b(7), c(8);
  a.fit(train);
  std::vector<float> pa = a.predict(kSpec, test.features);
  ASSERT_EQ(pa.size(), 512u);
  EXPECT_EQ(b.predict(kSpec, test.features), pa);  // same seed, same scores
  EXPECT_NE(c.predict(kSpec, test.features), pa);
  EXPECT_NE(a.predict(kSpec, test.features), pa);  // a new draw on every call
  for (float v : pa) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LT(v, 1.0f);
  }
  EXPECT_LT(std::abs(spearman(test.throughput, as_doubles(pa))), 0.15);
  // Any spec, but whole rows only; fit keeps the common contract.
  EXPECT_EQ(a.predict({"knob", 3, 5}, std::vector<float>(10)).size(), 2u);
  expect_error([&] { a.predict(kSpec, std::vector<float>(13)); }, {"13 feature values are not whole rows of 12"});
  expect_error([&] { a.fit(Samples{kSpec, {}, {}, {}, {}}); }, {"no samples to fit"});
}

// ---------------------------------------------------------------------------------------------
// XgbCostModel: ranking quality.

class XgbObjectiveTest : public ::testing::TestWithParam<Objective> {};

TEST_P(XgbObjectiveTest, RanksHeldOutCandidates) {
  Samples train = make_samples(kWorkloads, 512 / 3 + 1, 11);
  Samples test = make_samples(kWorkloads, 512 / 3 + 1, 12);
  XgbCostModel model(fast_options(GetParam()));
  model.fit(train);
  EXPECT_TRUE(model.trained());
  EXPECT_EQ(model.training_rows(), train.rows());
  EXPECT_GE(model.rounds(), 1);

  RandomModel random(3);
  double xgb = ranking_quality(model, test);
  double baseline = ranking_quality(random, test);
  EXPECT_GE(xgb, 0.7) << "random model: " << baseline;
  EXPECT_LT(std::abs(baseline), 0.15);
  EXPECT_GT(xgb - baseline, 0.5);
  // The top of the ranking is what the tuner measures next.
  for (const std::string &w : test.workloads) {
    Samples part = rows_of(test, w);
    EXPECT_GT(recall_at_k(part.throughput, as_doubles(model.predict(kSpec, part.features)), 16), 0.3) << w;
  }
}

INSTANTIATE_TEST_SUITE_P(Objectives, XgbObjectiveTest, ::testing::Values(Objective::kRank, Objective::kRegression),
                         [](const auto &info) { return info.param == Objective::kRank ? "Rank" : "Regression"; });

TEST(XgbCostModelTest, BeforeAnyFitEveryRowScoresAlike) {
  XgbCostModel model(fast_options());
  EXPECT_FALSE(model.trained());
  EXPECT_EQ(model.prior_weight(), 0.0);
  Samples test = make_samples(kWorkloads, 8, 3);
  EXPECT_EQ(model.predict(kSpec, test.features), std::vector<float>(test.rows(), 0.0f));
  expect_error([&] { model.predict(kSpec, std::vector<float>(25)); }, {"25 feature values are not whole rows of 12"});
  expect_error([&] { model.fit(Samples{kSpec, {}, {}, {}, {}}); }, {"no samples to fit"});
  EXPECT_FALSE(model.trained());
}

TEST(XgbCostModelTest, FailedWorkloadsAndSingleWorkloadSets) {
  // One workload (no group indices) whose rows all failed but one, and a workload that only failed.
  Samples s = make_samples({{"w", 1e9, 0}}, 32, 5, 0.0);
  s.group.clear();
  s.workloads.clear();
  XgbCostModel model(fast_options());
  model.fit(s);
  EXPECT_EQ(model.predict(kSpec, s.features).size(), 32u);

  Samples failed = make_samples({{"ok", 1e9, 0}, {"broken", 1e9, 0}}, 32, 6, 0.0);
  for (size_t i = 0; i < failed.rows(); ++i) {
    if (failed.group[i] == 1) failed.throughput[i] = 0;
  }
  XgbCostModel model2(fast_options(Objective::kRegression));
  model2.fit(failed);
  EXPECT_EQ(model2.training_workloads(), (std::vector<std::string>{"ok", "broken"}));
}

TEST(XgbCostModelTest, BadOptionsAreRefused) {
  Samples train = make_samples(kWorkloads, 16, 7);
  auto refused = [&](XgbOptions o, const std::string &part) {
    XgbCostModel model(o);
    expect_error([&] { model.fit(train); }, {part});
    EXPECT_FALSE(model.trained());
  };
  XgbOptions o = fast_options();
  o.max_rounds = 0;
  refused(o, "max_rounds");
  o = fast_options();
  o.recall_k = 0;
  refused(o, "recall_k");
  o = fast_options();
  o.time_budget_s = std::nan("");
  refused(o, "time_budget_s");
  // What XGBoost itself rejects comes as a CostModelError too.
  o = fast_options();
  o.subsample = 2;
  refused(o, "subsample");
}

// ---------------------------------------------------------------------------------------------
// Early stopping and the time budget.

TEST(XgbCostModelTest, EarlyStoppingKeepsFewerRoundsThanTheMaximum) {
  Samples train = make_samples(kWorkloads, 128, 21);
  XgbOptions o = fast_options();
  o.max_rounds = 2000;
  o.early_stopping_rounds = 10;
  XgbCostModel model(o);
  model.fit(train);
  EXPECT_GE(model.rounds(), 1);
  EXPECT_LT(model.rounds(), 500);
  EXPECT_LT(model.fit_seconds(), 5.0);
}

TEST(XgbCostModelTest, TimeBudgetStopsTraining) {
  Samples train = make_samples(kWorkloads, 200, 22);
  XgbOptions o = fast_options();
  o.max_rounds = 100000;
  o.early_stopping_rounds = 0;  // no early stopping: only the budget ends the fit
  o.time_budget_s = 0.05;
  XgbCostModel model(o);
  auto start = std::chrono::steady_clock::now();
  model.fit(train);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);
  EXPECT_LT(model.fit_seconds(), 1.0);
  EXPECT_GE(model.fit_seconds(), 0.05);
  EXPECT_GE(model.rounds(), 1);
  EXPECT_LT(model.rounds(), 100000);
  // The budget keeps a model that still ranks.
  EXPECT_GT(ranking_quality(model, make_samples(kWorkloads, 100, 23)), 0.5);
}

// ---------------------------------------------------------------------------------------------
// Transfer learning.

TEST(XgbCostModelTest, PriorWeightDecays) {
  auto prior = std::make_shared<XgbCostModel>(fast_options());
  prior->fit(make_samples({kWorkloads[0]}, 64, 31));
  XgbCostModel model(fast_options());
  expect_error([&] { model.set_prior(std::make_shared<XgbCostModel>(fast_options())); }, {"prior", "not trained"});
  model.set_prior(prior, 64, 0.05);
  EXPECT_EQ(model.prior_weight(), 1.0);
  // Before its own fit, the model predicts what the prior does.
  Samples test = make_samples({kWorkloads[1]}, 32, 32);
  EXPECT_EQ(model.predict(kSpec, test.features), prior->predict(kSpec, test.features));

  model.fit(make_samples({kWorkloads[1]}, 16, 33));
  EXPECT_DOUBLE_EQ(model.prior_weight(), std::exp2(-16.0 / 64));
  model.fit(make_samples({kWorkloads[1]}, 128, 34));
  EXPECT_DOUBLE_EQ(model.prior_weight(), 0.25);
  // 2^(-5) = 0.031 is below the cutoff.
  model.fit(make_samples({kWorkloads[1]}, 320, 35));
  EXPECT_EQ(model.prior_weight(), 0.0);
  model.set_prior(prior, 320, 0.05);
  EXPECT_DOUBLE_EQ(model.prior_weight(), 0.5);
  model.set_prior(nullptr);
  EXPECT_EQ(model.prior_weight(), 0.0);

  // A prior of other features is refused.
  auto knob_prior = std::make_shared<XgbCostModel>(fast_options());
  Samples knob = make_samples({kWorkloads[0]}, 16, 36);
  knob.spec = {"knob", 1, kFeatures};
  knob_prior->fit(knob);
  expect_error([&] { model.set_prior(knob_prior); }, {"knob features version 1", "ir features version 1"});
  XgbCostModel fresh(fast_options());
  fresh.set_prior(prior);
  expect_error([&] { fresh.fit(knob); }, {"samples are knob features", "the prior was trained on ir features"});
  EXPECT_FALSE(fresh.trained());
  expect_error([&] { fresh.set_prior(prior, 0); }, {"half-life"});
  expect_error([&] { fresh.set_prior(prior, 64, 1.5); }, {"cutoff"});
}

TEST(XgbCostModelTest, PriorHelpsANewWorkloadWithFewRows) {
  // A family of workloads; the prior knows A and B, the task is C with 16 measured rows.
  const std::vector<Workload> family = {{"a", 1e9, 0.2}, {"b", 4e10, -0.2}};
  const Workload c{"c", 5e8, 0.0};
  double with_prior = 0, without_prior = 0;
  const int kSeeds = 3;
  for (int seed = 0; seed < kSeeds; ++seed) {
    auto prior = std::make_shared<XgbCostModel>(fast_options());
    prior->fit(make_samples(family, 256, 100 + seed));
    Samples own = make_samples({c}, 16, 200 + seed);
    Samples test = make_samples({c}, 256, 300 + seed);

    XgbCostModel alone(fast_options());
    alone.fit(own);
    XgbCostModel transfer(fast_options());
    transfer.set_prior(prior);
    transfer.fit(own);
    without_prior += ranking_quality(alone, test) / kSeeds;
    with_prior += ranking_quality(transfer, test) / kSeeds;
  }
  EXPECT_GT(with_prior, without_prior + 0.15) << "without prior: " << without_prior;
  EXPECT_GT(with_prior, 0.6);
}

// ---------------------------------------------------------------------------------------------
// Refits, specs and threads.

TEST(XgbCostModelTest, RefusesOtherFeatureSpecsAndKeepsTheModel) {
  Samples train = make_samples(kWorkloads, 64, 41);
  XgbCostModel model(fast_options());
  model.fit(train);
  std::vector<float> before = model.predict(kSpec, train.features);

  const FeatureSpec v2{"ir", 2, kFeatures};
  expect_error([&] { model.predict(v2, train.features); },
               {"ir features version 2 (12 values)", "trained on ir features version 1 (12 values)"});
  expect_error([&] { model.predict(kSpec, std::vector<float>(13)); }, {"not whole rows of 12"});
  Samples other = train;
  other.spec = v2;
  expect_error([&] { model.fit(other); }, {"ir features version 2", "trained on ir features version 1"});
  Samples bad = train;
  bad.throughput[4] = std::nan("");
  expect_error([&] { model.fit(bad); }, {"sample 4: throughput is NaN"});
  EXPECT_EQ(model.predict(kSpec, train.features), before);
  EXPECT_EQ(model.spec(), kSpec);
}

TEST(XgbCostModelTest, ConcurrentPredictionsAgree) {
  Samples train = make_samples(kWorkloads, 128, 51);
  XgbCostModel model(fast_options());
  model.fit(train);
  Samples test = make_samples(kWorkloads, 64, 52);
  const std::vector<float> expected = model.predict(kSpec, test.features);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if (model.predict(kSpec, test.features) != expected) ++mismatches[t];
      }
    });
  }
  for (std::thread &t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// ---------------------------------------------------------------------------------------------
// The model file.

// Bit-exact equality of two score vectors.
bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::string read_bytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::vector<std::string> names_in(const std::string &dir) {
  std::vector<std::string> names;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class ModelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    train_ = make_samples(kWorkloads, 96, 61);
    test_ = make_samples(kWorkloads, 64, 62);
    XgbOptions o = fast_options(Objective::kRegression);
    o.eta = 0.2;
    o.seed = 99;
    model_ = std::make_unique<XgbCostModel>(o);
    model_->fit(train_);
    path_ = dir_.file("model.kcm");
    model_->save(path_);
  }

  test::TempDir dir_{"kiln_cost_model"};
  Samples train_, test_;
  std::unique_ptr<XgbCostModel> model_;
  std::string path_;
};

TEST_F(ModelFileTest, LoadReproducesPredictionsAndMetadata) {
  XgbCostModel loaded = XgbCostModel::load(path_, &kSpec);
  EXPECT_TRUE(same_bits(loaded.predict(kSpec, test_.features), model_->predict(kSpec, test_.features)));
  EXPECT_TRUE(same_bits(loaded.predict(kSpec, train_.features), model_->predict(kSpec, train_.features)));
  EXPECT_EQ(loaded.spec(), kSpec);
  EXPECT_EQ(loaded.training_rows(), train_.rows());
  EXPECT_EQ(loaded.training_workloads(), (std::vector<std::string>{"conv_a", "conv_b", "dense_c"}));
  EXPECT_EQ(loaded.rounds(), model_->rounds());
  EXPECT_EQ(loaded.options().objective, Objective::kRegression);
  EXPECT_EQ(loaded.options().eta, 0.2);
  EXPECT_EQ(loaded.options().seed, 99u);
  EXPECT_TRUE(loaded.trained());
  EXPECT_EQ(names_in(dir_.path()), std::vector<std::string>{"model.kcm"});  // no temporary left

  // Saving over an existing file replaces it; the loaded model can be refit.
  loaded.save(path_);
  EXPECT_TRUE(
      same_bits(XgbCostModel::load(path_).predict(kSpec, test_.features), model_->predict(kSpec, test_.features)));
  loaded.fit(make_samples(kWorkloads, 40, 63));
  EXPECT_EQ(loaded.training_rows(), 120u);
  Samples knob;
  knob.spec = {"knob", 1, 3};
  knob.add({0, 0, 0}, 1.0, "w");
  expect_error([&] { loaded.fit(knob); }, {"knob features version 1 (3 values)", "ir features version 1 (12 values)"});
}

TEST_F(ModelFileTest, RankModelRoundTrips) {
  XgbCostModel rank(fast_options(Objective::kRank));
  rank.fit(train_);
  rank.save(path_);
  XgbCostModel loaded = XgbCostModel::load(path_);
  EXPECT_EQ(loaded.options().objective, Objective::kRank);
  EXPECT_TRUE(same_bits(loaded.predict(kSpec, test_.features), rank.predict(kSpec, test_.features)));
}

TEST_F(ModelFileTest, FeatureVersionMismatchNamesBoth) {
  const FeatureSpec newer{"ir", 2, 180};
  expect_error([&] { XgbCostModel::load(path_, &newer); },
               {path_ + " was trained on ir features version 1 (12 values); this build extracts ir features version 2 "
                        "(180 values)"});
  const FeatureSpec knob{"knob", 1, kFeatures};
  expect_error([&] { XgbCostModel::load(path_, &knob); }, {"this build extracts knob features"});
}

TEST_F(ModelFileTest, CorruptTruncatedAndForeignFilesAreRefused) {
  const std::string bytes = read_bytes(path_);
  ASSERT_GT(bytes.size(), 200u);
  const std::string bad = dir_.file("bad.kcm");

  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x10;
  write_bytes(bad, flipped);
  expect_error([&] { XgbCostModel::load(bad); }, {bad, "corrupt"});

  write_bytes(bad, bytes.substr(0, bytes.size() / 2));
  expect_error([&] { XgbCostModel::load(bad); }, {bad, "truncated"});
  write_bytes(bad, bytes.substr(0, bytes.size() - 1));
  expect_error([&] { XgbCostModel::load(bad); }, {"truncated"});
  write_bytes(bad, bytes.substr(0, 10));
  expect_error([&] { XgbCostModel::load(bad); }, {"truncated"});
  write_bytes(bad, bytes + "x");
  expect_error([&] { XgbCostModel::load(bad); }, {"corrupt"});

  std::mt19937 rng(5);
  std::string random(4096, '\0');
  for (char &ch : random) ch = static_cast<char>(rng());
  write_bytes(bad, random);
  expect_error([&] { XgbCostModel::load(bad); }, {bad, "not a Kiln cost model"});
  write_bytes(bad, "{\"learner\": {}}\nsome text\n");
  expect_error([&] { XgbCostModel::load(bad); }, {"not a Kiln cost model"});
  write_bytes(bad, "");
  expect_error([&] { XgbCostModel::load(bad); }, {"not a Kiln cost model"});
  write_bytes(bad, "KILN-COST-MODEL 2\nwhatever");
  expect_error([&] { XgbCostModel::load(bad); }, {"format '2'", "reads format 1"});

  expect_error([&] { XgbCostModel::load(dir_.file("missing.kcm")); }, {"missing.kcm", "No such file"});
  expect_error([&] { XgbCostModel::load(dir_.path()); }, {"cannot read model file"});
}

TEST_F(ModelFileTest, WellFormedFilesWithBadContentAreRefused) {
  ModelFile parts = decode_model_file(read_bytes(path_), path_);
  const std::string bad = dir_.file("bad.kcm");

  ModelFile garbage = parts;
  garbage.model.assign(300, 'z');
  write_bytes(bad, encode_model_file(garbage));
  expect_error([&] { XgbCostModel::load(bad); }, {bad, "XGBoost cannot load"});

  ModelFile header = parts;
  header.header = "{\"extractor\": \"ir\"";
  write_bytes(bad, encode_model_file(header));
  expect_error([&] { XgbCostModel::load(bad); }, {bad, "unreadable header"});
  header.header = "{\"extractor\": \"ir\"}";
  write_bytes(bad, encode_model_file(header));
  expect_error([&] { XgbCostModel::load(bad); }, {"unreadable header", "feature_version"});

  // The header and XGBoost's model disagree on the feature count.
  ModelFile lying = parts;
  const std::string length = "\"feature_length\":12";
  ASSERT_NE(lying.header.find(length), std::string::npos);
  lying.header.replace(lying.header.find(length), length.size(), "\"feature_length\":13");
  write_bytes(bad, encode_model_file(lying));
  expect_error([&] { XgbCostModel::load(bad); }, {"corrupt", "13"});
}

TEST_F(ModelFileTest, FailedSaveLeavesNoFileBehind) {
  expect_error([&] { model_->save(dir_.file("no/such/dir/model.kcm")); }, {"cannot write model file"});
  // A directory where the file should go: the temporary is written, the rename fails.
  std::filesystem::create_directory(dir_.file("taken"));
  expect_error([&] { model_->save(dir_.file("taken")); }, {"cannot write model file", "taken"});
  EXPECT_EQ(names_in(dir_.path()), (std::vector<std::string>{"model.kcm", "taken"}));
  EXPECT_TRUE(names_in(dir_.file("taken")).empty());
  // An untrained model has nothing to save.
  expect_error([&] { XgbCostModel(fast_options()).save(dir_.file("empty.kcm")); }, {"not trained"});
  EXPECT_EQ(names_in(dir_.path()), (std::vector<std::string>{"model.kcm", "taken"}));
  // The earlier file is intact.
  EXPECT_TRUE(
      same_bits(XgbCostModel::load(path_).predict(kSpec, test_.features), model_->predict(kSpec, test_.features)));
}

}  // namespace
}  // namespace kiln::cost_model
