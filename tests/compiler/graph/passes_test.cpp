// The graph passes: each on a small graph, checking the graph it gives (which nodes remain) and that
// the optimized graph computes the same outputs as the original through the reference executor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <regex>
#include <string>

#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/ir/deploy_dtype.h"
#include "tests/compiler/graph/graph_test_util.h"

namespace kiln::graph {
namespace {

using namespace test;

TEST(GraphPasses, SimplifyRemovesIdentitiesUnitArithmeticReshapeChainsAndTransposePairs) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 3, 4}});
  ValueId v = add(g, "Identity", {x});
  v = add(g, "Add", {v, g.add_constant("zero", scalar(0))});
  v = add(g, "Mul", {v, g.add_constant("one", scalar(1))});
  v = add(g, "Reshape", {v, g.add_constant("s1", ints({6, 4}))});
  v = add(g, "Reshape", {v, g.add_constant("s2", ints({4, 6}))});
  v = add(g, "Transpose", {v}, {{"perm", Attribute::of_ints({1, 0})}});
  v = add(g, "Transpose", {v}, {{"perm", Attribute::of_ints({1, 0})}});
  v = add(g, "Relu", {v}, {}, "y");
  g.add_output(v);
  Graph s = passes::simplify(g);
  verify(s);
  EXPECT_EQ(count(s, "Identity"), 0);
  EXPECT_EQ(count(s, "Add"), 0);
  EXPECT_EQ(count(s, "Mul"), 0);
  EXPECT_EQ(count(s, "Reshape"), 1) << print(s);
  EXPECT_EQ(count(s, "Transpose"), 0) << print(s);
  EXPECT_EQ(s.nodes().size(), 2u) << print(s);
  EXPECT_EQ(s.value(s.outputs()[0]).name, "y");
  EXPECT_EQ(max_difference(g, s), 0.0);
}

TEST(GraphPasses, SimplifyKeepsArithmeticThatIsNotAUnitAndTransposesThatDoNotCancel) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 3, 4}});
  ValueId v = add(g, "Add", {x, g.add_constant("half", scalar(0.5f))});
  v = add(g, "Transpose", {v}, {{"perm", Attribute::of_ints({1, 2, 0})}});
  v = add(g, "Transpose", {v}, {{"perm", Attribute::of_ints({1, 2, 0})}});
  v = add(g, "Relu", {v}, {}, "y");
  g.add_output(v);
  Graph s = passes::simplify(g);
  EXPECT_EQ(count(s, "Add"), 1);
  EXPECT_EQ(count(s, "Transpose"), 1) << "two transposes become one";
  EXPECT_EQ(max_difference(g, s), 0.0);
}

// A Dropout node with the given outputs (its mask the second), training_mode a constant false.
std::vector<ValueId> dropout(Graph &g, ValueId x, size_t outputs) {
  Node n;
  n.op = "Dropout";
  n.name = g.unique_name("Dropout");
  n.inputs = {x, g.add_constant(g.unique_name("ratio"), scalar(0.5f)), g.add_constant(g.unique_name("training"), [] {
                deploy::Tensor t = deploy::Tensor::empty({}, deploy::DType::of<bool>());
                *t.data_as<bool>() = false;
                return t;
              }())};
  n.outputs.assign(outputs, kNoValue);
  auto types = infer_types(g, n);
  std::vector<std::string> names{g.unique_name("dropout_out"), g.unique_name("dropout_mask")};
  names.resize(outputs);
  return g.add_node(n, names, types);
}

TEST(GraphPasses, SimplifyRemovesInferenceDropoutWhoseMaskNothingReads) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 3, 4}});
  ValueId v = add(g, "Exp", {x});
  v = dropout(g, v, 1)[0];
  v = dropout(g, v, 2)[0];  // the optional mask declared, unread
  g.add_output(add(g, "Relu", {v}, {}, "y"));
  Graph s = passes::simplify(g);
  verify(s);
  EXPECT_EQ(count(s, "Dropout"), 0) << print(s);
  EXPECT_EQ(s.nodes().size(), 2u) << print(s);
  EXPECT_EQ(max_difference(s, g), 0.0);
}

