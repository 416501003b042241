// Dense weights packed at compile time (passes/prepack_dense.cpp): after the pipeline a FusedDense
// reads its constant weight packed once as [ceil(N/bn), K, bn], its kernel is dense_pack.x86 with
// "prepacked" and the block fixed (no packing stage), and its outputs are those of the unoptimized
// graph through the executor, with the template's default config and with tuned records whose
// block is the fixed one or another.
#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/driver/target.h"
#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/ops/registry.h"
#include "compiler/ops/tuning_task.h"
#include "tests/compiler/graph/graph_test_util.h"

namespace kiln::graph {
namespace {

using contracts::Json;
using namespace test;

// x[M, K] @ w[K, N] + b, then Relu: one FusedDense after fusion.
Graph linear(int64_t M, int64_t K, int64_t N) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {M, K}});
  ValueId v = add(g, "MatMul", {x, g.add_constant("w", random_tensor({K, N}, 1))});
  v = add(g, "Add", {v, g.add_constant("b", random_tensor({N}, 2))});
  g.add_output(add(g, "Relu", {v}, {}, "y"));
  return g;
}

const Node &only_dense(const Graph &g) {
  EXPECT_EQ(count(g, "FusedDense"), 1) << print(g);
  for (const auto &n : g.nodes()) {
    if (n.op == "FusedDense") return n;
  }
  throw std::runtime_error("no FusedDense");
}

ops::Task kernel_task(const Graph &g, const Node &n) {
  const Kernel k = find_op(n.op)->kernel(OpContext(g, n));
  return ops::Task(k.template_name, k.template_args, driver::resolve_target("llvm -mcpu=native"));
}

TEST(PrepackDense, TheWeightIsPackedOnceAndTheKernelHasNoPackStage) {
  // 1000 columns: no multiple of the vector, the last block padded; 64: whole blocks; M = 128 as
  // in the BERT encoder.
  for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 1280, 1000}, {128, 96, 64}, {3, 40, 24}}) {
    SCOPED_TRACE(testing::Message() << "M " << M << " K " << K << " N " << N);
    const Graph g = linear(M, K, N);
    const Graph o = driver::optimize_graph(g);
    const Node &d = only_dense(o);
    const int64_t bn = d.attr_int("bn", 0);
    ASSERT_GT(bn, 0) << print(o);
    EXPECT_EQ(d.attr_int("n", 0), N);
    const Value &w = o.value(d.inputs[1]);
    ASSERT_TRUE(w.is_constant());
    EXPECT_EQ(w.type.shape, (std::vector<int64_t>{(N + bn - 1) / bn, K, bn}));
    // No unpacked copy of the weight is left.
    for (const Value &v : o.values()) EXPECT_FALSE(v.is_constant() && v.type.shape == (std::vector<int64_t>{N, K}));
    // The packed layout: w[n, k] at [n / bn, k, n % bn], the padding zero.
    const deploy::Tensor &src = g.value(g.nodes()[0].inputs[1]).constant;  // [K, N]
    const float *p = w.constant.data_as<float>();
    for (int64_t n : {int64_t{0}, N / 2, N - 1})
      for (int64_t k : {int64_t{0}, K - 1})
        EXPECT_EQ(p[((n / bn) * K + k) * bn + n % bn], src.data_as<float>()[k * N + n]);
    for (int64_t n = N; n < (N + bn - 1) / bn * bn; ++n) EXPECT_EQ(p[((n / bn) * K) * bn + n % bn], 0.0f);
    const ops::Task task = kernel_task(o, d);
    EXPECT_EQ(task.workload().args.get_or("prepacked", false).as_bool(), true);
    EXPECT_EQ(task.workload().args.get_or("bn", 0).as_int(), bn);
    EXPECT_FALSE(task.compute(task.default_config()).has_part("pack"));
    EXPECT_EQ(task.default_config().split("tile_x").back(), bn);
    EXPECT_LT(max_difference(g, o), 1e-5);
  }
}

