// The cost model on measurements recorded on this kind of machine (tests/cost_model/data/
// recorded.csv, a sample of the benchmark's dataset written by `cost_model_dataset --export-csv`):
// a model fit on some configs of a workload ranks the others far better than random, a model
// reloaded from disk predicts the same, and a prior fit on other shapes of the template (through
// the tuning-log history path) finds faster configs on the first plan of a shape it never saw than
// a model without transfer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "cost_model/cost_model.h"
#include "cost_model/features.h"
#include "cost_model/history.h"
#include "tests/temp_dir.h"

namespace kiln::cost_model {
namespace {

using contracts::Json;

// The dataset's target: the AVX-512 host it was measured on. The spaces of the recorded
// workloads must be the ones the configs were drawn from (their fingerprints are checked).
constexpr const char *kTarget = "llvm -mcpu=skylake-avx512";

struct Recorded {
  std::string label, template_name, fingerprint, args_json;
  std::vector<int64_t> index;
  std::vector<double> gflops;
};

std::vector<Recorded> read_recorded() {
  std::ifstream in(std::string(KILN_COST_MODEL_TEST_DATA) + "/recorded.csv");
  EXPECT_TRUE(in.good()) << "cannot read recorded.csv";
  std::vector<Recorded> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("#workload ", 0) == 0) {
      std::istringstream s(line.substr(10));
      Recorded r;
      s >> r.label >> r.template_name >> r.fingerprint;
      std::getline(s, r.args_json);
      r.args_json.erase(0, r.args_json.find_first_not_of(' '));
      out.push_back(r);
    } else if (!line.empty() && !out.empty()) {
      const size_t comma = line.find(',');
      out.back().index.push_back(std::stoll(line.substr(0, comma)));
      out.back().gflops.push_back(std::stod(line.substr(comma + 1)));
    }
  }
  return out;
}

struct Workload {
  Recorded rec;
  std::unique_ptr<ops::Task> task;
  std::vector<float> features;
};

// The recorded data is read once for the suite. What is wrong with it fails every test (SetUp): a
// fatal failure in SetUpTestSuite itself makes GoogleTest skip the suite's tests, which CTest then
// counts as skipped, not failed (a changed template space hid these tests that way).
class Recorded_ : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new std::vector<Workload>();
    setup_error_ = new std::string();
    IrFeatureExtractor x;
    for (Recorded &r : read_recorded()) {
      Workload w;
      w.task = std::make_unique<ops::Task>(r.template_name, Json::parse(r.args_json), driver::resolve_target(kTarget));
      if (w.task->space().fingerprint() != r.fingerprint) {
        *setup_error_ = r.label + ": the template's space changed since recorded.csv was written (space " +
                        w.task->space().fingerprint() + ", recorded " + r.fingerprint +
                        "); regenerate it (cost_model_dataset --export-csv)";
        return;
      }
      std::vector<autotune::Config> configs;
      for (int64_t i : r.index) configs.push_back(w.task->space().get(i));
      const FeatureBatch b = extract_features(x, *w.task, configs, 2);
      for (const std::string &e : b.errors) {
        if (!e.empty()) {
          *setup_error_ = r.label + ": a recorded config does not build: " + e;
          return;
        }
      }
      w.features = b.features;
      w.rec = std::move(r);
      data_->push_back(std::move(w));
    }
    if (data_->size() < 3) *setup_error_ = "recorded.csv holds fewer than 3 workloads";
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
    delete setup_error_;
    setup_error_ = nullptr;
  }
  void SetUp() override { ASSERT_EQ(*setup_error_, ""); }
  static const Workload &get(const std::string &label) {
    for (const Workload &w : *data_) {
      if (w.rec.label == label) return w;
    }
    throw std::runtime_error("no recorded workload " + label);
  }
  static Samples samples(const Workload &w, const std::vector<size_t> &rows) {
    Samples s;
    s.spec = IrFeatureExtractor::ir_spec();
    const size_t len = s.spec.length;
    for (size_t i : rows) {
      s.add(std::vector<float>(w.features.begin() + i * len, w.features.begin() + (i + 1) * len), w.rec.gflops[i] * 1e9,
            w.task->key());
    }
    return s;
  }
  static std::vector<float> rows_of(const Workload &w, const std::vector<size_t> &rows) {
    const size_t len = IrFeatureExtractor::kLength;
    std::vector<float> out;
    for (size_t i : rows) out.insert(out.end(), w.features.begin() + i * len, w.features.begin() + (i + 1) * len);
    return out;
  }
  static std::vector<double> truth(const Workload &w, const std::vector<size_t> &rows) {
    std::vector<double> out;
    for (size_t i : rows) out.push_back(w.rec.gflops[i]);
    return out;
  }
  static std::vector<Workload> *data_;
  static std::string *setup_error_;  // why the recorded data cannot be used ("" where it can)
};
std::vector<Workload> *Recorded_::data_ = nullptr;
std::string *Recorded_::setup_error_ = nullptr;

