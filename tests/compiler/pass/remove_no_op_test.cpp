#include <gtest/gtest.h>

#include "compiler/ir/ir_printer.h"
#include "compiler/pass/passes.h"
#include "tests/compiler/ir/ir_equal.h"
#include "tests/compiler/pass/ir_builders.h"

namespace kiln::ir::testing {
namespace {

using pass::remove_no_op;

TEST(RemoveNoOp, LoopWithExtentZeroOrEmptyBodyIsRemoved) {
  Var b = buffer_var("B"), i("i"), j("j"), n("n");
  Stmt keep = store(b, 1.0f, 0);
  Stmt s = block({loop(i, 0, 0, store(b, 0.0f, i)), loop(j, 0, n, make_nop()), keep});
  EXPECT_TRUE(remove_no_op(s).same_as(keep));
}

TEST(RemoveNoOp, LoopWhoseBodyBecomesEmptyIsRemoved) {
  Var i("i"), x("x");
  Stmt s = loop(i, 0, 10, LetStmtNode::make(x, i * 2, EvaluateNode::make(0)));
  EXPECT_TRUE(is_nop(remove_no_op(s)));
}

TEST(RemoveNoOp, ConstantConditionKeepsTheTakenBranch) {
  Var b = buffer_var("B");
  Stmt t = store(b, 1.0f, 0), e = store(b, 2.0f, 0);
  EXPECT_TRUE(remove_no_op(IfThenElseNode::make(const_true(), t, e)).same_as(t));
  EXPECT_TRUE(remove_no_op(IfThenElseNode::make(const_false(), t, e)).same_as(e));
  EXPECT_TRUE(is_nop(remove_no_op(IfThenElseNode::make(const_false(), t))));
}

TEST(RemoveNoOp, EmptyElseIsDroppedAndEmptyIfRemoved) {
  Var b = buffer_var("B"), n("n");
  Stmt t = store(b, 1.0f, 0);
  Stmt out = remove_no_op(IfThenElseNode::make(n > 0, t, EvaluateNode::make(0)));
  EXPECT_EQ(to_string(out), "if ((n > 0)) {\n  B[0] = 1.0f\n}\n");
  EXPECT_FALSE(out.as<IfThenElseNode>()->else_case.defined());
  EXPECT_TRUE(is_nop(remove_no_op(IfThenElseNode::make(n > 0, make_nop(), make_nop()))));
}

TEST(RemoveNoOp, UnusedLetIsRemovedAndUsedLetKept) {
  Var b = buffer_var("B"), x("x"), y("y");
  Stmt body = store(b, 1.0f, y);
  Stmt used = LetStmtNode::make(y, 3, body);
  EXPECT_TRUE(remove_no_op(used).same_as(used));
  EXPECT_TRUE(remove_no_op(LetStmtNode::make(x, 5, used)).same_as(used));
}

TEST(RemoveNoOp, EvaluateOfConstantsAndPureValuesIsRemoved) {
  Var b = buffer_var("B"), n("n");
  Stmt keep = store(b, 1.0f, 0);
  Stmt out = remove_no_op(block({EvaluateNode::make(1.5f), keep, EvaluateNode::make(n + 1)}));
  EXPECT_TRUE(out.same_as(keep));
}

TEST(RemoveNoOp, EvaluateWithSideEffectsIsKept) {
  Stmt call = EvaluateNode::make(CallNode::make(Int(32), "trace", {}, CallNode::Kind::Extern));
  EXPECT_TRUE(remove_no_op(call).same_as(call));
}

TEST(RemoveNoOp, AllocationNeverReadIsDroppedWithItsStores) {
  Var a = buffer_var("A"), b = buffer_var("B"), t = buffer_var("T"), i("i");
  Stmt keep = loop(i, 0, 4, store(b, load(a, i), i));
  Stmt s = AllocateNode::make(t, Float(32), {4}, "local", block({loop(i, 0, 4, store(t, load(a, i), i)), keep}));
  EXPECT_TRUE(remove_no_op(s).same_as(keep));
}

TEST(RemoveNoOp, AllocationThatIsReadIsKept) {
  Var a = buffer_var("A"), b = buffer_var("B"), t = buffer_var("T"), i("i");
  Stmt s = AllocateNode::make(t, Float(32), {4}, "local",
                              block({loop(i, 0, 4, store(t, load(a, i), i)), loop(i, 0, 4, store(b, load(t, i), i))}));
  EXPECT_TRUE(remove_no_op(s).same_as(s));
}

TEST(RemoveNoOp, StoresToParametersAreNeverRemoved) {
  Var b = buffer_var("B"), i("i");
  Stmt s = loop(i, 0, 4, store(b, 0.0f, i));
  EXPECT_TRUE(remove_no_op(s).same_as(s));
}

TEST(RemoveNoOp, AttrAroundNothingIsRemoved) {
  Var b = buffer_var("B"), i("i");
  Stmt keep = store(b, 0.0f, 0);
  Stmt s = block({AttrStmtNode::make(Expr(), "pragma_x", 1, loop(i, 0, 0, keep)), keep});
  EXPECT_TRUE(remove_no_op(s).same_as(keep));
}

TEST(RemoveNoOp, UntouchedIrIsReturnedAsIs) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n"), x("x", Float(32));
  Stmt s =
      loop(i, 0, n, IfThenElseNode::make(i < 3, LetStmtNode::make(x, load(a, i), store(b, x, i)), store(b, 0.0f, i)));
  EXPECT_TRUE(remove_no_op(s).same_as(s));
}

}  // namespace
}  // namespace kiln::ir::testing
