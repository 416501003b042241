// Injective groups (passes::fuse_injective, FusedInjective): elementwise, broadcast and injective
// nodes grouped by the post-dominator rule become one kernel that builds each member through its
// own op. Each hand-built graph is checked before and after the pipeline (its kernels) and its
// outputs against the unoptimized graph through the reference executor on random inputs, and
// through the compiled artifact (driver::compile_graph, deploy::GraphModule); ShuffleNetV2 of
// make_models.py is checked whole against the unoptimized graph and torch.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <string>

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/driver/graph_compiler.h"
#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/driver/target.h"
#include "compiler/driver/node_kernel.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/ir/ir_printer.h"
#include "contracts/json.h"
#include "deploy/graph_module.h"
#include "tests/compiler/graph/graph_test_util.h"
#include "tests/compiler/graph/model_export.h"
#include "tests/temp_dir.h"

namespace kiln::graph {
namespace {

namespace fs = std::filesystem;
using contracts::Json;
using namespace test;

// The kernels a graph runs: nodes that are neither views nor evaluated at compile time.
int kernels(const Graph &g) {
  int k = 0;
  for (const auto &n : g.nodes()) {
    const OpDef *def = find_op(n.op);
    k += !def->view && !def->evaluate ? 1 : 0;
  }
  return k;
}

const Node &only_node(const Graph &g, const std::string &op) {
  const Node *found = nullptr;
  for (const auto &n : g.nodes()) {
    if (n.op == op) {
      EXPECT_EQ(found, nullptr) << "more than one " << op;
      found = &n;
    }
  }
  if (!found) throw std::runtime_error("no " + op + " node");
  return *found;
}

// The ops of a FusedInjective's members, in order.
std::vector<std::string> member_ops(const Node &n) {
  std::vector<std::string> ops;
  const Json sub = Json::parse(n.attr_string("subgraph", ""));
  for (const Json &m : sub["nodes"].as_array()) ops.push_back(m["op"].as_string());
  return ops;
}

// Max |a - b| / max(1, max |b|) over every output of the compiled artifact of `f` against the
// reference executor on `g`, on the same random inputs.
double artifact_difference(const Graph &f, const Graph &g, uint64_t seed = 11) {
  kiln::test::TempDir dir("kiln_injective");
  const std::string path = dir.file("model.kiln");
  driver::compile_graph(f, path);
  deploy::GraphModule m = deploy::GraphModule::load(path);
  std::vector<deploy::Tensor> in;
  for (ValueId i : g.inputs()) {
    in.push_back(random_tensor(g.value(i).type.shape, seed++));
    m.set_input(g.value(i).name, in.back());
  }
  m.run();
  const auto want = driver::GraphExecutor(g).run(in);
  double worst = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    const deploy::Tensor got = m.get_output(static_cast<int>(k));
    EXPECT_EQ(got.shape(), want[k].shape());
    double scale = 1;
    for (int64_t i = 0; i < want[k].numel(); ++i)
      scale = std::max(scale, std::fabs(double(want[k].data_as<float>()[i])));
    for (int64_t i = 0; i < want[k].numel() && i < got.numel(); ++i)
      worst = std::max(worst, std::fabs(double(got.data_as<float>()[i]) - want[k].data_as<float>()[i]) / scale);
  }
  return worst;
}

// The pipeline on `g`: the optimized graph, checked against `g` through the executor and the
// artifact.
Graph optimize_and_check(const Graph &g) {
  const Graph f = driver::optimize_graph(g, driver::GraphPipelineOptions{});
  verify(f);
  EXPECT_LT(max_difference(f, g), 1e-5) << print(f);
  EXPECT_LT(artifact_difference(f, g), 1e-5) << print(f);
  return f;
}

ValueId input(Graph &g, std::vector<int64_t> shape, const std::string &name = "x") {
  return g.add_input(name, TensorType{ir::Float(32), std::move(shape)});
}

// The lowered code of node `n`'s kernel.
std::string lowered(const Graph &g, const Node &n) {
  const driver::NodeKernel k = driver::prepare_node_kernel(g, n, *find_op(n.op), driver::ExecutorOptions{});
  return ir::to_string(driver::lower_node_kernel(g, n, k, "f").body);
}

TEST(InjectiveFusion, TransposeThenReluIsOneKernel) {
  Graph g;
  ValueId t = add(g, "Transpose", {input(g, {2, 8, 4, 6})}, {{"perm", Attribute::of_ints({0, 2, 3, 1})}});
  g.add_output(add(g, "Relu", {t}, {}, "y"));
  EXPECT_EQ(kernels(g), 2);
  const Graph f = optimize_and_check(g);
  EXPECT_EQ(kernels(f), 1) << print(f);
  EXPECT_EQ(member_ops(only_node(f, "FusedInjective")), (std::vector<std::string>{"Transpose", "Relu"}));
  // The output [2,4,6,8] is written a contiguous vector of 8 at a time (x is read with a stride).
  const std::string code = lowered(f, only_node(f, "FusedInjective"));
  EXPECT_TRUE(std::regex_search(code, std::regex(R"(\[ramp\([^\]]*, 1, 8\)\] =)"))) << code;
}

TEST(InjectiveFusion, ReluThenTransposeIsOneKernel) {
  Graph g;
  ValueId r = add(g, "Relu", {input(g, {3, 5, 7})});
  g.add_output(add(g, "Transpose", {r}, {{"perm", Attribute::of_ints({2, 0, 1})}}, "y"));
  EXPECT_EQ(kernels(g), 2);
  const Graph f = optimize_and_check(g);
  EXPECT_EQ(kernels(f), 1) << print(f);
  EXPECT_EQ(member_ops(only_node(f, "FusedInjective")), (std::vector<std::string>{"Relu", "Transpose"}));
}

// ShuffleNet's channel shuffle (Reshape, Transpose, Reshape) and a Slice of its first half: the
// views join the Transpose and the Slice as members, one kernel.
TEST(InjectiveFusion, AChannelShuffleAndASliceAreOneKernel) {
  Graph g;
  ValueId x = input(g, {1, 8, 4, 4});
  ValueId r = add(g, "Reshape", {x, g.add_constant("s1", ints({1, 2, 4, 4, 4}))});
  ValueId t = add(g, "Transpose", {r}, {{"perm", Attribute::of_ints({0, 2, 1, 3, 4})}});
  ValueId r2 = add(g, "Reshape", {t, g.add_constant("s2", ints({1, 8, 4, 4}))});
  g.add_output(
      add(g, "Slice",
          {r2, g.add_constant("st", ints({0})), g.add_constant("en", ints({4})), g.add_constant("ax", ints({1}))}, {},
          "y"));
  EXPECT_EQ(kernels(g), 2);
  const Graph f = optimize_and_check(g);
  EXPECT_EQ(kernels(f), 1) << print(f);
  EXPECT_EQ(member_ops(only_node(f, "FusedInjective")),
            (std::vector<std::string>{"Reshape", "Transpose", "Reshape", "Slice"}));
}

// A LayoutTransform from NCHW (what the layout pass puts before a blocked convolution) takes the
// Slice before it: one kernel, layout_transform.x86's transposed schedule over the slice's rows, no
// gather or scatter in its code, every element where the two kernels put it.
TEST(InjectiveFusion, ASliceThenALayoutTransformIsOneTransposedKernel) {
  Graph g;
  ValueId x = input(g, {1, 32, 8, 8});
  ValueId s = add(g, "Slice",
                  {x, g.add_constant("st", ints({8})), g.add_constant("en", ints({24})), g.add_constant("ax", ints({1}))});
  g.add_output(add(g, kLayoutTransformOp, {s}, {{"src_block", Attribute::of_int(0)}, {"dst_block", Attribute::of_int(8)}},
                   "y"));
  EXPECT_EQ(kernels(g), 2);
  const Graph f = passes::fuse_injective(g);
  verify(f);
  EXPECT_EQ(kernels(f), 1) << print(f);
  EXPECT_EQ(member_ops(only_node(f, "FusedInjective")), (std::vector<std::string>{"Slice", kLayoutTransformOp}));
  EXPECT_EQ(max_difference(f, g), 0.0);
  EXPECT_EQ(artifact_difference(f, g), 0.0);
  const Node &n = only_node(f, "FusedInjective");
  const driver::NodeKernel k = driver::prepare_node_kernel(f, n, *find_op(n.op), driver::ExecutorOptions{});
  EXPECT_TRUE(k.kernel.layout_transform_output);
  codegen::LLVMBuildOptions o;
  o.target = driver::ExecutorOptions{}.target;
  const std::string text = codegen::emit_llvm_ir({driver::lower_node_kernel(f, n, k, "f")}, o);
  EXPECT_EQ(text.find("masked.gather"), std::string::npos);
  EXPECT_EQ(text.find("masked.scatter"), std::string::npos);
}

// A Transpose (or a view) inlined into a transform would leave its index arithmetic to gathers: the
// transform stays a kernel of its own.
TEST(InjectiveFusion, ATransposeThenALayoutTransformStaysTwoKernels) {
  Graph g;
  ValueId t = add(g, "Transpose", {input(g, {1, 16, 4, 6})}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
  g.add_output(add(g, kLayoutTransformOp, {t}, {{"src_block", Attribute::of_int(0)}, {"dst_block", Attribute::of_int(8)}},
                   "y"));
  const Graph f = passes::fuse_injective(g);
  EXPECT_EQ(kernels(f), 2) << print(f);
  EXPECT_EQ(max_difference(f, g), 0.0);
}

TEST(InjectiveFusion, ASliceThenAnAddReadsItsInputContiguously) {
  Graph g;
  ValueId x = input(g, {4, 16});
  ValueId s = add(g, "Slice", {x, g.add_constant("st", ints({0, 4})), g.add_constant("en", ints({4, 12}))});
  g.add_output(add(g, "Add", {s, input(g, {4, 8}, "b")}, {}, "y"));
  EXPECT_EQ(kernels(g), 2);
  const Graph f = optimize_and_check(g);
  EXPECT_EQ(kernels(f), 1) << print(f);
  // The output, the slice's rows of x and b are all read and written as contiguous vectors of 8.
  const std::string code = lowered(f, only_node(f, "FusedInjective"));
  const std::regex ramp(R"(ramp\([^\]]*, (\d+), 8\)\])");
  int contiguous = 0, strided = 0;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), ramp); it != std::sregex_iterator(); ++it)
    ((*it)[1] == "1" ? contiguous : strided)++;
  EXPECT_EQ(contiguous, 3) << code;
  EXPECT_EQ(strided, 0) << code;
}

