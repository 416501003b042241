// The generated code of the memory-bound templates (elementwise, broadcast, reduction, softmax,
// layer norm, pooling, the generic injective schedule) at their default configs: where an access
// is contiguous along the vectorized loop it is a vector load or store, never a gather or scatter.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/driver/graph_executor.h"
#include "compiler/driver/node_kernel.h"
#include "compiler/driver/target.h"
#include "compiler/graph/op_def.h"
#include "compiler/ops/epilogue.h"
#include "compiler/ops/generic_schedule.h"
#include "compiler/ops/registry.h"
#include "tests/compiler/ops/op_test_util.h"

namespace kiln {
namespace {

using contracts::Json;
using testing::tensor;

const char *kTargetText = "llvm -mcpu=skylake-avx512";

struct Case {
  const char *name;
  const char *tmpl;
  Json args;
  // Whether the default schedule vectorizes the loads (global NCHW pooling reduces each plane
  // with scalar loads).
  bool vector_loads = true;
};

Json pool(const std::vector<int64_t> &shape, const char *type, int64_t k, int64_t s, int64_t p) {
  return Json::object({{"data", tensor(shape)},
                       {"pool_type", type},
                       {"kernel", Json::array_of(std::vector<int64_t>{k, k})},
                       {"strides", Json::array_of(std::vector<int64_t>{s, s})},
                       {"padding", Json::array_of(std::vector<int64_t>{p, p, p, p})}});
}

std::vector<Case> cases() {
  using ops::epilogue::relu;
  return {
      {"relu", "elemwise.x86", Json::object({{"data", tensor({1, 64, 56, 56})}, {"epilogue", Json::array({relu()})}})},
      {"relu_tail", "elemwise.x86",
       Json::object({{"data", tensor({3, 5, 7, 11})}, {"epilogue", Json::array({relu()})}})},
      {"bias_sigmoid", "elemwise.x86",
       Json::object({{"data", tensor({1, 16, 28, 28})},
                     {"epilogue", Json::array({ops::epilogue::bias_add(), ops::epilogue::sigmoid()})}})},
      {"residual", "elemwise.x86",
       Json::object({{"data", tensor({2, 8, 9, 13})}, {"epilogue", Json::array({ops::epilogue::add(), relu()})}})},
      {"broadcast_row", "broadcast.x86",
       Json::object({{"lhs", tensor({64, 768})}, {"rhs", tensor({768})}, {"op", "add"}})},
      {"broadcast_channel", "broadcast.x86",
       Json::object({{"lhs", tensor({1, 64, 56, 56})}, {"rhs", tensor({1, 64, 1, 1})}, {"op", "multiply"}})},
      {"reduce_rows", "reduce.x86", Json::object({{"data", tensor({64, 1000})}, {"axes", 1}})},
      {"reduce_cols", "reduce.x86", Json::object({{"data", tensor({100, 256})}, {"axes", 0}})},
      {"reduce_hw", "reduce.x86",
       Json::object({{"data", tensor({1, 32, 14, 14})}, {"axes", Json::array({2, 3})}, {"op", "mean"}})},
      {"softmax_rows", "softmax.x86", Json::object({{"data", tensor({1, 12, 128, 128})}})},
      {"softmax_1000", "softmax.x86", Json::object({{"data", tensor({1, 1000})}})},
      {"layer_norm", "layer_norm.x86", Json::object({{"data", tensor({1, 128, 768})}})},
      {"max_pool", "pool2d.x86", pool({1, 64, 112, 112}, "max", 3, 2, 1)},
      {"avg_pool", "pool2d.x86", pool({1, 64, 56, 56}, "avg", 2, 2, 0)},
      {"global_avg_pool", "global_pool2d.x86", Json::object({{"data", tensor({1, 1280, 7, 7})}, {"pool_type", "avg"}}),
       false},
  };
}

std::string llvm_ir(const ir::LoweredFunc &f) {
  codegen::LLVMBuildOptions o;
  o.target = kTargetText;
  return codegen::emit_llvm_ir({f}, o);
}

bool has_gather(const std::string &ir_text) {
  return ir_text.find("masked.gather") != std::string::npos || ir_text.find("masked.scatter") != std::string::npos;
}

TEST(VectorAccess, TemplatesUseContiguousVectorAccesses) {
  const ops::Target target = driver::resolve_target(kTargetText);
  for (const Case &c : cases()) {
    SCOPED_TRACE(c.name);
    ops::Task task(c.tmpl, c.args, target);
    ir::LoweredFunc f = task.lower(task.default_config(), "op");
    const std::string text = llvm_ir(f);
    std::ostringstream lowered;
    lowered << f;
    EXPECT_FALSE(has_gather(text)) << lowered.str();
    if (!c.vector_loads) continue;
    int widest = 0;
    const std::regex load("load <([0-9]+) x float>|call <([0-9]+) x float> @llvm\\.masked\\.load");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), load); it != std::sregex_iterator(); ++it) {
      widest = std::max(widest, std::stoi((*it)[(*it)[1].matched ? 1 : 2].str()));
    }
    EXPECT_GE(widest, 8) << "no vector load of at least 8 lanes\n" << lowered.str();
  }
}

