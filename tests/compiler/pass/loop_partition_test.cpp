#include <gtest/gtest.h>

#include "compiler/ir/function.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/pass/passes.h"
#include "tests/compiler/ir/ir_equal.h"
#include "tests/compiler/pass/ir_builders.h"
#include "tests/compiler/pass/stmt_runner.h"

namespace kiln::ir::testing {
namespace {

using pass::loop_partition;

int count(const Stmt &s, NodeType t) {
  int n = 0;
  post_order_visit(s, [&](const IRNode *node) { n += node->node_type == t; });
  return n;
}

int likely_calls(const Stmt &s) {
  int n = 0;
  post_order_visit(s, [&](const IRNode *node) {
    n += node->node_type == NodeType::Call && static_cast<const CallNode *>(node)->name == intrinsic::kLikely;
  });
  return n;
}

std::vector<Stmt> top_loops(const Stmt &s) {
  if (const auto *b = s.as<BlockNode>()) return b->stmts;
  return {s};
}

// Runs before and after with A = 0, 1, 2, ... and B zeroed, both sized `size`, `n` set to nv;
// out-of-bounds accesses throw.
void expect_same_results(const Stmt &before, const Stmt &after, const Var &a, const Var &b, const Var &n, int nv,
                         int size) {
  StmtRunner x, y;
  for (StmtRunner *e : {&x, &y}) {
    auto &in = e->buffer(a, static_cast<size_t>(std::max(size, 1)));
    for (size_t k = 0; k < in.size(); ++k) in[k] = static_cast<double>(k);
    e->buffer(b, static_cast<size_t>(std::max(size, 1)));
    e->set(n, nv);
  }
  x.run(before);
  ASSERT_NO_THROW(y.run(after)) << "n = " << nv << "\n" << after;
  EXPECT_EQ(x.buffers[b.get()], y.buffers[b.get()]) << "n = " << nv;
  EXPECT_EQ(x.stores, y.stores) << "n = " << nv;
}

// for (xo, 0, extent) for (xi, 0, 8) if (likely(xo * 8 + xi < n)) B[xo * 8 + xi] = A[xo * 8 + xi] + 1
struct SplitTail {
  Var a = buffer_var("A"), b = buffer_var("B"), xo{"xo"}, xi{"xi"}, n{"n"};
  Expr idx = xo * 8 + xi;
  Stmt guarded = IfThenElseNode::make(likely(idx < n), store(b, load(a, idx) + 1.0f, idx));
  Stmt nest(Expr extent, ForKind inner = ForKind::Serial) const {
    return loop(xo, 0, std::move(extent), loop(xi, 0, 8, guarded, inner));
  }
};

TEST(LoopPartition, ConstantBoundSplitsOuterLoopIntoMainAndTail) {
  SplitTail t;
  Var n20("n");
  Stmt s = loop(t.xo, 0, 3,
                loop(t.xi, 0, 8, IfThenElseNode::make(likely(t.idx < 20), store(t.b, load(t.a, t.idx) + 1.0f, t.idx))));
  Stmt out = loop_partition(s);
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 2u) << out;
  const auto *main = loops[0].as<ForNode>(), *tail = loops[1].as<ForNode>();
  ASSERT_TRUE(main && tail) << out;
  EXPECT_TRUE(main->loop_var.same_as(t.xo));
  EXPECT_FALSE(tail->loop_var.same_as(t.xo));
  EXPECT_TRUE(is_const_int(main->min, 0) && is_const_int(main->extent, 2)) << out;
  EXPECT_TRUE(is_const_int(tail->min, 2) && is_const_int(tail->extent, 1)) << out;
  EXPECT_EQ(count(loops[0], NodeType::IfThenElse), 0) << out;
  EXPECT_TRUE(ir_equal(loops[0], loop(t.xo, 0, 2, loop(t.xi, 0, 8, store(t.b, load(t.a, t.idx) + 1.0f, t.idx)))));
  // In the tail, xo * 8 + xi < 20 depends on xi alone: its loop stops at 4, unguarded.
  EXPECT_EQ(count(loops[1], NodeType::IfThenElse), 0) << out;
  const auto *tail_inner = tail->body.as<ForNode>();
  ASSERT_NE(tail_inner, nullptr) << out;
  EXPECT_TRUE(is_const_int(tail_inner->extent, 4)) << out;
  expect_same_results(s, out, t.a, t.b, n20, 0, 20);
}

TEST(LoopPartition, SymbolicBoundGivesSymbolicSplitPoint) {
  SplitTail t;
  Stmt s = t.nest(floordiv(t.n + 7, 8));
  Stmt out = loop_partition(s);
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 2u) << out;
  EXPECT_EQ(count(loops[0], NodeType::IfThenElse), 0) << out;
  // The tail's inner loop stops at n - xo * 8, unguarded.
  EXPECT_EQ(count(loops[1], NodeType::IfThenElse), 0) << out;
  // for (xo, 0, floordiv(n, 8)) unguarded, then the guarded tail from floordiv(n, 8) (clamped
  // to the loop's range: with n < 0 neither part may run).
  const auto *main = loops[0].as<ForNode>(), *tail = loops[1].as<ForNode>();
  ASSERT_TRUE(main && tail);
  EXPECT_TRUE(is_zero(main->min));
  EXPECT_EQ(to_string(main->extent), "floordiv(n, 8)") << out;
  EXPECT_NE(to_string(tail->min).find("floordiv(n, 8)"), std::string::npos) << out;
  for (int nv = -9; nv <= 35; ++nv) expect_same_results(s, out, t.a, t.b, t.n, nv, nv);
}