TEST(InjectiveFusion, AReflectPadThenAnAddIsOneKernel) {
  Graph g;
  ValueId x = input(g, {1, 3, 5, 6});
  ValueId p = add(g, "Pad", {x, g.add_constant("pads", ints({0, 0, 2, 1, 0, 0, 1, 2}))},
                  {{"mode", Attribute::of_string("reflect")}});
  g.add_output(add(g, "Add", {p, input(g, {1, 3, 8, 9}, "b")}, {}, "y"));
  EXPECT_EQ(kernels(g), 2);
  const Graph f = optimize_and_check(g);
  EXPECT_EQ(kernels(f), 1) << print(f);
  EXPECT_EQ(member_ops(only_node(f, "FusedInjective")), (std::vector<std::string>{"Pad", "Add"}));
}

TEST(InjectiveFusion, AGatherOfConstantIndicesThenAMulIsOneKernel) {
  Graph g;
  ValueId x = input(g, {5, 6});
  ValueId ga = add(g, "Gather", {x, g.add_constant("idx", ints({4, 0, 2}))}, {{"axis", Attribute::of_int(0)}});
  g.add_output(add(g, "Mul", {ga, input(g, {3, 6}, "b")}, {}, "y"));
  EXPECT_EQ(kernels(g), 2);
  const Graph f = optimize_and_check(g);
  EXPECT_EQ(kernels(f), 1) << print(f);
  EXPECT_EQ(member_ops(only_node(f, "FusedInjective")), (std::vector<std::string>{"Gather", "Mul"}));
}