TEST(VectorAccess, GenericInjectiveScheduleUsesContiguousVectorAccesses) {
  const ops::Target target = driver::resolve_target(kTargetText);
  for (const std::vector<int64_t> &shape : std::vector<std::vector<int64_t>>{{1, 64, 56, 56}, {3, 5, 7, 11}, {1000}}) {
    std::vector<ir::Expr> dims;
    for (int64_t d : shape) dims.push_back(ir::Expr(static_cast<int>(d)));
    te::Tensor x = te::placeholder(dims, ir::Float(32), "x");
    te::Tensor y =
        te::compute(dims, te::FCompute([&](const std::vector<ir::Var> &i) {
                      return ir::max(x(std::vector<ir::Expr>(i.begin(), i.end())), ir::make_zero(ir::Float(32)));
                    }),
                    "y");
    te::Tensor z =
        te::compute(dims, te::FCompute([&](const std::vector<ir::Var> &i) {
                      return y(std::vector<ir::Expr>(i.begin(), i.end())) * ir::make_const(ir::Float(32), 2.0);
                    }),
                    "z");
    auto s = te::create_schedule({z});
    ops::schedule_injective(*s, z, target);
    ir::LoweredFunc f = lower::lower(*s, {x, z}, "op");
    std::ostringstream lowered;
    lowered << f;
    EXPECT_FALSE(has_gather(llvm_ir(f))) << lowered.str();
  }
}

// A graph node without a template gets the executor's generic schedule: a channel shuffle's
// Transpose ([1, 2, 58, 14, 14] to [1, 58, 2, 14, 14]) keeps its inner H x W
// as it is, so each row of 196 is copied with contiguous vector loads and stores (one fused
// loop over every axis would gather each element); values against a reference.
TEST(VectorAccess, AChannelShuffleTransposeCopiesContiguousRows) {
  using graph::Attribute;
  graph::Graph g;
  const graph::ValueId x = g.add_input("x", graph::TensorType{ir::Float(32), {1, 2, 58, 14, 14}});
  graph::Node t;
  t.op = "Transpose";
  t.name = "shuffle";
  t.inputs = {x};
  t.attrs["perm"] = Attribute::of_ints({0, 2, 1, 3, 4});
  t.outputs = {graph::kNoValue};
  const graph::ValueId y = g.add_node(t, {"y"}, graph::infer_types(g, t))[0];
  g.add_output(y);
  driver::ExecutorOptions o;
  o.target = kTargetText;
  const graph::Node &n = g.nodes().back();
  const driver::NodeKernel k = driver::prepare_node_kernel(g, n, *graph::find_op(n.op), o);
  ASSERT_FALSE(k.from_template());
  const ir::LoweredFunc f = driver::lower_node_kernel(g, n, k, "shuffle");
  std::ostringstream lowered;
  lowered << f;
  const std::string text = llvm_ir(f);
  EXPECT_FALSE(has_gather(text)) << lowered.str();
  EXPECT_NE(text.find("load <16 x float>"), std::string::npos) << lowered.str();

  deploy::Tensor in = deploy::Tensor::empty({1, 2, 58, 14, 14}, deploy::DType::of<float>());
  for (int64_t i = 0; i < in.numel(); ++i) in.data_as<float>()[i] = static_cast<float>(i);
  driver::GraphExecutor ex(g);  // on this machine's own target
  const deploy::Tensor out = ex.run(std::vector<deploy::Tensor>{in})[0];
  for (int64_t c = 0; c < 58; ++c)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t p = 0; p < 196; ++p)
        ASSERT_EQ(out.data_as<float>()[(c * 2 + j) * 196 + p], in.data_as<float>()[(j * 58 + c) * 196 + p])
            << c << "," << j << "," << p;
}

}  // namespace
}  // namespace kiln
