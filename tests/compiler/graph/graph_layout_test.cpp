// The layout pass (passes/alter_layout.cpp): small graphs before and after (where the layout
// transforms go, what stays NCHW) and the same outputs as the unoptimized graph through the
// reference executor on random inputs; ResNet-18 and MobileNetV2 from the frontend's exported models.
// Without a tuning log in the pipeline the blocks are the graph's and configs given to the executor
// never change them; with one, each conv takes the blocks of the record of its tuning task (the
// workload with the blocks as knobs) that costs least with the transforms it needs.
//
// The small graphs use 8 channels: every block the templates' default configs choose for them is 8
// (one or two vectors of at least 4 lanes), so which transforms are needed does not depend on the
// machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <random>

#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/driver/target.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/ops/registry.h"
#include "compiler/ops/tuning_task.h"
#include "tests/compiler/graph/graph_test_util.h"
#include "tests/compiler/graph/model_export.h"

namespace kiln::graph {
namespace {

using test::add;
using test::count;
using test::random_tensor;
using test::scalar;

// A 3x3 convolution (padding 1) of `x` to `oc` channels with a random weight and bias.
ValueId conv(Graph &g, ValueId x, int64_t oc, uint64_t seed, int64_t group = 1, const std::string &out = "") {
  const int64_t c = g.value(x).type.shape[1];
  ValueId w = g.add_constant(g.unique_name("w"), random_tensor({oc, c / group, 3, 3}, seed));
  ValueId b = g.add_constant(g.unique_name("b"), random_tensor({oc}, seed + 1));
  return add(g, "Conv", {x, w, b},
             {{"kernel_shape", Attribute::of_ints({3, 3})},
              {"pads", Attribute::of_ints({1, 1, 1, 1})},
              {"group", Attribute::of_int(group)}},
             out);
}

Graph alter(const Graph &g) {
  Graph a = passes::alter_layout(g, driver::resolve_target("llvm -mcpu=native"));
  verify(a);
  return a;
}

// Max |a - b| / max(1, max |b|) over every output, on the same random inputs.
double max_difference(const Graph &a, const Graph &b, uint64_t seed = 7) {
  std::vector<deploy::Tensor> in;
  for (ValueId i : a.inputs()) in.push_back(random_tensor(a.value(i).type.shape, seed++));
  driver::GraphExecutor ea(a), eb(b);
  auto oa = ea.run(in), ob = eb.run(in);
  EXPECT_EQ(oa.size(), ob.size());
  double worst = 0;
  for (size_t k = 0; k < oa.size() && k < ob.size(); ++k) {
    EXPECT_EQ(oa[k].shape(), ob[k].shape());
    if (oa[k].shape() != ob[k].shape()) return 1e9;
    double scale = 1;
    for (int64_t i = 0; i < ob[k].numel(); ++i) scale = std::max(scale, std::fabs(double(ob[k].data_as<float>()[i])));
    for (int64_t i = 0; i < oa[k].numel(); ++i)
      worst = std::max(worst, std::fabs(double(oa[k].data_as<float>()[i]) - ob[k].data_as<float>()[i]) / scale);
  }
  return worst;
}

void expect_outputs_kept(const Graph &before, const Graph &after) {
  ASSERT_EQ(before.outputs().size(), after.outputs().size());
  for (size_t k = 0; k < before.outputs().size(); ++k) {
    EXPECT_EQ(after.value(after.outputs()[k]).name, before.value(before.outputs()[k]).name);
    EXPECT_EQ(after.value(after.outputs()[k]).type, before.value(before.outputs()[k]).type);
  }
}

TEST(GraphLayout, AConvChainIsBlockedWithTransformsOnlyAtTheEnds) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 10, 10}});
  ValueId v = conv(g, x, 8, 1);
  v = add(g, "Relu", {v});
  v = conv(g, v, 8, 3);
  v = add(g, "Sigmoid", {v});
  v = conv(g, v, 8, 5, 1, "y");
  g.add_output(v);
  Graph a = alter(g);
  EXPECT_EQ(count(a, "Conv"), 0) << print(a);
  EXPECT_EQ(count(a, "ConvNCHWc"), 3) << print(a);
  EXPECT_EQ(count(a, "LayoutTransform"), 2) << print(a);
  // The first node reads the input, the last one writes the output.
  EXPECT_EQ(a.nodes().front().op, "LayoutTransform");
  EXPECT_EQ(a.nodes().back().op, "LayoutTransform");
  EXPECT_EQ(a.value(a.nodes()[1].outputs[0]).type.rank(), 5) << "the relu stays blocked";
  expect_outputs_kept(g, a);
  EXPECT_LE(max_difference(a, g), 1e-5);
}

TEST(GraphLayout, AResidualBlockHasNoTransformBetweenItsConvs) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 9, 9}});
  ValueId a0 = add(g, "Relu", {conv(g, x, 8, 1)});
  ValueId v = add(g, "Relu", {conv(g, a0, 8, 3)});
  v = conv(g, v, 8, 5);
  v = add(g, "Add", {v, a0});
  v = add(g, "Relu", {v}, {}, "y");
  g.add_output(v);
  Graph f = passes::fuse_epilogues(g);
  ASSERT_EQ(count(f, "FusedConv"), 3) << print(f);
  Graph a = alter(f);
  EXPECT_EQ(count(a, "ConvNCHWc"), 3) << print(a);
  EXPECT_EQ(count(a, "LayoutTransform"), 2) << print(a);
  // The residual reaches the last conv's epilogue in the blocked layout.
  const Node &last = a.nodes()[a.nodes().size() - 2];
  ASSERT_EQ(last.op, "ConvNCHWc");
  ASSERT_EQ(last.inputs.size(), 4u);
  EXPECT_EQ(a.value(last.inputs[3]).type.rank(), 5);
  expect_outputs_kept(g, a);
  EXPECT_LE(max_difference(a, g), 1e-5);
}

