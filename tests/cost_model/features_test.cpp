// The IR features: one fixed length on every template and target, deterministic, different for
// schedules that differ in tiling, loop order or annotation, and extracted in parallel with the
// same result as serially.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "cost_model/features.h"

namespace kiln::cost_model {
namespace {

using contracts::Json;

Json tensor(const std::vector<int64_t> &shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
}

ops::Task dense_task(const std::string &target = "llvm -mcpu=skylake-avx512") {
  return ops::Task("dense_pack.x86",
                   Json::object({{"data", tensor({64, 128})}, {"weight", tensor({96, 128})}, {"prepacked", true}}),
                   driver::resolve_target(target));
}

ops::Task conv_task(const std::string &target = "llvm -mcpu=skylake-avx512") {
  return ops::Task("conv2d_nchwc.x86",
                   Json::object({{"data", tensor({1, 32, 14, 14})},
                                 {"kernel", tensor({32, 32, 3, 3})},
                                 {"strides", Json::array_of(std::vector<int64_t>{1, 1})},
                                 {"padding", Json::array_of(std::vector<int64_t>{1, 1, 1, 1})},
                                 {"dilation", Json::array_of(std::vector<int64_t>{1, 1})}}),
                   driver::resolve_target(target));
}

size_t index_of(const std::string &name) {
  const std::vector<std::string> names = IrFeatureExtractor::names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return i;
  }
  ADD_FAILURE() << "no feature named " << name;
  return 0;
}

TEST(IrFeatures, NamesCoverTheVectorAndAreUnique) {
  const std::vector<std::string> names = IrFeatureExtractor::names();
  EXPECT_EQ(names.size(), IrFeatureExtractor::kLength);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  EXPECT_EQ(IrFeatureExtractor::ir_spec().extractor, "ir");
  EXPECT_EQ(IrFeatureExtractor::ir_spec().version, kIrFeatureVersion);
}

TEST(IrFeatures, DeterministicAndFinite) {
  const ops::Task task = dense_task();
  IrFeatureExtractor x;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 10; ++i) {
    const autotune::Config c = task.space().sample(rng);
    const std::vector<float> a = x.extract(task, c), b = x.extract(task, c);
    ASSERT_EQ(a.size(), IrFeatureExtractor::kLength);
    EXPECT_EQ(a, b) << c.to_string();
    for (float v : a) ASSERT_TRUE(std::isfinite(v)) << c.to_string();
  }
}

// Configs that differ only in one knob (a tile size, the loop order, an annotation) give
// different vectors, and the features that differ are the ones that knob changes.
TEST(IrFeatures, SchedulesThatDifferInOneKnobDiffer) {
  for (const ops::Task &task : {dense_task(), conv_task()}) {
    SCOPED_TRACE(task.templ().name);
    IrFeatureExtractor x;
    std::mt19937_64 rng(11);
    std::set<autotune::KnobKind> kinds_seen;
    int pairs = 0, differing = 0;
    for (int i = 0; i < 60; ++i) {
      const autotune::Config c = task.space().sample(rng);
      const std::optional<autotune::Config> n = task.space().neighbour(c, rng);
      if (!n) continue;
      // The knob that differs.
      std::string knob;
      for (const autotune::Knob &k : task.space().knobs()) {
        if (c.value(k.name) != n->value(k.name)) knob = k.name;
      }
      const autotune::Knob &k = task.space().knob(knob);
      // A knob can be a no-op for some configs (e.g. the order of loops of extent 1); count them.
      ++pairs;
      if (x.extract(task, c) != x.extract(task, *n)) {
        ++differing;
        kinds_seen.insert(k.kind);
      }
    }
    EXPECT_GE(differing, pairs * 8 / 10) << differing << " of " << pairs << " neighbours differ";
    EXPECT_TRUE(kinds_seen.count(autotune::KnobKind::Split));
  }
}

