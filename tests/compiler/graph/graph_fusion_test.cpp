// Fusion beyond convolutions: matrix products with their elementwise consumers (FusedDense,
// FusedMatMul), exported layer normalizations (LayerNormalization), and elementwise groups
// (FusedElementwise). Each hand-built graph is checked before and after the pass (which nodes
// remain) and through the executor against the unoptimized graph on random inputs; the BERT-style
// encoder of tests/frontend/make_models.py is checked for the kernels the pipeline leaves.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/driver/task_extraction.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/fuse_ops.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/ops/epilogue.h"
#include "contracts/json.h"
#include "tests/compiler/graph/graph_test_util.h"
#include "tests/compiler/graph/model_export.h"

namespace kiln::graph {
namespace {

namespace fs = std::filesystem;
using contracts::Json;

using namespace test;

ValueId constant(Graph &g, float v) { return g.add_constant(g.unique_name("c"), scalar(v)); }

const Node &only_node(const Graph &g, const std::string &op) {
  for (const auto &n : g.nodes()) {
    if (n.op == op) return n;
  }
  throw std::runtime_error("no " + op + " node");
}

// The template a node's kernel is built from ("" for a tensor-expression compute).
std::string template_of(const Graph &g, const Node &n) { return find_op(n.op)->kernel(OpContext(g, n)).template_name; }

// GELU as torch exports it: x * 0.5 * (1 + erf(x / sqrt 2)), the 0.5 first or last.
ValueId gelu(Graph &g, ValueId x, bool half_first) {
  ValueId e = add(g, "Erf", {add(g, "Div", {x, constant(g, 1.4142135f)})});
  ValueId one_plus = add(g, "Add", {e, constant(g, 1.0f)});
  if (half_first) return add(g, "Mul", {add(g, "Mul", {x, constant(g, 0.5f)}), one_plus});
  return add(g, "Mul", {add(g, "Mul", {x, one_plus}), constant(g, 0.5f)});
}

// Every op of the table has a fusion pattern, and the lattice orders them as fusion relies on.
TEST(GraphFusion, EveryOpHasAFusionPattern) {
  std::vector<std::string> missing;
  for (const auto &name : op_names()) {
    if (!find_op(name)->pattern) missing.push_back(name);
  }
  EXPECT_TRUE(missing.empty()) << "ops without a pattern: " << ::testing::PrintToString(missing);
  EXPECT_GT(op_names().size(), 100u);
}

TEST(GraphFusion, OpPatternsSpotChecks) {
  EXPECT_EQ(op_pattern("Relu"), OpPattern::kElemWise);
  EXPECT_EQ(op_pattern("Cast"), OpPattern::kElemWise);
  EXPECT_EQ(op_pattern("Add"), OpPattern::kBroadcast);
  EXPECT_EQ(op_pattern("Where"), OpPattern::kBroadcast);
  EXPECT_EQ(op_pattern("Reshape"), OpPattern::kInjective);
  EXPECT_EQ(op_pattern("Pad"), OpPattern::kInjective);
  EXPECT_EQ(op_pattern(kLayoutTransformOp), OpPattern::kInjective);
  EXPECT_EQ(op_pattern("ReduceMean"), OpPattern::kCommReduce);
  EXPECT_EQ(op_pattern("Conv"), OpPattern::kOutEWiseFusable);
  EXPECT_EQ(op_pattern("FusedDense"), OpPattern::kOutEWiseFusable);
  EXPECT_EQ(op_pattern("Softmax"), OpPattern::kOpaque);
  EXPECT_EQ(op_pattern("Shape"), OpPattern::kOpaque);
  EXPECT_EQ(op_pattern("NoSuchOp"), OpPattern::kOpaque);
  EXPECT_LT(OpPattern::kElemWise, OpPattern::kBroadcast);
  EXPECT_LT(OpPattern::kInjective, OpPattern::kCommReduce);
  EXPECT_LT(OpPattern::kOutEWiseFusable, OpPattern::kOpaque);
  EXPECT_STREQ(pattern_name(OpPattern::kOutEWiseFusable), "out_elemwise_fusable");
}

// The post-dominator tree: a diamond's branches are post-dominated by their join, the join by the
// graph output's exit.
TEST(GraphFusion, PostDominatorsOfADiamond) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 3}});
  ValueId r = add(g, "Relu", {x});                  // 0
  ValueId a = add(g, "Exp", {r});                   // 1
  ValueId b = add(g, "Neg", {r});                   // 2
  ValueId j = add(g, "Add", {a, b});                // 3
  g.add_output(add(g, "Sigmoid", {j}, {}, "out"));  // 4
  g.add_output(add(g, "Tanh", {r}, {}, "side"));    // 5
  const std::vector<size_t> ipdom = passes::immediate_post_dominators(g);
  const size_t exit = g.nodes().size();
  EXPECT_EQ(ipdom, (std::vector<size_t>{exit, 3, 3, 4, exit, exit}));
}