// A Transpose read by two nodes whose paths meet again at an Add: every path to the post-dominator
// is in the group, one kernel. Read by two graph outputs, it stays a kernel of its own.
TEST(InjectiveFusion, AValueReadTwiceJoinsOnlyUpToItsPostDominator) {
  Graph g;
  ValueId t = add(g, "Transpose", {input(g, {4, 8})}, {{"perm", Attribute::of_ints({1, 0})}});
  g.add_output(add(g, "Add", {add(g, "Relu", {t}), add(g, "Sigmoid", {t})}, {}, "y"));
  EXPECT_EQ(kernels(g), 4);
  const Graph f = optimize_and_check(g);
  EXPECT_EQ(kernels(f), 1) << print(f);

  Graph h;
  ValueId u = add(h, "Transpose", {input(h, {4, 8})}, {{"perm", Attribute::of_ints({1, 0})}});
  h.add_output(add(h, "Relu", {u}, {}, "a"));
  h.add_output(add(h, "Sigmoid", {u}, {}, "b"));
  const Graph hf = optimize_and_check(h);
  EXPECT_EQ(kernels(hf), 3) << print(hf);
  EXPECT_EQ(count(hf, "FusedInjective"), 0);
}

// A graph output in the middle of a chain ends the group: it is computed and kept.
TEST(InjectiveFusion, AGraphOutputInTheMiddleIsKept) {
  Graph g;
  ValueId t = add(g, "Transpose", {input(g, {3, 4, 8})}, {{"perm", Attribute::of_ints({0, 2, 1})}}, "mid");
  ValueId r = add(g, "Relu", {t});
  g.add_output(t);
  g.add_output(add(g, "Transpose", {r}, {{"perm", Attribute::of_ints({1, 0, 2})}}, "y"));
  const Graph f = optimize_and_check(g);
  EXPECT_EQ(kernels(f), 2) << print(f);
  EXPECT_EQ(count(f, "Transpose"), 1);
  EXPECT_EQ(member_ops(only_node(f, "FusedInjective")), (std::vector<std::string>{"Relu", "Transpose"}));
  EXPECT_EQ(f.value(f.outputs()[0]).name, "mid");
}