TEST(GraphLayout, ATensorReadByTwoNchwConsumersIsTransformedOnce) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 6, 6}});
  ValueId c = conv(g, x, 8, 1);
  ValueId f = add(g, "Flatten", {c}, {}, "flat");
  ValueId t = add(g, "Transpose", {c}, {{"perm", Attribute::of_ints({0, 2, 3, 1})}}, "nhwc");
  ValueId r = add(g, "ReduceMax", {c}, {{"keepdims", Attribute::of_int(0)}}, "max");
  g.add_output(f);
  g.add_output(t);
  g.add_output(r);
  Graph a = alter(g);
  EXPECT_EQ(count(a, "ConvNCHWc"), 1);
  EXPECT_EQ(count(a, "LayoutTransform"), 2) << "one into the conv, one back for all three readers\n" << print(a);
  expect_outputs_kept(g, a);
  EXPECT_LE(max_difference(a, g), 1e-5);
}

TEST(GraphLayout, BackToBackTransformsCancelOrCompose) {
  auto transform = [](Graph &g, ValueId v, int64_t src, int64_t dst, const std::string &out = "") {
    return add(g, "LayoutTransform", {v},
               {{"src_block", Attribute::of_int(src)}, {"dst_block", Attribute::of_int(dst)}}, out);
  };
  {
    Graph g;
    ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 4, 4}});
    ValueId v = transform(g, transform(g, x, 0, 8), 8, 0);
    g.add_output(add(g, "Relu", {v}, {}, "y"));
    Graph a = alter(g);
    EXPECT_EQ(count(a, "LayoutTransform"), 0) << print(a);
    EXPECT_EQ(max_difference(a, g), 0.0);
  }
  {
    Graph g;
    ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 4, 4}});
    ValueId v = transform(g, transform(g, transform(g, x, 0, 8), 8, 2), 2, 4, "y");
    g.add_output(v);
    Graph a = alter(g);
    ASSERT_EQ(count(a, "LayoutTransform"), 1) << print(a);
    EXPECT_EQ(a.nodes()[0].attr_int("src_block", -1), 0);
    EXPECT_EQ(a.nodes()[0].attr_int("dst_block", -1), 4);
    EXPECT_EQ(a.value(a.outputs()[0]).type, g.value(g.outputs()[0]).type);
    EXPECT_EQ(max_difference(a, g), 0.0);
  }
}

TEST(GraphLayout, GraphOutputsKeepTheirLayoutAndNameWhenAlsoReadBlocked) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 5, 5}});
  ValueId c1 = conv(g, x, 8, 1, 1, "first");
  ValueId c2 = conv(g, c1, 8, 3, 1, "second");
  g.add_output(c1);
  g.add_output(c2);
  Graph a = alter(g);
  EXPECT_EQ(count(a, "ConvNCHWc"), 2);
  EXPECT_EQ(count(a, "LayoutTransform"), 3) << print(a);
  expect_outputs_kept(g, a);
  EXPECT_LE(max_difference(a, g), 1e-5);
}

TEST(GraphLayout, ConvsTheBlockedTemplatesDoNotTakeStayNchw) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 6, 6}});
  // Two groups of four channels: neither groups = 1 nor depthwise.
  ValueId grouped = conv(g, x, 8, 1, 2, "grouped");
  // A weight computed at run time cannot be packed at compile time.
  ValueId wx = g.add_input("runtime_weight", TensorType{ir::Float(32), {8, 8, 1, 1}});
  ValueId dynamic = add(g, "Conv", {grouped, wx}, {{"kernel_shape", Attribute::of_ints({1, 1})}}, "dynamic");
  g.add_output(dynamic);
  Graph d;
  ValueId xd = d.add_input("x", TensorType{ir::Float(64), {1, 8, 6, 6}});
  deploy::Tensor w64 = deploy::Tensor::empty({8, 8, 1, 1}, deploy::DType::of<double>());
  for (int64_t i = 0; i < 64; ++i) w64.data_as<double>()[i] = 0.01 * static_cast<double>(i);
  d.add_output(add(d, "Conv", {xd, d.add_constant("w", w64)}, {{"kernel_shape", Attribute::of_ints({1, 1})}}, "y"));
  for (const Graph *in : {&g, &d}) {
    Graph a = alter(*in);
    EXPECT_EQ(count(a, "ConvNCHWc"), 0) << print(a);
    EXPECT_EQ(count(a, "LayoutTransform"), 0) << print(a);
    EXPECT_EQ(count(a, "Conv"), count(*in, "Conv"));
  }
  EXPECT_LE(max_difference(alter(g), g), 1e-6);
}

TEST(GraphLayout, PoolsDepthwiseChannelConstantsAndConcatStayBlocked) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 12, 12}});
  ValueId c = add(g, "Relu", {conv(g, x, 8, 1)});
  ValueId p = add(g, "MaxPool", {c},
                  {{"kernel_shape", Attribute::of_ints({3, 3})},
                   {"strides", Attribute::of_ints({2, 2})},
                   {"pads", Attribute::of_ints({1, 1, 1, 1})}});
  ValueId dw = conv(g, p, 8, 3, 8);
  ValueId scale = g.add_constant("scale", random_tensor({8, 1, 1}, 9, 0.5f, 1.5f));
  ValueId m = add(g, "Mul", {dw, scale});
  m = add(g, "Add", {m, g.add_constant("half", scalar(0.5f))});
  ValueId other = conv(g, p, 8, 11);
  ValueId cat = add(g, "Concat", {m, other}, {{"axis", Attribute::of_int(1)}});
  ValueId avg =
      add(g, "AveragePool", {cat}, {{"kernel_shape", Attribute::of_ints({2, 2})}, {"ceil_mode", Attribute::of_int(1)}});
  ValueId gap = add(g, "GlobalAveragePool", {avg});
  g.add_output(add(g, "Flatten", {gap}, {}, "y"));
  Graph a = alter(g);
  EXPECT_EQ(count(a, "ConvNCHWc"), 3) << print(a);
  EXPECT_EQ(count(a, "PoolNCHWc"), 3) << print(a);
  EXPECT_EQ(count(a, "LayoutTransform"), 2) << "into the first conv and before the Flatten\n" << print(a);
  expect_outputs_kept(g, a);
  EXPECT_LE(max_difference(a, g), 1e-5);
}