std::vector<size_t> range(size_t begin, size_t end) {
  std::vector<size_t> v(end - begin);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

TEST_F(Recorded_, AModelRanksHeldOutConfigsFarBetterThanRandom) {
  for (const std::string label : {"conv_64_56_3x3", "dense_16x1000x2048"}) {
    SCOPED_TRACE(label);
    const Workload &w = get(label);
    const size_t n = w.rec.index.size(), train = n * 3 / 4;
    XgbOptions o;
    o.threads = 2;
    XgbCostModel model(o);
    model.fit(samples(w, range(0, train)));
    const std::vector<size_t> test = range(train, n);
    const std::vector<float> s = model.predict(IrFeatureExtractor::ir_spec(), rows_of(w, test));
    const std::vector<double> predicted(s.begin(), s.end());
    RandomModel random(3);
    const std::vector<float> r = random.predict(IrFeatureExtractor::ir_spec(), rows_of(w, test));
    const double model_rho = spearman(truth(w, test), predicted);
    const double random_rho = spearman(truth(w, test), std::vector<double>(r.begin(), r.end()));
    std::cout << label << ": spearman model " << model_rho << ", random " << random_rho << "\n";
    EXPECT_GE(model_rho, 0.6);
    EXPECT_GE(model_rho, random_rho + 0.4);
    EXPECT_GT(recall_at_k(truth(w, test), predicted, 16), 16.0 / test.size() * 3);
  }
}

TEST_F(Recorded_, ASavedModelPredictsTheSameAfterLoading) {
  const Workload &w = get("conv_64_56_3x3");
  XgbOptions o;
  o.threads = 2;
  XgbCostModel model(o);
  model.fit(samples(w, range(0, 200)));
  test::TempDir dir;
  const std::string path = dir.path() + "/model.kcm";
  model.save(path);
  const FeatureSpec spec = IrFeatureExtractor::ir_spec();
  const XgbCostModel loaded = XgbCostModel::load(path, &spec);
  const std::vector<float> rows = rows_of(w, range(200, w.rec.index.size()));
  EXPECT_EQ(model.predict(spec, rows), loaded.predict(spec, rows));
  EXPECT_EQ(loaded.training_rows(), 200u);
}

// The first plan of a new shape: without transfer the model knows nothing (the tuner samples at
// random); with a prior fit on the template's other shapes, its top 64 hold faster configs.
TEST_F(Recorded_, TransferFromOtherShapesBeatsNoTransferOnTheFirstPlan) {
  const Workload &target = get("conv_256_14_1x1_s2");
  std::vector<HistoryRow> history;
  for (const std::string label : {"conv_64_56_3x3", "conv_128_28_3x3_s2"}) {
    const Workload &w = get(label);
    for (size_t i = 0; i < w.rec.index.size(); ++i) {
      history.push_back(
          {w.rec.template_name, w.rec.args_json, w.task->space().get(w.rec.index[i]).record(), w.rec.gflops[i] * 1e9});
    }
  }
  const HistorySamples hs = samples_from_history(history, IrFeatureExtractor(), driver::resolve_target(kTarget), 2);
  EXPECT_EQ(hs.skipped, 0u);
  ASSERT_EQ(hs.samples.rows(), history.size());
  // The same history again (the next job of a tuning service): every row from the process's
  // cache, none lowered again, the same samples.
  const HistorySamples again = samples_from_history(history, IrFeatureExtractor(), driver::resolve_target(kTarget), 2);
  EXPECT_EQ(again.extracted, 0u);
  EXPECT_EQ(again.samples.features, hs.samples.features);
  EXPECT_EQ(again.samples.throughput, hs.samples.throughput);
  XgbOptions o;
  o.threads = 2;
  auto prior = std::make_shared<XgbCostModel>(o);
  prior->fit(hs.samples);

  XgbCostModel with(o), without(o);
  with.set_prior(prior);
  const std::vector<size_t> all = range(0, target.rec.index.size());
  const std::vector<double> t = truth(target, all);
  const double best = *std::max_element(t.begin(), t.end());
  auto best_of_plan = [&](const std::vector<float> &scores, uint64_t seed) {
    std::vector<size_t> order(all.size());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);  // ties (an untrained model) at random
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    double found = 0;
    for (size_t k = 0; k < 64; ++k) found = std::max(found, t[order[k]]);
    return found / best;
  };
  const std::vector<float> ws = with.predict(IrFeatureExtractor::ir_spec(), rows_of(target, all));
  const std::vector<float> ns = without.predict(IrFeatureExtractor::ir_spec(), rows_of(target, all));
  double with_frac = 0, without_frac = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    with_frac += best_of_plan(ws, seed) / 20;
    without_frac += best_of_plan(ns, seed) / 20;
  }
  std::cout << "first plan of 64 on a new shape: best found / best known " << with_frac << " with transfer, "
            << without_frac << " without\n";
  EXPECT_GT(with_frac, without_frac + 0.05) << "with transfer " << with_frac << ", without " << without_frac;
  EXPECT_GT(spearman(t, std::vector<double>(ws.begin(), ws.end())), 0.3);
}

}  // namespace
}  // namespace kiln::cost_model
