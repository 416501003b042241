// simplify(Stmt): loop bounds, lets, if folding, loop removal.
#include <gtest/gtest.h>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/op.h"
#include "tests/compiler/ir/ir_equal.h"

namespace kiln::arith {
namespace {

using namespace ir;
using ir::testing::ir_equal;

class StmtSimplifyTest : public ::testing::Test {
 protected:
  Stmt store(const Expr &index, const Expr &value) { return StoreNode::make(buf, value, index); }
  Stmt loop(const Var &v, Expr min, Expr extent, Stmt body, ForKind kind = ForKind::Serial) {
    return ForNode::make(v, std::move(min), std::move(extent), kind, std::move(body));
  }
  Var buf{"A", Handle()};
  Var i{"i"}, j{"j"}, n{"n"}, x{"x"}, y{"y"};
};

TEST_F(StmtSimplifyTest, ZeroExtentLoopIsRemoved) {
  EXPECT_TRUE(is_nop(simplify(loop(i, 0, 0, store(i, 1)))));
  EXPECT_TRUE(is_nop(simplify(loop(i, 0, n - n, store(i, 1)))));
  Stmt s = BlockNode::make(loop(i, 0, 0, store(i, 1)), store(0, 2));
  EXPECT_TRUE(ir_equal(simplify(s), store(0, 2)));
}

TEST_F(StmtSimplifyTest, LoopVariableBoundIsUsed) {
  Stmt s = loop(i, 0, 16, loop(j, 0, 4, store(floordiv(i * 4 + j, 4), floormod(i * 4 + j, 4))));
  Stmt expected = loop(i, 0, 16, loop(j, 0, 4, store(i, j)));
  EXPECT_TRUE(ir_equal(simplify(s), expected));
}

TEST_F(StmtSimplifyTest, ProvableIfIsFolded) {
  Stmt s = loop(i, 0, 16, IfThenElseNode::make(i < 16, store(i, 1), store(i, 2)));
  EXPECT_TRUE(ir_equal(simplify(s), loop(i, 0, 16, store(i, 1))));
  s = loop(i, 0, 16, IfThenElseNode::make(i >= 16, store(i, 1), store(i, 2)));
  EXPECT_TRUE(ir_equal(simplify(s), loop(i, 0, 16, store(i, 2))));
  s = loop(i, 0, 16, IfThenElseNode::make(i * 4 < 64, store(i, 1)));
  EXPECT_TRUE(ir_equal(simplify(s), loop(i, 0, 16, store(i, 1))));
  s = IfThenElseNode::make(Expr(1) > 2, store(0, 1));
  EXPECT_TRUE(is_nop(simplify(s)));
}

TEST_F(StmtSimplifyTest, UndecidedIfIsKept) {
  Stmt s = loop(i, 0, 16, IfThenElseNode::make(i < 10, store(i, 1)));
  EXPECT_TRUE(ir_equal(simplify(s), s));
}

TEST_F(StmtSimplifyTest, SymbolicLoopRangeIsUsed) {
  Stmt s = loop(i, 0, n, IfThenElseNode::make(i < n, store(i, 1)));
  EXPECT_TRUE(ir_equal(simplify(s), loop(i, 0, n, store(i, 1))));
  s = loop(i, 0, n, IfThenElseNode::make(i + 1 < n, store(i, 1)));
  EXPECT_TRUE(ir_equal(simplify(s), loop(i, 0, n, IfThenElseNode::make(i < n - 1, store(i, 1)))));
}

TEST_F(StmtSimplifyTest, ConditionIsAssumedInsideTheBranch) {
  Stmt inner = IfThenElseNode::make(x < 20, store(0, 1), store(0, 2));
  Stmt s = IfThenElseNode::make(x < 10, inner, store(0, 3));
  Stmt expected = IfThenElseNode::make(x < 10, store(0, 1), store(0, 3));
  EXPECT_TRUE(ir_equal(simplify(s), expected));
  // In the else branch x >= 10.
  s = IfThenElseNode::make(x < 10, store(0, 3), IfThenElseNode::make(x < 5, store(0, 1), store(0, 2)));
  expected = IfThenElseNode::make(x < 10, store(0, 3), store(0, 2));
  EXPECT_TRUE(ir_equal(simplify(s), expected));
  // The assumption bounds x for division rules too.
  s = IfThenElseNode::make(0 <= x && x < 8, store(floormod(x, 8), 1));
  expected = IfThenElseNode::make(Expr(0) <= x && x < 8, store(x, 1));
  EXPECT_TRUE(ir_equal(simplify(s), expected));
}

TEST_F(StmtSimplifyTest, ExtentOneSerialLoopIsSubstituted) {
  Stmt s = loop(i, x, 1, store(i, i + 1));
  EXPECT_TRUE(ir_equal(simplify(s), store(x, x + 1)));
  s = loop(i, x * y, 1, store(i, 1));
  EXPECT_TRUE(ir_equal(simplify(s), LetStmtNode::make(i, x * y, store(i, 1))));
}

TEST_F(StmtSimplifyTest, ExtentOneVectorizedOrParallelLoopIsKept) {
  Stmt s = loop(i, 0, 1, store(i, 1), ForKind::Vectorized);
  EXPECT_TRUE(ir_equal(simplify(s), loop(i, 0, 1, store(0, 1), ForKind::Vectorized)));
  s = loop(i, 0, 1, store(x, 1), ForKind::Parallel);
  EXPECT_TRUE(ir_equal(simplify(s), s));
}

TEST_F(StmtSimplifyTest, LetStmt) {
  Var v("v");
  Stmt s = LetStmtNode::make(v, Expr(2) + 2, store(v, v * 2));
  EXPECT_TRUE(ir_equal(simplify(s), store(4, 8)));
  s = LetStmtNode::make(v, x * y, store(v, 1));
  EXPECT_TRUE(ir_equal(simplify(s), s));
  s = LetStmtNode::make(v, x * y, store(0, 1));
  EXPECT_TRUE(ir_equal(simplify(s), store(0, 1)));
  // Small index arithmetic is substituted, and its bound decides the condition.
  s = LetStmtNode::make(v, floormod(x, 8), IfThenElseNode::make(v < 8, store(v, 1)));
  EXPECT_TRUE(ir_equal(simplify(s), store(floormod(x, 8), 1)));
  // A value that is not small index arithmetic stays a let; its bound is still used.
  s = LetStmtNode::make(v, floormod(x * y, 8), IfThenElseNode::make(v < 8, store(v, 1)));
  EXPECT_TRUE(ir_equal(simplify(s), LetStmtNode::make(v, floormod(x * y, 8), store(v, 1))));
}

TEST_F(StmtSimplifyTest, ThreadExtentBindsTheThreadVariable) {
  Var tx("threadIdx.x");
  Stmt s = AttrStmtNode::make(tx, attr::kThreadExtent, 32, IfThenElseNode::make(tx < 32, store(tx, 1)));
  EXPECT_TRUE(ir_equal(simplify(s), AttrStmtNode::make(tx, attr::kThreadExtent, 32, store(tx, 1))));
}

TEST_F(StmtSimplifyTest, EmptyBodiesAreRemoved) {
  Stmt s = loop(i, 0, 8, IfThenElseNode::make(i > 100, store(i, 1)));
  EXPECT_TRUE(is_nop(simplify(s)));
}

TEST_F(StmtSimplifyTest, StoreAndAllocate) {
  Stmt s = StoreNode::make(buf, BroadcastNode::make(Expr(1), 4), RampNode::make(x + 0, 1, 4), const_true(4));
  EXPECT_TRUE(ir_equal(simplify(s), StoreNode::make(buf, BroadcastNode::make(Expr(1), 4), RampNode::make(x, 1, 4))));
  Var b("B", Handle());
  s = AllocateNode::make(b, Float(32), {Expr(4) * 8}, "local", store(0, 1));
  EXPECT_TRUE(ir_equal(simplify(s), AllocateNode::make(b, Float(32), {Expr(32)}, "local", store(0, 1))));
}

TEST_F(StmtSimplifyTest, HandleLetIsNotDroppedWhileUsedAsBuffer) {
  Var alias("alias", Handle());
  Stmt s = LetStmtNode::make(alias, buf, StoreNode::make(alias, 1, 0));
  Stmt r = simplify(s);
  ASSERT_TRUE(r.as<LetStmtNode>());
  EXPECT_TRUE(r.as<LetStmtNode>()->var.same_as(alias));
}

TEST_F(StmtSimplifyTest, SimplifyKeepsUnchangedStatementsShared) {
  Stmt s = loop(i, 0, 16, store(i, x));
  EXPECT_TRUE(simplify(s).same_as(s));
}

}  // namespace
}  // namespace kiln::arith
