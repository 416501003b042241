#include <gtest/gtest.h>

#include "compiler/ir/ir_printer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/pass/passes.h"
#include "tests/compiler/ir/ir_equal.h"
#include "tests/compiler/pass/ir_builders.h"
#include "tests/compiler/pass/stmt_runner.h"

namespace kiln::ir::testing {
namespace {

using pass::vectorize_loops;

bool has_vectors(const Stmt &s) {
  bool found = false;
  post_order_visit(s, [&](const IRNode *n) {
    found = found || (n->node_type <= NodeType::Reduce && static_cast<const BaseExprNode *>(n)->type.is_vector());
  });
  return found;
}

// The loop was scalarized: the same loop, now serial, with the same body.
void expect_scalarized(const Stmt &in) {
  Stmt out = vectorize_loops(in);
  const auto *f = out.as<ForNode>();
  const auto *g = in.as<ForNode>();
  ASSERT_NE(f, nullptr) << out;
  EXPECT_EQ(f->kind, ForKind::Serial);
  EXPECT_TRUE(f->loop_var.same_as(g->loop_var));
  EXPECT_TRUE(ir_equal(f->body, g->body));
  EXPECT_FALSE(has_vectors(out));
}

// Runs `in` with its vectorized loops made serial, and vectorize_loops(in), over the same inputs.
void expect_same_results(const Stmt &in, const std::vector<std::pair<Var, size_t>> &buffers,
                         const std::vector<std::pair<Var, int64_t>> &scalars = {}) {
  class MakeSerial : public IRMutator {
   protected:
    using IRMutator::visit;
    Stmt visit(const ForNode *op, const Stmt &self) override {
      Stmt s = IRMutator::visit(op, self);
      const auto *f = s.as<ForNode>();
      return ForNode::make(f->loop_var, f->min, f->extent, ForKind::Serial, f->body);
    }
  };
  Stmt serial = MakeSerial().mutate(in);
  StmtRunner before, after;
  for (StmtRunner *e : {&before, &after}) {
    for (const auto &[v, size] : buffers) {
      auto &b = e->buffer(v, size);
      for (size_t k = 0; k < size; ++k) b[k] = static_cast<double>((k * 7) % 11) - 3;
    }
    for (const auto &[v, value] : scalars) e->set(v, value);
  }
  before.run(serial);
  after.run(vectorize_loops(in));
  for (const auto &[v, size] : buffers) EXPECT_EQ(before.buffers[v.get()], after.buffers[v.get()]) << v.name();
}

TEST(VectorizeLoops, DenseLoopBecomesRampLoadsAndStores) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i");
  Stmt s = loop(i, 0, 8, store(b, load(a, i) + 1.0f, i), ForKind::Vectorized);
  Expr r = ramp(0, 1, 8);
  Stmt expected = store(b, load(a, r) + bcast(1.0f, 8), r);
  EXPECT_TRUE(ir_equal(vectorize_loops(s), expected));
  EXPECT_EQ(to_string(vectorize_loops(s)), "B[ramp(0, 1, 8)] = (A[ramp(0, 1, 8)] + x8(1.0f))\n");
}

TEST(VectorizeLoops, SplitInnerLoopIndexStaysARamp) {
  Var a = buffer_var("A"), b = buffer_var("B"), xo("xo"), xi("xi");
  Stmt inner = loop(xi, 0, 4, store(b, load(a, xo * 4 + xi) * 2.0f, xo * 4 + xi), ForKind::Vectorized);
  Stmt out = vectorize_loops(loop(xo, 0, 3, inner));
  Expr r = ramp(xo * 4, 1, 4);
  EXPECT_TRUE(ir_equal(out, loop(xo, 0, 3, store(b, load(a, r) * bcast(2.0f, 4), r))));
  expect_same_results(loop(xo, 0, 3, inner), {{a, 12}, {b, 12}});
}

TEST(VectorizeLoops, StridedStoreAndGatherLoad) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i");
  Stmt s = loop(i, 0, 4, store(b, load(a, floordiv(i, 2)), i * 2), ForKind::Vectorized);
  Stmt out = vectorize_loops(s);
  const auto *st = out.as<StoreNode>();
  ASSERT_NE(st, nullptr) << out;
  EXPECT_TRUE(ir_equal(st->index, ramp(0, 2, 4)));
  EXPECT_EQ(st->value.type(), Float(32, 4));
  expect_same_results(s, {{a, 4}, {b, 8}});
}