TEST(GraphPasses, SimplifyKeepsADropoutWhoseMaskIsRead) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 3, 4}});
  std::vector<ValueId> d = dropout(g, add(g, "Exp", {x}), 2);
  // The mask (all true at inference) selects the dropout's output.
  g.add_output(add(g, "Where", {d[1], d[0], g.add_constant("zero", scalar(0))}, {}, "y"));
  Graph s = passes::simplify(g);
  verify(s);
  EXPECT_EQ(count(s, "Dropout"), 1) << print(s);
  EXPECT_EQ(max_difference(s, g), 0.0);
  // The reference computes the mask as all true: y = exp(x).
  const deploy::Tensor in = random_tensor({2, 3, 4}, 3);
  driver::GraphExecutor ex(s);
  const deploy::Tensor y = ex.run({in})[0];
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_FLOAT_EQ(y.data_as<float>()[i], std::exp(in.data_as<float>()[i]));
}

TEST(GraphPasses, BatchNormFoldsIntoTheConvBeforeItAndElsewhereIntoAScaleAndShift) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 3, 8, 8}});
  ValueId w = g.add_constant("w", random_tensor({4, 3, 3, 3}, 1));
  ValueId b = g.add_constant("b", random_tensor({4}, 2));
  auto bn_params = [&](const std::string &p, int64_t c, uint64_t seed) {
    return std::vector<ValueId>{g.add_constant(p + "_gamma", random_tensor({c}, seed, 0.5f, 2.0f)),
                                g.add_constant(p + "_beta", random_tensor({c}, seed + 1)),
                                g.add_constant(p + "_mean", random_tensor({c}, seed + 2)),
                                g.add_constant(p + "_var", random_tensor({c}, seed + 3, 0.5f, 2.0f))};
  };
  ValueId c = add(g, "Conv", {x, w, b}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}});
  auto p1 = bn_params("bn1", 4, 10);
  ValueId y = add(g, "BatchNormalization", {c, p1[0], p1[1], p1[2], p1[3]}, {{"epsilon", Attribute::of_float(1e-3)}});
  ValueId r = add(g, "Relu", {y});
  // A BatchNormalization after a Relu: no conv to fold into.
  auto p2 = bn_params("bn2", 4, 20);
  ValueId z = add(g, "BatchNormalization", {r, p2[0], p2[1], p2[2], p2[3]}, {}, "z");
  g.add_output(z);
  Graph f = passes::fold_batch_norm(g);
  verify(f);
  EXPECT_EQ(count(f, "BatchNormalization"), 0) << print(f);
  EXPECT_EQ(count(f, "Conv"), 1);
  EXPECT_EQ(count(f, "Mul"), 1);
  EXPECT_EQ(count(f, "Add"), 1);
  EXPECT_LT(max_difference(g, f), 1e-5);
}

// The four statistics of a BatchNormalization over `c` channels, as constants of `g`.
std::vector<ValueId> batch_norm_params(Graph &g, const std::string &p, int64_t c, uint64_t seed) {
  return {g.add_constant(p + "_gamma", random_tensor({c}, seed, 0.5f, 2.0f)),
          g.add_constant(p + "_beta", random_tensor({c}, seed + 1)),
          g.add_constant(p + "_mean", random_tensor({c}, seed + 2)),
          g.add_constant(p + "_var", random_tensor({c}, seed + 3, 0.5f, 2.0f))};
}

ValueId batch_norm(Graph &g, ValueId x, int64_t c, uint64_t seed, const std::string &out = "") {
  auto p = batch_norm_params(g, "bn" + std::to_string(seed), c, seed);
  return add(g, "BatchNormalization", {x, p[0], p[1], p[2], p[3]}, {{"epsilon", Attribute::of_float(1e-3)}}, out);
}

struct GemmCase {
  bool trans_b;
  std::vector<int64_t> bias;  // C's shape; empty: no C
  double alpha, beta;
};

class BatchNormAfterGemm : public ::testing::TestWithParam<GemmCase> {};

