// The expression epilogue (compiler/ops/epilogue.h, {"op":"expr"}): its canonical form and errors,
// its formula, and a FusedConv / FusedDense / FusedMatMul whose epilogue is an elementwise subgraph
// that is not a chain (a diamond, per-channel and broadcast inputs), checked through the executor
// against the unfused graph.
#include <gtest/gtest.h>

#include <string>

#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/graph/passes/fuse_ops.h"
#include "compiler/graph/op_def.h"
#include "compiler/ops/epilogue.h"
#include "compiler/ops/registry.h"
#include "contracts/json.h"
#include "tests/compiler/graph/graph_test_util.h"

namespace kiln::graph {
namespace {

using contracts::Json;
using namespace test;

Json fn(const std::string &f, std::vector<Json> args) {
  Json a = Json::array();
  for (auto &x : args) a.push_back(x);
  return Json::object({{"op", f}, {"args", a}});
}
Json input(int k) { return Json::object({{"input", k}}); }

// The JSON text of a broadcast kind of these dims.
std::string concat_ints(const std::vector<int64_t> &dims) { return ops::epilogue::broadcast_input(dims).dump(); }

// The message of the OpError that canonical_epilogue throws for `list`, or "" when it accepts it.
std::string error_of(const Json &list, ir::DataType t = ir::Float(32)) {
  try {
    ops::canonical_epilogue(list, t, "conv");
  } catch (const ops::OpError &e) {
    return e.what();
  }
  return "";
}

TEST(EpilogueExpr, CanonicalFormAndFormula) {
  // relu(x) + in0 * 2 with an unsorted, integer-valued source.
  const Json e = Json::parse(R"([{"inputs":["full"],"op":"expr","expr":{"op":"add","args":[{"op":"relu","args":["x"]},)"
                             R"({"op":"mul","args":[{"input":0},2]}]}}])");
  const Json c = ops::canonical_epilogue(e, ir::Float(32), "conv");
  EXPECT_EQ(c.dump(), ops::canonical_epilogue(c, ir::Float(32), "conv").dump()) << "canonical form is a fixed point";
  EXPECT_EQ(c[0]["op"].as_string(), "expr");
  EXPECT_EQ(ops::expr_string(c[0]["expr"]), "add(relu(x), mul(in0, 2.0))") << c.dump();
  EXPECT_EQ(ops::epilogue_dtype(c, ir::Float(32)), ir::Float(32));
  // Three functions, so three operations per element; a named descriptor counts one.
  EXPECT_EQ(ops::epilogue_flop(c, 10), 30);
  EXPECT_EQ(ops::epilogue_flop(Json::array({ops::epilogue::relu()}), 10), 10);
  // The named descriptors still validate as before.
  EXPECT_EQ(error_of(Json::array({ops::epilogue::bias_add(), ops::epilogue::relu()})), "");
}

TEST(EpilogueExpr, BadExpressionsAreClearErrors) {
  auto expr = [](const Json &e, std::vector<std::string> in = {}) { return Json::array({ops::epilogue::expr(e, in)}); };
  EXPECT_NE(error_of(expr(Json("y"))).find("unknown name \"y\""), std::string::npos);
  EXPECT_NE(error_of(expr(fn("softmax", {Json("x")}))).find("unknown expression function 'softmax' (neg, abs"),
            std::string::npos);
  EXPECT_NE(error_of(expr(fn("add", {Json("x")}))).find("add takes 2 arguments, got 1"), std::string::npos);
  EXPECT_NE(error_of(expr(input(1), {"full"})).find("is not one of the descriptor's 1 inputs"), std::string::npos);
  EXPECT_NE(error_of(expr(input(0), {"rows"})).find("an input kind is \"full\", \"channel\" or {\"broadcast\""),
            std::string::npos);
  EXPECT_NE(error_of(expr(fn("greater", {Json("x"), Json(0.0)}))).find("may only be where's first argument"),
            std::string::npos);
  EXPECT_NE(error_of(expr(fn("where", {Json("x"), Json("x"), Json(0.0)}))).find("must be a comparison"),
            std::string::npos);
  EXPECT_NE(error_of(expr(Json::array())).find("an expression is"), std::string::npos);
  EXPECT_NE(error_of(Json::array({Json::object({{"op", "expr"}})})).find("expr needs an \"expr\""), std::string::npos);
  EXPECT_NE(error_of(expr(Json("x")), ir::Int(32)).find("expr needs a float input"), std::string::npos);
  // A deep tree is refused, not recursed into without bound.
  Json deep("x");
  for (int i = 0; i < 100; ++i) deep = fn("neg", {deep});
  EXPECT_NE(error_of(expr(deep)).find("more than 64 nodes"), std::string::npos);
  // The error names where it is.
  EXPECT_NE(error_of(expr(Json("y"))).find("conv, epilogue op 0"), std::string::npos);
}

// conv -> relu -> {add(r, y), mul(r, r)} -> add: the epilogue chain cannot hold it, an expression
// can. One FusedConv node (one kernel, the conv template) gives the unfused graph's values.
TEST(EpilogueExpr, ADiamondAfterAConvIsOneKernel) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 10, 10}});
  ValueId y = g.add_input("y", TensorType{ir::Float(32), {1, 16, 10, 10}});
  ValueId w = g.add_constant("w", random_tensor({16, 8, 3, 3}, 3));
  ValueId b = g.add_constant("b", random_tensor({16}, 4));
  ValueId s = g.add_constant("s", random_tensor({1, 16, 1, 1}, 5));
  std::map<std::string, Attribute> attrs = {{"pads", Attribute::of_ints({1, 1, 1, 1})}};
  ValueId c = add(g, "Conv", {x, w, b}, attrs);
  ValueId r = add(g, "Relu", {c});
  ValueId a = add(g, "Add", {r, y});
  ValueId m = add(g, "Mul", {r, r});
  ValueId sum = add(g, "Add", {a, m});
  g.add_output(add(g, "Mul", {sum, s}, {}, "out"));

  // The same computation as one FusedConv: (relu(x) + in0 + relu(x) * relu(x)) * in1[channel].
  Graph f;
  ValueId fx = f.add_input("x", g.value(x).type);
  ValueId fy = f.add_input("y", g.value(y).type);
  const Json rx = fn("relu", {Json("x")});
  const Json e = fn("mul", {fn("add", {fn("add", {rx, input(0)}), fn("mul", {rx, rx})}), input(1)});
  std::map<std::string, Attribute> fattrs = attrs;
  fattrs["epilogue"] = Attribute::of_string(Json::array({ops::epilogue::expr(e, {"full", "channel"})}).dump());
  ValueId fs = f.add_constant("s", g.value(s).constant.view(0, {16}));
  ValueId out = add(f, "FusedConv",
                    {fx, f.add_constant("w", g.value(w).constant), f.add_constant("b", g.value(b).constant), fy, fs},
                    fattrs, "out");
  f.add_output(out);
  verify(f);
  ASSERT_EQ(f.nodes().size(), 1u);
  EXPECT_EQ(find_op("FusedConv")->kernel(OpContext(f, f.nodes()[0])).template_name, "conv2d_nchw.x86");
  EXPECT_LT(max_difference(g, f), 1e-5);

  // An extra input of the wrong shape is refused at inference, naming the node.
  Graph bad;
  ValueId bx = bad.add_input("x", g.value(x).type);
  ValueId by = bad.add_input("y", TensorType{ir::Float(32), {1, 16, 5, 5}});
  EXPECT_THROW(add(bad, "FusedConv",
                   {bx, bad.add_constant("w", g.value(w).constant), kNoValue, by,
                    bad.add_constant("s", g.value(s).constant.view(0, {16}))},
                   fattrs),
               GraphError);
}