// 1001 output channels have no block of whole vectors (nor of a part of one but 1): the conv runs
// on 1001 rounded up to two vectors (1024 with 16 lanes, 1008 with 8), the rest zero weights and
// bias, blocked by two vectors, and the padding is dropped on the way back to NCHW, where the pool
// reads it.
TEST(GraphLayout, OutputChannelsWithoutAVectorBlockArePaddedToWholeVectors) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 5, 5}});
  ValueId r = add(g, "Relu", {conv(g, x, 1001, 1)});
  g.add_output(add(g, "GlobalAveragePool", {r}, {}, "y"));
  Graph a = alter(g);
  ASSERT_EQ(count(a, "ConvNCHWc"), 1) << print(a);
  EXPECT_EQ(count(a, "Slice"), 1) << print(a);
  const int64_t lanes = driver::resolve_target("llvm -mcpu=native").lanes(ir::Float(32));
  for (const Node &n : a.nodes()) {
    if (n.op != "ConvNCHWc") continue;
    const TensorType &y = a.value(n.outputs[0]).type;
    ASSERT_EQ(y.rank(), 5);
    EXPECT_EQ(y.shape[4], 2 * lanes) << "the output block is two vectors: " << y.str();
    EXPECT_EQ(y.shape[1] * y.shape[4], (1001 + 2 * lanes - 1) / (2 * lanes) * (2 * lanes)) << y.str();
  }
  expect_outputs_kept(g, a);
  EXPECT_LE(max_difference(a, g), 1e-4);
}

// ShuffleNetV2's branch: 58 channels, which no block of whole vectors divides. The first conv runs on
// them padded to whole vectors; the depthwise conv after it computes the padded channels too (zero
// weights and bias), and the last conv reads them with zero weights: one transform into the blocks
// and one padding dropped at the end, where each conv would otherwise go back to NCHW, slice and
// transform again. An epilogue that may turn the zeros into infinities (exp) keeps the slices.
TEST(GraphLayout, ConvsOfAPaddedConvReadItsPaddedChannels) {
  for (const char *act : {"Relu", "Exp"}) {
    SCOPED_TRACE(act);
    Graph g;
    ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 16, 8, 8}});
    ValueId a = add(g, act, {conv(g, x, 58, 1)});
    ValueId d = add(g, "Relu", {conv(g, a, 58, 3, 58)});
    g.add_output(add(g, "Relu", {conv(g, d, 58, 5)}, {}, "y"));
    driver::GraphPipelineOptions po;
    po.fuse_expand_depthwise = false;
    const Graph o = driver::optimize_graph(g, po);
    ASSERT_EQ(count(o, "ConvNCHWc"), 3) << print(o);
    if (std::string(act) == "Relu") {
      EXPECT_EQ(count(o, "LayoutTransform"), 2) << print(o);
      EXPECT_EQ(count(o, "Slice"), 1) << print(o);
    } else {
      // The slices, on their own or as members of an injective group (a Slice then a transform).
      int slices = count(o, "Slice");
      for (const auto &n : o.nodes()) {
        if (n.op == "FusedInjective" && n.attr_string("subgraph", "").find("\"op\":\"Slice\"") != std::string::npos)
          ++slices;
      }
      EXPECT_GE(slices, 2) << print(o);
    }
    expect_outputs_kept(g, o);
    EXPECT_LE(max_difference(o, g), 1e-5);
  }
}

// A global pool straight after a padded conv pools the padded blocked tensor: the padding is dropped
// from the pooled values (1024 of them with 16 lanes), not from the 1024 x 5 x 5 map, whose
// transform back and slice are gone.
TEST(GraphLayout, AGlobalPoolOfAPaddedConvPoolsTheBlockedTensor) {
  const int64_t lanes = driver::resolve_target("llvm -mcpu=native").lanes(ir::Float(32));
  const int64_t padded = (1001 + 2 * lanes - 1) / (2 * lanes) * (2 * lanes);
  for (const char *op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    Graph g;
    ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 5, 5}});
    g.add_output(add(g, op, {conv(g, x, 1001, 1)}, {}, "y"));
    Graph a = passes::eliminate_dead_code(alter(g));
    EXPECT_EQ(count(a, "PoolNCHWc"), 1) << print(a);
    ASSERT_EQ(count(a, "Slice"), 1) << print(a);
    for (const Node &n : a.nodes()) {
      if (n.op == "Slice" || (n.op == "LayoutTransform" && n.attr_int("dst_block", 0) == 0)) {
        EXPECT_EQ(a.value(n.inputs[0]).type.numel(), padded) << n.describe() << " moves the whole map\n" << print(a);
      }
    }
    expect_outputs_kept(g, a);
    EXPECT_LE(max_difference(a, g), 1e-4) << op;
  }
}

// Where padding would add more than an eighth of the work (20 channels to 24 or 32), the conv keeps a
// block of part of a vector and nothing is sliced.
TEST(GraphLayout, OutputChannelsAreNotPaddedBeyondAnEighth) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 5, 5}});
  g.add_output(conv(g, x, 20, 1, 1, "y"));
  Graph a = alter(g);
  EXPECT_EQ(count(a, "ConvNCHWc"), 1) << print(a);
  EXPECT_EQ(count(a, "Slice"), 0) << print(a);
  EXPECT_LE(max_difference(a, g), 1e-5);
}

TEST(GraphLayout, AConcatWhoseChannelsDoNotDivideTheBlockGoesBackToNchw) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 6, 6}});
  ValueId z = g.add_input("z", TensorType{ir::Float(32), {1, 3, 6, 6}});
  ValueId c = conv(g, x, 8, 1);
  g.add_output(add(g, "Concat", {c, z}, {{"axis", Attribute::of_int(1)}}, "y"));
  Graph a = alter(g);
  EXPECT_EQ(count(a, "ConvNCHWc"), 1);
  EXPECT_EQ(count(a, "LayoutTransform"), 2) << print(a);
  for (const auto &n : a.nodes()) {
    if (n.op == "Concat") {
      EXPECT_EQ(a.value(n.outputs[0]).type.rank(), 4);
    }
  }
  EXPECT_LE(max_difference(a, g), 1e-5);
}