// A tuning log with one record for one workload.
class OneRecord : public ops::ConfigLookup {
 public:
  OneRecord(std::string key, contracts::ConfigRecord record) : key_(std::move(key)), record_(std::move(record)) {}
  std::optional<ops::TunedConfig> best(const contracts::Workload &w, const std::string &target) const override {
    if (w.key != key_) return std::nullopt;
    ops::TunedConfig t;
    t.config = record_;
    t.target = target;
    return t;
  }

 private:
  std::string key_;
  contracts::ConfigRecord record_;
};

TEST(PrepackDense, ARecordOfTheFreeBlockServesOnlyWithTheFixedBlock) {
  const Graph g = linear(4, 64, 1000);
  const Graph o = driver::optimize_graph(g);
  const Node &d = only_dense(o);
  const int64_t bn = d.attr_int("bn", 0);
  const ops::Task kernel = kernel_task(o, d);
  // The task of an older log: the block a knob.
  const ops::Task free = ops::tuning_task(ops::without_fixed_blocks(kernel));
  ASSERT_NE(free.key(), ops::tuning_task(kernel).key());
  std::vector<std::pair<std::string, Json>> values;
  for (const autotune::Knob &k : free.space().knobs()) values.emplace_back(k.name, free.default_config().value(k.name));
  // A valid config of the free space with the fixed block bn (which blocks the space has and takes
  // depends on the host's vector width): tile_x [x, y, bn].
  auto with_block = [&](int64_t block) -> std::optional<std::vector<std::pair<std::string, Json>>> {
    for (const Json &e : free.space().knob("tile_x").entities) {
      if (e[2].as_int() != block) continue;
      auto v = values;
      for (auto &[name, value] : v)
        if (name == "tile_x") value = e;
      try {
        free.space().from_values(v);
        return v;
      } catch (const std::exception &) {
      }
    }
    return std::nullopt;
  };
  // Another block: the first of the space's sampled (valid) configs whose block is not bn.
  std::optional<autotune::Config> other;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 1000 && !other; ++i) {
    autotune::Config c = free.space().sample(rng);
    if (c.split("tile_x")[2] != bn) other = c;
  }
  ASSERT_TRUE(other.has_value()) << "no config of the free space with a block other than " << bn;
  ASSERT_TRUE(with_block(bn).has_value());
  for (const autotune::Config &cfg : {free.space().from_values(*with_block(bn)), *other}) {
    const int64_t block = cfg.split("tile_x")[2];
    SCOPED_TRACE(testing::Message() << "block " << block);
    const OneRecord log(ops::tuning_task(free).key(), cfg.record());
    const ops::TunedChoice c = ops::choose_tuned_config(&log, kernel);
    EXPECT_EQ(c.config.has_value(), block == bn);
    driver::ExecutorOptions eo;
    eo.configs = &log;
    std::vector<deploy::Tensor> in = {random_tensor({4, 64}, 5)};
    driver::GraphExecutor reference(g), tuned(o, eo);
    const auto want = reference.run(in), got = tuned.run(in);
    ASSERT_EQ(got[0].shape(), want[0].shape());
    double worst = 0;
    for (int64_t i = 0; i < want[0].numel(); ++i)
      worst = std::max(worst, double(std::fabs(got[0].data_as<float>()[i] - want[0].data_as<float>()[i])));
    EXPECT_LT(worst, 1e-4);
  }
}

TEST(PrepackDense, APackedWeightOfTheWrongShapeIsAGraphError) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 8}});
  ValueId w = g.add_constant("w", random_tensor({2, 8, 16}, 3));
  Node n;
  n.op = "FusedDense";
  n.name = "dense";
  n.inputs = {x, w};
  n.attrs["bn"] = Attribute::of_int(16);
  n.attrs["n"] = Attribute::of_int(40);  // needs 3 blocks of 16
  n.outputs = {kNoValue};
  try {
    infer_types(g, n);
    FAIL() << "no error";
  } catch (const GraphError &e) {
    EXPECT_NE(std::string(e.what()).find("is not [ceil(n/bn), K, bn]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::graph