// x W^T + bias, then a SiLU written as an expression with a residual: one FusedDense kernel.
TEST(EpilogueExpr, AnExpressionAfterADenseIsOneKernel) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {6, 12}});
  ValueId res = g.add_input("res", TensorType{ir::Float(32), {6, 10}});
  ValueId w = g.add_constant("w", random_tensor({12, 10}, 8));
  ValueId v = add(g, "MatMul", {x, w});
  ValueId sig = add(g, "Sigmoid", {v});
  g.add_output(add(g, "Add", {add(g, "Mul", {v, sig}), res}, {}, "out"));

  Graph f;
  ValueId fx = f.add_input("x", g.value(x).type);
  ValueId fr = f.add_input("res", g.value(res).type);
  // FusedDense takes the weight as [N, K].
  deploy::Tensor wt = deploy::Tensor::empty({10, 12}, deploy::DType::of<float>());
  for (int k = 0; k < 12; ++k) {
    for (int n = 0; n < 10; ++n) wt.data_as<float>()[n * 12 + k] = g.value(w).constant.data_as<float>()[k * 10 + n];
  }
  const Json e = fn("add", {fn("mul", {Json("x"), fn("sigmoid", {Json("x")})}), input(0)});
  std::map<std::string, Attribute> attrs = {
      {"epilogue", Attribute::of_string(Json::array({ops::epilogue::expr(e, {"full"})}).dump())}};
  f.add_output(add(f, "FusedDense", {fx, f.add_constant("w", wt), kNoValue, fr}, attrs, "out"));
  verify(f);
  ASSERT_EQ(f.nodes().size(), 1u);
  EXPECT_EQ(find_op("FusedDense")->kernel(OpContext(f, f.nodes()[0])).template_name, "dense_pack.x86");
  EXPECT_LT(max_difference(g, f), 1e-5);
}