TEST(GraphLayout, LayoutTransformRejectsABlockThatDoesNotDivideTheChannels) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 6, 2, 2}});
  EXPECT_THROW(add(g, "LayoutTransform", {x}, {{"dst_block", Attribute::of_int(4)}}), GraphError);
}

// A tuning log whose record for a workload is `make`'s (nullopt: none); the workloads it was asked
// (their arguments).
class FakeLog : public ops::ConfigLookup {
 public:
  using Make = std::function<std::optional<autotune::Config>(const ops::Task &)>;
  explicit FakeLog(Make make) : make_(std::move(make)) {}
  std::optional<ops::TunedConfig> best(const contracts::Workload &w, const std::string &target) const override {
    asked.push_back(w.args_json);
    const ops::Task t(w.template_name, w.args, driver::resolve_target(target));
    const std::optional<autotune::Config> c = make_(t);
    if (!c) return std::nullopt;
    ops::TunedConfig tuned;
    tuned.config = c->record();
    tuned.target = target;
    tuned.exact_target = true;
    return tuned;
  }
  mutable std::vector<std::string> asked;

 private:
  Make make_;
};

bool fixes_blocks(const ops::Task &t) {
  return t.workload().args.contains("ic_bn") || t.workload().args.contains("c_bn");
}

// For a conv2d_nchwc workload with the blocks as knobs (a log from before they were fixed): the
// default config with input blocks `ic` and output blocks `oc`, and a register tile of one column.
FakeLog::Make free_block_records(int64_t ic, int64_t oc) {
  return [=](const ops::Task &t) -> std::optional<autotune::Config> {
    if (t.workload().template_name != "conv2d_nchwc.x86" || fixes_blocks(t)) return std::nullopt;
    const autotune::Config d = t.default_config();
    const int64_t c = t.workload().args["data"]["shape"][1].as_int();
    const int64_t o = t.workload().args["kernel"]["shape"][0].as_int();
    const int64_t ow = d.split("tile_ow")[0] * d.split("tile_ow")[1];
    std::vector<std::pair<std::string, contracts::Json>> values = {
        {"tile_ic", contracts::Json::array_of(std::vector<int64_t>{c / ic, ic})},
        {"tile_oc", contracts::Json::array_of(std::vector<int64_t>{o / oc, oc})},
        {"tile_ow", contracts::Json::array_of(std::vector<int64_t>{ow, 1})}};
    for (const char *k : {"tile_oh", "unroll_kw"}) {
      if (d.has(k)) values.emplace_back(k, d.value(k));
    }
    return t.space().from_values(values);
  };
}

// conv (8 -> 8) -> relu -> conv (8 -> 8, 1x1): every default block is 8.
Graph two_convs() {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 6, 6}});
  ValueId v = add(g, "Relu", {conv(g, x, 8, 1)});
  g.add_output(conv(g, v, 8, 3, 1, "y"));
  return g;
}

// The kernels the executor builds with `log` (how many from a record) and its values
// against the unoptimized graph's.
void expect_tuned_values(const Graph &g, const FakeLog &log, int tuned_kernels) {
  const Graph a = driver::optimize_graph(g);
  driver::ExecutorOptions eo;
  eo.configs = &log;
  driver::GraphExecutor tuned(a, eo), reference(g);
  const deploy::Tensor in = random_tensor(g.value(g.inputs()[0]).type.shape, 5);
  const deploy::Tensor got = tuned.run(std::vector<deploy::Tensor>{in})[0],
                       want = reference.run(std::vector<deploy::Tensor>{in})[0];
  EXPECT_EQ(tuned.stats().tuned_kernels, tuned_kernels);
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_NEAR(got.data_as<float>()[i], want.data_as<float>()[i], 1e-4) << i;
}

TEST(GraphLayout, TheBlocksAreFixedInTheWorkloadsAndArbitraryTunedConfigsKeepTheLayout) {
  const Graph g = two_convs();
  const Graph a = driver::optimize_graph(g);
  ASSERT_EQ(count(a, "ConvNCHWc"), 2) << print(a);
  EXPECT_EQ(count(a, "LayoutTransform"), 2) << print(a);
  for (const auto &n : a.nodes()) {
    if (n.op != "ConvNCHWc") continue;
    EXPECT_EQ(n.attr_int("ic_bn", 0), 8) << n.describe();
    EXPECT_EQ(n.attr_int("oc_bn", 0), 8) << n.describe();
    const Kernel k = find_op(n.op)->kernel(OpContext(a, n));
    EXPECT_EQ(k.template_args["ic_bn"].as_int(), 8) << k.template_args.dump();
    EXPECT_EQ(k.template_args["oc_bn"].as_int(), 8) << k.template_args.dump();
  }
  // Random configs of each workload asked (its blocks held): the layout stays, both kernels use them.
  std::mt19937_64 rng(11);
  FakeLog log([&](const ops::Task &t) -> std::optional<autotune::Config> { return t.space().sample(rng); });
  expect_tuned_values(g, log, 2);
}

TEST(GraphLayout, RecordsWithOtherBlocksAreNotUsedByAGraphLaidOutWithoutTheLog) {
  FakeLog log(free_block_records(4, 2));
  expect_tuned_values(two_convs(), log, 0);
  // Asked under the fixed-block workload first, then under the free-block one.
  bool free_asked = false;
  for (const std::string &args : log.asked) free_asked = free_asked || args.find("_bn") == std::string::npos;
  EXPECT_TRUE(free_asked);
}

TEST(GraphLayout, RecordsOfTheFreeBlockTaskWithTheChosenBlocksApply) {
  FakeLog log(free_block_records(8, 8));
  expect_tuned_values(two_convs(), log, 2);
}