// The region between a node and a post-dominator: every node on the paths to it, or none when a
// node on them is refused or a path passes the post-dominator by.
TEST(GraphFusion, TheRegionUpToAPostDominator) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 3}});
  ValueId r = add(g, "Relu", {x});                                      // 0
  ValueId j = add(g, "Add", {add(g, "Exp", {r}), add(g, "Neg", {r})});  // 1, 2, 3
  g.add_output(add(g, "Sigmoid", {j}, {}, "out"));                      // 4
  const auto readers = passes::value_readers(g);
  auto any = [](size_t) { return true; };
  const size_t relu = 0, join = 3;
  EXPECT_EQ(passes::immediate_post_dominators(g)[relu], join);
  EXPECT_EQ(passes::post_dominated_region(g, readers, {r}, join, any, 32), (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(passes::post_dominated_region(
                g, readers, {r}, join, [](size_t k) { return k != 2; }, 32),
            std::nullopt);
  EXPECT_EQ(passes::post_dominated_region(g, readers, {r}, join, any, 2), std::nullopt);
  // Read by a graph output's node as well, r is post-dominated by the exit only: a path passes
  // the join by.
  g.add_output(add(g, "Tanh", {r}, {}, "side"));
  EXPECT_EQ(passes::post_dominated_region(g, passes::value_readers(g), {r}, join, any, 32), std::nullopt);
}

void conv_input(Graph &g, ValueId *x, ValueId *c) {
  *x = g.add_input("x", TensorType{ir::Float(32), {1, 4, 8, 8}});
  *c = add(g, "Conv",
           {*x, g.add_constant("w", random_tensor({16, 4, 3, 3}, 11)), g.add_constant("b", random_tensor({16}, 12))},
           {{"pads", Attribute::of_ints({1, 1, 1, 1})}});
}

// conv -> relu -> {add(r, y), mul(r, r)} -> add: the chain rule stopped at r (read twice); the
// post-dominator rule fuses the diamond into the conv's kernel as an expression step.
TEST(GraphFusion, AConvDiamondIsOneKernel) {
  Graph g;
  ValueId x, c;
  conv_input(g, &x, &c);
  ValueId y = g.add_input("y", TensorType{ir::Float(32), {1, 16, 8, 8}});
  ValueId r = add(g, "Relu", {c});
  ValueId sum = add(g, "Add", {add(g, "Add", {r, y}), add(g, "Mul", {r, r})});
  // A per-channel scale (not foldable into the weights: it comes after the ReLU).
  g.add_output(add(g, "Mul", {sum, g.add_constant("s", random_tensor({1, 16, 1, 1}, 13))}, {}, "out"));
  Graph f = passes::fuse_epilogues(g);
  verify(f);
  ASSERT_EQ(f.nodes().size(), 1u) << print(f);
  const Node &fc = only_node(f, "FusedConv");
  const Json epi = Json::parse(fc.attr_string("epilogue", ""));
  ASSERT_EQ(epi.size(), 2u) << epi.dump();
  EXPECT_EQ(epi[0].dump(), R"({"op":"relu"})");
  EXPECT_EQ(epi[1]["op"].as_string(), "expr");
  EXPECT_EQ(ops::expr_string(epi[1]["expr"]), "mul(add(add(x, in0), mul(x, x)), in1)") << epi.dump();
  EXPECT_EQ(epi[1]["inputs"].dump(), R"(["full","channel"])");
  EXPECT_EQ(f.value(f.outputs()[0]).name, "out");
  EXPECT_LT(max_difference(g, f), 1e-5);
  // Its tuning task is the plain conv's workload: the epilogue does not make a task of its own.
  Graph plain;
  ValueId px, pc;
  conv_input(plain, &px, &pc);
  plain.add_output(pc);
  const driver::TaskExtraction fused_tasks = driver::extract_tasks(f, "llvm -mcpu=native");
  const driver::TaskExtraction plain_tasks = driver::extract_tasks(plain, "llvm -mcpu=native");
  ASSERT_EQ(fused_tasks.tasks.size(), 1u);
  ASSERT_EQ(plain_tasks.tasks.size(), 1u);
  EXPECT_EQ(fused_tasks.tasks[0].workload_key, plain_tasks.tasks[0].workload_key);
  // The whole pipeline (layouts included) computes the same.
  const Graph o = driver::optimize_graph(g, driver::GraphPipelineOptions{});
  EXPECT_EQ(count(o, "Relu") + count(o, "Add") + count(o, "Mul") + count(o, "FusedElementwise"), 0) << print(o);
  EXPECT_LT(max_difference(g, o), 1e-5);
}

// A value that escapes the region (a graph output, or a reader past the post-dominator) keeps the
// diamond out of the conv.
TEST(GraphFusion, AnEscapingValueKeepsTheDiamondOut) {
  Graph g;
  ValueId x, c;
  conv_input(g, &x, &c);
  ValueId e = add(g, "Exp", {c}, {}, "e");
  g.add_output(add(g, "Add", {e, add(g, "Neg", {c})}, {}, "out"));
  g.add_output(e);
  Graph f = passes::fuse_epilogues(g);
  verify(f);
  EXPECT_EQ(count(f, "Conv"), 1) << print(f);
  EXPECT_EQ(count(f, "FusedConv"), 0);
  EXPECT_LT(max_difference(g, f), 1e-5);
}

// The cap of 32 nodes per group splits a long elementwise chain after a conv.
TEST(GraphFusion, TheCapSplitsALongChainAfterAConv) {
  Graph g;
  ValueId x, v;
  conv_input(g, &x, &v);
  for (int i = 0; i < 40; ++i) v = add(g, i % 2 ? "Sigmoid" : "Exp", {v});
  g.add_output(v);
  Graph f = passes::fuse_epilogues(g);
  verify(f);
  ASSERT_EQ(count(f, "FusedConv"), 1) << print(f);
  // 32 nodes go into the conv (Sigmoid as a named step, Exp as an expression), 8 stay.
  EXPECT_EQ(f.nodes().size(), 9u) << print(f);
  EXPECT_LT(max_difference(g, f), 1e-5);
}

TEST(GraphFusion, LinearWithBiasAndGeluIsOneFusedDense) {
  for (bool half_first : {false, true}) {
    Graph g;
    ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 5, 8}});
    ValueId w = g.add_constant("w", random_tensor({8, 12}, 1));
    ValueId b = g.add_constant("b", random_tensor({12}, 2));
    ValueId v = add(g, "MatMul", {x, w});
    v = add(g, "Add", {v, b});
    g.add_output(gelu(g, v, half_first));
    Graph f = passes::fuse_epilogues(g);
    verify(f);
    EXPECT_EQ(count(f, "FusedDense"), 1) << print(f);
    for (const char *op : {"MatMul", "Add", "Mul", "Div", "Erf"}) EXPECT_EQ(count(f, op), 0) << op << "\n" << print(f);
    const Node &d = only_node(f, "FusedDense");
    EXPECT_EQ(Json::parse(d.attr_string("epilogue", "")).dump(),
              R"([{"op":"bias_add"},{"approximate":"none","op":"gelu"}])");
    EXPECT_EQ(template_of(f, d), "dense_pack.x86");
    // The activations are viewed as [10, 8]; the weight is stored transposed, [12, 8].
    EXPECT_EQ(f.value(d.inputs[0]).type.shape, (std::vector<int64_t>{10, 8}));
    EXPECT_EQ(f.value(d.inputs[1]).type.shape, (std::vector<int64_t>{12, 8}));
    EXPECT_EQ(f.value(f.outputs()[0]).type.shape, (std::vector<int64_t>{2, 5, 12}));
    EXPECT_LT(max_difference(g, f), 1e-5);
  }
}

