// Each schedule primitive on a small example: the printed loop structure (golden text) and the
// values against an unscheduled run, through the interpreter and the C back end.
#include <gtest/gtest.h>

#include "tests/compiler/schedule/harness.h"
#include "tests/compiler/schedule/primitives_golden.h"

namespace kiln {
namespace {

using namespace ir;
using testing::check_against_unscheduled;

std::string body_text(const LoweredFunc &f) { return to_string(f.body); }

TEST(Primitives, SplitWithSymbolicLength) {
  Var n = te::var("n");
  auto A = te::placeholder({n}, Float(32), "A");
  auto B = te::placeholder({n}, Float(32), "B");
  auto C = te::compute(
      {n}, [&](Var i) { return A(i) + B(i); }, "C");
  auto s = te::create_schedule({C});
  IterVar xo, xi;
  (*s)[C].split((*s)[C].axis(0), 32, &xo, &xi);
  for (int64_t len : {1, 31, 32, 33, 100}) {
    auto f = check_against_unscheduled(*s, {A, B, C}, {{len}, {len}, {len}}, 0.0, static_cast<uint64_t>(len));
    ASSERT_EQ(f.size_vars.size(), 1u);
    EXPECT_EQ(f.size_vars[0].name(), "n");
  }
  lower::LowerOptions o;
  o.partition_loops = false;
  auto f = lower::lower(*s, {A, B, C}, "vadd", o);
  EXPECT_EQ(body_text(f),
            "for (i.outer, 0, floordiv((n + 31), 32)) {\n"
            "  for (i.inner, 0, 32) {\n"
            "    if (likely((((i.outer * 32) + i.inner) < n))) {\n"
            "      C[((i.outer * 32) + i.inner)] = (A[((i.outer * 32) + i.inner)] + B[((i.outer * 32) + i.inner)])\n"
            "    }\n"
            "  }\n"
            "}\n");
}

// LowerOptions::pass_seconds: each pass that ran has its time under its name, a pass turned off
// has none, and lowerings accumulate.
TEST(Primitives, PassSecondsNameThePassesThatRan) {
  auto A = te::placeholder({64}, Float(32), "A");
  auto B = te::compute(
      {64}, [&](Var i) { return A(i) * 2.0f; }, "B");
  auto s = te::create_schedule({B});
  IterVar xo, xi;
  (*s)[B].split((*s)[B].axis(0), 16, &xo, &xi);
  (*s)[B].vectorize(xi);

  std::map<std::string, double> all;
  lower::LowerOptions full;
  full.pass_seconds = &all;
  const LoweredFunc vectorized = lower::lower(*s, {A, B}, "double_it", full);
  for (const char *pass :
       {"infer_bound", "schedule_ops", "storage_flatten", "simplify", "fuse_with_next_loops", "pipeline_loops",
        "loop_partition", "unroll_loops", "vectorize_loops", "storage_rewrite", "remove_no_op", "verify_ir"}) {
    EXPECT_EQ(all.count(pass), 1u) << pass;
  }
  for (const auto &[pass, seconds] : all) EXPECT_GE(seconds, 0.0) << pass;

  std::map<std::string, double> few;
  lower::LowerOptions bare;
  bare.partition_loops = bare.unroll = bare.vectorize = bare.reuse_storage = false;
  bare.pass_seconds = &few;
  const LoweredFunc plain = lower::lower(*s, {A, B}, "double_it", bare);
  for (const char *pass : {"loop_partition", "unroll_loops", "vectorize_loops", "storage_rewrite"}) {
    EXPECT_EQ(few.count(pass), 0u) << pass;
  }
  // infer_bound to thread_sync, simplify, fuse_with_next_loops, pipeline_loops, remove_no_op, verify_ir
  EXPECT_EQ(few.size(), 10u);
  // Without the loop passes the vectorized loop stays a loop; with them it is gone.
  EXPECT_NE(body_text(plain).find("for (i.inner, 0, 16)"), std::string::npos) << body_text(plain);
  EXPECT_EQ(body_text(vectorized).find("for (i.inner"), std::string::npos) << body_text(vectorized);
  // A second lowering adds to the same entries.
  const double before = few.at("schedule_ops");
  lower::lower(*s, {A, B}, "double_it", bare);
  EXPECT_GT(few.at("schedule_ops"), before);
  EXPECT_EQ(few.size(), 10u);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

using namespace ir;
using testing::check_against_unscheduled;

TEST(Primitives, TileFuseReorderOnCopy) {
  auto A = te::placeholder({20, 12}, Float(32), "A");
  auto B = te::compute(
      {20, 12}, [&](Var i, Var j) { return A(i, j); }, "B");
  auto s = te::create_schedule({B});
  auto st = (*s)[B];
  IterVar xo, yo, xi, yi, f;
  st.tile(st.axis(0), st.axis(1), 8, 4, &xo, &yo, &xi, &yi);
  st.fuse(xo, yo, &f);
  st.reorder({f, yi, xi});
  check_against_unscheduled(*s, {A, B}, {{20, 12}, {20, 12}}, 0.0);
  auto fn = lower::lower(*s, {A, B}, "copy");
  EXPECT_EQ(to_string(fn.body), golden::kTile);
}

TEST(Primitives, ComputeAtAndInline) {
  Var n = te::var("n");
  auto A = te::placeholder({n}, Float(32), "A");
  auto B = te::compute(
      {n}, [&](Var i) { return A(i) * 2.0f; }, "B");
  auto C = te::compute(
      {n}, [&](Var i) { return B(i) + 1.0f; }, "C");
  {
    auto s = te::create_schedule({C});
    IterVar xo, xi;
    (*s)[C].split((*s)[C].axis(0), 4, &xo, &xi);
    (*s)[B].compute_at((*s)[C], xo);
    for (int64_t len : {3, 4, 10}) check_against_unscheduled(*s, {A, C}, {{len}, {len}}, 0.0);
    auto f = lower::lower(*s, {A, C}, "at");
    // B is allocated inside the outer loop of C with the size of one tile.
    EXPECT_EQ(to_string(f.body), golden::kAt);
  }
  {
    auto s = te::create_schedule({C});
    (*s)[B].compute_inline();
    check_against_unscheduled(*s, {A, C}, {{7}, {7}}, 0.0);
    auto f = lower::lower(*s, {A, C}, "inl");
    EXPECT_EQ(to_string(f.body), golden::kInline);
  }
}

te::Tensor matmul(const te::Tensor &A, const te::Tensor &B, const Expr &k_extent) {
  auto k = te::reduce_axis(k_extent, "k");
  return te::compute(
      {A.shape()[0], B.shape()[1]}, [&](Var i, Var j) { return te::sum(A(i, k) * B(k, j), {k}); }, "C");
}

TEST(Primitives, CacheReadAndCacheWriteOnMatmul) {
  auto A = te::placeholder({16, 24}, Float(32), "A");
  auto B = te::placeholder({24, 20}, Float(32), "B");
  auto C = matmul(A, B, 24);
  auto s = te::create_schedule({C});
  auto AL = s->cache_read(A, "local", {C.op()});
  auto CL = s->cache_write(C, "local");
  auto sc = (*s)[C];
  IterVar io, jo, ii, ji;
  sc.tile(sc.axis(0), sc.axis(1), 4, 8, &io, &jo, &ii, &ji);
  (*s)[CL].compute_at(sc, jo);
  auto scl = (*s)[CL];
  IterVar ko, ki;
  scl.split(scl.reduce_axis(0), 6, &ko, &ki);
  scl.reorder({ko, scl.axis(0), ki, scl.axis(1)});
  (*s)[AL].compute_at(scl, ko);
  auto f = check_against_unscheduled(*s, {A, B, C}, {{16, 24}, {24, 20}, {16, 20}}, 1e-4);
  EXPECT_EQ(to_string(f.body), golden::kCache);
}

TEST(Primitives, RfactorOfSum) {
  auto A = te::placeholder({8, 64}, Float(32), "A");
  auto k = te::reduce_axis(64, "k");
  auto S = te::compute(
      {8}, [&](Var i) { return te::sum(A(i, k), {k}); }, "S");
  auto s = te::create_schedule({S});
  IterVar ko, ki;
  (*s)[S].split(k, 16, &ko, &ki);
  auto SF = s->rfactor(S, ki);
  EXPECT_EQ(SF.ndim(), 2);
  EXPECT_EQ(*as_const_int(SF.shape()[0]), 16);
  auto f = check_against_unscheduled(*s, {A, S}, {{8, 64}, {8}}, 1e-4);
  EXPECT_EQ(to_string(f.body), golden::kRfactor);
}

TEST(Primitives, AnnotationsKeepValues) {
  auto A = te::placeholder({37, 19}, Float(32), "A");
  auto B = te::compute(
      {37, 19}, [&](Var i, Var j) { return A(i, j) * A(i, j) + 1.0f; }, "B");
  auto s = te::create_schedule({B});
  auto st = (*s)[B];
  IterVar jo, ji;
  st.split(st.axis(1), 8, &jo, &ji);
  st.parallel(st.axis(0));
  st.vectorize(ji);
  st.unroll(jo);
  auto f = check_against_unscheduled(*s, {A, B}, {{37, 19}, {37, 19}}, 0.0);
  std::string text = to_string(f.body);
  EXPECT_NE(text.find("parallel"), std::string::npos) << text;
  EXPECT_NE(text.find("ramp("), std::string::npos) << text;
}

TEST(Primitives, GpuBindingRunsInTheInterpreter) {
  auto A = te::placeholder({100}, Float(32), "A");
  auto B = te::compute(
      {100}, [&](Var i) { return A(i) + 3.0f; }, "B");
  auto s = te::create_schedule({B});
  IterVar bx, tx;
  (*s)[B].split((*s)[B].axis(0), 32, &bx, &tx);
  (*s)[B].bind(bx, "blockIdx.x");
  (*s)[B].bind(tx, "threadIdx.x");
  auto f = check_against_unscheduled(*s, {A, B}, {{100}, {100}}, 0.0, 3, /*with_c=*/true);
  std::string text = to_string(f.body);
  EXPECT_NE(text.find("blockIdx.x"), std::string::npos) << text;
  EXPECT_NE(text.find("threadIdx.x"), std::string::npos) << text;
}

TEST(Primitives, StorageAlignAndPragma) {
  auto A = te::placeholder({16, 16}, Float(32), "A");
  auto B = te::compute(
      {16, 16}, [&](Var i, Var j) { return A(i, j) * 2.0f; }, "B");
  auto C = te::compute(
      {16, 16}, [&](Var i, Var j) { return B(j, i) + 1.0f; }, "C");
  auto s = te::create_schedule({C});
  (*s)[B].storage_align((*s)[B].axis(0), 32, 1);
  (*s)[C].pragma((*s)[C].axis(0), "auto_unroll_max_step", 16);
  auto f = check_against_unscheduled(*s, {A, C}, {{16, 16}, {16, 16}}, 0.0);
  std::string text = to_string(f.body);
  // Rows of B are 33 elements apart.
  EXPECT_NE(text.find("allocate B[float32 * 528]"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

using namespace ir;

// argmax over rows as a tuple reduction (two outputs, one loop nest), and a two-output
// elementwise compute, checked against plain C++.
TEST(Primitives, MultiOutputComputeAndTupleReduction) {
  const int m = 5, n = 9;
  auto X = te::placeholder({m, n}, Float(32), "X");
  auto k = te::reduce_axis(n, "k");
  auto am = te::compute_multi(
      {m},
      [&](const std::vector<Var> &i) {
        return te::tuple_reduce(
            [](const std::vector<Var> &l, const std::vector<Var> &r) {
              Expr take_r = r[1] > l[1];
              return std::vector<Expr>{select(take_r, r[0], l[0]), select(take_r, r[1], l[1])};
            },
            {Expr(-1), min_value(Float(32))}, {Expr(k->var), X(i[0], k)}, {k});
      },
      "argmax");
  auto both = te::compute_multi(
      {m, n},
      [&](const std::vector<Var> &i) {
        return std::vector<Expr>{X(i[0], i[1]) * 2.0f, -X(i[0], i[1])};
      },
      "pair");
  auto s1 = te::create_schedule({am[0].op()});
  IterVar ko, ki;
  (*s1)[am[0]].split(k, 4, &ko, &ki);
  auto f1 = lower::lower(*s1, {X, am[0], am[1]}, "argmax");
  auto s2 = te::create_schedule({both[0].op()});
  (*s2)[both[0]].vectorize((*s2)[both[0]].axis(1));
  auto f2 = lower::lower(*s2, {X, both[0], both[1]}, "pair");

  auto x = testing::make_tensor({m, n}, Float(32));
  testing::fill_random(x, 5);
  const float *xp = static_cast<const float *>(x.data());
  for (bool use_c : {false, true}) {
    auto idx = testing::make_tensor({m}, Int(32));
    auto val = testing::make_tensor({m}, Float(32));
    auto out = use_c ? testing::run_c(f1, {x, idx, val}) : testing::run_interp(f1, {x, idx, val});
    for (int i = 0; i < m; ++i) {
      int best = 0;
      for (int j = 1; j < n; ++j) {
        if (xp[i * n + j] > xp[i * n + best]) best = j;
      }
      EXPECT_EQ(static_cast<const int32_t *>(out[1].data())[i], best) << "row " << i << (use_c ? " (C)" : "");
      EXPECT_EQ(static_cast<const float *>(out[2].data())[i], xp[i * n + best]);
    }
    auto a = testing::make_tensor({m, n}, Float(32));
    auto b = testing::make_tensor({m, n}, Float(32));
    auto out2 = use_c ? testing::run_c(f2, {x, a, b}) : testing::run_interp(f2, {x, a, b});
    for (int i = 0; i < m * n; ++i) {
      EXPECT_EQ(static_cast<const float *>(out2[1].data())[i], xp[i] * 2.0f);
      EXPECT_EQ(static_cast<const float *>(out2[2].data())[i], -xp[i]);
    }
  }
}

}  // namespace
}  // namespace kiln
