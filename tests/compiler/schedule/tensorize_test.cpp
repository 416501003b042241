// tensorize: loops replaced by an intrinsic declared by its compute pattern, with values checked
// against the unscheduled operator, and mismatching patterns rejected with ScheduleError.
#include <gtest/gtest.h>

#include "tests/compiler/schedule/harness.h"

namespace kiln {
namespace {

using namespace ir;
using te::TensorIntrinBuffers;

// gemv on a 4x8 block: c[i] (+)= sum_k a[i, k] * b[k], emitted as plain loops over the region
// buffers, so that the result can be checked. `mode`: 0 = full (init + update), 1 = reset,
// 2 = update.
Stmt gemv_body(const TensorIntrinBuffers &bf, int mode) {
  const Buffer &a = bf.inputs[0], &b = bf.inputs[1], &c = bf.outputs[0];
  Var i("ii"), k("kk");
  Expr ci = bf.output_offsets[0] + i * c.strides[0];
  Stmt zero = StoreNode::make(c.data, make_zero(Float(32)), ci);
  Expr av = LoadNode::make(Float(32), a.data, bf.input_offsets[0] + i * a.strides[0] + k * a.strides[1]);
  Expr bv = LoadNode::make(Float(32), b.data, bf.input_offsets[1] + k * b.strides[0]);
  Stmt acc = StoreNode::make(c.data, LoadNode::make(Float(32), c.data, ci) + av * bv, ci);
  Stmt update = ForNode::make(k, 0, 8, ForKind::Serial, acc);
  Stmt body;
  if (mode == 0) body = BlockNode::make(zero, update);
  if (mode == 1) body = zero;
  if (mode == 2) body = update;
  return ForNode::make(i, 0, 4, ForKind::Serial, body);
}

te::TensorIntrin gemv_intrin() {
  auto a = te::placeholder({4, 8}, Float(32), "a");
  auto b = te::placeholder({8}, Float(32), "b");
  auto k = te::reduce_axis(8, "k");
  auto c = te::compute(
      {4}, [&](Var i) { return te::sum(a(i, k) * b(k), {k}); }, "c");
  return te::decl_tensor_intrin(
      "gemv4x8", c, [](const TensorIntrinBuffers &bf) { return gemv_body(bf, 0); },
      [](const TensorIntrinBuffers &bf) { return gemv_body(bf, 1); },
      [](const TensorIntrinBuffers &bf) { return gemv_body(bf, 2); });
}

TEST(Tensorize, WholeReductionInsideTheIntrinsic) {
  auto A = te::placeholder({16, 8}, Float(32), "A");
  auto B = te::placeholder({8}, Float(32), "B");
  auto k = te::reduce_axis(8, "k");
  auto C = te::compute(
      {16}, [&](Var i) { return te::sum(A(i, k) * B(k), {k}); }, "C");
  auto s = te::create_schedule({C});
  IterVar io, ii;
  (*s)[C].split((*s)[C].axis(0), 4, &io, &ii);
  (*s)[C].tensorize(ii, gemv_intrin());
  auto f = testing::check_against_unscheduled(*s, {A, B, C}, {{16, 8}, {8}, {16}}, 1e-4);
  std::string text = to_string(f.body);
  // One loop over the blocks; the intrinsic's own loops inside, addressing the real buffers.
  EXPECT_NE(text.find("for (i.outer, 0, 4)"), std::string::npos) << text;
  EXPECT_NE(text.find("for (ii, 0, 4)"), std::string::npos) << text;
  EXPECT_EQ(text.find("i.inner"), std::string::npos) << text;
}

TEST(Tensorize, ResetAndUpdateWhenReductionLoopsAreOutside) {
  auto A = te::placeholder({16, 24}, Float(32), "A");
  auto B = te::placeholder({24}, Float(32), "B");
  auto k = te::reduce_axis(24, "k");
  auto C = te::compute(
      {16}, [&](Var i) { return te::sum(A(i, k) * B(k), {k}); }, "C");
  auto s = te::create_schedule({C});
  auto st = (*s)[C];
  IterVar io, ii, ko, ki;
  st.split(st.axis(0), 4, &io, &ii);
  st.split(k, 8, &ko, &ki);
  st.reorder({io, ko, ii, ki});
  st.tensorize(ii, gemv_intrin());
  testing::check_against_unscheduled(*s, {A, B, C}, {{16, 24}, {24}, {16}}, 1e-4);
}

TEST(Tensorize, MismatchingPatternIsAScheduleError) {
  auto A = te::placeholder({16, 8}, Float(32), "A");
  auto B = te::placeholder({8}, Float(32), "B");
  auto k = te::reduce_axis(8, "k");
  // A + B instead of A * B.
  auto C = te::compute(
      {16}, [&](Var i) { return te::sum(A(i, k) + B(k), {k}); }, "C");
  auto s = te::create_schedule({C});
  IterVar io, ii;
  (*s)[C].split((*s)[C].axis(0), 4, &io, &ii);
  (*s)[C].tensorize(ii, gemv_intrin());
  try {
    lower::lower(*s, {A, B, C}, "f");
    ADD_FAILURE() << "no error";
  } catch (const ScheduleError &e) {
    std::string m = e.what();
    EXPECT_NE(m.find("stage C"), std::string::npos) << m;
    EXPECT_NE(m.find("axis i.inner"), std::string::npos) << m;
    EXPECT_NE(m.find("does not match"), std::string::npos) << m;
  }
}

TEST(Tensorize, WrongExtentIsAScheduleError) {
  auto A = te::placeholder({16, 8}, Float(32), "A");
  auto B = te::placeholder({8}, Float(32), "B");
  auto k = te::reduce_axis(8, "k");
  auto C = te::compute(
      {16}, [&](Var i) { return te::sum(A(i, k) * B(k), {k}); }, "C");
  auto s = te::create_schedule({C});
  IterVar io, ii;
  (*s)[C].split((*s)[C].axis(0), 8, &io, &ii);
  (*s)[C].tensorize(ii, gemv_intrin());
  try {
    lower::lower(*s, {A, B, C}, "f");
    ADD_FAILURE() << "no error";
  } catch (const ScheduleError &e) {
    std::string m = e.what();
    EXPECT_NE(m.find("has extent 8"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace kiln