// GELU's tanh approximation as torch exports it (constants on the left).
ValueId gelu_tanh(Graph &g, ValueId x) {
  ValueId cube = add(g, "Mul", {x, add(g, "Mul", {x, x})});
  ValueId inner = add(g, "Add", {x, add(g, "Mul", {constant(g, 0.044715f), cube})});
  ValueId t = add(g, "Tanh", {add(g, "Mul", {constant(g, 0.7978845608f), inner})});
  ValueId m = add(g, "Mul", {x, add(g, "Add", {constant(g, 1.0f), t})});
  return add(g, "Mul", {constant(g, 0.5f), m});
}

TEST(GraphFusion, TheTanhApproximationOfGeluIsADenseEpilogueToo) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {3, 4, 16}});
  ValueId v = add(g, "MatMul", {x, g.add_constant("w", random_tensor({16, 24}, 11))});
  v = add(g, "Add", {g.add_constant("b", random_tensor({24}, 12)), v});
  g.add_output(gelu_tanh(g, v));
  Graph f = passes::fuse_epilogues(g);
  verify(f);
  EXPECT_EQ(count(f, "Tanh"), 0) << print(f);
  EXPECT_EQ(count(f, "Mul"), 0);
  EXPECT_EQ(Json::parse(only_node(f, "FusedDense").attr_string("epilogue", "")).dump(),
            R"([{"op":"bias_add"},{"approximate":"tanh","op":"gelu"}])");
  EXPECT_LT(max_difference(g, f), 1e-5);
}