TEST(LoopPartition, SingleLoopWithSymbolicBound) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n"), m("m");
  Stmt s = loop(i, 0, n, IfThenElseNode::make(likely(i < m), store(b, load(a, i), i)));
  Stmt out = loop_partition(s);
  // i < m depends on no inner loop: it fails in the whole tail, which is dropped.
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 1u) << out;
  EXPECT_EQ(likely_calls(out), 0);
  for (int nv = 0; nv <= 6; ++nv) {
    for (int mv = -2; mv <= 8; ++mv) {
      StmtRunner x, y;
      for (StmtRunner *e : {&x, &y}) {
        e->buffer(a, 8) = {1, 2, 3, 4, 5, 6, 7, 8};
        e->buffer(b, 8);
        e->set(n, nv);
        e->set(m, mv);
      }
      x.run(s);
      y.run(out);
      EXPECT_EQ(x.buffers[b.get()], y.buffers[b.get()]) << nv << " " << mv;
    }
  }
}

TEST(LoopPartition, LowerBoundConditionMakesAHead) {
  // j runs inside: i + j >= 3 holds for every j only from i = 3 on, and for some j before; in
  // the head, the loop over j starts where it holds.
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), j("j"), n("n");
  Stmt s = loop(i, 0, 10, loop(j, 0, 2, IfThenElseNode::make(likely(i + j >= 3), store(b, load(a, i + j - 3), i))));
  Stmt out = loop_partition(s);
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 2u) << out;
  const auto *head = loops[0].as<ForNode>(), *main = loops[1].as<ForNode>();
  ASSERT_TRUE(head && main);
  EXPECT_TRUE(is_const_int(head->extent, 3)) << out;
  EXPECT_EQ(count(loops[0], NodeType::IfThenElse), 0) << out;
  EXPECT_TRUE(is_const_int(main->min, 3) && is_const_int(main->extent, 7)) << out;
  EXPECT_TRUE(ir_equal(loops[1], loop(i, 3, 7, loop(j, 0, 2, store(b, load(a, i + j - 3), i)))));
  expect_same_results(s, out, a, b, n, 0, 12);
}

TEST(LoopPartition, ExactConditionDropsThePartWhereItFails) {
  // i >= 3 depends on nothing inside the loop: it fails at every i below 3, so the head does
  // nothing and only the main loop is left.
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n");
  Stmt s = loop(i, 0, 10, IfThenElseNode::make(likely(i >= 3), store(b, load(a, i - 3), i)));
  Stmt out = loop_partition(s);
  EXPECT_TRUE(ir_equal(out, loop(i, 3, 7, store(b, load(a, i - 3), i)))) << out;
  expect_same_results(s, out, a, b, n, 0, 10);
}

TEST(LoopPartition, ExactConditionKeepsWhatDoesNotNeedIt) {
  // The head keeps the else branch and the statements outside the guard.
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n");
  Stmt s = loop(i, 0, 10,
                block({IfThenElseNode::make(likely(i >= 3), store(b, load(a, i - 3), i), store(b, 2.0f, i)),
                       store(a, load(a, i) + 1.0f, i)}));
  Stmt out = loop_partition(s);
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 2u) << out;
  EXPECT_EQ(count(out, NodeType::IfThenElse), 0) << out;
  EXPECT_EQ(count(loops[0], NodeType::Store), 2) << out;
  expect_same_results(s, out, a, b, n, 0, 10);
}