TEST_P(BatchNormAfterGemm, FoldsIntoOneGemm) {
  const GemmCase &p = GetParam();
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {3, 6}});
  ValueId w =
      g.add_constant("w", random_tensor(p.trans_b ? std::vector<int64_t>{5, 6} : std::vector<int64_t>{6, 5}, 1));
  std::vector<ValueId> in{x, w};
  if (!p.bias.empty()) in.push_back(g.add_constant("c", random_tensor(p.bias, 2)));
  std::map<std::string, Attribute> attrs{{"transB", Attribute::of_int(p.trans_b ? 1 : 0)}};
  if (p.alpha != 1.0) attrs["alpha"] = Attribute::of_float(p.alpha);
  if (p.beta != 1.0) attrs["beta"] = Attribute::of_float(p.beta);
  ValueId d = add(g, "Gemm", in, attrs);
  g.add_output(batch_norm(g, d, 5, 10, "y"));
  Graph f = passes::fold_batch_norm(g);
  verify(f);
  EXPECT_EQ(count(f, "BatchNormalization"), 0) << print(f);
  EXPECT_EQ(count(f, "Gemm"), 1) << print(f);
  EXPECT_EQ(f.nodes().size(), 1u) << "no scale and shift left: " << print(f);
  EXPECT_EQ(f.value(f.outputs()[0]).name, "y");
  EXPECT_LT(max_difference(f, g), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(GraphPasses, BatchNormAfterGemm,
                         ::testing::Values(GemmCase{false, {}, 1.0, 1.0}, GemmCase{true, {}, 1.0, 1.0},
                                           GemmCase{false, {5}, 1.0, 1.0}, GemmCase{true, {5}, 1.0, 1.0},
                                           GemmCase{true, {1, 5}, 0.5, 2.0}, GemmCase{false, {3, 1}, 1.5, 0.25},
                                           GemmCase{true, {3, 5}, 1.0, -1.0}, GemmCase{false, {}, 2.0, 1.0}),
                         [](const ::testing::TestParamInfo<GemmCase> &info) {
                           std::string name = info.param.trans_b ? "TransB" : "B";
                           name += info.param.bias.empty() ? "_NoBias" : "_Bias";
                           for (int64_t d : info.param.bias) name += "x" + std::to_string(d);
                           return name + "_" + std::to_string(info.index);
                         });

TEST(GraphPasses, BatchNormFoldsIntoAMatMulOfTwoMatricesWithAConstantWeight) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {4, 6}});
  ValueId d = add(g, "MatMul", {x, g.add_constant("w", random_tensor({6, 7}, 1))});
  g.add_output(batch_norm(g, d, 7, 10, "y"));
  Graph f = passes::fold_batch_norm(g);
  verify(f);
  EXPECT_EQ(f.nodes().size(), 1u) << print(f);
  EXPECT_EQ(count(f, "Gemm"), 1) << print(f);
  EXPECT_LT(max_difference(f, g), 1e-5);
}

TEST(GraphPasses, BatchNormAfterADenseLayerItCannotFoldIntoIsAScaleAndShift) {
  Graph g;
  // The Gemm's output is also read elsewhere (a graph output).
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {3, 6}});
  ValueId d =
      add(g, "Gemm", {x, g.add_constant("w", random_tensor({5, 6}, 1)), g.add_constant("c", random_tensor({5}, 2))},
          {{"transB", Attribute::of_int(1)}}, "dense");
  g.add_output(d);
  g.add_output(batch_norm(g, d, 5, 10, "y"));
  // A weight that is no constant.
  ValueId x2 = g.add_input("x2", TensorType{ir::Float(32), {3, 6}});
  ValueId w2 = g.add_input("w2", TensorType{ir::Float(32), {6, 5}});
  g.add_output(batch_norm(g, add(g, "Gemm", {x2, w2}), 5, 20, "y2"));
  // A producer that is no dense layer (one input).
  ValueId x4 = g.add_input("x4", TensorType{ir::Float(32), {3, 5}});
  g.add_output(batch_norm(g, add(g, "Relu", {x4}), 5, 40, "y4"));
  // A batched MatMul: the BatchNormalization's channel (axis 1) is not the feature axis.
  ValueId x3 = g.add_input("x3", TensorType{ir::Float(32), {2, 3, 6}});
  g.add_output(batch_norm(g, add(g, "MatMul", {x3, g.add_constant("w3", random_tensor({6, 4}, 3))}), 3, 30, "y3"));
  Graph f = passes::fold_batch_norm(g);
  verify(f);
  EXPECT_EQ(count(f, "BatchNormalization"), 0) << print(f);
  EXPECT_EQ(count(f, "Gemm"), 2) << print(f);
  EXPECT_EQ(count(f, "MatMul"), 1) << print(f);
  EXPECT_EQ(count(f, "Mul"), 4) << print(f);
  EXPECT_EQ(count(f, "Add"), 4) << print(f);
  for (const Node &n : f.nodes()) {
    if (n.op == "Gemm") {
      EXPECT_EQ(f.value(n.inputs[1]).name.find("_bn"), std::string::npos) << "weights unchanged";
    }
  }
  EXPECT_LT(max_difference(f, g), 1e-5);
}