// A Concat ends groups and keeps its inputs: two Transpose -> Relu groups written into it (in
// place in the artifact) give the same values.
TEST(InjectiveFusion, GroupsBeforeAConcatAreItsInputs) {
  Graph g;
  ValueId a = add(g, "Relu", {add(g, "Transpose", {input(g, {4, 8}, "a")}, {{"perm", Attribute::of_ints({1, 0})}})});
  ValueId b = add(g, "Exp", {add(g, "Transpose", {input(g, {4, 8}, "b")}, {{"perm", Attribute::of_ints({1, 0})}})});
  g.add_output(add(g, "Concat", {a, b}, {{"axis", Attribute::of_int(0)}}, "y"));
  const Graph f = optimize_and_check(g);
  EXPECT_EQ(count(f, "FusedInjective"), 2) << print(f);
  EXPECT_EQ(count(f, "Concat"), 1);
  EXPECT_EQ(kernels(f), 3);
}

// An elementwise-only group stays FusedElementwise; a view with elementwise ops stays a view.
TEST(InjectiveFusion, ElementwiseGroupsAndViewsAreLeftAsTheyWere) {
  Graph g;
  ValueId r = add(g, "Relu", {input(g, {2, 12})});
  ValueId v = add(g, "Reshape", {r, g.add_constant("s", ints({2, 3, 4}))});
  g.add_output(add(g, "Sigmoid", {add(g, "Exp", {v})}, {}, "y"));
  const Graph f = optimize_and_check(g);
  EXPECT_EQ(count(f, "FusedInjective"), 0) << print(f);
  EXPECT_EQ(count(f, "Reshape"), 1);
  EXPECT_EQ(count(f, "FusedElementwise"), 1);
}

// A reduction takes the elementwise nodes before it: ReduceSum(x * x), ReduceMean(|x|) and
// ReduceMax(exp x) are one kernel each.
TEST(InjectiveFusion, AReductionTakesItsElementwiseProducers) {
  Graph g;
  ValueId x = input(g, {3, 5, 8});
  ValueId sq = add(g, "Mul", {x, x});
  g.add_output(add(g, "ReduceSum", {sq, g.add_constant("axes", ints({2}))}, {}, "sum_sq"));
  g.add_output(add(g, "ReduceMean", {add(g, "Abs", {x})},
                   {{"axes", Attribute::of_ints({1})}, {"keepdims", Attribute::of_int(0)}}, "mean_abs"));
  g.add_output(add(g, "ReduceMax", {add(g, "Exp", {x})}, {{"axes", Attribute::of_ints({0, 2})}}, "max_exp"));
  EXPECT_EQ(kernels(g), 6);
  const Graph f = optimize_and_check(g);
  EXPECT_EQ(kernels(f), 3) << print(f);
  EXPECT_EQ(count(f, "FusedInjective"), 3);
  for (const auto &n : f.nodes()) EXPECT_EQ(member_ops(n).size(), 2u) << n.op;
}