TEST(LoopPartition, HeadAndTailWithNoMainPartAreSplitWhenConstant) {
  // Every tile of 4 crosses one end of [1, 7): no iteration of xo is unguarded, but the two
  // constant parts are separated.
  Var a = buffer_var("A"), b = buffer_var("B"), xo("xo"), xi("xi"), n("n");
  Expr x = xo * 4 + xi;
  Stmt s =
      loop(xo, 0, 2, loop(xi, 0, 4, IfThenElseNode::make(likely(x >= 1) && likely(x < 7), store(b, load(a, x), x))));
  Stmt out = loop_partition(s);
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 2u) << out;
  for (const auto &l : loops) EXPECT_TRUE(is_const_int(l.as<ForNode>()->extent, 1)) << out;
  expect_same_results(s, out, a, b, n, 0, 8);
}

TEST(LoopPartition, InnerLoopStartingAtAnExpressionIsSolvedThroughIt) {
  // A register tile placed at xo: for (x, xo * 4, 4). x >= 2 holds for all of it from xo = 1 on
  // (with x * 2 + k: the same terms scaled), x < 14 up to xo = 3.
  Var a = buffer_var("A"), b = buffer_var("B"), xo("xo"), x("x"), k("k"), n("n");
  Expr e = x * 2 + k;
  Stmt s = loop(
      xo, 0, 4,
      loop(
          x, xo * 4, 4,
          loop(k, 0, 2, IfThenElseNode::make(likely(e >= 3) && likely(e < 29), store(b, load(b, x) + load(a, e), x)))));
  Stmt out = loop_partition(s);
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 3u) << out;
  const auto *main = loops[1].as<ForNode>();
  EXPECT_TRUE(is_const_int(main->min, 1) && is_const_int(main->extent, 2)) << out;
  EXPECT_EQ(count(loops[1], NodeType::IfThenElse), 0) << out;
  expect_same_results(s, out, a, b, n, 0, 32);
}

TEST(LoopPartition, SiblingCopiesAreSplitByTheSameInnerCondition) {
  // The outer loop is split by x; the inner loop of every part, head and main alike, by y.
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), j("j"), k("k"), n("n");
  Expr x = i * 2 + k, y = j - 1;
  Stmt s = loop(
      i, 0, 4,
      loop(j, 0, 4,
           loop(k, 0, 2,
                IfThenElseNode::make(likely(x >= 1) && likely(y >= 0), store(b, load(b, x) + load(a, y * 8 + x), x)))));
  Stmt out = loop_partition(s);
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 2u) << out;
  for (const auto &l : loops) {
    const auto *inner = l.as<ForNode>()->body.as<ForNode>();
    ASSERT_NE(inner, nullptr) << out;
    EXPECT_TRUE(is_const_int(inner->min, 1) && is_const_int(inner->extent, 3)) << out;
  }
  expect_same_results(s, out, a, b, n, 0, 32);
}

TEST(LoopPartition, TwoSidedConditionMakesHeadMainAndTail) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n");
  Stmt s = loop(i, 0, 12, IfThenElseNode::make(likely(i >= 2) && likely(i < n), store(b, load(a, i), i)));
  Stmt out = loop_partition(s);
  // Both conditions fail where the main part ends: nothing is left of the head and the tail.
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 1u) << out;
  EXPECT_EQ(count(out, NodeType::IfThenElse), 0) << out;
  // With j inside, the head and tail stay, guarded.
  Var j("j");
  Stmt inner = loop(
      i, 0, 12, loop(j, 0, 2, IfThenElseNode::make(likely(i + j >= 2) && likely(i + j < n), store(b, load(a, i), i))));
  Stmt parts = loop_partition(inner);
  ASSERT_EQ(top_loops(parts).size(), 3u) << parts;
  EXPECT_EQ(count(top_loops(parts)[1], NodeType::IfThenElse), 0) << parts;
  for (int nv = 0; nv <= 14; ++nv) expect_same_results(inner, parts, a, b, n, nv, 12);
  for (int nv = 0; nv <= 14; ++nv) expect_same_results(s, out, a, b, n, nv, 12);
}

TEST(LoopPartition, LikelyInSelectIsRemovedInTheMainLoop) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n");
  Stmt s = loop(i, 0, 16, store(b, select(likely(i < n), load(a, i), 0.0f), i));
  Stmt out = loop_partition(s);
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 2u) << out;
  EXPECT_EQ(count(loops[0], NodeType::Select), 0) << out;
  for (int nv = 0; nv <= 16; ++nv) expect_same_results(s, out, a, b, n, nv, 16);
}