TEST(VectorizeLoops, SymbolicStrideLoadIsARamp) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), m("m");
  Stmt s = loop(i, 0, 4, store(b, load(a, i * m), i), ForKind::Vectorized);
  EXPECT_TRUE(ir_equal(vectorize_loops(s), store(b, load(a, ramp(0, m, 4)), ramp(0, 1, 4))));
  expect_same_results(s, {{a, 16}, {b, 4}}, {{m, 3}});
}

TEST(VectorizeLoops, SymbolicStrideStoreIsScalarized) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), m("m");
  expect_scalarized(loop(i, 0, 4, store(b, load(a, i), i * m), ForKind::Vectorized));
}

TEST(VectorizeLoops, ReductionAccumulatorIsScalarized) {
  Var a = buffer_var("A"), c = buffer_var("C"), i("i");
  Stmt s = loop(i, 0, 8, store(c, load(c, 0) + load(a, i), 0), ForKind::Vectorized);
  expect_scalarized(s);
  expect_same_results(s, {{a, 8}, {c, 1}});
}

TEST(VectorizeLoops, ReadOfAnotherIterationsElementIsScalarized) {
  Var b = buffer_var("B"), i("i");
  expect_scalarized(loop(i, 1, 8, store(b, load(b, i - 1) + 1.0f, i), ForKind::Vectorized));
}

TEST(VectorizeLoops, InPlaceUpdateAtTheSameIndexIsVectorized) {
  Var b = buffer_var("B"), i("i");
  Stmt s = loop(i, 0, 8, store(b, load(b, i) * 2.0f, i), ForKind::Vectorized);
  EXPECT_TRUE(ir_equal(vectorize_loops(s), store(b, load(b, ramp(0, 1, 8)) * bcast(2.0f, 8), ramp(0, 1, 8))));
}

TEST(VectorizeLoops, ScatterStoreIsScalarized) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i");
  expect_scalarized(loop(i, 0, 8, store(b, load(a, i), floordiv(i, 2)), ForKind::Vectorized));
}

TEST(VectorizeLoops, NonConstantExtentIsScalarized) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n");
  expect_scalarized(loop(i, 0, n, store(b, load(a, i), i), ForKind::Vectorized));
}

TEST(VectorizeLoops, InnerLoopScalarizesTheWholeLoop) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), k("k");
  expect_scalarized(loop(i, 0, 4, loop(k, 0, 2, store(b, load(a, i * 2 + k), i * 2 + k)), ForKind::Vectorized));
}

TEST(VectorizeLoops, BarrierIsScalarized) {
  Var b = buffer_var("B"), i("i");
  Stmt sync = EvaluateNode::make(CallNode::make(Int(32), intrinsic::kSyncThreads, {}, CallNode::Kind::Intrinsic));
  expect_scalarized(loop(i, 0, 4, block({store(b, 1.0f, i), sync}), ForKind::Vectorized));
}

TEST(VectorizeLoops, ExternCallIsScalarized) {
  Var b = buffer_var("B"), i("i");
  Expr call = CallNode::make(Float(32), "my_extern", {i}, CallNode::Kind::Extern);
  expect_scalarized(loop(i, 0, 4, store(b, call, i), ForKind::Vectorized));
}

TEST(VectorizeLoops, TailGuardBecomesPredicatedStoreAndLoad) {
  Var a = buffer_var("A"), b = buffer_var("B"), xo("xo"), xi("xi"), n("n");
  Expr idx = xo * 8 + xi;
  Stmt s = loop(xi, 0, 8, IfThenElseNode::make(likely(idx < n), store(b, load(a, idx), idx)), ForKind::Vectorized);
  Expr r = ramp(xo * 8, 1, 8);
  Expr pred = r < bcast(n, 8);
  EXPECT_TRUE(ir_equal(vectorize_loops(s), store(b, load(a, r, pred), r, pred)));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "B[ramp((xo * 8), 1, 8)] = A[ramp((xo * 8), 1, 8)] if (ramp((xo * 8), 1, 8) < x8(n)) if "
            "(ramp((xo * 8), 1, 8) < x8(n))\n");
  for (int nv : {0, 5, 13, 16}) {
    expect_same_results(loop(xo, 0, 2, s), {{a, static_cast<size_t>(nv)}, {b, static_cast<size_t>(nv)}}, {{n, nv}});
  }
}

