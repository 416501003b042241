#include <gtest/gtest.h>

#include "compiler/ir/ir_printer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/pass/passes.h"
#include "tests/compiler/ir/ir_equal.h"
#include "tests/compiler/pass/ir_builders.h"
#include "tests/compiler/pass/stmt_runner.h"

namespace kiln::ir::testing {
namespace {

using pass::unroll_loops;

int count(const Stmt &s, NodeType t) {
  int n = 0;
  post_order_visit(s, [&](const IRNode *node) { n += node->node_type == t; });
  return n;
}

TEST(UnrollLoops, ConstantExtentBecomesCopiesWithTheIndexSubstituted) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i");
  Stmt s = loop(i, 0, 3, store(b, load(a, i) * 2.0f, i), ForKind::Unrolled);
  Stmt expected =
      block({store(b, load(a, 0) * 2.0f, 0), store(b, load(a, 1) * 2.0f, 1), store(b, load(a, 2) * 2.0f, 2)});
  EXPECT_TRUE(ir_equal(unroll_loops(s), expected));
}

TEST(UnrollLoops, GoldenText) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i");
  Stmt s = loop(i, 2, 2, store(b, load(a, i) + 1.0f, i), ForKind::Unrolled);
  EXPECT_EQ(to_string(unroll_loops(s)), "B[2] = (A[2] + 1.0f)\nB[3] = (A[3] + 1.0f)\n");
}

TEST(UnrollLoops, SymbolicMinIsOffsetPerCopy) {
  Var b = buffer_var("B"), i("i"), m("m");
  Stmt s = loop(i, m, 2, store(b, 0.0f, i), ForKind::Unrolled);
  EXPECT_TRUE(ir_equal(unroll_loops(s), block({store(b, 0.0f, m), store(b, 0.0f, m + 1)})));
}

TEST(UnrollLoops, NonConstantExtentBecomesSerial) {
  Var b = buffer_var("B"), i("i"), n("n");
  Stmt body = store(b, 0.0f, i);
  Stmt out = unroll_loops(loop(i, 0, n, body, ForKind::Unrolled));
  const auto *f = out.as<ForNode>();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->kind, ForKind::Serial);
  EXPECT_TRUE(f->loop_var.same_as(i));
  EXPECT_TRUE(f->body.same_as(body));
}

TEST(UnrollLoops, ExtentZeroLeavesNothing) {
  Var b = buffer_var("B"), i("i");
  EXPECT_TRUE(is_nop(unroll_loops(loop(i, 0, 0, store(b, 0.0f, i), ForKind::Unrolled))));
}

TEST(UnrollLoops, UntouchedIrIsReturnedAsIs) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), j("j");
  Stmt s = loop(i, 0, 4, loop(j, 0, 4, store(b, load(a, i * 4 + j), i * 4 + j), ForKind::Vectorized));
  EXPECT_TRUE(unroll_loops(s).same_as(s));
}

TEST(UnrollLoops, AutoUnrollWithinMaxStepUnrollsTheWholeNestAndDropsThePragma) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), j("j");
  Stmt nest = loop(i, 0, 4, loop(j, 0, 4, store(b, load(a, i * 4 + j), i * 4 + j)));
  Stmt s = AttrStmtNode::make(Expr(), attr::kAutoUnrollMaxStep, 16, nest);
  Stmt out = unroll_loops(s);
  EXPECT_EQ(count(out, NodeType::For), 0);
  EXPECT_EQ(count(out, NodeType::AttrStmt), 0);
  EXPECT_EQ(count(out, NodeType::Store), 16);
}

TEST(UnrollLoops, AutoUnrollBeyondMaxStepUnrollsOnlyInnerLoops) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), j("j");
  Stmt nest = loop(i, 0, 4, loop(j, 0, 4, store(b, load(a, i * 4 + j), i * 4 + j)));
  Stmt out = unroll_loops(AttrStmtNode::make(Expr(), attr::kAutoUnrollMaxStep, 8, nest));
  const auto *f = out.as<ForNode>();
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->loop_var.same_as(i));
  EXPECT_EQ(count(out, NodeType::For), 1);
  EXPECT_EQ(count(out, NodeType::Store), 4);
}

TEST(UnrollLoops, AutoUnrollLeavesNonSerialAndSymbolicLoops) {
  Var b = buffer_var("B"), i("i"), j("j"), n("n");
  Stmt par = loop(i, 0, 4, store(b, 0.0f, i), ForKind::Parallel);
  Stmt sym = loop(j, 0, n, store(b, 1.0f, j));
  Stmt out = unroll_loops(AttrStmtNode::make(Expr(), attr::kAutoUnrollMaxStep, 64, block({par, sym})));
  EXPECT_TRUE(ir_equal(out, block({par, sym})));
}

TEST(UnrollLoops, DefinitionsInsideCopiesGetFreshVariables) {
  Var a = buffer_var("A"), b = buffer_var("B"), t = buffer_var("T"), i("i"), x("x", Float(32)), k("k");
  Stmt body = AllocateNode::make(t, Float(32), {4}, "local",
                                 block({loop(k, 0, 4, store(t, load(a, i * 4 + k), k)),
                                        LetStmtNode::make(x, load(t, 0) + load(t, 3), store(b, x, i))}));
  Stmt out = unroll_loops(loop(i, 0, 2, body, ForKind::Unrolled));
  const auto *blk = out.as<BlockNode>();
  ASSERT_NE(blk, nullptr);
  ASSERT_EQ(blk->stmts.size(), 2u);
  const auto *first = blk->stmts[0].as<AllocateNode>(), *second = blk->stmts[1].as<AllocateNode>();
  ASSERT_TRUE(first && second);
  EXPECT_TRUE(first->buffer_var.same_as(t));
  EXPECT_FALSE(second->buffer_var.same_as(t));
  EXPECT_EQ(second->buffer_var->pointee, Float(32));

  // Same results as the loop.
  StmtRunner before, after;
  for (StmtRunner *e : {&before, &after}) {
    auto &in = e->buffer(a, 8);
    for (int v = 0; v < 8; ++v) in[v] = v * v;
    e->buffer(b, 2);
  }
  before.run(loop(i, 0, 2, body));
  after.run(out);
  EXPECT_EQ(before.buffers[b.get()], after.buffers[b.get()]);
}

TEST(UnrollLoops, LoopCarriedAccumulationKeepsItsOrder) {
  Var a = buffer_var("A"), c = buffer_var("C"), i("i");
  Stmt s = loop(i, 0, 3, store(c, load(c, 0) * 2.0f + load(a, i), 0), ForKind::Unrolled);
  StmtRunner before, after;
  for (StmtRunner *e : {&before, &after}) {
    e->buffer(a, 3) = {1, 2, 3};
    e->buffer(c, 1) = {5};
  }
  before.run(loop(i, 0, 3, store(c, load(c, 0) * 2.0f + load(a, i), 0)));
  after.run(unroll_loops(s));
  EXPECT_EQ(before.buffers[c.get()], after.buffers[c.get()]);
  EXPECT_EQ(after.buffers[c.get()][0], ((5 * 2 + 1) * 2 + 2) * 2 + 3);
}

}  // namespace
}  // namespace kiln::ir::testing