TEST(GraphFusion, GemmAndResidualAndScalarStepsJoinTheDense) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {6, 8}});
  ValueId skip = g.add_input("skip", TensorType{ir::Float(32), {6, 4}});
  ValueId v =
      add(g, "Gemm", {x, g.add_constant("w", random_tensor({8, 4}, 3)), g.add_constant("c", random_tensor({4}, 4))});
  v = add(g, "Add", {v, skip});
  v = add(g, "Relu", {v});
  v = add(g, "Sub", {v, constant(g, 0.25f)});
  g.add_output(add(g, "Div", {v, constant(g, 3.0f)}, {}, "y"));
  Graph f = passes::fuse_epilogues(g);
  EXPECT_EQ(f.nodes().size(), 1u) << print(f);
  const Node &d = only_node(f, "FusedDense");
  EXPECT_EQ(Json::parse(d.attr_string("epilogue", "")).size(), 4u);
  EXPECT_EQ(f.value(f.outputs()[0]).name, "y");
  EXPECT_LT(max_difference(g, f), 1e-5);
}

TEST(GraphFusion, AValueReadTwiceJoinsUpToItsPostDominator) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {4, 8}});
  ValueId y = g.add_input("y", TensorType{ir::Float(32), {4, 8}});
  ValueId v = add(g, "MatMul", {x, g.add_constant("w", random_tensor({8, 8}, 5))});
  ValueId biased = add(g, "Add", {v, g.add_constant("b", random_tensor({8}, 6))});
  // `biased` is read by Relu and by Mul, which join at a = r + m: the chain rule stopped at
  // `biased`; the region up to a, and Exp after it, are the dense's expression step.
  ValueId r = add(g, "Relu", {biased});
  ValueId m = add(g, "Mul", {biased, y});
  ValueId a = add(g, "Add", {r, m});
  // e = exp(a) is read by two graph outputs' nodes: its post-dominator is the exit, so the group
  // ends at e and Sigmoid and Tanh stay on their own.
  ValueId e = add(g, "Exp", {a});
  g.add_output(add(g, "Sigmoid", {e}, {}, "s"));
  g.add_output(add(g, "Tanh", {e}, {}, "t"));
  Graph f = passes::fuse_elementwise(passes::fuse_epilogues(g));
  verify(f);
  const Node &d = only_node(f, "FusedDense");
  const Json epi = Json::parse(d.attr_string("epilogue", ""));
  ASSERT_EQ(epi.size(), 2u) << epi.dump();
  EXPECT_EQ(epi[0].dump(), R"({"op":"bias_add"})");
  EXPECT_EQ(ops::expr_string(epi[1]["expr"]), "exp(add(relu(x), mul(x, in0)))");
  EXPECT_EQ(count(f, "FusedElementwise"), 0) << print(f);
  EXPECT_EQ(count(f, "Sigmoid"), 1);
  EXPECT_EQ(count(f, "Tanh"), 1);
  EXPECT_EQ(f.nodes().size(), 3u);
  EXPECT_LT(max_difference(g, f), 1e-5);

  // A graph output inside the chain ends the group there too.
  Graph h;
  ValueId p = h.add_input("p", TensorType{ir::Float(32), {3, 5}});
  ValueId q = add(h, "Neg", {p}, {}, "q");
  h.add_output(q);
  h.add_output(add(h, "Exp", {add(h, "Abs", {q})}, {}, "z"));
  Graph hf = passes::fuse_elementwise(h);
  EXPECT_EQ(count(hf, "Neg"), 1) << print(hf);
  EXPECT_EQ(count(hf, "FusedElementwise"), 1);
  EXPECT_LT(max_difference(h, hf), 1e-6);
}

TEST(GraphFusion, AnElementwiseDiamondWithBroadcastingIsOneKernel) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {4, 6}});
  ValueId y = g.add_input("y", TensorType{ir::Float(32), {1, 6}});
  ValueId a = add(g, "Add", {x, y});
  ValueId p = add(g, "Mul", {a, constant(g, 3.0f)});
  ValueId q = add(g, "Exp", {a});
  ValueId r = add(g, "Sub", {p, q});
  ValueId s = add(g, "Pow", {add(g, "Sqrt", {add(g, "Abs", {r})}), constant(g, 2.0f)});
  g.add_output(add(g, "Where", {add(g, "Greater", {s, constant(g, 1.0f)}), s, r}, {}, "out"));
  Graph f = passes::fuse_elementwise(g);
  verify(f);
  // Greater is not in the fusable list, and s and r are read by it or by Where as well as inside
  // their groups: two groups, Greater and Where on their own.
  EXPECT_EQ(count(f, "FusedElementwise"), 2) << print(f);
  EXPECT_EQ(count(f, "Greater"), 1);
  EXPECT_EQ(count(f, "Where"), 1);
  EXPECT_EQ(f.nodes().size(), 4u);
  EXPECT_LT(max_difference(g, f), 1e-5);

  // Without it, one kernel reads x and y only (the scalars are inlined).
  Graph h;
  ValueId hx = h.add_input("x", TensorType{ir::Float(32), {4, 6}});
  ValueId hy = h.add_input("y", TensorType{ir::Float(32), {1, 6}});
  ValueId ha = add(h, "Add", {hx, hy});
  h.add_output(add(h, "Sub", {add(h, "Mul", {ha, constant(h, 3.0f)}), add(h, "Exp", {ha})}, {}, "out"));
  Graph hf = passes::fuse_elementwise(h);
  ASSERT_EQ(hf.nodes().size(), 1u) << print(hf);
  EXPECT_EQ(hf.nodes()[0].op, "FusedElementwise");
  EXPECT_EQ(hf.nodes()[0].inputs.size(), 2u);
  EXPECT_LT(max_difference(h, hf), 1e-6);
}