TEST(GraphPasses, CommonSubexpressionsAndEqualConstantsAreComputedOnce) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {4, 5}});
  ValueId c1 = g.add_constant("c1", random_tensor({5}, 3));
  ValueId c2 = g.add_constant("c2", random_tensor({5}, 3));  // the same data
  ValueId a = add(g, "Add", {x, c1});
  ValueId b = add(g, "Add", {x, c2});
  ValueId e1 = add(g, "Exp", {a});
  ValueId e2 = add(g, "Exp", {b});
  g.add_output(add(g, "Mul", {e1, e2}, {}, "y"));
  Graph s = passes::eliminate_common_subexpressions(g);
  verify(s);
  EXPECT_EQ(count(s, "Add"), 1) << print(s);
  EXPECT_EQ(count(s, "Exp"), 1);
  EXPECT_EQ(max_difference(g, s), 0.0);
}

TEST(GraphPasses, ConstantSubgraphsFoldAndDeadNodesGo) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 6}});
  ValueId k = g.add_constant("k", random_tensor({6, 2}, 4));
  ValueId kt = add(g, "Transpose", {k}, {{"perm", Attribute::of_ints({1, 0})}});  // constant
  ValueId dead = add(g, "Exp", {x});
  (void)dead;
  g.add_output(add(g, "Add", {x, kt}, {}, "y"));
  Graph d = passes::eliminate_dead_code(g);
  EXPECT_EQ(count(d, "Exp"), 0);
  Graph f = driver::optimize_graph(g, driver::GraphPipelineOptions{});
  EXPECT_EQ(count(f, "Transpose"), 0) << print(f);
  EXPECT_EQ(f.nodes().size(), 1u);
  EXPECT_EQ(max_difference(g, f), 0.0);
}

// A Conv, a BatchNormalization and a Relu: every pass of the pipeline has something to look at.
Graph conv_bn_relu() {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 4, 8, 8}});
  ValueId c = add(g, "Conv", {x, g.add_constant("w", random_tensor({8, 4, 3, 3}, 1))},
                  {{"pads", Attribute::of_ints({1, 1, 1, 1})}});
  g.add_output(add(g, "Relu", {batch_norm(g, c, 8, 10)}, {}, "y"));
  return g;
}

// The "--- after <pass> (<ms> ms, <n> nodes)" headers of the debug output, in order, each with the
// graph text that follows it.
struct DebugSection {
  std::string pass, graph_text;
  double ms;
};
std::vector<DebugSection> debug_sections(const std::string &text) {
  std::vector<DebugSection> out;
  std::vector<size_t> starts, ends;
  const std::regex header(R"(--- after ([a-z_]+) \(([0-9.eE+-]+) ms, ([0-9]+) nodes\)\n)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), header); it != std::sregex_iterator(); ++it) {
    out.push_back({(*it)[1].str(), "", std::stod((*it)[2].str())});
    starts.push_back(static_cast<size_t>(it->position()));
    ends.push_back(static_cast<size_t>(it->position() + it->length()));
  }
  starts.push_back(text.size());
  for (size_t k = 0; k < out.size(); ++k) out[k].graph_text = text.substr(ends[k], starts[k + 1] - ends[k]);
  return out;
}

