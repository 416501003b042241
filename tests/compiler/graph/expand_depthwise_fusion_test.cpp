// The pass fusing a 1x1 convolution and the depthwise one that reads it (ExpandDepthwiseNCHWc,
// passes/fuse_expand_depthwise.cpp): which pairs it takes and the tuning task of the fused node (not when the expanded
// tensor is also a graph output or has a second reader, nor below the size threshold, nor with the option off), and the
// outputs of the pipeline's graph against the unoptimized graph through the reference executor; MobileNetV2 from the
// frontend's exported models against the executor and torch.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/driver/task_extraction.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/passes.h"
#include "tests/compiler/graph/graph_test_util.h"
#include "tests/compiler/graph/model_export.h"

namespace kiln::graph {
namespace {

namespace fs = std::filesystem;
using test::add;
using test::count;
using test::max_difference;
using test::random_tensor;
using test::scalar;

ValueId relu6(Graph &g, ValueId x) {
  return add(g, "Clip",
             {x, g.add_constant(g.unique_name("lo"), scalar(0)), g.add_constant(g.unique_name("hi"), scalar(6))});
}

// x [1, 16, hw, hw] -> 1x1 conv to 96 channels + bias + ReLU6 (the expanded tensor) -> 3x3
// depthwise (stride, padding 1) + bias + ReLU6. Returns the expanded tensor; *out the output.
ValueId expansion_block(Graph &g, int64_t hw, int64_t stride, ValueId *out) {
  const ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 16, hw, hw}});
  const ValueId w1 = g.add_constant("w1", random_tensor({96, 16, 1, 1}, 1, -0.5f, 0.5f));
  const ValueId b1 = g.add_constant("b1", random_tensor({96}, 2));
  const ValueId mid = relu6(g, add(g, "Conv", {x, w1, b1}, {{"kernel_shape", Attribute::of_ints({1, 1})}}));
  const ValueId w2 = g.add_constant("w2", random_tensor({96, 1, 3, 3}, 3, -0.5f, 0.5f));
  const ValueId b2 = g.add_constant("b2", random_tensor({96}, 4));
  *out = relu6(g, add(g, "Conv", {mid, w2, b2},
                      {{"kernel_shape", Attribute::of_ints({3, 3})},
                       {"pads", Attribute::of_ints({1, 1, 1, 1})},
                       {"strides", Attribute::of_ints({stride, stride})},
                       {"group", Attribute::of_int(96)}}));
  return mid;
}

Graph optimize(const Graph &g, bool fuse_pairs = true) {
  driver::GraphPipelineOptions o;
  o.fuse_expand_depthwise = fuse_pairs;
  Graph a = driver::optimize_graph(g, o);
  verify(a);
  return a;
}

// 96 channels at 48x48: an expanded tensor of 864 KiB, above the threshold; strides 1 and 2.
TEST(ExpandDepthwiseFusion, PairBecomesOneKernel) {
  for (int64_t stride : {1, 2}) {
    Graph g;
    ValueId out;
    expansion_block(g, 48, stride, &out);
    g.add_output(out);
    const Graph a = optimize(g);
    EXPECT_EQ(count(a, "ExpandDepthwiseNCHWc"), 1) << print(a);
    EXPECT_EQ(count(a, "ConvNCHWc"), 0) << print(a);
    EXPECT_LE(max_difference(a, g), 1e-4);
    // Its tuning task is the fused workload (the expansion's epilogue kept, the last one dropped).
    const driver::TaskExtraction tasks = driver::extract_tasks(a, "llvm -mcpu=native");
    int fused_tasks = 0;
    for (const auto &t : tasks.tasks) {
      if (t.template_name != "conv1x1_depthwise_nchwc.x86") continue;
      ++fused_tasks;
      EXPECT_EQ(t.weight, 1);
      EXPECT_EQ(t.args["strides"][0].as_int(), stride);
      EXPECT_EQ(t.args["expand_epilogue"].size(), 2u) << t.args.dump();
    }
    EXPECT_EQ(fused_tasks, 1);
    // With the option off, the two convolutions stay.
    const Graph off = optimize(g, false);
    EXPECT_EQ(count(off, "ExpandDepthwiseNCHWc"), 0);
    EXPECT_EQ(count(off, "ConvNCHWc"), 2);
  }
}

TEST(ExpandDepthwiseFusion, ExpandedTensorAlsoAGraphOutputIsNotFused) {
  Graph g;
  ValueId out;
  const ValueId mid = expansion_block(g, 48, 1, &out);
  g.add_output(out);
  g.add_output(mid);
  const Graph a = optimize(g);
  EXPECT_EQ(count(a, "ExpandDepthwiseNCHWc"), 0) << print(a);
  EXPECT_EQ(count(a, "ConvNCHWc"), 2);
  EXPECT_LE(max_difference(a, g), 1e-4);
}

