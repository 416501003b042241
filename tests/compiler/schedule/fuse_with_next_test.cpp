// Stage::fuse_with_next: a producer's loop over a row merged with its consumer's reduction loop
// over the same row (one loop reads each element just written), values equal to the unscheduled
// computation's through the interpreter and the C back end, with and without a tail; and the
// requests that would change the values refused with a ScheduleError saying why.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "compiler/ir/error.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "tests/compiler/schedule/harness.h"

namespace kiln::te {
namespace {

int count_loops(const ir::Stmt &body) {
  int n = 0;
  ir::post_order_visit(body, [&](const ir::IRNode *node) { n += node->node_type == ir::NodeType::For; });
  return n;
}

// The loops whose body (inner loops included) both stores into and loads buffer `name`.
int loops_writing_and_reading(const ir::Stmt &body, const std::string &name) {
  int n = 0;
  ir::post_order_visit(body, [&](const ir::IRNode *node) {
    if (node->node_type != ir::NodeType::For) return;
    bool reads = false, writes = false;
    ir::post_order_visit(static_cast<const ir::ForNode *>(node)->body, [&](const ir::IRNode *m) {
      reads = reads ||
              (m->node_type == ir::NodeType::Load && static_cast<const ir::LoadNode *>(m)->buffer_var->name == name);
      writes = writes ||
               (m->node_type == ir::NodeType::Store && static_cast<const ir::StoreNode *>(m)->buffer_var->name == name);
    });
    n += reads && writes;
  });
  return n;
}

// E[i, j] = A[i, j] * 2 + 1; S[i] = sum over k of E[i, `read`(k)]; O[i, j] = E[i, j] / S[i]: a
// softmax-like row pipeline with E and S computed at O's row loop, E's and S's loops over the row
// split by `e_step` and `s_step`; E's outer loop fused with the next when `fuse`.
struct Rows {
  Tensor A, E, S, O;
  ScheduleOwner s;
  IterVar eo;
};

Rows rows(int64_t len, int e_step, int s_step, bool reversed = false) {
  Rows r;
  r.A = placeholder({Expr(16), Expr(len)}, ir::Float(32), "A");
  r.E = compute(
      {Expr(16), Expr(len)}, [&](Var i, Var j) { return r.A(i, j) * 2.0f + 1.0f; }, "E");
  IterVar k = reduce_axis(Expr(len), "k");
  Tensor E = r.E;
  r.S = compute(
      {Expr(16)}, [&](Var i) { return sum(E(i, reversed ? Expr(len - 1) - k->var : Expr(k->var)), {k}); }, "S");
  Tensor S = r.S;
  r.O = compute(
      {Expr(16), Expr(len)}, [&](Var i, Var j) { return E(i, j) / S(i); }, "O");
  r.s = create_schedule({r.O});
  Stage O = r.s[r.O], Es = r.s[r.E], Ss = r.s[r.S];
  Es.compute_at(O, O.axis(0));
  Ss.compute_at(O, O.axis(0));
  IterVar ei, so, si;
  Es.split(Es.axis(1), e_step, &r.eo, &ei);
  Ss.split(Ss.reduce_axis(0), s_step, &so, &si);
  return r;
}

TEST(FuseWithNext, OneLoopStoresAndSumsTheRowWithTheSameValues) {
  for (int64_t len : {int64_t{96}, int64_t{100}}) {  // 100: a tail the step does not divide
    SCOPED_TRACE("row of " + std::to_string(len));
    Rows two = rows(len, 8, 8);
    ir::LoweredFunc apart = lower::lower(*two.s, {two.A, two.O}, "apart");
    Rows one = rows(len, 8, 8);
    one.s[one.E].fuse_with_next(one.eo);
    ir::LoweredFunc f = testing::check_against_unscheduled(*one.s, {one.A, one.O}, {{16, len}, {16, len}}, 1e-5);
    // The row's two loops (E's, S's) are one: one loop fewer, and a loop (beside the row's loop i)
    // that both writes and reads E.
    EXPECT_EQ(count_loops(f.body), count_loops(apart.body) - 1) << f;
    EXPECT_EQ(loops_writing_and_reading(apart.body, "E"), 1) << apart;
    EXPECT_EQ(loops_writing_and_reading(f.body, "E"), 2) << f;
    std::ostringstream os;
    os << f;
    const std::string text = os.str();
    const size_t loop = text.find("for (j.outer");
    ASSERT_NE(loop, std::string::npos) << f;
    // The fused loop's body stores E, then adds it to S, before the loop closes.
    const size_t store = text.find("E[", loop), add = text.find("S[", loop), close = text.find("\n  }", loop);
    EXPECT_LT(store, add) << f;
    EXPECT_LT(add, close) << f;
  }
}

std::string fuse_error(Rows &r) {
  r.s[r.E].fuse_with_next(r.eo);
  try {
    lower::lower(*r.s, {r.A, r.O}, "bad");
  } catch (const ScheduleError &e) {
    return e.what();
  }
  return "no error";
}

TEST(FuseWithNext, RefusesWhatWouldChangeTheValues) {
  {
    // S reads the row backwards: iteration k reads elements E writes in later iterations.
    Rows r = rows(96, 8, 8, true);
    const std::string what = fuse_error(r);
    EXPECT_NE(what.find("cannot fuse loop j.outer with the next loop: the next loop reads E["), std::string::npos)
        << what;
    EXPECT_NE(what.find("not only the element"), std::string::npos) << what;
  }
  {
    // Steps of 8 and 4: the loops have different ranges.
    Rows r = rows(96, 8, 4);
    const std::string what = fuse_error(r);
    EXPECT_NE(what.find("the next loop k.outer runs over [0, 0 + 24), this one over [0, 0 + 12)"), std::string::npos)
        << what;
  }
  {
    // O's row loop: nothing after it uses what it writes.
    Rows r = rows(96, 8, 8);
    r.s[r.O].fuse_with_next(r.s[r.O].axis(0));
    try {
      lower::lower(*r.s, {r.A, r.O}, "bad");
      ADD_FAILURE() << "lowered";
    } catch (const ScheduleError &e) {
      EXPECT_NE(std::string(e.what()).find("no statement after it uses what it writes"), std::string::npos) << e.what();
    }
  }
  {
    // A vectorized loop cannot be fused.
    Rows r = rows(96, 8, 8);
    r.s[r.E].vectorize(r.eo);
    EXPECT_THROW(r.s[r.E].fuse_with_next(r.eo), ScheduleError);
  }
}

}  // namespace
}  // namespace kiln::te
