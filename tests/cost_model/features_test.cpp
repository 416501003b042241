// The IR features: one fixed length on every template and target, deterministic, different for
// schedules that differ in tiling, loop order or annotation, and extracted in parallel with the
// same result as serially.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/driver/target.h"
#include "compiler/lower/lower.h"
#include "compiler/ops/registry.h"
#include "compiler/te/tensor.h"
#include "cost_model/features.h"
#include "tests/compiler/ops/example_workloads.h"

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

// Configs that differ only in one knob give different vectors, for every knob of the space: tile
// sizes (splits) and choices (e.g. conv2d_nchwc's unroll_kw, an annotation).
TEST(IrFeatures, SchedulesThatDifferInOneKnobDiffer) {
  for (const ops::Task &task : {dense_task(), conv_task()}) {
    SCOPED_TRACE(task.templ().name);
    IrFeatureExtractor x;
    std::mt19937_64 rng(11);
    std::map<std::string, int> pairs, differing;
    for (int i = 0; i < 200; ++i) {
      const autotune::Config c = task.space().sample(rng);
      const std::optional<autotune::Config> n = task.space().neighbour(c, rng);
      if (!n) continue;
      for (const autotune::Knob &k : task.space().knobs()) {
        if (c.value(k.name) == n->value(k.name)) continue;
        ++pairs[k.name];
        if (x.extract(task, c) != x.extract(task, *n)) ++differing[k.name];
      }
    }
    for (const autotune::Knob &k : task.space().knobs()) {
      // A knob can be a no-op for some configs (the order of loops of extent 1), never for most.
      if (k.size() < 2) continue;
      EXPECT_GT(pairs[k.name], 0) << k.name;
      EXPECT_GE(differing[k.name], pairs[k.name] * 7 / 10)
          << k.name << ": " << differing[k.name] << " of " << pairs[k.name] << " neighbours differ";
    }
  }
}

// A matmul scheduled by hand: tiles, then one variation each of loop order, vectorize, unroll,
// parallel and GPU thread binding. Every variation changes the vector, and in the features that
// say what changed.
ir::LoweredFunc hand_matmul(const std::string &variation) {
  auto A = te::placeholder({64, 48}, ir::Float(32), "A");
  auto B = te::placeholder({48, 32}, ir::Float(32), "B");
  auto k = te::reduce_axis(48, "k");
  auto C = te::compute(
      {64, 32}, [&](ir::Var i, ir::Var j) { return te::sum(A(i, k) * B(k, j), {k}); }, "C");
  auto s = te::create_schedule({C});
  te::Stage st = (*s)[C];
  ir::IterVar io, jo, ii, ji;
  st.tile(st.axis(0), st.axis(1), 8, 16, &io, &jo, &ii, &ji);
  const ir::IterVar kk = st.reduce_axis(0);
  if (variation == "order") {
    st.reorder({io, jo, ii, kk, ji});
  } else {
    st.reorder({io, jo, kk, ii, ji});
  }
  if (variation == "vectorize") st.vectorize(ji);
  if (variation == "unroll") st.unroll(ii);
  if (variation == "parallel") st.parallel(io);
  if (variation == "gpu") {
    st.bind(io, "blockIdx.x");
    st.bind(ii, "threadIdx.x");
  }
  lower::LowerOptions o;
  o.partition_loops = o.unroll = o.vectorize = o.reuse_storage = false;
  return lower::lower(*s, {A, B, C}, "mm", o);
}

TEST(IrFeatures, LoopOrderAndEveryAnnotationChangeTheVector) {
  IrFeatureExtractor x;
  const std::vector<float> base = x.extract_lowered(hand_matmul("base"), 2.0 * 64 * 32 * 48);
  EXPECT_EQ(base, x.extract_lowered(hand_matmul("base"), 2.0 * 64 * 32 * 48));
  const std::map<std::string, std::string> says = {{"order", "store0.buf0.reuse_iters"},
                                                   {"vectorize", "store0.loop0.vectorized"},
                                                   {"unroll", "store0.loop1.unrolled"},
                                                   {"parallel", "store0.loop4.parallel"},
                                                   {"gpu", "store0.loop4.blockIdx"}};
  for (const auto &[variation, feature] : says) {
    SCOPED_TRACE(variation);
    const std::vector<float> f = x.extract_lowered(hand_matmul(variation), 2.0 * 64 * 32 * 48);
    ASSERT_EQ(f.size(), base.size());
    EXPECT_NE(f, base);
    EXPECT_NE(f[index_of(feature)], base[index_of(feature)]) << IrFeatureExtractor::describe(f);
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

// Every template of the operator library, on AVX-512, AVX2 and SSE targets, for the default and
// random configs: one length, finite values.
TEST(IrFeatures, SameLengthOnEveryTemplateAndTarget) {
  IrFeatureExtractor x;
  std::set<std::string> templates;
  for (const std::string target : {"llvm -mcpu=skylake-avx512", "llvm -mcpu=haswell", "llvm -mcpu=x86-64"}) {
    for (const testing::ExampleWorkload &w : testing::example_workloads()) {
      const ops::Task task(w.template_name, w.args, driver::resolve_target(target));
      std::mt19937_64 rng(9);
      std::vector<autotune::Config> configs = {task.default_config()};
      for (int i = 0; i < 5; ++i) configs.push_back(task.space().sample(rng));
      for (const autotune::Config &c : configs) {
        const std::vector<float> f = x.extract(task, c);
        ASSERT_EQ(f.size(), IrFeatureExtractor::kLength) << w.template_name << " on " << target;
        for (float v : f) ASSERT_TRUE(std::isfinite(v)) << w.template_name << " " << c.to_string();
      }
      templates.insert(w.template_name);
    }
  }
  EXPECT_EQ(templates.size(), ops::Registry::builtin().names().size());
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