// The graph optimized with `log` in the pipeline.
Graph optimize_with(const Graph &g, const ops::ConfigLookup &log) {
  driver::GraphPipelineOptions po;
  po.configs = &log;
  Graph a = driver::optimize_graph(g, po);
  verify(a);
  return a;
}

// The blocks (ic_bn, oc_bn) of each ConvNCHWc of `a`, in order.
std::vector<std::pair<int64_t, int64_t>> conv_blocks(const Graph &a) {
  std::vector<std::pair<int64_t, int64_t>> b;
  for (const auto &n : a.nodes()) {
    if (n.op == "ConvNCHWc") b.emplace_back(n.attr_int("ic_bn", 0), n.attr_int("oc_bn", 0));
  }
  return b;
}

// Built with `log`: every template kernel from a record, the values the unoptimized graph's.
void expect_values_with(const Graph &a, const Graph &g, const ops::ConfigLookup &log, int tuned_kernels) {
  driver::ExecutorOptions eo;
  eo.configs = &log;
  driver::GraphExecutor tuned(a, eo), reference(g);
  const deploy::Tensor in = random_tensor(g.value(g.inputs()[0]).type.shape, 5);
  const deploy::Tensor got = tuned.run(std::vector<deploy::Tensor>{in})[0],
                       want = reference.run(std::vector<deploy::Tensor>{in})[0];
  EXPECT_EQ(tuned.stats().tuned_kernels, tuned_kernels);
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_NEAR(got.data_as<float>()[i], want.data_as<float>()[i], 1e-4) << i;
}

TEST(GraphLayout, WithTheLogEachConvTakesTheBlocksOfItsRecord) {
  const Graph g = two_convs();
  FakeLog log(free_block_records(4, 4));
  const Graph a = optimize_with(g, log);
  using B = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(conv_blocks(a), (B{{4, 4}, {4, 4}})) << print(a);
  EXPECT_EQ(count(a, "LayoutTransform"), 2) << print(a);  // in and out only
  expect_values_with(a, g, log, 2);
  // Without the log the graph keeps its own blocks.
  EXPECT_EQ(conv_blocks(driver::optimize_graph(g)), (B{{8, 8}, {8, 8}}));
}

// A 1x1 convolution of `x` to `oc` channels with a random weight and bias.
ValueId conv1x1(Graph &g, ValueId x, int64_t oc, uint64_t seed, const std::string &out = "") {
  const int64_t c = g.value(x).type.shape[1];
  ValueId w = g.add_constant(g.unique_name("w"), random_tensor({oc, c, 1, 1}, seed));
  ValueId b = g.add_constant(g.unique_name("b"), random_tensor({oc}, seed + 1));
  return add(g, "Conv", {x, w, b}, {{"kernel_shape", Attribute::of_ints({1, 1})}}, out);
}

TEST(GraphLayout, WithTheLogAnExpansionItsDepthwiseConvAndWhatFeedsThemKeepTheirBlocks) {
  // conv 3x3 -> relu -> expansion 1x1 (8 -> 48) -> depthwise 3x3 -> projection 1x1 (48 -> 8).
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 6, 6}});
  ValueId v = add(g, "Relu", {conv(g, x, 8, 1)});
  v = conv(g, conv1x1(g, v, 48, 3), 48, 5, 48);
  g.add_output(conv1x1(g, v, 8, 7, "y"));
  FakeLog log(free_block_records(4, 4));
  const Graph a = optimize_with(g, log);
  driver::GraphPipelineOptions po;
  po.fuse_expand_depthwise = false;
  const Graph plain = driver::optimize_graph(g, po);
  po.configs = &log;
  const std::vector<std::pair<int64_t, int64_t>> without = conv_blocks(plain),
                                                 with = conv_blocks(driver::optimize_graph(g, po));
  ASSERT_EQ(without.size(), 4u) << print(plain);
  ASSERT_EQ(with.size(), 4u);
  // The first three keep their blocks although every conv2d task has a record of blocks 4; the
  // projection takes them.
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(with[i], without[i]) << "conv " << i;
  EXPECT_EQ(with[3], std::make_pair(int64_t{4}, int64_t{4}));
  expect_values_with(a, g, log, 1);  // the projection's kernel from the record
}

// A log of free-block conv2d tasks whose top() lists the configs listed() gives, fastest first.
class ListedLog : public ops::ConfigLookup {
 public:
  virtual std::vector<std::pair<autotune::Config, double>> listed(const ops::Task &t) const = 0;

  std::optional<ops::TunedConfig> best(const contracts::Workload &w, const std::string &target) const override {
    std::vector<ops::TunedConfig> t = top(w, target, 1);
    if (t.empty()) return std::nullopt;
    return t[0];
  }
  std::vector<ops::TunedConfig> top(const contracts::Workload &w, const std::string &target, int64_t k) const override {
    std::vector<ops::TunedConfig> out;
    const ops::Task t(w.template_name, w.args, driver::resolve_target(target));
    if (w.template_name != "conv2d_nchwc.x86" || fixes_blocks(t)) return out;
    std::vector<std::pair<autotune::Config, double>> c = listed(t);
    std::stable_sort(c.begin(), c.end(), [](const auto &a, const auto &b) { return a.second < b.second; });
    for (const auto &[config, mean_s] : c) {
      if (static_cast<int64_t>(out.size()) >= k) break;
      ops::TunedConfig r;
      r.config = config.record();
      r.target = target;
      r.mean_s = mean_s;
      out.push_back(r);
    }
    return out;
  }
};

// A log with records of given blocks and times per convolution shape (input channels, output
// channels).
class TimedLog : public ListedLog {
 public:
  struct Entry {
    int64_t ic, oc;
    double mean_s;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Entry>> records;