// Hand-written checks of what the features say about a known schedule: the dense template's
// innermost loop is vectorized with the x tile as its extent, and the outer loop is parallel.
TEST(IrFeatures, DescribeTheLoopNest) {
  const ops::Task task = dense_task();
  IrFeatureExtractor x;
  const autotune::Config c = task.default_config();
  const std::vector<float> f = x.extract(task, c);
  if (std::getenv("KILN_PRINT_FEATURES")) std::cout << IrFeatureExtractor::describe(f);
  // The main store (slot 0) is the reduction update: vectorized innermost, a parallel loop above.
  EXPECT_EQ(f[index_of("store0.loop0.vectorized")], 1.f);
  bool parallel = false;
  for (size_t l = 0; l < IrFeatureExtractor::kLoopSlots; ++l) {
    parallel = parallel || f[index_of("store0.loop" + std::to_string(l) + ".parallel")] == 1.f;
  }
  EXPECT_TRUE(parallel);
  // The work of the whole nest is the multiply-adds of 64x96x128.
  EXPECT_NEAR(f[index_of("store0.float_fma")], std::log2(1.0 + 64.0 * 96 * 128), 0.01);
  EXPECT_EQ(f[index_of("program.flop")], static_cast<float>(std::log2(1.0 + task.flop())));
  // The stored buffer is read and written (a reduction).
  EXPECT_EQ(f[index_of("store0.buf0.read")], 1.f);
  EXPECT_EQ(f[index_of("store0.buf0.written")], 1.f);
}

TEST(IrFeatures, SameLengthOnEveryTemplateAndTarget) {
  IrFeatureExtractor x;
  int templates = 0;
  for (const std::string target : {"llvm -mcpu=skylake-avx512", "llvm -mcpu=haswell", "llvm -mcpu=x86-64"}) {
    for (const ops::Task &task : {dense_task(target), conv_task(target)}) {
      const std::vector<float> f = x.extract(task, task.default_config());
      EXPECT_EQ(f.size(), IrFeatureExtractor::kLength) << task.templ().name << " on " << target;
      ++templates;
    }
  }
  EXPECT_EQ(templates, 6);
}

TEST(FeatureBatch, ParallelExtractionMatchesSerial) {
  const ops::Task task = conv_task();
  std::mt19937_64 rng(5);
  std::vector<autotune::Config> configs;
  for (int i = 0; i < 24; ++i) configs.push_back(task.space().sample(rng));
  IrFeatureExtractor x;
  const FeatureBatch serial = extract_features(x, task, configs, 1);
  const FeatureBatch parallel = extract_features(x, task, configs, 4);
  ASSERT_EQ(serial.rows(), configs.size());
  EXPECT_EQ(serial.features, parallel.features);
  for (size_t i = 0; i < configs.size(); ++i) {
    EXPECT_EQ(serial.errors[i], "") << configs[i].to_string();
    const std::vector<float> one = x.extract(task, configs[i]);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), serial.features.begin() + i * serial.spec.length));
  }
  EXPECT_GT(serial.lower_seconds, 0);
  EXPECT_GT(serial.extract_seconds, 0);
}

TEST(FeatureBatch, AConfigOfAnotherSpaceIsAnErrorRowNotACrash) {
  const ops::Task dense = dense_task(), conv = conv_task();
  std::vector<autotune::Config> configs = {dense.default_config(), conv.default_config()};
  const FeatureBatch b = extract_features(IrFeatureExtractor(), dense, configs, 2);
  EXPECT_EQ(b.errors[0], "");
  EXPECT_NE(b.errors[1], "");
  EXPECT_TRUE(std::isnan(b.features[b.spec.length]));
}

TEST(KnobFeatures, OneValuePerKnobEntry) {
  const ops::Task task = conv_task();
  KnobFeatureExtractor x;
  const FeatureSpec spec = x.spec(task);
  EXPECT_EQ(spec.extractor, "knob");
  EXPECT_GT(spec.length, task.space().knobs().size() - 1);
  std::mt19937_64 rng(2);
  const autotune::Config a = task.space().sample(rng), b = task.space().sample(rng);
  EXPECT_EQ(x.extract(task, a).size(), spec.length);
  EXPECT_NE(x.extract(task, a), x.extract(task, b));
}

}  // namespace
}  // namespace kiln::cost_model