// Exp's immediate post-dominator is the Add, but one path to it runs through a reduction: Exp
// stays out of the group of Neg, Add and Relu (the reduction between them would have to run
// inside it).
TEST(GraphFusion, AnElementwiseNodeJoinsOnlyWhenEveryPathToItsPostDominatorIsInTheGroup) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {4, 6}});
  ValueId e = add(g, "Exp", {x});
  ValueId m = add(g, "ReduceMean", {e}, {{"axes", Attribute::of_ints({-1})}, {"keepdims", Attribute::of_int(1)}});
  g.add_output(add(g, "Relu", {add(g, "Add", {add(g, "Neg", {e}), m})}, {}, "out"));
  Graph f = passes::fuse_elementwise(g);
  verify(f);
  ASSERT_EQ(f.nodes().size(), 3u) << print(f);
  EXPECT_EQ(f.nodes()[0].op, "Exp");
  EXPECT_EQ(f.nodes()[1].op, "ReduceMean");
  EXPECT_EQ(Json::parse(only_node(f, "FusedElementwise").attr_string("subgraph", ""))["nodes"].size(), 3u);
  EXPECT_LT(max_difference(g, f), 1e-5);
}

TEST(GraphFusion, TheCapsSplitLongChainsAndWideGroups) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {3, 7}});
  ValueId v = x;
  for (int i = 0; i < 40; ++i)
    v = add(g, i % 2 ? "Tanh" : "Mul", i % 2 ? std::vector<ValueId>{v} : std::vector<ValueId>{v, constant(g, 1.5f)});
  g.add_output(v);
  Graph f = passes::fuse_elementwise(g);
  verify(f);
  ASSERT_EQ(f.nodes().size(), 2u) << print(f);
  EXPECT_EQ(Json::parse(f.nodes()[1].attr_string("subgraph", ""))["nodes"].size(), 32u);
  EXPECT_EQ(Json::parse(f.nodes()[0].attr_string("subgraph", ""))["nodes"].size(), 8u);
  EXPECT_LT(max_difference(g, f), 1e-5);

  // A sum of 20 inputs: no kernel reads more than 16.
  Graph w;
  ValueId s = w.add_input("i0", TensorType{ir::Float(32), {5}});
  for (int i = 1; i < 20; ++i)
    s = add(w, "Add", {s, w.add_input("i" + std::to_string(i), TensorType{ir::Float(32), {5}})});
  w.add_output(s);
  Graph wf = passes::fuse_elementwise(w);
  EXPECT_EQ(count(wf, "FusedElementwise"), 2) << print(wf);
  for (const auto &n : wf.nodes()) EXPECT_LE(n.inputs.size(), 16u);
  EXPECT_LT(max_difference(w, wf), 1e-5);

  // A variadic Max of three tensors is not one of the subgraph's binary ops: it stays a node.
  Graph m;
  ValueId a = m.add_input("a", TensorType{ir::Float(32), {4}});
  ValueId b = m.add_input("b", TensorType{ir::Float(32), {4}});
  ValueId mx = add(m, "Max", {add(m, "Neg", {a}), add(m, "Abs", {b}), a});
  m.add_output(add(m, "Exp", {add(m, "Relu", {mx})}));
  Graph mf = passes::fuse_elementwise(m);
  EXPECT_EQ(count(mf, "Max"), 1) << print(mf);
  EXPECT_EQ(count(mf, "FusedElementwise"), 1);
  EXPECT_LT(max_difference(m, mf), 1e-6);
}