  std::vector<std::pair<autotune::Config, double>> listed(const ops::Task &t) const override {
    std::vector<std::pair<autotune::Config, double>> out;
    const contracts::Json &args = t.workload().args;
    auto it = records.find({args["data"]["shape"][1].as_int(), args["kernel"]["shape"][0].as_int()});
    if (it == records.end()) return out;
    for (const Entry &r : it->second) out.emplace_back(*free_block_records(r.ic, r.oc)(t), r.mean_s);
    return out;
  }
};

// x [1, 8, 6, 6] -> conv 8 -> 16 -> relu -> conv 16 -> 8 -> y.
Graph widening_convs() {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 6, 6}});
  ValueId v = add(g, "Relu", {conv(g, x, 16, 1)});
  g.add_output(conv(g, v, 8, 3, 1, "y"));
  return g;
}

TEST(GraphLayout, AConvTakesASlowerRecordWhenTheFasterOnesInputBlockCostsMoreToMakeThanItSaves) {
  using B = std::vector<std::pair<int64_t, int64_t>>;
  const Graph g = widening_convs();
  // The first conv writes blocks of 4. Its 16 x 6 x 6 output (2304 bytes) is estimated to move in
  // about 0.08 us, so a record 0.05 us faster that reads blocks of 8 loses to one that reads blocks of 4.
  TimedLog log;
  log.records[{8, 16}] = {{8, 4, 1e-6}};
  log.records[{16, 8}] = {{8, 8, 1.0e-6}, {4, 8, 1.05e-6}};
  Graph a = optimize_with(g, log);
  EXPECT_EQ(conv_blocks(a), (B{{8, 4}, {4, 8}})) << print(a);
  EXPECT_EQ(count(a, "LayoutTransform"), 2) << print(a);
  expect_values_with(a, g, log, 2);
  // 1 us faster: worth the transform from blocks of 4 to 8.
  log.records[{16, 8}] = {{8, 8, 1.0e-6}, {4, 8, 2.0e-6}};
  a = optimize_with(g, log);
  EXPECT_EQ(conv_blocks(a), (B{{8, 4}, {8, 8}})) << print(a);
  EXPECT_EQ(count(a, "LayoutTransform"), 3) << print(a);
  expect_values_with(a, g, log, 2);
}

TEST(GraphLayout, AConvKeepsItsOwnBlocksWhereTheFasterRecordWinsByLessThanTheTieMargin) {
  using B = std::vector<std::pair<int64_t, int64_t>>;
  const Graph g = widening_convs();
  // Without the log the first conv (8 -> 16) reads blocks of 8 and writes blocks of 16.
  ASSERT_EQ(conv_blocks(driver::optimize_graph(g)), (B{{8, 16}, {16, 8}}));
  // Output blocks of 4 measured 3 % faster than its own: a tie, the graph keeps its blocks.
  TimedLog log;
  log.records[{8, 16}] = {{8, 16, 1.0e-6}, {8, 4, 0.97e-6}};
  Graph a = optimize_with(g, log);
  EXPECT_EQ(conv_blocks(a), (B{{8, 16}, {16, 8}})) << print(a);
  expect_values_with(a, g, log, 1);
  // 10 % faster: taken, and the second conv reads them.
  log.records[{8, 16}] = {{8, 16, 1.0e-6}, {8, 4, 0.9e-6}};
  a = optimize_with(g, log);
  EXPECT_EQ(conv_blocks(a), (B{{8, 4}, {4, 8}})) << print(a);
  expect_values_with(a, g, log, 1);
}

// A log whose configs and times come from a function of the task.
class ConfigTimesLog : public ListedLog {
 public:
  std::function<std::vector<std::pair<autotune::Config, double>>(const ops::Task &)> configs;
  std::vector<std::pair<autotune::Config, double>> listed(const ops::Task &t) const override { return configs(t); }
};

TEST(TunedChoice, TheDefaultConfigIsKeptUnlessARecordBeatsItsOwnByTheTieMargin) {
  // The kernel of a blocked 3x3 conv (8 -> 16, blocks 8 and 16) and its free-block task.
  const ops::Target target = driver::resolve_target("llvm -mcpu=native");
  contracts::Json args = contracts::Json::object(
      {{"data", contracts::Json::object({{"shape", contracts::Json::array_of(std::vector<int64_t>{1, 8, 6, 6})},
                                         {"dtype", contracts::Json("float32")}})},
       {"kernel", contracts::Json::object({{"shape", contracts::Json::array_of(std::vector<int64_t>{16, 8, 3, 3})},
                                           {"dtype", contracts::Json("float32")}})},
       {"padding", contracts::Json::array_of(std::vector<int64_t>{1, 1, 1, 1})}});
  const ops::Task free("conv2d_nchwc.x86", args, target);
  args.set("ic_bn", contracts::Json(int64_t{8}));
  args.set("oc_bn", contracts::Json(int64_t{16}));
  const ops::Task kernel("conv2d_nchwc.x86", args, target);
  const autotune::Config d = kernel.default_config();
  // Another config with the kernel's blocks: the default's other knobs changed.
  std::vector<std::pair<std::string, contracts::Json>> values;
  for (const autotune::Knob &k : free.space().knobs()) values.emplace_back(k.name, d.value(k.name));
  for (auto &[name, v] : values)
    if (name == "unroll_kw") v = contracts::Json(int64_t{1} - d.value("unroll_kw").as_int());
  const autotune::Config other = free.space().from_values(values);
  ASSERT_EQ(other.split("tile_oc").back(), 16);
  values.clear();
  for (const autotune::Knob &k : free.space().knobs()) values.emplace_back(k.name, d.value(k.name));
  const autotune::Config free_default = free.space().from_values(values);

  ConfigTimesLog log;
  double other_s = 0.97e-6;
  log.configs = [&](const ops::Task &) {
    return std::vector<std::pair<autotune::Config, double>>{{free_default, 1.0e-6}, {other, other_s}};
  };
  ops::TunedChoice c = ops::choose_tuned_config(&log, kernel);
  ASSERT_TRUE(c.config);
  EXPECT_TRUE(c.default_kept);
  EXPECT_EQ(c.config->index(), d.index());
  EXPECT_DOUBLE_EQ(c.record->mean_s, 1.0e-6);
  other_s = 0.9e-6;
  c = ops::choose_tuned_config(&log, kernel);
  ASSERT_TRUE(c.config);
  EXPECT_FALSE(c.default_kept);
  EXPECT_NE(c.config->index(), d.index());
  EXPECT_EQ(c.config->value("unroll_kw").as_int(), 1 - d.value("unroll_kw").as_int());
  EXPECT_DOUBLE_EQ(c.record->mean_s, 0.9e-6);
  // A kernel whose blocks no record has (input blocks of 4) but whose free-block task has a record of
  // its default: its own default config, with that record (the layout pass weighed its blocks by it).
  contracts::Json args4 = args;
  args4.set("ic_bn", contracts::Json(int64_t{4}));
  const ops::Task kernel4("conv2d_nchwc.x86", args4, target);
  c = ops::choose_tuned_config(&log, kernel4);
  ASSERT_TRUE(c.config);
  EXPECT_TRUE(c.found);
  EXPECT_TRUE(c.default_kept);
  EXPECT_EQ(c.config->index(), kernel4.default_config().index());
  EXPECT_DOUBLE_EQ(c.record->mean_s, 1.0e-6);
  // Without a record of the default, the fastest record is taken, however close.
  other_s = 0.99e-6;
  log.configs = [&](const ops::Task &) { return std::vector<std::pair<autotune::Config, double>>{{other, other_s}}; };
  c = ops::choose_tuned_config(&log, kernel);
  ASSERT_TRUE(c.config);
  EXPECT_FALSE(c.default_kept);
  EXPECT_NE(c.config->index(), d.index());
}