TEST(EpilogueExpr, BroadcastInputKinds) {
  auto with = [](const Json &kind) {
    Json in = Json::array();
    in.push_back(kind);
    return Json::array({Json::object({{"op", "expr"}, {"expr", input(0)}, {"inputs", in}})});
  };
  const Json c = ops::canonical_epilogue(with(ops::epilogue::broadcast_input({1, 1, 16})), ir::Float(32), "bmm");
  EXPECT_EQ(c[0]["inputs"][0].dump(), R"({"broadcast":[1,1,16]})");
  for (const char *bad : {R"({"broadcast":[]})", R"({"broadcast":[1,0]})", R"({"broadcast":"x"})",
                          R"({"broadcast":[1.5]})", R"({"broadcast":[1],"other":1})", R"({"shape":[1]})"}) {
    EXPECT_NE(error_of(with(Json::parse(bad))).find("an input kind is"), std::string::npos) << bad;
  }
}

TEST(EpilogueExpr, BroadcastShapeInTheAnchorsTerms) {
  using passes::broadcast_shape;
  using V = std::vector<int64_t>;
  // An attention mask over scores [1, 4, 16, 16] computed as [4, 16, 16].
  EXPECT_EQ(broadcast_shape({1, 1, 1, 16}, {1, 4, 16, 16}, {4, 16, 16}), (V{1, 1, 16}));
  EXPECT_EQ(broadcast_shape({16}, {1, 4, 16, 16}, {4, 16, 16}), (V{1, 1, 16}));
  EXPECT_EQ(broadcast_shape({1, 4, 1, 1}, {1, 4, 16, 16}, {4, 16, 16}), (V{4, 1, 1}));
  // A spatial map over a conv's output, the anchor's shape the output's.
  EXPECT_EQ(broadcast_shape({1, 1, 10, 10}, {2, 16, 10, 10}, {2, 16, 10, 10}), (V{1, 1, 10, 10}));
  EXPECT_EQ(broadcast_shape({2, 16, 1, 1}, {2, 16, 10, 10}, {2, 16, 10, 10}), (V{2, 16, 1, 1}));
  // Rows of a dense layer [B, S, N] as [B*S, N]: a per-position table is read only when B is 1.
  EXPECT_EQ(broadcast_shape({6, 10}, {1, 6, 10}, {6, 10}), (V{6, 10}));
  EXPECT_EQ(broadcast_shape({1, 6, 10}, {2, 6, 10}, {12, 10}), std::nullopt);
  EXPECT_EQ(broadcast_shape({2, 1, 10}, {2, 6, 10}, {12, 10}), std::nullopt);
  EXPECT_EQ(broadcast_shape({1, 1, 10}, {2, 6, 10}, {12, 10}), (V{1, 10}));
  // What does not broadcast at all.
  EXPECT_EQ(broadcast_shape({3, 10}, {2, 6, 10}, {12, 10}), std::nullopt);
  EXPECT_EQ(broadcast_shape({1, 2, 6, 10}, {2, 6, 10}, {12, 10}), std::nullopt);
}