TEST(GraphFusion, AttentionProductsAreFusedMatMulsOnRankThreeViews) {
  Graph g;
  ValueId q = g.add_input("q", TensorType{ir::Float(32), {2, 3, 5, 4}});
  ValueId k = g.add_input("k", TensorType{ir::Float(32), {2, 3, 6, 4}});
  ValueId v = g.add_input("v", TensorType{ir::Float(32), {6, 4}});
  ValueId kt = add(g, "Transpose", {k}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
  ValueId scores = add(g, "Div", {add(g, "MatMul", {q, kt}), constant(g, 2.0f)});
  ValueId p = add(g, "Softmax", {scores}, {{"axis", Attribute::of_int(-1)}});
  // A rank-2 activation b is shared by every batch.
  g.add_output(add(g, "MatMul", {p, v}, {}, "out"));
  Graph f = passes::fuse_epilogues(g);
  verify(f);
  EXPECT_EQ(count(f, "FusedMatMul"), 2) << print(f);
  EXPECT_EQ(count(f, "Transpose"), 0);
  EXPECT_EQ(count(f, "Div"), 0);
  for (const auto &n : f.nodes()) {
    if (n.op == "FusedMatMul" || n.op == "Softmax") {
      EXPECT_NE(template_of(f, n), "") << n.describe();
    }
  }
  EXPECT_EQ(template_of(f, only_node(f, "Softmax")), "softmax.x86");
  EXPECT_LT(max_difference(g, f), 1e-5);
}

TEST(GraphFusion, AnExportedLayerNormIsOneLayerNormalizationOnItsTemplate) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 3, 16}});
  ValueId mean = add(g, "ReduceMean", {x}, {{"axes", Attribute::of_ints({-1})}});
  ValueId d = add(g, "Sub", {x, mean});
  ValueId var = add(g, "ReduceMean", {add(g, "Pow", {d, constant(g, 2.0f)})}, {{"axes", Attribute::of_ints({-1})}});
  ValueId n = add(g, "Div", {d, add(g, "Sqrt", {add(g, "Add", {var, constant(g, 1e-5f)})})});
  ValueId y = add(g, "Mul", {n, g.add_constant("gamma", random_tensor({16}, 8))});
  g.add_output(add(g, "Add", {y, g.add_constant("beta", random_tensor({16}, 9))}, {}, "y"));
  Graph f = passes::fuse_layer_norms(g);
  verify(f);
  ASSERT_EQ(f.nodes().size(), 1u) << print(f);
  EXPECT_EQ(f.nodes()[0].op, "LayerNormalization");
  EXPECT_EQ(template_of(f, f.nodes()[0]), "layer_norm.x86");
  EXPECT_LT(max_difference(g, f), 1e-5);

  // Over another axis than the last, it stays as it is.
  Graph h;
  ValueId hx = h.add_input("x", TensorType{ir::Float(32), {4, 8}});
  ValueId hm = add(h, "ReduceMean", {hx}, {{"axes", Attribute::of_ints({0})}});
  h.add_output(add(h, "Sub", {hx, hm}));
  EXPECT_EQ(count(passes::fuse_layer_norms(h), "LayerNormalization"), 0);
}

TEST(GraphFusion, AMalformedSubgraphIsAGraphErrorNamingTheNode) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {4}});
  Node n;
  n.op = "FusedElementwise";
  n.name = "fe";
  n.inputs = {x};
  n.outputs = {kNoValue};
  n.attrs["subgraph"] =
      Attribute::of_string(R"({"nodes":[{"op":"Conv","in":[{"i":0}],"shape":[4],"dtype":"float32"}]})");
  try {
    infer_types(g, n);
    FAIL() << "no error";
  } catch (const GraphError &e) {
    EXPECT_NE(std::string(e.what()).find("'fe'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("does not fuse"), std::string::npos) << e.what();
  }
  n.attrs["subgraph"] =
      Attribute::of_string(R"({"nodes":[{"op":"Neg","in":[{"n":0}],"shape":[4],"dtype":"float32"}]})");
  EXPECT_THROW(infer_types(g, n), GraphError);
  n.attrs["subgraph"] =
      Attribute::of_string(R"({"nodes":[{"op":"Neg","in":[{"i":0}],"shape":[3],"dtype":"float32"}]})");
  EXPECT_THROW(infer_types(g, n), GraphError);
  n.attrs["subgraph"] = Attribute::of_string("[1,");
  EXPECT_THROW(infer_types(g, n), GraphError);
}

// --- the BERT-style encoder ---

void require_unknown_model() { KILN_REQUIRE_MODEL("no_such_model"); }

// A model test skips only when torch is missing: any other failure of make_models.py (here its
// status 2 for an unknown model) fails it, with what the script printed.
TEST(GraphFusion, AFailedModelExportFailsTheTestWithTheScriptsOutput) {
  if (!fs::exists(kiln::test::kModelsPython)) GTEST_SKIP() << kiln::test::kModelsPython << " is missing";
  EXPECT_FATAL_FAILURE(require_unknown_model(), "unknown model(s): no_such_model");
  EXPECT_FATAL_FAILURE(require_unknown_model(), "make_models.py no_such_model failed (status 2)");
}

TEST(GraphFusion, TheEncoderRunsOnTemplateKernels) {
  KILN_REQUIRE_MODEL("bert_encoder");
  const fs::path dir = fs::path(KILN_MODELS_DIR) / "bert_encoder";
  const Graph g = frontend::onnx::import_model((dir / "model.onnx").string());
  const Graph f = driver::optimize_graph(g, driver::GraphPipelineOptions{});
  // Two layers: q, k, v, out and the two feed-forward linears each; QK^T and PV each; a softmax each;
  // the embedding norm and two norms each; no elementwise node left on its own but the embedding sum.
  EXPECT_EQ(count(f, "FusedDense"), 12) << print(f);
  EXPECT_EQ(count(f, "FusedMatMul"), 4);
  EXPECT_EQ(count(f, "Softmax"), 2);
  EXPECT_EQ(count(f, "LayerNormalization"), 5);
  EXPECT_EQ(count(f, "FusedElementwise"), 0);
  for (const char *op : {"MatMul", "Erf", "ReduceMean", "Div", "Mul", "Sub", "Pow", "Sqrt"})
    EXPECT_EQ(count(f, op), 0) << op;
  std::map<std::string, int> templates;
  for (const auto &n : f.nodes()) {
    const OpDef *def = find_op(n.op);
    if (def->view || def->evaluate) continue;
    ++templates[template_of(f, n)];
  }
  EXPECT_EQ(templates["dense_pack.x86"], 12);
  EXPECT_EQ(templates["batch_matmul.x86"], 4);
  EXPECT_EQ(templates["softmax.x86"], 2);
  EXPECT_EQ(templates["layer_norm.x86"], 5);
  // Left as computes: the embedding Gather and Add (one FusedInjective kernel) and the attention's
  // head transposes.
  EXPECT_EQ(count(f, "FusedInjective"), 1);
  EXPECT_EQ(templates[""], 9);
  // The GELU of both feed-forward layers is in their first linear's epilogue.
  int gelus = 0;
  for (const auto &n : f.nodes())
    gelus += n.op == "FusedDense" && n.attr_string("epilogue", "").find("gelu") != std::string::npos;
  EXPECT_EQ(gelus, 2);
  const deploy::Tensor input = frontend::onnx::read_tensor_file((dir / "input_0.pb").string());
  const deploy::Tensor want = frontend::onnx::read_tensor_file((dir / "output_0.pb").string());
  const deploy::Tensor got = driver::GraphExecutor(f).run(std::vector<deploy::Tensor>{input})[0];
  ASSERT_EQ(got.shape(), want.shape());
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, std::fabs(double(got.data_as<float>()[i]) - want.data_as<float>()[i]));
    scale = std::max(scale, std::fabs(double(want.data_as<float>()[i])));
  }
  EXPECT_LT(worst / scale, 1e-4);
}