// The default config of free-block conv2d task `t` with input blocks `ic` and output blocks `oc`.
autotune::Config default_with_blocks(const ops::Task &t, int64_t ic, int64_t oc) {
  const autotune::Config d = t.default_config();
  const int64_t c = t.workload().args["data"]["shape"][1].as_int();
  const int64_t o = t.workload().args["kernel"]["shape"][0].as_int();
  std::vector<std::pair<std::string, contracts::Json>> values;
  for (const autotune::Knob &k : t.space().knobs()) values.emplace_back(k.name, d.value(k.name));
  for (auto &[name, v] : values) {
    if (name == "tile_ic") v = contracts::Json::array_of(std::vector<int64_t>{c / ic, ic});
    if (name == "tile_oc") v = contracts::Json::array_of(std::vector<int64_t>{o / oc, oc});
  }
  return t.space().from_values(values);
}

TEST(GraphLayout, TheDefaultsRecordStandsForBlocksTheLogHasNoRecordOf) {
  using B = std::vector<std::pair<int64_t, int64_t>>;
  const Graph g = widening_convs();
  // The first conv (8 -> 16) has one record, output blocks of 4: it takes them. The second (16 -> 8)
  // then reads blocks of 4, which none of its records has: its default config (the template's own
  // input block, 16) and a config 1 % faster with it. Both need the first conv's output moved from
  // blocks of 4 to 16; the default's record stands for the blocks the conv has, which need none.
  ConfigTimesLog log;
  log.configs = [](const ops::Task &t) {
    using R = std::vector<std::pair<autotune::Config, double>>;
    if (t.workload().args["data"]["shape"][1].as_int() == 8) return R{{default_with_blocks(t, 8, 4), 1e-6}};
    const autotune::Config d = t.default_config();
    EXPECT_EQ(d.split("tile_ic").back(), 16);
    std::vector<std::pair<std::string, contracts::Json>> values;
    for (const autotune::Knob &k : t.space().knobs()) values.emplace_back(k.name, d.value(k.name));
    for (auto &[name, v] : values)
      if (name == "tile_ow") v = contracts::Json::array_of(std::vector<int64_t>{6, 1});
    return R{{d, 1.0e-6}, {t.space().from_values(values), 0.99e-6}};
  };
  const Graph a = optimize_with(g, log);
  EXPECT_EQ(conv_blocks(a), (B{{8, 4}, {4, 8}})) << print(a);
  EXPECT_EQ(count(a, "LayoutTransform"), 2) << print(a);  // in and out only
  // Both kernels from the log: the first with its record, the second with its default config and
  // the default's record.
  expect_values_with(a, g, log, 2);
}

TEST(GraphLayout, LayoutTransformsBetweenBlocksRoundTripExactly) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 24, 3, 5}});
  ValueId v = x, first = kNoValue;
  int64_t from = 0;
  // Blocks that divide each other both ways, and 8 -> 12 where neither does.
  for (int64_t to : {8, 4, 12, 3, 24, 8, 12, 0}) {
    v = add(g, "LayoutTransform", {v}, {{"src_block", Attribute::of_int(from)}, {"dst_block", Attribute::of_int(to)}});
    if (first == kNoValue) first = v;
    from = to;
  }
  g.add_output(first);
  g.add_output(v);
  const deploy::Tensor in = random_tensor({2, 24, 3, 5}, 3);
  driver::GraphExecutor ex(g);
  const std::vector<deploy::Tensor> out = ex.run(std::vector<deploy::Tensor>{in});
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3, 3, 5, 8}));
  const float *x8 = out[0].data_as<float>(), *src = in.data_as<float>();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 24; ++c)
      for (int64_t hw = 0; hw < 15; ++hw)
        ASSERT_EQ(x8[((n * 3 + c / 8) * 15 + hw) * 8 + c % 8], src[(n * 24 + c) * 15 + hw])
            << n << "," << c << "," << hw;
  ASSERT_EQ(out[1].shape(), in.shape());
  EXPECT_EQ(std::memcmp(out[1].data(), in.data(), in.nbytes()), 0);
}

// --- the exported models ---

namespace fs = std::filesystem;

struct ModelCounts {
  int blocked_convs, nchw_convs;
  int transforms;                  // -1: any number of transforms between two blocked layouts
  int from_nchw = 1, to_nchw = 1;  // transforms out of NCHW and back into it
};