TEST(ExpandDepthwiseFusion, ExpandedTensorWithTwoReadersIsNotFused) {
  Graph g;
  ValueId out;
  const ValueId mid = expansion_block(g, 48, 2, &out);
  g.add_output(out);
  g.add_output(add(g, "GlobalAveragePool", {mid}));
  const Graph a = optimize(g);
  EXPECT_EQ(count(a, "ExpandDepthwiseNCHWc"), 0) << print(a);
  EXPECT_EQ(count(a, "ConvNCHWc"), 2);
  EXPECT_LE(max_difference(a, g), 1e-4);
}

// 96 channels at 16x16 (96 KiB) stays two kernels by default; with no threshold the pass fuses it.
TEST(ExpandDepthwiseFusion, SmallExpandedTensorIsNotFusedByDefault) {
  Graph g;
  ValueId out;
  expansion_block(g, 16, 1, &out);
  g.add_output(out);
  const Graph a = optimize(g);
  EXPECT_EQ(count(a, "ExpandDepthwiseNCHWc"), 0) << print(a);
  const Graph forced = passes::fuse_expand_depthwise(a, 0);
  verify(forced);
  EXPECT_EQ(count(forced, "ExpandDepthwiseNCHWc"), 1) << print(forced);
  EXPECT_LE(max_difference(forced, g), 1e-4);
}

// 96 channels at 21x21 (165 KiB, an odd width): above the 128 KiB threshold, so small spatial
// shapes such as MobileNetV2's 14x14 and 7x7 layers fuse too; strides 1 and 2.
TEST(ExpandDepthwiseFusion, ExpandedTensorOf165KiBIsFused) {
  for (int64_t stride : {1, 2}) {
    Graph g;
    ValueId out;
    const ValueId mid = expansion_block(g, 21, stride, &out);
    g.add_output(out);
    ASSERT_EQ(g.value(mid).type.nbytes(), 96 * 21 * 21 * 4);
    const Graph a = optimize(g);
    EXPECT_EQ(count(a, "ExpandDepthwiseNCHWc"), 1) << print(a);
    EXPECT_EQ(count(a, "ConvNCHWc"), 0) << print(a);
    EXPECT_LE(max_difference(a, g), 1e-4);
  }
}

int kernels(const Graph &g) {
  int k = 0;
  for (const auto &n : g.nodes()) {
    const OpDef *def = find_op(n.op);
    if (!def->view && !def->evaluate) ++k;
  }
  return k;
}

// MobileNetV2: all 16 expansion + depthwise pairs (16->96 at 112, 24->144 at 56 twice, 32->192 at
// 28 three times, 64->384 at 14 four times, 96->576 at 14 three times, 160->960 at 7 three times)
// become one kernel each, 16 fewer kernels; the output matches the unoptimized graph through the
// executor and torch's within 1e-4 of its scale.
TEST(ExpandDepthwiseFusion, MobilenetV2) {
  KILN_REQUIRE_MODEL("mobilenet_v2");
  const fs::path dir = fs::path(KILN_MODELS_DIR) / "mobilenet_v2";
  const Graph g = frontend::onnx::import_model((dir / "model.onnx").string());
  const Graph on = optimize(g), off = optimize(g, false);
  EXPECT_EQ(count(on, "ExpandDepthwiseNCHWc"), 16);
  EXPECT_EQ(kernels(on), kernels(off) - 16);
  const deploy::Tensor input = frontend::onnx::read_tensor_file((dir / "input_0.pb").string());
  const deploy::Tensor want = frontend::onnx::read_tensor_file((dir / "output_0.pb").string());
  const deploy::Tensor base = driver::GraphExecutor(g).run(std::vector<deploy::Tensor>{input})[0];
  const deploy::Tensor got = driver::GraphExecutor(on).run(std::vector<deploy::Tensor>{input})[0];
  ASSERT_EQ(got.shape(), base.shape());
  ASSERT_EQ(got.numel(), want.numel());
  double to_base = 0, to_torch = 0, scale = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    to_base = std::max(to_base, std::fabs(double(got.data_as<float>()[i]) - base.data_as<float>()[i]));
    to_torch = std::max(to_torch, std::fabs(double(got.data_as<float>()[i]) - want.data_as<float>()[i]));
    scale = std::max(scale, std::fabs(double(base.data_as<float>()[i])));
  }
  EXPECT_LE(to_base, 1e-4 * scale);
  EXPECT_LE(to_torch, 1e-4 * scale);
}

}  // namespace
}  // namespace kiln::graph