TEST(VectorizeLoops, IfElseOfStoresPredicatesBothSides) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i");
  Stmt s =
      loop(i, 0, 8, IfThenElseNode::make(load(a, i) > 0.0f, store(b, load(a, i), i), store(b, 0.0f - load(a, i), i)),
           ForKind::Vectorized);
  Stmt out = vectorize_loops(s);
  const auto *blk = out.as<BlockNode>();
  ASSERT_NE(blk, nullptr) << out;
  ASSERT_EQ(blk->stmts.size(), 2u);
  EXPECT_TRUE(blk->stmts[0].as<StoreNode>()->predicate.defined());
  EXPECT_TRUE(blk->stmts[1].as<StoreNode>()->predicate.as<NotNode>());
  expect_same_results(s, {{a, 8}, {b, 8}});
}

TEST(VectorizeLoops, LaneDependentIfAroundNonStoresIsScalarized) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), x("x", Float(32));
  Stmt then_case = LetStmtNode::make(x, load(a, i), store(b, x, i));
  expect_scalarized(loop(i, 0, 8, IfThenElseNode::make(i < 5, then_case), ForKind::Vectorized));
}

TEST(VectorizeLoops, GuardedIntegerDivisionIsScalarized) {
  Var a = buffer_var("A", Int(32)), d = buffer_var("D", Int(32)), i("i");
  Stmt s =
      loop(i, 0, 4, IfThenElseNode::make(load(d, i) != 0, store(a, load(a, i) / load(d, i), i)), ForKind::Vectorized);
  expect_scalarized(s);
}

TEST(VectorizeLoops, LoopInvariantIfStaysScalar) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), flag("flag");
  Stmt s = loop(i, 0, 4, IfThenElseNode::make(flag > 0, store(b, load(a, i), i)), ForKind::Vectorized);
  Stmt out = vectorize_loops(s);
  const auto *ite = out.as<IfThenElseNode>();
  ASSERT_NE(ite, nullptr) << out;
  EXPECT_TRUE(ite->condition.type().is_scalar());
  EXPECT_TRUE(ir_equal(ite->then_case, store(b, load(a, ramp(0, 1, 4)), ramp(0, 1, 4))));
}

TEST(VectorizeLoops, LetOfAVectorValueGetsAVectorVariable) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), t("t", Float(32));
  Stmt s = loop(i, 0, 4, LetStmtNode::make(t, load(a, i) * 2.0f, store(b, t + t, i)), ForKind::Vectorized);
  Stmt out = vectorize_loops(s);
  const auto *let = out.as<LetStmtNode>();
  ASSERT_NE(let, nullptr) << out;
  EXPECT_EQ(let->var.type(), Float(32, 4));
  Var t4("t", Float(32, 4));
  Expr r = ramp(0, 1, 4);
  EXPECT_TRUE(ir_equal(out, LetStmtNode::make(t4, load(a, r) * bcast(2.0f, 4), store(b, t4 + t4, r))));
  expect_same_results(s, {{a, 4}, {b, 4}});
}

TEST(VectorizeLoops, LetOfAnIndexIsSubstitutedAsARamp) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), k("k");
  Stmt s = loop(i, 0, 4, LetStmtNode::make(k, i * 3 + 1, store(b, load(a, k), i)), ForKind::Vectorized);
  Expr r = ramp(0, 1, 4);
  EXPECT_TRUE(ir_equal(vectorize_loops(s), store(b, load(a, ramp(1, 3, 4)), r)));
}

TEST(VectorizeLoops, CastSelectAndMathCallsWiden) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i");
  Expr value = select(load(a, i) > 0.0f, exp(load(a, i)), cast(Float(32), i));
  Stmt s = loop(i, 0, 4, store(b, value, i), ForKind::Vectorized);
  Stmt out = vectorize_loops(s);
  Expr r = ramp(0, 1, 4);
  Expr la = load(a, r);
  Expr expected_value =
      SelectNode::make(la > bcast(0.0f, 4), CallNode::make(Float(32, 4), "exp", {la}, CallNode::Kind::PureIntrinsic),
                       CastNode::make(Float(32, 4), r));
  EXPECT_TRUE(ir_equal(out, store(b, expected_value, r)));
  expect_same_results(s, {{a, 4}, {b, 4}});
}