TEST(InjectiveFusion, AMalformedSubgraphIsAGraphErrorNamingTheNode) {
  Graph g;
  ValueId x = input(g, {2, 3});
  Node n;
  n.op = "FusedInjective";
  n.name = "bad";
  n.inputs = {x};
  n.outputs = {kNoValue};
  for (const std::string &sub :
       {std::string("[1]"), std::string(R"({"nodes":[{"op":"Conv","in":[{"i":0}]}]})"),
        std::string(R"({"nodes":[{"op":"Relu","in":[{"i":3}]}]})"),
        std::string(R"({"nodes":[{"op":"Transpose","attrs":{"perm":{"ints":[0,5]}},"in":[{"i":0}]}]})"),
        std::string(R"({"nodes":[{"op":"Relu","in":[{"k":{"dtype":"int64","shape":[1],"data":[1]}}]}]})")}) {
    n.attrs["subgraph"] = Attribute::of_string(sub);
    try {
      infer_types(g, n);
      find_op(n.op)->kernel(OpContext(g, n));
      ADD_FAILURE() << "no error for " << sub;
    } catch (const GraphError &e) {
      EXPECT_NE(std::string(e.what()).find("bad"), std::string::npos) << e.what();
    }
  }
}

// --- ShuffleNetV2 ---

// The whole model through the pipeline: the same output as the unoptimized graph and torch's,
// through the executor and the artifact. Each channel shuffle's Transpose is read by two Slices
// (into the next Concat and into a convolution branch), so its post-dominator is the next Concat
// (docs/graph.md) and it groups with neither; the groups are the 13 units' (after the first of each
// stage) Slice of the branch's half with the transform into the branch's 29c blocks.
TEST(InjectiveFusion, ShufflenetV2MatchesTheReferenceAndTorch) {
  KILN_REQUIRE_MODEL("shufflenet_v2_x1_0");
  const fs::path dir = fs::path(KILN_MODELS_DIR) / "shufflenet_v2_x1_0";
  const Graph g = frontend::onnx::import_model((dir / "model.onnx").string());
  const Graph f = driver::optimize_graph(g, driver::GraphPipelineOptions{});
  const deploy::Tensor input = frontend::onnx::read_tensor_file((dir / "input_0.pb").string());
  const deploy::Tensor want = frontend::onnx::read_tensor_file((dir / "output_0.pb").string());
  const deploy::Tensor base = driver::GraphExecutor(g).run(std::vector<deploy::Tensor>{input})[0];
  const deploy::Tensor got = driver::GraphExecutor(f).run(std::vector<deploy::Tensor>{input})[0];
  kiln::test::TempDir tmp("kiln_shufflenet");
  driver::compile_graph(f, tmp.file("model.kiln"));
  deploy::GraphModule m = deploy::GraphModule::load(tmp.file("model.kiln"));
  m.set_input(g.value(g.inputs()[0]).name, input);
  m.run();
  const deploy::Tensor art = m.get_output(0);
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(art.shape(), want.shape());
  double to_base = 0, to_torch = 0, art_base = 0, scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    to_base = std::max(to_base, std::fabs(double(got.data_as<float>()[i]) - base.data_as<float>()[i]));
    to_torch = std::max(to_torch, std::fabs(double(got.data_as<float>()[i]) - want.data_as<float>()[i]));
    art_base = std::max(art_base, std::fabs(double(art.data_as<float>()[i]) - base.data_as<float>()[i]));
    scale = std::max(scale, std::fabs(double(base.data_as<float>()[i])));
  }
  EXPECT_LE(to_base, 1e-4 * scale);
  EXPECT_LE(to_torch, 1e-4 * scale);
  EXPECT_LE(art_base, 1e-4 * scale);
  // At 8 lanes (AVX2) the first unit of each of the 3 stages has the group too: 16.
  const int64_t lanes = driver::resolve_target("llvm -mcpu=native").lanes(ir::Float(32));
  EXPECT_EQ(count(f, "FusedInjective"), lanes == 8 ? 16 : 13);
  for (const auto &n : f.nodes()) {
    if (n.op == "FusedInjective") {
      EXPECT_EQ(member_ops(n), (std::vector<std::string>{"Slice", kLayoutTransformOp})) << n.name;
    }
  }
  std::printf("shufflenet_v2_x1_0 kernels: %d unoptimized, %d optimized, %d FusedInjective\n", kernels(g), kernels(f),
              count(f, "FusedInjective"));
}

}  // namespace
}  // namespace kiln::graph
