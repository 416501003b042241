// Stage::prefetch: where the prefetch lands in the loop nest and which element it names, that the
// LLVM back end emits llvm.prefetch for it (and the assembly a prefetch instruction) while the
// values stay those of the unscheduled computation in every back end, and the schedule errors.
#include <gtest/gtest.h>

#include <sstream>

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/ir/error.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "tests/compiler/schedule/harness.h"

namespace kiln::te {
namespace {

int count_prefetches(const ir::Stmt &body) {
  int n = 0;
  ir::post_order_visit(body, [&](const ir::IRNode *node) {
    n += node->node_type == ir::NodeType::Call &&
         static_cast<const ir::CallNode *>(node)->name == ir::intrinsic::kPrefetch;
  });
  return n;
}

int count(const std::string &text, const std::string &what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

struct RowSum {
  Tensor A, B;
  IterVar k;
};

// B[i] = sum over k of A[i, k], with A [64, 256].
RowSum row_sum() {
  Tensor A = placeholder({Expr(64), Expr(256)}, ir::Float(32), "A");
  IterVar k = reduce_axis(Expr(256), "k");
  Tensor B = compute(
      {Expr(64)}, [&](Var i) { return sum(A(i, k->var), {k}); }, "B");
  return {A, B, k};
}

TEST(Prefetch, AtTheStartOfEachIterationOfTheLoopWithTheIndexInLoopVariables) {
  RowSum r = row_sum();
  auto s = create_schedule({r.B});
  Stage B = s[r.B];
  auto [ko, ki] = B.split(B.reduce_axis(0), 16);
  // The next row's chunk: the loops inside ko (ki) count as at their first iteration.
  B.prefetch(r.A, ko, {min(B.axis(0)->var + 1, 63), B.reduce_axis(0)->var});
  ir::LoweredFunc f = testing::check_against_unscheduled(*s, {r.A, r.B}, {{64, 256}, {64}}, 1e-4);
  EXPECT_EQ(count_prefetches(f.body), 1) << f;
  std::ostringstream os;
  os << f;
  // A is flattened: row i + 1 (clamped), column k.outer * 16 (k.inner at 0).
  EXPECT_NE(os.str().find("prefetch(A[((min((i + 1), 63) * 256) + (k.outer * 16))])"), std::string::npos) << f;
}

TEST(Prefetch, TheLLVMBackEndEmitsLlvmPrefetchAndTheValuesStay) {
  RowSum r = row_sum();
  auto s = create_schedule({r.B});
  Stage B = s[r.B];
  auto [ko, ki] = B.split(B.reduce_axis(0), 16);
  B.prefetch(r.A, ko, {B.axis(0)->var, min(B.reduce_axis(0)->var + 64, 255)});
  ir::LoweredFunc f = lower::lower(*s, {r.A, r.B}, "f");
  codegen::LLVMBuildOptions o;
  o.target = "llvm -mcpu=native";
  EXPECT_EQ(count(codegen::emit_llvm_ir({f}, o, false), "call void @llvm.prefetch"), 1);
  EXPECT_GE(count(codegen::emit_assembly({f}, o), "prefetcht0"), 1);

  auto in = testing::make_args(f, {{64, 256}, {64}}, 3);
  auto ref_s = create_schedule({r.B});
  auto want = testing::run_interp(lower::lower(*ref_s, {r.A, r.B}, "ref"), in);
  std::vector<deploy::Tensor> got = {testing::clone(in[0]), testing::clone(in[1])};
  codegen::LLVMModule m(f, o);
  ASSERT_EQ(m.call_status("f", got), 0) << m.last_error();
  EXPECT_LE(testing::max_diff(want[1], got[1]), 1e-4);

  // Without the primitive: no prefetch.
  RowSum plain = row_sum();
  auto s2 = create_schedule({plain.B});
  s2[plain.B].split(s2[plain.B].reduce_axis(0), 16);
  ir::LoweredFunc g = lower::lower(*s2, {plain.A, plain.B}, "g");
  EXPECT_EQ(count(codegen::emit_llvm_ir({g}, o, false), "llvm.prefetch"), 0);
}

TEST(Prefetch, BadRequestsAreScheduleErrors) {
  RowSum r = row_sum();
  Tensor other = placeholder({Expr(8)}, ir::Float(32), "other");
  auto s = create_schedule({r.B});
  Stage B = s[r.B];
  Var i = B.axis(0)->var;
  EXPECT_THROW(B.prefetch(other, B.axis(0), {i}), ScheduleError);  // not read by the stage
  EXPECT_THROW(B.prefetch(r.A, B.axis(0), {i}), ScheduleError);    // A has two dimensions
  Var stranger("j", ir::Int(32));
  EXPECT_THROW(B.prefetch(r.A, B.axis(0), {i, stranger}), ScheduleError);  // not the stage's variable
  EXPECT_THROW(B.prefetch(r.A, B.axis(0), {i, Expr(1.5f)}), ScheduleError);
  try {
    B.prefetch(other, B.axis(0), {i});
  } catch (const ScheduleError &e) {
    EXPECT_NE(std::string(e.what()).find("prefetch of other, which the stage does not read"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ir::prefetch(Expr(1)), ExprError);  // the intrinsic takes a read of a tensor
}

}  // namespace
}  // namespace kiln::te