// The scores of self-attention, q k^T / sqrt(d) + mask: the mask [1, 1, 1, S] (an input, not a
// constant) is a broadcast input of the batched matmul's epilogue, one kernel before the softmax.
TEST(EpilogueExpr, AnAttentionMaskAfterABatchedMatMulIsOneKernel) {
  Graph g;
  ValueId q = g.add_input("q", TensorType{ir::Float(32), {1, 4, 16, 8}});
  ValueId kt = g.add_input("kt", TensorType{ir::Float(32), {1, 4, 8, 16}});
  ValueId mask = g.add_input("mask", TensorType{ir::Float(32), {1, 1, 1, 16}});
  ValueId s = add(g, "Div", {add(g, "MatMul", {q, kt}), g.add_constant("d", scalar(2.8284271f))});
  g.add_output(add(g, "Softmax", {add(g, "Add", {s, mask})}, {{"axis", Attribute::of_int(-1)}}, "out"));
  const Graph f = driver::optimize_graph(g);
  ASSERT_EQ(count(f, "FusedMatMul"), 1) << print(f);
  EXPECT_EQ(count(f, "Add"), 0) << print(f);
  for (const Node &n : f.nodes()) {
    if (n.op == "FusedMatMul") {
      EXPECT_NE(n.attr_string("epilogue", "").find(R"({"broadcast":[1,1,16]})"), std::string::npos) << n.describe();
    }
  }
  EXPECT_LT(max_difference(g, f), 1e-5);
}

// conv -> relu, times a spatial attention map [1, 1, H, W], plus a per-channel tensor [1, C, 1, 1]
// that are computed (not constants), times a per-channel constant: one kernel, blocked by the layout
// pass (the map as a view of its data, the computed per-channel tensor in the output's layout, the
// constant as [C]), or NCHW without it.
TEST(EpilogueExpr, SpatialAndChannelTensorsAfterAConvAreOneBlockedKernel) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 8, 10, 10}});
  ValueId att = g.add_input("att", TensorType{ir::Float(32), {1, 1, 10, 10}});
  ValueId se = g.add_input("se", TensorType{ir::Float(32), {1, 32, 1, 1}});
  ValueId c = add(
      g, "Conv", {x, g.add_constant("w", random_tensor({32, 8, 3, 3}, 3)), g.add_constant("b", random_tensor({32}, 4))},
      {{"pads", Attribute::of_ints({1, 1, 1, 1})}});
  ValueId m = add(g, "Mul", {add(g, "Relu", {c}), add(g, "Sigmoid", {att})});
  ValueId scale = g.add_constant("scale", random_tensor({1, 32, 1, 1}, 6));
  g.add_output(add(g, "Mul", {add(g, "Add", {m, add(g, "Tanh", {se})}), scale}, {}, "out"));

  driver::GraphPipelineOptions nchw;
  nchw.alter_layout = false;
  const Graph f = driver::optimize_graph(g, nchw);
  ASSERT_EQ(count(f, "FusedConv"), 1) << print(f);
  EXPECT_EQ(count(f, "Mul") + count(f, "Add"), 0) << print(f);
  EXPECT_LT(max_difference(g, f), 1e-5);

  const Graph b = driver::optimize_graph(g);
  ASSERT_EQ(count(b, "ConvNCHWc"), 1) << print(b);
  EXPECT_EQ(count(b, "FusedConv") + count(b, "Mul") + count(b, "Add"), 0) << print(b);
  for (const Node &n : b.nodes()) {
    if (n.op != "ConvNCHWc") continue;
    const int64_t oc = n.attr_int("oc_bn", 0);
    const std::string e = n.attr_string("epilogue", "");
    EXPECT_NE(e.find(R"({"broadcast":[1,1,10,10,1]})"), std::string::npos) << e;
    EXPECT_NE(e.find(concat_ints({1, 32 / oc, 1, 1, oc})), std::string::npos) << e;
    EXPECT_NE(e.find(R"("channel")"), std::string::npos) << e;
  }
  EXPECT_LT(max_difference(g, b), 1e-5);
}

// A per-position table [1, S, N] added to a dense layer over a batch of 2 ([2, S, N] computed as
// [2*S, N]) cannot be read at the anchor's index: the Add stays a node of its own, with the same
// values.
TEST(EpilogueExpr, ABroadcastTheAnchorCannotIndexStaysOutside) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {2, 6, 12}});
  ValueId pos = g.add_input("pos", TensorType{ir::Float(32), {1, 6, 10}});
  ValueId v = add(g, "MatMul", {x, g.add_constant("w", random_tensor({12, 10}, 8))});
  g.add_output(add(g, "Add", {add(g, "Relu", {v}), pos}, {}, "out"));
  const Graph f = driver::optimize_graph(g);
  EXPECT_EQ(count(f, "FusedDense"), 1) << print(f);
  EXPECT_EQ(count(f, "Add"), 1) << print(f);
  EXPECT_LT(max_difference(g, f), 1e-5);
}

}  // namespace
}  // namespace kiln::graph