TEST(VectorizeLoops, IfThenElseCallPredicatesTheLoadsOfEachSide) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), n("n");
  Stmt s = loop(i, 0, 8, store(b, if_then_else(i < n, load(a, i), 0.0f), i), ForKind::Vectorized);
  Stmt out = vectorize_loops(s);
  Expr r = ramp(0, 1, 8);
  Expr c = r < bcast(n, 8);
  Expr expected = CallNode::make(Float(32, 8), intrinsic::kIfThenElse, {c, load(a, r, c), bcast(0.0f, 8)},
                                 CallNode::Kind::PureIntrinsic);
  EXPECT_TRUE(ir_equal(out, store(b, expected, r)));
  expect_same_results(s, {{a, 3}, {b, 8}}, {{n, 3}});
}

TEST(VectorizeLoops, NonZeroMinStartsTheRamp) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), m("m");
  Stmt s = loop(i, m, 4, store(b, load(a, i), i), ForKind::Vectorized);
  EXPECT_TRUE(ir_equal(vectorize_loops(s), store(b, load(a, ramp(m, 1, 4)), ramp(m, 1, 4))));
}

// The lane counts of the vectors in a statement.
std::vector<int> vector_lanes(const Stmt &s) {
  std::vector<int> lanes;
  post_order_visit(s, [&](const IRNode *n) {
    if (n->node_type <= NodeType::Reduce && static_cast<const BaseExprNode *>(n)->type.is_vector()) {
      lanes.push_back(static_cast<const BaseExprNode *>(n)->type.lanes());
    }
  });
  return lanes;
}

TEST(VectorizeLoops, LoopsLongerThan64LanesRunOverChunksOf64) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i");
  Stmt s = loop(i, 0, 192, store(b, load(a, i) + 1.0f, i), ForKind::Vectorized);
  Stmt out = vectorize_loops(s);
  const auto *chunks = out.as<ForNode>();
  ASSERT_NE(chunks, nullptr) << out;
  EXPECT_EQ(chunks->kind, ForKind::Serial);
  EXPECT_TRUE(ir_equal(chunks->extent, Expr(3)));
  // The base is left for the simplifier to fold.
  Expr r = ramp(AddNode::make(Expr(0), chunks->loop_var * 64), 1, 64);
  EXPECT_TRUE(ir_equal(chunks->body, store(b, load(a, r) + bcast(1.0f, 64), r))) << out;
  expect_same_results(s, {{a, 192}, {b, 192}});
}

// When 64 does not divide the extent, the chunks take the largest power of two that does, or the
// loop stays serial; every element is computed once, none beyond the extent.
TEST(VectorizeLoops, ExtentsThat64DoesNotDivideUseADividingLaneCount) {
  struct Case {
    int64_t extent;
    int lanes;  // 0: serial
  };
  for (const Case c : {Case{65, 0}, Case{66, 2}, Case{96, 32}, Case{100, 4}, Case{130, 2}, Case{160, 32}, Case{200, 8},
                       Case{127, 0}}) {
    SCOPED_TRACE("extent " + std::to_string(c.extent));
    Var a = buffer_var("A"), b = buffer_var("B"), i("i"), m("m");
    // Starting at m, in buffers one chunk longer than the loop, so that a lane past the end shows.
    Stmt s = loop(i, m, static_cast<int>(c.extent), store(b, load(a, i) * 2.0f, i), ForKind::Vectorized);
    Stmt out = vectorize_loops(s);
    if (c.lanes == 0) {
      expect_scalarized(s);
    } else {
      const auto *chunks = out.as<ForNode>();
      ASSERT_NE(chunks, nullptr) << out;
      EXPECT_TRUE(ir_equal(chunks->extent, Expr(static_cast<int>(c.extent / c.lanes)))) << out;
      for (int l : vector_lanes(out)) EXPECT_EQ(l, c.lanes) << out;
    }
    const size_t size = static_cast<size_t>(c.extent + 3 + 64);
    expect_same_results(s, {{a, size}, {b, size}}, {{m, 3}});
  }
}

TEST(VectorizeLoops, UntouchedIrIsReturnedAsIs) {
  Var a = buffer_var("A"), b = buffer_var("B"), i("i"), j("j");
  Stmt s = loop(i, 0, 4, loop(j, 0, 4, store(b, load(a, i * 4 + j), i * 4 + j), ForKind::Unrolled));
  EXPECT_TRUE(vectorize_loops(s).same_as(s));
}

}  // namespace
}  // namespace kiln::ir::testing
