// Before/expected pairs for the rewrite simplifier, compared structurally.
#include <gtest/gtest.h>

#include <chrono>
#include <limits>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/op.h"
#include "tests/compiler/ir/ir_equal.h"

namespace kiln::arith {
namespace {

using namespace ir;
using ir::testing::ir_equal;

Expr i8(int64_t v) { return make_const(Int(8), v); }
Expr i16(int64_t v) { return make_const(Int(16), v); }
Expr i64(int64_t v) { return make_const(Int(64), v); }
Expr u8(int64_t v) { return make_const(UInt(8), v); }
Expr u32(int64_t v) { return make_const(UInt(32), v); }
Expr f32(double v) { return make_const(Float(32), v); }
Expr f64(double v) { return make_const(Float(64), v); }

#define EXPECT_SIMPLIFY(before, expected) \
  EXPECT_TRUE(ir_equal(simplify(before), expected)) << "input: " << to_string(before)
#define EXPECT_ANA_SIMPLIFY(ana, before, expected) \
  EXPECT_TRUE(ir_equal((ana).simplify(before), expected)) << "input: " << to_string(before)
// Leaves the expression as it is (possibly rebuilt, but structurally the same).
#define EXPECT_UNCHANGED(before) EXPECT_SIMPLIFY(before, before)

class SimplifyTest : public ::testing::Test {
 protected:
  Var x{"x"}, y{"y"}, z{"z"}, i{"i"}, j{"j"}, n{"n"};
  Var x8{"x8", Int(8)}, u{"u", UInt(32)}, ub{"ub", UInt(8)};
  Var x64{"x64", Int(64)};
  Var fx{"fx", Float(32)}, fy{"fy", Float(32)};
  Var c{"c", Bool()}, d{"d", Bool()};
};

// ---------------------------------------------------------------------------------------------
// Constant folding

TEST_F(SimplifyTest, FoldInt32Arithmetic) {
  EXPECT_SIMPLIFY(Expr(3) + 4, Expr(7));
  EXPECT_SIMPLIFY(Expr(3) - 10, Expr(-7));
  EXPECT_SIMPLIFY(Expr(6) * -7, Expr(-42));
  EXPECT_SIMPLIFY(min(Expr(3), Expr(-2)), Expr(-2));
  EXPECT_SIMPLIFY(max(Expr(3), Expr(-2)), Expr(3));
}

TEST_F(SimplifyTest, FoldDivisionRoundsLikeC) {
  EXPECT_SIMPLIFY(truncdiv(Expr(-7), Expr(2)), Expr(-3));
  EXPECT_SIMPLIFY(floordiv(Expr(-7), Expr(2)), Expr(-4));
  EXPECT_SIMPLIFY(truncmod(Expr(-7), Expr(2)), Expr(-1));
  EXPECT_SIMPLIFY(floormod(Expr(-7), Expr(2)), Expr(1));
  EXPECT_SIMPLIFY(truncdiv(Expr(7), Expr(-2)), Expr(-3));
  EXPECT_SIMPLIFY(floordiv(Expr(7), Expr(-2)), Expr(-4));
  EXPECT_SIMPLIFY(truncmod(Expr(7), Expr(-2)), Expr(1));
  EXPECT_SIMPLIFY(floormod(Expr(7), Expr(-2)), Expr(-1));
  EXPECT_SIMPLIFY(floordiv(Expr(8), Expr(2)), Expr(4));
  EXPECT_SIMPLIFY(Expr(-8) / 2, Expr(-4));
}

TEST_F(SimplifyTest, DivisionByZeroIsLeftAlone) {
  EXPECT_UNCHANGED(truncdiv(Expr(7), Expr(0)));
  EXPECT_UNCHANGED(floordiv(Expr(7), Expr(0)));
  EXPECT_UNCHANGED(floormod(Expr(7), Expr(0)));
  EXPECT_UNCHANGED(truncmod(Expr(7), Expr(0)));
  EXPECT_UNCHANGED(floordiv(x, Expr(0)));
  EXPECT_UNCHANGED(floormod(x, Expr(0)));
  EXPECT_UNCHANGED(truncdiv(x, Expr(0)));
  EXPECT_UNCHANGED(f32(1.0) / f32(0.0));
}

TEST_F(SimplifyTest, FoldNarrowIntegersOnlyWhenTheResultFits) {
  EXPECT_SIMPLIFY(i8(100) + i8(27), i8(127));
  EXPECT_UNCHANGED(i8(100) + i8(28));
  EXPECT_UNCHANGED(i8(-128) - i8(1));
  EXPECT_UNCHANGED(i8(16) * i8(8));
  EXPECT_UNCHANGED(truncdiv(i8(-128), i8(-1)));
  EXPECT_SIMPLIFY(i8(-128) / i8(2), i8(-64));
  EXPECT_SIMPLIFY(i16(300) * i16(100), i16(30000));
  EXPECT_UNCHANGED(i16(300) * i16(200));
}

TEST_F(SimplifyTest, FoldInt64) {
  EXPECT_SIMPLIFY(i64(int64_t{1} << 40) * i64(4), i64(int64_t{1} << 42));
  EXPECT_UNCHANGED(i64(std::numeric_limits<int64_t>::max()) + i64(1));
  EXPECT_UNCHANGED(i64(std::numeric_limits<int64_t>::min()) / i64(-1));
  EXPECT_SIMPLIFY(floormod(i64(-9), i64(4)), i64(3));
}

TEST_F(SimplifyTest, FoldUnsigned) {
  EXPECT_SIMPLIFY(u8(200) + u8(55), u8(255));
  EXPECT_UNCHANGED(u8(200) + u8(56));
  EXPECT_SIMPLIFY(u32(5) - u32(3), u32(2));
  EXPECT_UNCHANGED(u32(3) - u32(5));
  EXPECT_SIMPLIFY(u32(7) / u32(2), u32(3));
  EXPECT_SIMPLIFY(u32(3) < u32(5), const_true());
}

TEST_F(SimplifyTest, FoldFloatInTheNodePrecision) {
  EXPECT_SIMPLIFY(f32(1.5) + f32(2.25), f32(3.75));
  EXPECT_SIMPLIFY(f32(0.1) + f32(0.2), f32(static_cast<double>(0.1f + 0.2f)));
  EXPECT_SIMPLIFY(f64(0.1) + f64(0.2), f64(0.1 + 0.2));
  EXPECT_SIMPLIFY(f32(3.0) * f32(0.5), f32(1.5));
  EXPECT_SIMPLIFY(f64(1.0) / f64(4.0), f64(0.25));
  EXPECT_SIMPLIFY(min(f32(1.5), f32(2.5)), f32(1.5));
  EXPECT_SIMPLIFY(max(f32(1.5), f32(2.5)), f32(2.5));
  EXPECT_SIMPLIFY(f32(1.5) < f32(2.0), const_true());
  EXPECT_SIMPLIFY(f64(1.5) == f64(2.0), const_false());
}

TEST_F(SimplifyTest, FoldBool) {
  EXPECT_SIMPLIFY(const_true() && const_false(), const_false());
  EXPECT_SIMPLIFY(const_true() || const_false(), const_true());
  EXPECT_SIMPLIFY(!const_true(), const_false());
  EXPECT_SIMPLIFY(const_true() == const_false(), const_false());
}

TEST_F(SimplifyTest, FoldCasts) {
  EXPECT_SIMPLIFY(cast(Int(32), f32(3.7)), Expr(3));
  EXPECT_SIMPLIFY(cast(Int(32), f32(-3.7)), Expr(-3));
  EXPECT_SIMPLIFY(CastNode::make(Float(32), Expr(7)), f32(7.0));
  EXPECT_SIMPLIFY(CastNode::make(Int(64), Expr(-5)), i64(-5));
  EXPECT_SIMPLIFY(CastNode::make(Bool(), Expr(5)), const_true());
  EXPECT_SIMPLIFY(CastNode::make(Float(32), f64(0.1)), f32(0.1));
  EXPECT_UNCHANGED(CastNode::make(Int(8), Expr(300)));
  EXPECT_UNCHANGED(CastNode::make(UInt(8), Expr(-1)));
  EXPECT_UNCHANGED(CastNode::make(Int(32), f64(1e20)));
}

// ---------------------------------------------------------------------------------------------
// Identities and linear forms

TEST_F(SimplifyTest, Identities) {
  EXPECT_SIMPLIFY(x + 0, x);
  EXPECT_SIMPLIFY(0 + x, x);
  EXPECT_SIMPLIFY(x - 0, x);
  EXPECT_SIMPLIFY(x * 1, x);
  EXPECT_SIMPLIFY(1 * x, x);
  EXPECT_SIMPLIFY(x * 0, Expr(0));
  EXPECT_SIMPLIFY(x - x, Expr(0));
  EXPECT_SIMPLIFY(min(x, x), x);
  EXPECT_SIMPLIFY(max(x, x), x);
  EXPECT_SIMPLIFY(x / 1, x);
  EXPECT_SIMPLIFY(floordiv(x, 1), x);
  EXPECT_SIMPLIFY(floormod(x, 1), Expr(0));
  EXPECT_SIMPLIFY(truncmod(x, 1), Expr(0));
  EXPECT_SIMPLIFY(fx * 1.0f, fx);
  EXPECT_SIMPLIFY(fx + 0.0f, fx);
  EXPECT_SIMPLIFY(fx / 1.0f, fx);
  EXPECT_UNCHANGED(fx * 0.0f);  // NaN * 0 is NaN
  EXPECT_UNCHANGED(fx - fx);    // inf - inf is NaN
}

TEST_F(SimplifyTest, CollectLinearTerms) {
  EXPECT_SIMPLIFY((x * 4 + y * 2 + x * 3 + 5) - (x + 5), x * 6 + y * 2);
  EXPECT_SIMPLIFY((x + 1) + 2, x + 3);
  EXPECT_SIMPLIFY((x + 2) * 4, x * 4 + 8);
  EXPECT_SIMPLIFY(3 + x, x + 3);
  EXPECT_SIMPLIFY(x - (x + y), 0 - y);
  EXPECT_SIMPLIFY((x - y) + y, x);
  EXPECT_SIMPLIFY((x - 3) - (y - 5), (x - y) + 2);
  EXPECT_SIMPLIFY(5 - (x + 2), 3 - x);
  EXPECT_SIMPLIFY(x * 2 - x * 2, Expr(0));
  EXPECT_SIMPLIFY((x * y + 1) - x * y, Expr(1));
  EXPECT_SIMPLIFY(x * 2 * 3, x * 6);
  EXPECT_SIMPLIFY(y + x - y + x, x * 2);
  EXPECT_SIMPLIFY((x + y) - (y + x), Expr(0));
  EXPECT_SIMPLIFY(x - 1 - 1, x - 2);
}

TEST_F(SimplifyTest, RecombineDivAndMod) {
  EXPECT_SIMPLIFY(floordiv(x, 4) * 4 + floormod(x, 4), x);
  EXPECT_SIMPLIFY(truncdiv(x, 8) * 8 + truncmod(x, 8), x);
  EXPECT_SIMPLIFY(floormod(x, 4) + floordiv(x, 4) * 4 + y, x + y);
  EXPECT_SIMPLIFY(floordiv(x, 4) * 8 + floormod(x, 4) * 2, x * 2);
  // Mixed floor/truncating halves do not recombine.
  EXPECT_UNCHANGED(floordiv(x, 4) * 4 + truncmod(x, 4));
}

// The flattened index of a tensor read through one fused loop variable: the digits of x in a
// mixed radix add back up to x.
TEST_F(SimplifyTest, RecombineNestedDivAndModOfAFusedIndex) {
  EXPECT_SIMPLIFY(floordiv(x, 12) * 12 + floormod(floordiv(x, 4), 3) * 4 + floormod(x, 4), x);
  EXPECT_SIMPLIFY(floormod(x, 4) + floormod(floordiv(x, 4), 3) * 4 + floordiv(x, 12) * 12 + y, x + y);
  EXPECT_SIMPLIFY(
      floordiv(x, 385) * 385 + floormod(floordiv(x, 77), 5) * 77 + floormod(floordiv(x, 11), 7) * 11 + floormod(x, 11),
      x);
  EXPECT_SIMPLIFY(truncdiv(x, 6) * 6 + truncmod(truncdiv(x, 2), 3) * 2 + truncmod(x, 2), x);
  // The digit of another radix does not combine.
  EXPECT_UNCHANGED(floordiv(x, 12) * 12 + floormod(floordiv(x, 4), 4) * 4);
}

TEST_F(SimplifyTest, NarrowAndUnsignedLinearForms) {
  EXPECT_SIMPLIFY((u + 5) - 3, u + 2);
  EXPECT_SIMPLIFY((u - 5) + 5, Expr(u));
  EXPECT_SIMPLIFY((x8 + i8(3)) + i8(4), x8 + i8(7));
  // 200 is not an int8: nothing is folded into a wrong constant.
  EXPECT_UNCHANGED((x8 + i8(100)) + i8(100));
}

// ---------------------------------------------------------------------------------------------
// Division and modulo

TEST_F(SimplifyTest, DivModWithBounds) {
  Analyzer ana;
  ana.bind(x, Range(0, 16));
  ana.bind(y, Range(0, 8));
  EXPECT_ANA_SIMPLIFY(ana, floordiv(x * 8 + y, 8), x);
  EXPECT_ANA_SIMPLIFY(ana, floormod(x * 8 + y, 8), y);
  EXPECT_ANA_SIMPLIFY(ana, truncdiv(x * 8 + y, 8), x);
  EXPECT_ANA_SIMPLIFY(ana, truncmod(x * 8 + y, 8), y);
  EXPECT_ANA_SIMPLIFY(ana, floormod(x, 16), x);
  EXPECT_ANA_SIMPLIFY(ana, floordiv(y, 8), Expr(0));
  EXPECT_ANA_SIMPLIFY(ana, floordiv(y + 8, 8), Expr(1));
  EXPECT_ANA_SIMPLIFY(ana, floormod(y + 8, 8), y);
  EXPECT_ANA_SIMPLIFY(ana, truncdiv(x, 4), floordiv(x, 4));
  EXPECT_ANA_SIMPLIFY(ana, truncmod(x, 4), floormod(x, 4));
  EXPECT_ANA_SIMPLIFY(ana, floordiv(x * 8 + y + 16, 8), x + 2);
  EXPECT_ANA_SIMPLIFY(ana, floordiv(x * 4 + floordiv(y, 2), 4), x);
}

// A dividend below a non-constant divisor: floormod(j, d) is j and floordiv(j, d) is 0 only when
// j.max < d.min; at j.max == d.min the quotient reaches 1 and nothing may be rewritten.
TEST_F(SimplifyTest, DivModByAVariableAtTheBoundary) {
  const int64_t kN = 7;
  {
    // j in [0, n], i in [n - 1, n + 3]: i + 1 >= n reaches j's maximum.
    Analyzer ana;
    ana.bind(j, Range(0, kN + 1));
    ana.bind(i, Range(kN - 1, 5));
    EXPECT_ANA_SIMPLIFY(ana, floormod(j, i + 1), floormod(j, i + 1));
    EXPECT_ANA_SIMPLIFY(ana, floordiv(j, i + 1), floordiv(j, i + 1));
    EXPECT_ANA_SIMPLIFY(ana, truncmod(j, i + 1), floormod(j, i + 1));
    EXPECT_ANA_SIMPLIFY(ana, truncdiv(j, i + 1), floordiv(j, i + 1));
    // i itself reaches n - 1 < n.
    EXPECT_ANA_SIMPLIFY(ana, floormod(j, i), floormod(j, i));
    EXPECT_ANA_SIMPLIFY(ana, floordiv(j, i), floordiv(j, i));
  }
  {
    // i in [n, n + 4]: i == n meets j's maximum, i + 1 lies above it.
    Analyzer ana;
    ana.bind(j, Range(0, kN + 1));
    ana.bind(i, Range(kN, 5));
    EXPECT_ANA_SIMPLIFY(ana, floormod(j, i), floormod(j, i));
    EXPECT_ANA_SIMPLIFY(ana, floordiv(j, i), floordiv(j, i));
    EXPECT_ANA_SIMPLIFY(ana, floormod(j, i + 1), j);
    EXPECT_ANA_SIMPLIFY(ana, floordiv(j, i + 1), Expr(0));
    EXPECT_ANA_SIMPLIFY(ana, truncmod(j, i + 1), j);
    EXPECT_ANA_SIMPLIFY(ana, truncdiv(j, i + 1), Expr(0));
  }
  {
    // i in [n + 1, n + 5]: strictly above j.
    Analyzer ana;
    ana.bind(j, Range(0, kN + 1));
    ana.bind(i, Range(kN + 1, 5));
    EXPECT_ANA_SIMPLIFY(ana, floormod(j, i), j);
    EXPECT_ANA_SIMPLIFY(ana, floordiv(j, i), Expr(0));
  }
  {
    // A dividend that may be negative is never rewritten this way.
    Analyzer ana;
    ana.bind(j, Range(-1, kN + 2));
    ana.bind(i, Range(kN + 1, 5));
    EXPECT_ANA_SIMPLIFY(ana, floormod(j, i), floormod(j, i));
    EXPECT_ANA_SIMPLIFY(ana, floordiv(j, i), floordiv(j, i));
  }
}

TEST_F(SimplifyTest, DivModWithoutBounds) {
  EXPECT_SIMPLIFY(truncdiv(x * 4, 2), x * 2);
  EXPECT_SIMPLIFY(floordiv(x * 4, 2), x * 2);
  EXPECT_SIMPLIFY(truncdiv(x * 6 + 9, 3), x * 2 + 3);
  EXPECT_UNCHANGED(truncdiv(x * 4 + 3, 2));
  EXPECT_SIMPLIFY(floordiv(floordiv(x, 4), 8), floordiv(x, 32));
  EXPECT_SIMPLIFY(truncdiv(truncdiv(x, 2), 3), truncdiv(x, 6));
  EXPECT_SIMPLIFY(floormod(floormod(x, 16), 4), floormod(x, 4));
  EXPECT_SIMPLIFY(floormod(x * 8 + y, 8), floormod(y, 8));
  EXPECT_SIMPLIFY(floordiv(x * 8 + y, 8), x + floordiv(y, 8));
  EXPECT_SIMPLIFY(floordiv(x * 8 + y + 17, 8), (x + floordiv(y + 1, 8)) + 2);
  EXPECT_SIMPLIFY(floordiv(x * 4 + 4, 8), floordiv(x + 1, 2));
  EXPECT_SIMPLIFY(floormod(x * 4, 8), floormod(x, 2) * 4);
  EXPECT_SIMPLIFY(floormod(x * 6, 3), Expr(0));
  EXPECT_SIMPLIFY(truncmod(x * 6, 3), Expr(0));
  EXPECT_SIMPLIFY(floormod(y + 17, 8), floormod(y + 1, 8));
  EXPECT_UNCHANGED(floormod(x, 16));
  EXPECT_UNCHANGED(truncdiv(x, 4));
  EXPECT_UNCHANGED(floordiv(x, -4));
}

// ---------------------------------------------------------------------------------------------
// Min / max

TEST_F(SimplifyTest, MinMax) {
  EXPECT_SIMPLIFY(min(x + 1, x + 3), x + 1);
  EXPECT_SIMPLIFY(max(x + 1, x + 3), x + 3);
  EXPECT_SIMPLIFY(min(Expr(5), x), min(x, 5));
  EXPECT_SIMPLIFY(min(min(x, 5), 3), min(x, 3));
  EXPECT_SIMPLIFY(max(max(x, 2), 7), max(x, 7));
  EXPECT_SIMPLIFY(min(x, max(x, y)), x);
  EXPECT_SIMPLIFY(max(x, min(x, y)), x);
  EXPECT_SIMPLIFY(min(min(x, y), x), min(x, y));
  EXPECT_SIMPLIFY(max(y, max(x, y)), max(x, y));
  EXPECT_SIMPLIFY(min(floormod(x, 8), 8), floormod(x, 8));
  EXPECT_SIMPLIFY(max(floormod(x, 8), -1), floormod(x, 8));
  EXPECT_UNCHANGED(min(x, y));
  EXPECT_UNCHANGED(max(fx, fy));
}

TEST_F(SimplifyTest, MinMaxWithBounds) {
  Analyzer ana;
  ana.bind(x, Range(0, 4));
  ana.bind(y, Range(10, 10));
  EXPECT_ANA_SIMPLIFY(ana, min(x, y), x);
  EXPECT_ANA_SIMPLIFY(ana, max(x, y), y);
  EXPECT_ANA_SIMPLIFY(ana, min(x * 4, 12), x * 4);
  EXPECT_ANA_SIMPLIFY(ana, max(x - 3, 0), Expr(0));
  EXPECT_ANA_SIMPLIFY(ana, max(x - 2, 0), max(x - 2, 0));
}

// ---------------------------------------------------------------------------------------------
// Comparisons

TEST_F(SimplifyTest, ComparisonsAreNormalised) {
  EXPECT_SIMPLIFY(x + 1 < y + 3, x < y + 2);
  EXPECT_SIMPLIFY(x + 2 < 5, x < 3);
  EXPECT_SIMPLIFY(x * 2 < 10, x < 5);
  EXPECT_SIMPLIFY(x * 4 < 7, x < 2);
  EXPECT_SIMPLIFY(x * 4 <= 7, x <= 1);
  EXPECT_SIMPLIFY(x > 3, Expr(3) < x);
  EXPECT_SIMPLIFY(x >= y, y <= x);
  EXPECT_SIMPLIFY(x + 1 == 5, x == 4);
  EXPECT_SIMPLIFY(x * 2 == 3, const_false());
  EXPECT_SIMPLIFY(x * 2 != 3, const_true());
  EXPECT_SIMPLIFY(x * 2 == y * 2, x == y);
  EXPECT_SIMPLIFY(x - y == 0, x == y);
  EXPECT_SIMPLIFY(x == x, const_true());
  EXPECT_SIMPLIFY(x < x, const_false());
  EXPECT_SIMPLIFY(x + 1 > x, const_true());
  EXPECT_SIMPLIFY(floormod(x, 8) < 8, const_true());
  EXPECT_SIMPLIFY(floormod(x, 8) >= 0, const_true());
  EXPECT_UNCHANGED(x < y);
}

TEST_F(SimplifyTest, ComparisonsWithBounds) {
  Analyzer ana;
  ana.bind(i, Range(0, 32));
  ana.bind(j, Range(0, 32));
  EXPECT_ANA_SIMPLIFY(ana, i * 32 + j < 1024, const_true());
  EXPECT_ANA_SIMPLIFY(ana, i * 32 + j >= 1024, const_false());
  EXPECT_ANA_SIMPLIFY(ana, i * 32 + j < 1000, i * 32 + j < 1000);
  EXPECT_ANA_SIMPLIFY(ana, i < 40, const_true());
  EXPECT_ANA_SIMPLIFY(ana, i == 40, const_false());
}

TEST_F(SimplifyTest, NarrowComparisonsUseBoundsOnly) {
  EXPECT_SIMPLIFY(x8 <= i8(127), const_true());
  EXPECT_SIMPLIFY(ub < u8(0), const_false());
  // x8 + 1 may wrap around: not rewritten into x8 < 4.
  EXPECT_UNCHANGED(x8 + i8(1) < i8(5));
}

// ---------------------------------------------------------------------------------------------
// Logic and select

TEST_F(SimplifyTest, Logic) {
  EXPECT_SIMPLIFY(const_true() && c, Expr(c));
  EXPECT_SIMPLIFY(const_false() && c, const_false());
  EXPECT_SIMPLIFY(c || const_true(), const_true());
  EXPECT_SIMPLIFY(c || const_false(), Expr(c));
  EXPECT_SIMPLIFY(c && c, Expr(c));
  EXPECT_SIMPLIFY(c && !c, const_false());
  EXPECT_SIMPLIFY(c || !c, const_true());
  EXPECT_SIMPLIFY(!!c, Expr(c));
  EXPECT_SIMPLIFY(!(x < y), y <= x);
  EXPECT_SIMPLIFY(!(x <= y), y < x);
  EXPECT_SIMPLIFY(!(x == y), x != y);
  EXPECT_SIMPLIFY(!(c && d), !c || !d);
  EXPECT_SIMPLIFY(c == const_true(), Expr(c));
  EXPECT_SIMPLIFY(c == const_false(), !c);
  EXPECT_UNCHANGED(!(fx < fy));  // NaN: not the same as fy <= fx
}

TEST_F(SimplifyTest, LogicOnComparisons) {
  EXPECT_SIMPLIFY(x < 5 && x < 3, x < 3);
  EXPECT_SIMPLIFY(x < 5 || x < 3, x < 5);
  EXPECT_SIMPLIFY(x < 3 && 5 < x, const_false());
  EXPECT_SIMPLIFY(x < 5 || 3 < x, const_true());
  EXPECT_SIMPLIFY(x < y && y <= x, const_false());
  EXPECT_UNCHANGED(2 < x && x < 5);
}

TEST_F(SimplifyTest, Select) {
  EXPECT_SIMPLIFY(select(const_true(), x, y), x);
  EXPECT_SIMPLIFY(select(const_false(), x, y), y);
  EXPECT_SIMPLIFY(select(c, x, x), x);
  EXPECT_SIMPLIFY(select(!c, x, y), select(c, y, x));
  EXPECT_SIMPLIFY(select(c, const_true(), const_false()), Expr(c));
  EXPECT_SIMPLIFY(select(c, x + 0, y * 1), select(c, x, y));
  Analyzer ana;
  ana.bind(x, Range(0, 8));
  EXPECT_ANA_SIMPLIFY(ana, select(x < 10, x, y), x);
}

// ---------------------------------------------------------------------------------------------
// Vectors

TEST_F(SimplifyTest, RampAndBroadcast) {
  Expr r = RampNode::make(x, 1, 4);
  EXPECT_SIMPLIFY(r + BroadcastNode::make(y, 4), RampNode::make(x + y, 1, 4));
  EXPECT_SIMPLIFY(BroadcastNode::make(y, 4) + r, RampNode::make(y + x, 1, 4));
  EXPECT_SIMPLIFY(BroadcastNode::make(Expr(2), 4) + BroadcastNode::make(Expr(3), 4), BroadcastNode::make(Expr(5), 4));
  EXPECT_SIMPLIFY(RampNode::make(x, 2, 4) * BroadcastNode::make(Expr(3), 4), RampNode::make(x * 3, 6, 4));
  EXPECT_SIMPLIFY(r - RampNode::make(y, 1, 4), BroadcastNode::make(x - y, 4));
  EXPECT_SIMPLIFY(RampNode::make(x, 2, 4) + RampNode::make(y, 3, 4), RampNode::make(x + y, 5, 4));
  EXPECT_SIMPLIFY(RampNode::make(x, 0, 4), BroadcastNode::make(x, 4));
  EXPECT_SIMPLIFY(BroadcastNode::make(x, 4) < BroadcastNode::make(y, 4), BroadcastNode::make(x < y, 4));
  EXPECT_SIMPLIFY(r + BroadcastNode::make(Expr(0), 4), r);
  EXPECT_SIMPLIFY(RampNode::make(x + 1, 1, 4) - BroadcastNode::make(Expr(1), 4), r);
}

TEST_F(SimplifyTest, RampDivMod) {
  Expr r = RampNode::make(x * 8, 1, 4);
  Expr eight = BroadcastNode::make(Expr(8), 4);
  EXPECT_SIMPLIFY(floordiv(r, eight), BroadcastNode::make(x, 4));
  EXPECT_SIMPLIFY(floormod(r, eight), RampNode::make(Expr(0), 1, 4));
  EXPECT_SIMPLIFY(floordiv(RampNode::make(x * 8, 8, 4), eight), RampNode::make(x, 1, 4));
  // Lanes 8*x + 6 .. 8*x + 9 straddle a block boundary.
  EXPECT_UNCHANGED(floordiv(RampNode::make(x * 8 + 6, 1, 4), eight));
}

// ---------------------------------------------------------------------------------------------
// Let, casts, unknown nodes

TEST_F(SimplifyTest, Let) {
  Var v("v");
  EXPECT_SIMPLIFY(LetNode::make(v, 3, v + 1), Expr(4));
  EXPECT_SIMPLIFY(LetNode::make(v, x, v * 2), x * 2);
  EXPECT_SIMPLIFY(LetNode::make(v, x * y, v + v), LetNode::make(v, x * y, v * 2));
  EXPECT_SIMPLIFY(LetNode::make(v, x * y, Expr(5)), Expr(5));
  EXPECT_SIMPLIFY(LetNode::make(v, floormod(x, 4), v < 4), const_true());
}

TEST_F(SimplifyTest, Casts) {
  EXPECT_SIMPLIFY(CastNode::make(Int(32), CastNode::make(Int(64), x)), x);
  EXPECT_UNCHANGED(CastNode::make(Int(64), CastNode::make(Int(8), x)));
  EXPECT_SIMPLIFY(CastNode::make(Int(64, 4), BroadcastNode::make(x, 4)),
                  BroadcastNode::make(CastNode::make(Int(64), x), 4));
  EXPECT_SIMPLIFY(CastNode::make(Int(64), x + 0), CastNode::make(Int(64), x));
}

TEST_F(SimplifyTest, UnknownNodesSimplifyTheirChildren) {
  Var buf("A", Handle());
  EXPECT_SIMPLIFY(LoadNode::make(Float(32), buf, x + 0), LoadNode::make(Float(32), buf, x));
  EXPECT_SIMPLIFY(LoadNode::make(Float(32), buf, x, const_true()), LoadNode::make(Float(32), buf, x));
  EXPECT_SIMPLIFY(CallNode::make(Int(32), "f", {x * 1, Expr(2) + 3}, CallNode::Kind::Extern),
                  CallNode::make(Int(32), "f", {x, Expr(5)}, CallNode::Kind::Extern));
  EXPECT_SIMPLIFY(if_then_else(const_true(), x, y), x);
  EXPECT_UNCHANGED(StringImmNode::make("hello"));
  EXPECT_UNCHANGED(exp(fx));
}

// ---------------------------------------------------------------------------------------------
// Analyzer: proofs and bindings

TEST_F(SimplifyTest, CanProve) {
  Analyzer ana;
  EXPECT_TRUE(ana.can_prove(x - x == 0));
  EXPECT_TRUE(ana.can_prove(x + 1 > x));
  EXPECT_TRUE(ana.can_prove(floormod(x, 8) < 8));
  EXPECT_TRUE(ana.can_prove(floordiv(x, 4) * 4 <= x));
  EXPECT_TRUE(ana.can_prove(const_true()));
  EXPECT_FALSE(ana.can_prove(x < y));
  EXPECT_FALSE(ana.can_prove(i * 32 + j < 1024));  // true only under bounds
  EXPECT_FALSE(ana.can_prove(x));                  // not a condition
  EXPECT_FALSE(ana.can_prove(const_false()));
  ana.bind(i, Range(0, 32));
  ana.bind(j, Range(0, 32));
  EXPECT_TRUE(ana.can_prove(i * 32 + j < 1024));
  EXPECT_FALSE(ana.can_prove(i * 32 + j < 1023));
  ana.unbind(i);
  EXPECT_FALSE(ana.can_prove(i * 32 + j < 1024));
}

TEST_F(SimplifyTest, CanProveWithSymbolicRange) {
  Analyzer ana;
  ana.bind(i, Range(0, n));
  EXPECT_TRUE(ana.can_prove(i < n));
  EXPECT_TRUE(ana.can_prove(i + 1 <= n));
  EXPECT_TRUE(ana.can_prove(i >= 0));
  EXPECT_FALSE(ana.can_prove(i < n - 1));
  ana.unbind(i);
  EXPECT_FALSE(ana.can_prove(i < n));
}

TEST_F(SimplifyTest, CanProveEqual) {
  Analyzer ana;
  EXPECT_TRUE(ana.can_prove_equal(floordiv(x, 4) * 4 + floormod(x, 4), x));
  EXPECT_TRUE(ana.can_prove_equal(x + y, y + x));
  EXPECT_FALSE(ana.can_prove_equal(x, y));
  EXPECT_FALSE(ana.can_prove_equal(x, fx + 0.0f));
  EXPECT_FALSE(ana.can_prove_equal(x, Var("h", Handle())));
}

TEST_F(SimplifyTest, BindValue) {
  Analyzer ana;
  Var v("v");
  ana.bind(v, Expr(4));
  EXPECT_ANA_SIMPLIFY(ana, v * 2, Expr(8));
  Var w("w");
  ana.bind(x, Range(0, 4));
  ana.bind(w, x * 16);
  EXPECT_TRUE(ana.can_prove(w < 64));
  EXPECT_TRUE(ana.can_prove(w - x * 16 == 0));
  // Small index arithmetic bound to a variable is substituted.
  EXPECT_ANA_SIMPLIFY(ana, w + 1, x * 16 + 1);
  Var u("u");
  ana.bind(u, x * y);
  EXPECT_ANA_SIMPLIFY(ana, u + 1, u + 1);
}

TEST_F(SimplifyTest, OutputIsDeterministic) {
  // Two runs over fresh variables with the same names print the same text.
  auto run = [] {
    Var a("a"), b("b"), e("e");
    return to_string(simplify((e * 3 + b * 2 + a) - (b + 1) + e));
  };
  EXPECT_EQ(run(), run());
  EXPECT_EQ(run(), "((((e * 4) + b) + a) - 1)");
}

TEST_F(SimplifyTest, IndexExpressionIsFast) {
  Var n0("n"), co("co"), h("h"), w("w"), ci("ci"), kh("kh"), kw("kw");
  Analyzer ana;
  ana.bind(co, Range(0, 64));
  ana.bind(h, Range(0, 56));
  ana.bind(w, Range(0, 56));
  ana.bind(ci, Range(0, 64));
  ana.bind(kh, Range(0, 3));
  ana.bind(kw, Range(0, 3));
  Expr index = ((n0 * 64 + ci) * 58 + (h + kh)) * 58 + (w + kw);
  Expr e = floordiv(index, 58) * 58 + floormod(index, 58) + min(h * 4 + 3, 224) - select(kh < 3, 0, 1);
  const int reps = 2000;
  auto start = std::chrono::steady_clock::now();
  Expr s;
  for (int r = 0; r < reps; ++r) s = ana.simplify(e);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / reps;
  EXPECT_LT(us, 1000.0) << "simplify took " << us << " us per call: " << s;
  EXPECT_TRUE(ana.can_prove_equal(s, index + h * 4 + 3));
}

}  // namespace
}  // namespace kiln::arith