TEST(LoopPartition, LikelyStorePredicateIsDroppedInTheMainLoop) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n");
  Stmt s = loop(i, 0, 16, store(b, load(a, i), i, likely(i < n)));
  Stmt out = loop_partition(s);
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 1u) << out;
  const auto *main = loops[0].as<ForNode>();
  ASSERT_NE(main, nullptr);
  EXPECT_TRUE(ir_equal(main->body, store(b, load(a, i), i))) << out;
  for (int nv = 0; nv <= 16; ++nv) expect_same_results(s, out, a, b, n, nv, 16);
}

TEST(LoopPartition, ConstantSplitOfAVectorizedLoopKeepsConstantExtents) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n");
  Stmt s = loop(i, 0, 8, IfThenElseNode::make(likely(i < 5), store(b, load(a, i), i)), ForKind::Vectorized);
  Stmt out = loop_partition(s);
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 1u) << out;
  for (const auto &l : loops) {
    ASSERT_TRUE(l.as<ForNode>());
    EXPECT_EQ(l.as<ForNode>()->kind, ForKind::Vectorized);
    EXPECT_TRUE(as_const_int(l.as<ForNode>()->extent)) << out;
  }
  expect_same_results(s, out, a, b, n, 0, 8);
}

// A vector of 16 lanes whose first lane is a padded column is kept whole, the condition its mask:
// cut, it would be a vector of 1 lane and one of 15 (whose mask and stores cost more). Cut where
// both pieces are powers of two (8 and 8), it is; a serial loop is cut at the lane either way.
TEST(LoopPartition, AVectorizedLoopIsCutOnlyIntoPowerOfTwoVectors) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n");
  auto nest = [&](int from, ForKind kind) {
    return loop(i, 0, 16, store(b, select(likely(i >= from), load(a, i), 0.0f), i), kind);
  };
  const Stmt odd = nest(1, ForKind::Vectorized);
  EXPECT_TRUE(loop_partition(odd).same_as(odd)) << loop_partition(odd);
  const Stmt halves = nest(8, ForKind::Vectorized);
  const Stmt cut = loop_partition(halves);
  auto loops = top_loops(cut);
  ASSERT_EQ(loops.size(), 2u) << cut;
  for (const auto &l : loops) {
    EXPECT_EQ(l.as<ForNode>()->kind, ForKind::Vectorized);
    EXPECT_TRUE(is_const_int(l.as<ForNode>()->extent, 8)) << cut;
  }
  EXPECT_EQ(count(loops[1], NodeType::Select), 0) << cut;
  expect_same_results(halves, cut, a, b, n, 0, 16);
  const Stmt serial = nest(1, ForKind::Serial);
  EXPECT_EQ(top_loops(loop_partition(serial)).size(), 2u) << loop_partition(serial);
}

TEST(LoopPartition, OuterLoopIsSplitAroundAVectorizedInnerLoop) {
  SplitTail t;
  Stmt s = t.nest(floordiv(t.n + 7, 8), ForKind::Vectorized);
  Stmt out = loop_partition(s);
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 2u) << out;
  const auto *inner = loops[0].as<ForNode>()->body.as<ForNode>();
  ASSERT_NE(inner, nullptr) << out;
  EXPECT_EQ(inner->kind, ForKind::Vectorized);
  EXPECT_TRUE(is_const_int(inner->extent, 8));
  EXPECT_EQ(count(loops[0], NodeType::IfThenElse), 0) << out;
}

TEST(LoopPartition, SymbolicSplitOfAVectorizedLoopIsLeftAlone) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n");
  Stmt s = loop(i, 0, 8, IfThenElseNode::make(likely(i < n), store(b, load(a, i), i)), ForKind::Vectorized);
  EXPECT_TRUE(loop_partition(s).same_as(s));
}

TEST(LoopPartition, ThreadBindingIsNotSplitButItsInnerLoopIs) {
  SplitTail t;
  Stmt s =
      ForNode::make(t.xo, 0, floordiv(t.n + 7, 8), ForKind::ThreadBinding, loop(t.xi, 0, 8, t.guarded), "blockIdx.x");
  Stmt out = loop_partition(s);
  const auto *f = out.as<ForNode>();
  ASSERT_NE(f, nullptr) << out;
  EXPECT_EQ(f->kind, ForKind::ThreadBinding);
  EXPECT_TRUE(f->loop_var.same_as(t.xo));
  for (int nv = 0; nv <= 20; ++nv) expect_same_results(s, out, t.a, t.b, t.n, nv, nv);
}