TEST(GraphPasses, DebugOptionPrintsEachPassWithItsTimeAndTheGraphInPipelineOrder) {
  const Graph g = conv_bn_relu();
  driver::GraphPipelineOptions o;
  o.debug = true;
  ::testing::internal::CaptureStderr();
  const Graph f = driver::optimize_graph(g, o);
  const std::string text = ::testing::internal::GetCapturedStderr();
  const std::vector<DebugSection> sections = debug_sections(text);
  const std::vector<std::string> expected{"simplify",
                                          "fold_batch_norm",
                                          "fold_constants",
                                          "eliminate_common_subexpressions",
                                          "simplify",
                                          "fuse_layer_norms",
                                          "inline_injective_producers",
                                          "fuse_epilogues",
                                          "alter_layout",
                                          "prepack_dense",
                                          "fuse_expand_depthwise",
                                          "fuse_injective",
                                          "fuse_elementwise",
                                          "eliminate_dead_code"};
  std::vector<std::string> passes;
  for (const auto &s : sections) {
    passes.push_back(s.pass);
    EXPECT_GE(s.ms, 0.0) << s.pass;
  }
  EXPECT_EQ(passes, expected) << text;
  ASSERT_EQ(sections.size(), expected.size()) << text;
  // The graph after the first pass still has the BatchNormalization; the last one is the result,
  // each of its nodes named.
  EXPECT_NE(sections[0].graph_text.find("= BatchNormalization("), std::string::npos) << sections[0].graph_text;
  EXPECT_EQ(sections[1].graph_text.find("= BatchNormalization("), std::string::npos) << sections[1].graph_text;
  EXPECT_EQ(sections.back().graph_text, print(f));
  for (const Node &n : f.nodes()) EXPECT_NE(sections.back().graph_text.find(n.name), std::string::npos) << n.name;
  // Without the option nothing is printed.
  ::testing::internal::CaptureStderr();
  driver::optimize_graph(g, driver::GraphPipelineOptions{});
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(GraphPasses, DebugOptionFollowsTheEnvironment) {
  const char *before = std::getenv("KILN_DEBUG_GRAPH");
  const std::string saved = before ? before : "";
  setenv("KILN_DEBUG_GRAPH", "1", 1);
  EXPECT_TRUE(driver::GraphPipelineOptions::from_env().debug);
  ::testing::internal::CaptureStderr();
  driver::optimize_graph(conv_bn_relu());  // the options from the environment
  const std::string text = ::testing::internal::GetCapturedStderr();
  const std::vector<DebugSection> sections = debug_sections(text);
  ASSERT_GE(sections.size(), 13u) << text;  // 14 unless KILN_FUSE_EXPAND_DEPTHWISE=0 takes one out
  EXPECT_EQ(sections.front().pass, "simplify");
  EXPECT_EQ(sections.back().pass, "eliminate_dead_code");
  setenv("KILN_DEBUG_GRAPH", "0", 1);
  EXPECT_FALSE(driver::GraphPipelineOptions::from_env().debug);
  unsetenv("KILN_DEBUG_GRAPH");
  EXPECT_FALSE(driver::GraphPipelineOptions::from_env().debug);
  if (before) setenv("KILN_DEBUG_GRAPH", saved.c_str(), 1);
}

TEST(GraphPasses, ConvWithItsElementwiseConsumersIsOneKernel) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 4, 9, 9}});
  ValueId skip = g.add_input("skip", TensorType{ir::Float(32), {1, 8, 9, 9}});
  ValueId w = g.add_constant("w", random_tensor({8, 4, 3, 3}, 1));
  ValueId b = g.add_constant("b", random_tensor({8}, 2));
  ValueId c = add(g, "Conv", {x, w, b}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}});
  ValueId v = add(g, "Add", {c, skip});  // a residual
  v = add(g, "Relu", {v});
  v = add(g, "Mul", {v, g.add_constant("k", scalar(0.5f))});  // a scalar
  v = add(g, "Clip", {v, g.add_constant("lo", scalar(-0.25f)), g.add_constant("hi", scalar(0.75f))});
  ValueId y = add(g, "HardSwish", {v}, {}, "y");
  // A second conv whose output is read twice, by a diamond that joins again (relu(c2) + c2): the
  // diamond, up to its join, is that conv's epilogue (an expression step).
  ValueId w2 = g.add_constant("w2", random_tensor({8, 8, 1, 1}, 3));
  ValueId c2 = add(g, "Conv", {y, w2});
  ValueId r2 = add(g, "Relu", {c2});
  g.add_output(y);
  g.add_output(add(g, "Add", {r2, c2}, {}, "z"));
  Graph f = passes::fuse_epilogues(g);
  verify(f);
  EXPECT_EQ(count(f, "FusedConv"), 2) << print(f);
  EXPECT_EQ(count(f, "Conv"), 0);
  EXPECT_EQ(count(f, "Relu"), 0);
  EXPECT_EQ(count(f, "HardSwish"), 0);
  EXPECT_EQ(f.value(f.outputs()[0]).name, "y");
  EXPECT_LT(max_difference(g, f), 1e-5);
  driver::GraphExecutor ex(f);
  EXPECT_EQ(ex.stats().template_kernels, 2) << "the fused chain is the conv template's epilogue";
}

TEST(GraphPasses, FusionStopsAtAGraphOutputAndAtAValueReadTwice) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 2, 5, 5}});
  ValueId w = g.add_constant("w", random_tensor({2, 2, 3, 3}, 5));
  ValueId c = add(g, "Conv", {x, w}, {}, "c");
  g.add_output(c);
  g.add_output(add(g, "Relu", {c}, {}, "r"));
  Graph f = passes::fuse_epilogues(g);
  EXPECT_EQ(count(f, "FusedConv"), 0);
  EXPECT_EQ(max_difference(g, f), 0.0);
}

TEST(GraphPasses, ImportersNeverProduceInternalOps) {
  const OpDef *d = find_op("FusedConv");
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->internal);
}

}  // namespace
}  // namespace kiln::graph