void check_model(const std::string &model, const ModelCounts &want) {
  KILN_REQUIRE_MODEL(model);
  const fs::path dir = fs::path(KILN_MODELS_DIR) / model;
  Graph g = frontend::onnx::import_model((dir / "model.onnx").string());
  driver::GraphPipelineOptions po;
  po.fuse_expand_depthwise = false;  // the layout alone: every convolution a ConvNCHWc
  po.alter_layout = false;
  Graph fused = driver::optimize_graph(g, po);
  po.alter_layout = true;
  Graph a = driver::optimize_graph(g, po);
  EXPECT_EQ(count(a, "ConvNCHWc"), want.blocked_convs) << print(a);
  EXPECT_EQ(count(a, "Conv") + count(a, "FusedConv"), want.nchw_convs) << print(a);
  if (want.transforms >= 0) {
    EXPECT_EQ(count(a, "LayoutTransform"), want.transforms) << print(a);
  }
  // Into the blocked layout at the input, back to NCHW before the classifier, and around the convs
  // that stay NCHW; any other transform changes the block between two convolutions that chose
  // different ones.
  int from_nchw = 0, to_nchw = 0;
  for (const auto &n : a.nodes()) {
    if (n.op != "LayoutTransform") continue;
    from_nchw += n.attr_int("src_block", -1) == 0 ? 1 : 0;
    to_nchw += n.attr_int("dst_block", -1) == 0 ? 1 : 0;
    EXPECT_NE(n.attr_int("src_block", -1), n.attr_int("dst_block", -1)) << n.describe();
  }
  EXPECT_EQ(from_nchw, want.from_nchw) << print(a);
  EXPECT_EQ(to_nchw, want.to_nchw) << print(a);
  expect_outputs_kept(g, a);
  // Laid out without a log, built with any configs of the workloads the executor asks for, the
  // blocked graph computes what the NCHW one does.
  std::mt19937_64 rng(3);
  FakeLog log([&](const ops::Task &t) -> std::optional<autotune::Config> { return t.space().sample(rng); });
  driver::ExecutorOptions tuned;
  tuned.configs = &log;
  const deploy::Tensor input = frontend::onnx::read_tensor_file((dir / "input_0.pb").string());
  driver::GraphExecutor ef(fused), ea(a, tuned);
  const deploy::Tensor of = ef.run(std::vector<deploy::Tensor>{input})[0],
                       oa = ea.run(std::vector<deploy::Tensor>{input})[0];
  ASSERT_EQ(of.shape(), oa.shape());
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < of.numel(); ++i) {
    worst = std::max(worst, std::fabs(double(of.data_as<float>()[i]) - oa.data_as<float>()[i]));
    scale = std::max(scale, std::fabs(double(of.data_as<float>()[i])));
  }
  EXPECT_LE(worst, 1e-4 * scale) << model << ": the blocked graph differs from the NCHW one";
  // And what torch computes (the exported float64 output).
  const deploy::Tensor ref = frontend::onnx::read_tensor_file((dir / "output_0.pb").string());
  auto expect_torchs = [&](const deploy::Tensor &got, const char *what) {
    ASSERT_EQ(ref.numel(), got.numel());
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      const double r = ref.dtype().bytes() == 8 ? ref.data_as<double>()[i] : ref.data_as<float>()[i];
      worst = std::max(worst, std::fabs(r - got.data_as<float>()[i]));
      scale = std::max(scale, std::fabs(r));
    }
    EXPECT_LE(worst, 1e-4 * scale) << model << ": " << what << " differs from torch";
  };
  expect_torchs(oa, "the blocked graph");
  // Laid out with a log of random records (random blocks for each conv, transforms wherever two
  // disagree) and built with it: still what torch computes.
  std::mt19937_64 rng2(5);
  FakeLog random_log([&](const ops::Task &t) -> std::optional<autotune::Config> { return t.space().sample(rng2); });
  po.configs = &random_log;
  const Graph r = driver::optimize_graph(g, po);
  expect_outputs_kept(g, r);
  tuned.configs = &random_log;
  driver::GraphExecutor er(r, tuned);
  expect_torchs(er.run(std::vector<deploy::Tensor>{input})[0], "the graph laid out with random records");
  int changed = 0;
  std::vector<std::pair<int64_t, int64_t>> before = conv_blocks(a), after = conv_blocks(r);
  for (size_t i = 0; i < before.size() && i < after.size(); ++i) changed += before[i] != after[i] ? 1 : 0;
  EXPECT_GT(changed, 0) << "the random records changed no conv's blocks";
}

// Every conv blocked; transforms at the input and before the classifier only.
TEST(GraphLayout, Resnet18IsBlockedFromTheInputToTheClassifier) { check_model("resnet18", {20, 0, 2}); }

// The same for MobileNetV2: each depthwise conv keeps its producer's block, the 1x1 projections to
// 24 channels (no block of whole vectors with 16 lanes) take a part of a vector, 8, and the 1x1
// expansions read it.
TEST(GraphLayout, MobilenetV2IsBlockedFromTheInputToTheClassifier) { check_model("mobilenet_v2", {52, 0, 2}); }

// SqueezeNet: the Fire modules' concats stay blocked; the classifier's 1000 output channels are
// padded to whole vectors where the vector does not divide 1000 (16 lanes; 8 lanes do), the global
// pool reads them blocked and the padding is sliced from the pooled values (the transform back).
TEST(GraphLayout, Squeezenet11IsBlockedWithItsClassifierPadded) {
  check_model("squeezenet1_1", {26, 0, 2});
  const fs::path dir = fs::path(KILN_MODELS_DIR) / "squeezenet1_1";
  if (!fs::exists(dir / "model.onnx")) return;
  Graph a = driver::optimize_graph(frontend::onnx::import_model((dir / "model.onnx").string()));
  const int64_t lanes = driver::resolve_target("llvm -mcpu=native").lanes(ir::Float(32));
  EXPECT_EQ(count(a, "Slice"), 1000 % lanes != 0 ? 1 : 0) << print(a);
}

}  // namespace
}  // namespace kiln::graph