TEST(LoopPartition, BarrierInTheBodyKeepsTheLoopWhole) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n");
  Stmt sync = EvaluateNode::make(CallNode::make(Int(32), intrinsic::kSyncThreads, {}, CallNode::Kind::Intrinsic));
  Stmt s = loop(i, 0, 16, block({sync, IfThenElseNode::make(likely(i < n), store(b, load(a, i), i))}));
  EXPECT_TRUE(loop_partition(s).same_as(s));
}

TEST(LoopPartition, NonLinearOrVaryingConditionsAreLeftAlone) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n");
  Stmt square = loop(i, 0, 16, IfThenElseNode::make(likely(i * i < n), store(b, load(a, i), i)));
  EXPECT_TRUE(loop_partition(square).same_as(square));
  Stmt loaded = loop(i, 0, 16, IfThenElseNode::make(likely(i < cast(Int(32), load(b, 0))), store(b, 1.0f, i)));
  EXPECT_TRUE(loop_partition(loaded).same_as(loaded));
  Stmt divided = loop(i, 0, 16, IfThenElseNode::make(likely(floordiv(i, 2) < n), store(b, 1.0f, i)));
  EXPECT_TRUE(loop_partition(divided).same_as(divided));
}

TEST(LoopPartition, ConditionWithoutLikelyIsLeftAlone) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n");
  Stmt s = loop(i, 0, 16, IfThenElseNode::make(i < n, store(b, load(a, i), i)));
  EXPECT_TRUE(loop_partition(s).same_as(s));
}

TEST(LoopPartition, InnerLoopWithNonConstantRangeIsSplitItself) {
  SplitTail t;
  Var m("m");
  Stmt s = loop(t.xo, 0, floordiv(t.n + 7, 8), loop(t.xi, 0, m, t.guarded));
  Stmt out = loop_partition(s);
  const auto *outer = out.as<ForNode>();
  ASSERT_NE(outer, nullptr) << out;
  EXPECT_TRUE(outer->loop_var.same_as(t.xo));
  // The inner loop stops where xo * 8 + xi < n fails; nothing of its tail is left.
  EXPECT_EQ(top_loops(outer->body).size(), 1u) << out;
  EXPECT_EQ(count(out, NodeType::IfThenElse), 0) << out;
  for (int mv : {0, 3, 8}) {
    for (int nv = 0; nv <= 20; ++nv) {
      StmtRunner x, y;
      for (StmtRunner *e : {&x, &y}) {
        auto &in = e->buffer(t.a, 64);
        for (size_t k = 0; k < in.size(); ++k) in[k] = static_cast<double>(k);
        e->buffer(t.b, 64);
        e->set(t.n, nv);
        e->set(m, mv);
      }
      x.run(s);
      y.run(out);
      EXPECT_EQ(x.buffers[t.b.get()], y.buffers[t.b.get()]);
    }
  }
}

TEST(LoopPartition, MainLoopVectorizesWithoutPredicatesAndTheTailWithThem) {
  Var n("n");
  Buffer a = make_buffer("A", Float(32), {n}), b = make_buffer("B", Float(32), {n});
  Var xo("xo"), xi("xi");
  Expr idx = xo * 8 + xi;
  Stmt s = loop(xo, 0, floordiv(n + 7, 8),
                loop(xi, 0, 8, IfThenElseNode::make(likely(idx < n), store(b.data, load(a.data, idx) * 3.0f, idx)),
                     ForKind::Vectorized));
  Stmt out = pass::vectorize_loops(loop_partition(s));
  EXPECT_NO_THROW(pass::verify_ir(LoweredFunc{"f", {a, b}, {n}, out}));
  auto loops = top_loops(out);
  ASSERT_EQ(loops.size(), 2u) << out;
  const auto *main_store = loops[0].as<ForNode>()->body.as<StoreNode>();
  const auto *tail_store = loops[1].as<ForNode>()->body.as<StoreNode>();
  ASSERT_TRUE(main_store && tail_store) << out;
  EXPECT_FALSE(main_store->predicate.defined());
  EXPECT_TRUE(main_store->index.as<RampNode>());
  EXPECT_TRUE(tail_store->predicate.defined());
  for (int nv = 0; nv <= 33; ++nv) expect_same_results(s, out, a.data, b.data, n, nv, nv);
}

}  // namespace
}  // namespace kiln::ir::testing