// A zero Pad over H and W read only by a Conv becomes the conv's padding; a Pad by another value,
// or one read elsewhere, stays.
TEST(GraphFusion, AZeroPadBeforeAConvIsItsPadding) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 3, 6, 7}});
  ValueId w = g.add_constant("w", random_tensor({4, 3, 3, 3}, 21));
  ValueId pads = g.add_constant("pads", ints({0, 0, 1, 2, 0, 0, 2, 0}));
  ValueId p = add(g, "Pad", {x, pads});
  ValueId c = add(g, "Conv", {p, w}, {{"pads", Attribute::of_ints({1, 0, 0, 1})}});
  // A Pad by 1.5 (not zeros) stays.
  ValueId p2 = add(g, "Pad", {x, pads, g.add_constant("v", scalar(1.5f))});
  ValueId c2 = add(g, "Conv", {p2, w});
  g.add_output(add(g, "Relu", {c}, {}, "a"));
  g.add_output(add(g, "Relu", {c2}, {}, "b"));
  Graph f = passes::inline_injective_producers(g);
  verify(f);
  EXPECT_EQ(count(f, "Pad"), 1) << print(f);
  EXPECT_EQ(count(f, "Conv"), 2);
  bool folded = false;
  for (const auto &n : f.nodes()) {
    if (n.op == "Conv" && n.attr_ints("pads") == std::vector<int64_t>{2, 2, 2, 1}) folded = true;
  }
  EXPECT_TRUE(folded) << print(f);
  EXPECT_LT(max_difference(g, f), 1e-5);
  const Graph o = driver::optimize_graph(g, driver::GraphPipelineOptions{});
  EXPECT_EQ(count(o, "Pad"), 1) << print(o);
  EXPECT_LT(max_difference(g, o), 1e-5);
}

// The kernels a graph runs: nodes that are neither views nor evaluated at compile time, by op.
std::map<std::string, int> kernels_by_op(const Graph &g) {
  std::map<std::string, int> k;
  for (const auto &n : g.nodes()) {
    const OpDef *def = find_op(n.op);
    if (!def->view && !def->evaluate) ++k[n.op];
  }
  return k;
}

int total(const std::map<std::string, int> &m) {
  int t = 0;
  for (const auto &[op, c] : m) t += c;
  return t;
}

