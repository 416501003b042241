// Stage::pipeline: a row's statistics computed one row early, their loop beside the loop that
// writes the previous row's output; values equal to the unscheduled computation's through the
// interpreter and the C back end (rows of one, of several, loops of different lengths, a serial
// loop inside a parallel one); and the requests that would change the values refused with a
// ScheduleError saying why.
#include <gtest/gtest.h>

#include <string>

#include "compiler/ir/error.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "tests/compiler/schedule/harness.h"

namespace kiln::te {
namespace {

// The loops whose body (inner loops included) stores into both buffers and allocates nothing: a
// loop over a row's elements, not the loop over the rows (whose body allocates the row's
// statistics, or a pipelined loop's derived values).
int loops_storing_both(const ir::Stmt &body, const std::string &a, const std::string &b) {
  int n = 0;
  ir::post_order_visit(body, [&](const ir::IRNode *node) {
    if (node->node_type != ir::NodeType::For) return;
    bool wa = false, wb = false, allocates = false;
    ir::post_order_visit(static_cast<const ir::ForNode *>(node)->body, [&](const ir::IRNode *m) {
      allocates = allocates || m->node_type == ir::NodeType::Allocate;
      if (m->node_type != ir::NodeType::Store) return;
      const std::string &name = static_cast<const ir::StoreNode *>(m)->buffer_var->name;
      wa = wa || name == a;
      wb = wb || name == b;
    });
    n += wa && wb && !allocates;
  });
  return n;
}

// S[i] = sum over k of A[i, k]; M[i] = S[i] / len; O[i, j] = (A[i, j] - M[i]) * 2: a row's
// statistic (S, its loop split by `s_step`), a value derived from it (M) and the row's output (O,
// split by `o_step`), with S and M computed at O's row loop. With `direct`, O reads S itself.
struct Rows {
  Tensor A, S, M, O;
  ScheduleOwner s;
  IterVar row;  // O's row loop
};

Rows rows(int64_t n_rows, int64_t len, int s_step, int o_step, bool direct = false, int parallel_chunks = 0) {
  Rows r;
  r.A = placeholder({Expr(n_rows), Expr(len)}, ir::Float(32), "A");
  Tensor A = r.A;
  IterVar k = reduce_axis(Expr(len), "k");
  r.S = compute(
      {Expr(n_rows)}, [&](Var i) { return sum(A(i, k->var), {k}); }, "S");
  Tensor S = r.S;
  r.M = compute(
      {Expr(n_rows)}, [&](Var i) { return S(i) / static_cast<float>(len); }, "M");
  Tensor M = r.M;
  r.O = compute(
      {Expr(n_rows), Expr(len)}, [&](Var i, Var j) { return (A(i, j) - (direct ? S(i) : M(i))) * 2.0f; }, "O");
  r.s = create_schedule({r.O});
  Stage O = r.s[r.O], Ss = r.s[r.S];
  r.row = O.axis(0);
  if (parallel_chunks > 0) {
    IterVar po, pi;
    O.split(r.row, parallel_chunks, &po, &pi);
    O.parallel(po);
    r.row = pi;
  }
  IterVar oo, oi, so, si;
  O.split(O.axis(1), o_step, &oo, &oi);
  Ss.compute_at(O, r.row);
  if (!direct) r.s[r.M].compute_at(O, r.row);
  Ss.split(Ss.reduce_axis(0), s_step, &so, &si);
  return r;
}

TEST(Pipeline, TheNextRowsStatisticsShareTheOutputsLoopWithTheSameValues) {
  struct Case {
    int64_t n_rows, len;
    int s_step, o_step, chunks;
  };
  for (const Case &c : {Case{16, 96, 8, 8, 0},     // loops of the same length
                        Case{16, 100, 8, 8, 0},    // tails the steps do not divide
                        Case{16, 96, 8, 4, 0},     // S's loop shorter than O's: O's rest after
                        Case{16, 96, 4, 16, 0},    // S's loop longer: S's rest after
                        Case{1, 96, 8, 8, 0},      // one row: the prologue and the last row's form
                        Case{12, 40, 8, 8, 4}}) {  // a serial loop of 4 rows in each parallel iteration
    SCOPED_TRACE(std::to_string(c.n_rows) + " rows of " + std::to_string(c.len) + ", steps " +
                 std::to_string(c.s_step) + " and " + std::to_string(c.o_step) + ", chunks " +
                 std::to_string(c.chunks));
    Rows r = rows(c.n_rows, c.len, c.s_step, c.o_step, false, c.chunks);
    r.s[r.O].pipeline(r.row);
    ir::LoweredFunc f =
        testing::check_against_unscheduled(*r.s, {r.A, r.O}, {{c.n_rows, c.len}, {c.n_rows, c.len}}, 1e-4);
    // One loop writes the next row's sum and this row's output (none unless pipelined).
    EXPECT_EQ(loops_storing_both(f.body, "S", "O") > 0, c.n_rows > 1) << f;
    Rows plain = rows(c.n_rows, c.len, c.s_step, c.o_step, false, c.chunks);
    EXPECT_EQ(loops_storing_both(lower::lower(*plain.s, {plain.A, plain.O}, "plain").body, "S", "O"), 0);
  }
}

std::string pipeline_error(Rows &r) {
  try {
    lower::lower(*r.s, {r.A, r.O}, "bad");
  } catch (const ScheduleError &e) {
    return e.what();
  }
  return "lowered without an error";
}

TEST(Pipeline, RefusesWhatWouldChangeTheValues) {
  {
    // O reads S itself: the next row's sum would overwrite it before this row's output reads it.
    Rows r = rows(16, 96, 8, 8, true);
    r.s[r.O].pipeline(r.row);
    const std::string what = pipeline_error(r);
    EXPECT_NE(what.find("cannot pipeline loop i: the first loop's statements write S, which its last loop reads"),
              std::string::npos)
        << what;
  }
  {
    // O's loop over the row: its body has no loop.
    Rows r = rows(16, 96, 8, 8);
    r.s[r.O].pipeline(r.s[r.O].leaf(2));
    const std::string what = pipeline_error(r);
    EXPECT_NE(what.find("its body has no serial loop followed by other statements"), std::string::npos) << what;
  }
  {
    // A parallel loop's iterations run on other threads: not one after the other.
    Rows r = rows(16, 96, 8, 8);
    r.s[r.O].parallel(r.row);
    EXPECT_THROW(r.s[r.O].pipeline(r.row), ScheduleError);
  }
}

}  // namespace
}  // namespace kiln::te
