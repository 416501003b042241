// The schedule primitives that return the loops they make, s[C] on the owned schedule, and
// C.axis(i): the same schedules as the out-pointer forms, written in one line each.
#include <gtest/gtest.h>

#include <sstream>

#include "compiler/ir/error.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/lower/lower.h"
#include "compiler/te/schedule.h"

namespace kiln::te {
namespace {

std::string lowered(const Schedule &s, const std::vector<Tensor> &args) {
  std::ostringstream os;
  os << lower::lower(s, args, "f");
  return os.str();
}

TEST(EaseApi, SplitReturnsOuterAndInnerAsTheOutPointerFormDoes) {
  auto make = [] {
    Tensor A = placeholder({Expr(64)}, ir::Float(32), "A");
    Tensor C = compute(
        {Expr(64)}, [&](Var i) { return A(i) + 1.0f; }, "C");
    return std::make_pair(A, C);
  };
  auto [A1, C1] = make();
  auto s1 = create_schedule({C1});
  auto [xo, xi] = s1[C1].split(C1.axis(0), 16);
  EXPECT_EQ(xo->var.name(), "i.outer");
  EXPECT_EQ(xi->var.name(), "i.inner");
  s1[C1].reorder({xi, xo});

  auto [A2, C2] = make();
  std::unique_ptr<Schedule> s2 = create_schedule({C2});  // the old spelling still compiles
  IterVar o, i;
  (*s2)[C2].split((*s2)[C2].axis(0), 16, &o, &i);
  (*s2)[C2].reorder({i, o});
  EXPECT_EQ(lowered(*s1, {A1, C1}), lowered(*s2, {A2, C2}));
}

TEST(EaseApi, TileWithNamedFactorsAndFuse) {
  Tensor A = placeholder({Expr(32), Expr(24)}, ir::Float(32), "A");
  Tensor C = compute(
      {Expr(32), Expr(24)}, [&](Var i, Var j) { return A(i, j) * 2.0f; }, "C");
  auto s = create_schedule({C});
  auto [xo, yo, xi, yi] = s[C].tile(C.axis(0), C.axis(1), {/*x=*/8, /*y=*/4});
  IterVar f = s[C].fuse(xo, yo);
  EXPECT_EQ(f->var.name(), "i.outer.j.outer.fused");
  std::string text = lowered(*s, {A, C});
  EXPECT_NE(text.find("for (i.outer.j.outer.fused, 0, 24)"), std::string::npos) << text;
  EXPECT_NE(text.find("for (i.inner, 0, 8)"), std::string::npos) << text;
  EXPECT_NE(text.find("for (j.inner, 0, 4)"), std::string::npos) << text;
}

TEST(EaseApi, AxisOfAPlaceholderOrPastTheRankIsAnExprError) {
  Tensor A = placeholder({Expr(4)}, ir::Float(32), "A");
  Tensor C = compute(
      {Expr(4)}, [&](Var i) { return A(i); }, "C");
  EXPECT_THROW(A.axis(0), ExprError);
  EXPECT_THROW(C.axis(1), ExprError);
  EXPECT_THROW(C.reduce_axis(0), ExprError);
  auto s = create_schedule({C});
  s[C].split(C.axis(0), 2);
  EXPECT_THROW(s[C].split(C.axis(0), 2), ScheduleError);  // already split
}

}  // namespace
}  // namespace kiln::te