// The model through the whole pipeline (fusion and layouts): its kernels by op, and its output
// against the unoptimized graph through the executor (1e-4 relative) and torch's (make_models.py).
std::map<std::string, int> check_model_fusion(const std::string &model) {
  const fs::path dir = fs::path(KILN_MODELS_DIR) / model;
  const Graph g = frontend::onnx::import_model((dir / "model.onnx").string());
  const Graph f = driver::optimize_graph(g, driver::GraphPipelineOptions{});
  const deploy::Tensor input = frontend::onnx::read_tensor_file((dir / "input_0.pb").string());
  const deploy::Tensor want = frontend::onnx::read_tensor_file((dir / "output_0.pb").string());
  const deploy::Tensor base = driver::GraphExecutor(g).run(std::vector<deploy::Tensor>{input})[0];
  const deploy::Tensor got = driver::GraphExecutor(f).run(std::vector<deploy::Tensor>{input})[0];
  EXPECT_EQ(got.shape(), base.shape());
  EXPECT_EQ(got.shape(), want.shape());
  double to_base = 0, to_torch = 0, scale = 0;
  for (int64_t i = 0; i < base.numel() && i < got.numel() && i < want.numel(); ++i) {
    to_base = std::max(to_base, std::fabs(double(got.data_as<float>()[i]) - base.data_as<float>()[i]));
    to_torch = std::max(to_torch, std::fabs(double(got.data_as<float>()[i]) - want.data_as<float>()[i]));
    scale = std::max(scale, std::fabs(double(base.data_as<float>()[i])));
  }
  EXPECT_LE(to_base, 1e-4 * scale) << model << ": the optimized graph differs from the unoptimized one";
  EXPECT_LE(to_torch, 1e-4 * scale) << model << ": the optimized graph differs from torch";
  return kernels_by_op(f);
}

// ResNet-18: 20 convolutions (the 7x7 stem, 16 3x3, 3 1x1 downsamples), each blocked with its
// ReLU and, for the second conv of each of the 8 blocks, the residual add in its epilogue; the max
// pool and the global average pool blocked; the classifier one FusedDense; a transform into the
// blocked layout at the input and one back before the classifier: 20 + 2 + 1 + 2 = 25 kernels.
TEST(GraphFusion, Resnet18Groupings) {
  KILN_REQUIRE_MODEL("resnet18");
  const auto k = check_model_fusion("resnet18");
  EXPECT_EQ(k.at("ConvNCHWc"), 20) << ::testing::PrintToString(k);
  EXPECT_EQ(k.at("PoolNCHWc"), 2);
  EXPECT_EQ(k.at("FusedDense"), 1);
  EXPECT_EQ(k.at(kLayoutTransformOp), 2);
  EXPECT_EQ(total(k), 25) << ::testing::PrintToString(k);
}

// MobileNetV2: 52 convolutions (the stem, 17 depthwise, 16 1x1 expansions, 17 1x1 projections,
// the last 1x1), each blocked with its ReLU6 (Clip) and the 10 residual adds in the projection's
// epilogue, of which the 16 expansions (each with an expanded tensor of 128 KiB or more) are one
// ExpandDepthwiseNCHWc kernel with their depthwise conv; the global average pool blocked; the
// classifier one FusedDense; two transforms: 20 + 16 + 1 + 1 + 2 = 40 kernels.
TEST(GraphFusion, MobilenetV2Groupings) {
  KILN_REQUIRE_MODEL("mobilenet_v2");
  const auto k = check_model_fusion("mobilenet_v2");
  EXPECT_EQ(k.at("ConvNCHWc"), 20) << ::testing::PrintToString(k);
  EXPECT_EQ(k.at("ExpandDepthwiseNCHWc"), 16) << ::testing::PrintToString(k);
  EXPECT_EQ(k.at("PoolNCHWc"), 1);
  EXPECT_EQ(k.at("FusedDense"), 1);
  EXPECT_EQ(k.at(kLayoutTransformOp), 2);
  EXPECT_EQ(total(k), 40) << ::testing::PrintToString(k);
}

// The BERT-style encoder: 12 FusedDense (q, k, v, out, two feed-forward linears per layer, GELU in
// the first's epilogue), 4 FusedMatMul (QK^T with its scaling and PV per layer), 2 Softmax, 5
// LayerNormalization; 9 computes left (the embedding Gather and Add as one FusedInjective, and the
// head transposes); no layout transforms (no convolution): 32 kernels.
TEST(GraphFusion, BertEncoderGroupings) {
  KILN_REQUIRE_MODEL("bert_encoder");
  const auto k = check_model_fusion("bert_encoder");
  EXPECT_EQ(k.at("FusedDense"), 12) << ::testing::PrintToString(k);
  EXPECT_EQ(k.at("FusedMatMul"), 4);
  EXPECT_EQ(k.at("Softmax"), 2);
  EXPECT_EQ(k.at("LayerNormalization"), 5);
  EXPECT_EQ(k.at("FusedInjective"), 1);
  EXPECT_EQ(k.count(kLayoutTransformOp), 0u);
  EXPECT_EQ(total(k), 32) << ::testing::PrintToString(k);
}

}  // namespace
}  // namespace kiln::graph
