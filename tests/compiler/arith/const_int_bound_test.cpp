// Constant integer bounds: values, saturation and robustness.
#include <gtest/gtest.h>

#include <limits>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/op.h"

namespace kiln::arith {
namespace {

using namespace ir;

constexpr int64_t kNegInf = ConstIntBound::kNegInf;
constexpr int64_t kPosInf = ConstIntBound::kPosInf;

#define EXPECT_BOUND(ana, e, lo, hi)               \
  do {                                             \
    ConstIntBound b_ = (ana).const_int_bound(e);   \
    EXPECT_EQ(b_.min_value, (lo)) << to_string(e); \
    EXPECT_EQ(b_.max_value, (hi)) << to_string(e); \
  } while (0)

class ConstIntBoundTest : public ::testing::Test {
 protected:
  ConstIntBoundTest() {
    ana.bind(x, Range(0, 10));
    ana.bind(y, Range(-4, 8));  // [-4, 3]
  }
  Analyzer ana;
  Var x{"x"}, y{"y"}, z{"z"};
};

TEST_F(ConstIntBoundTest, ConstantsAndVariables) {
  EXPECT_BOUND(ana, Expr(5), 5, 5);
  EXPECT_BOUND(ana, x, 0, 9);
  EXPECT_BOUND(ana, z, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  EXPECT_BOUND(ana, Var("w", Int(64)), kNegInf, kPosInf);
  EXPECT_BOUND(ana, Var("u", UInt(8)), 0, 255);
  EXPECT_BOUND(ana, Var("b", Bool()), 0, 1);
  EXPECT_BOUND(ana, Var("f", Float(32)), kNegInf, kPosInf);
}

TEST_F(ConstIntBoundTest, Arithmetic) {
  EXPECT_BOUND(ana, x * 2 + 1, 1, 19);
  EXPECT_BOUND(ana, x - y, -3, 13);
  EXPECT_BOUND(ana, x * y, -36, 27);
  EXPECT_BOUND(ana, min(x, y), -4, 3);
  EXPECT_BOUND(ana, max(x, y), 0, 9);
  EXPECT_BOUND(ana, select(z < 0, x, y), -4, 9);
  EXPECT_BOUND(ana, x - x, 0, 0);  // through simplification
}

TEST_F(ConstIntBoundTest, Division) {
  EXPECT_BOUND(ana, truncdiv(x, 3), 0, 3);
  EXPECT_BOUND(ana, floordiv(x - 5, 3), -2, 1);
  EXPECT_BOUND(ana, truncdiv(x - 5, 3), -1, 1);
  EXPECT_BOUND(ana, floordiv(x, -2), -5, 0);
  EXPECT_BOUND(ana, floormod(z, 8), 0, 7);
  EXPECT_BOUND(ana, truncmod(z, 8), -7, 7);
  EXPECT_BOUND(ana, truncmod(x, 8), 0, 7);
  EXPECT_BOUND(ana, truncmod(y, 8), -4, 3);
  EXPECT_BOUND(ana, floormod(x + 3, 4), 0, 3);
  EXPECT_BOUND(ana, floormod(x, 16), 0, 9);
  EXPECT_BOUND(ana, floordiv(x, y + 5), 0, 9);  // divisor in [1, 8]
}

TEST_F(ConstIntBoundTest, DivisionByRangesWithZeroDoesNotCrash) {
  ConstIntBound b = ana.const_int_bound(truncdiv(x, y));
  EXPECT_LE(b.min_value, -9);
  EXPECT_GE(b.max_value, 9);
  b = ana.const_int_bound(floormod(x, y));
  EXPECT_LE(b.min_value, 0);
  EXPECT_GE(b.max_value, 3);
  b = ana.const_int_bound(floordiv(x, 0));
  EXPECT_LE(b.min_value, b.max_value);
  b = ana.const_int_bound(floormod(z, 0));
  EXPECT_LE(b.min_value, b.max_value);
}

TEST_F(ConstIntBoundTest, CastsAndVectors) {
  EXPECT_BOUND(ana, CastNode::make(Int(8), x), 0, 9);
  Var big("big");
  ana.bind(big, Range(0, 1000));
  EXPECT_BOUND(ana, CastNode::make(Int(8), big), -128, 127);
  EXPECT_BOUND(ana, CastNode::make(Int(64), z), std::numeric_limits<int32_t>::min(),
               std::numeric_limits<int32_t>::max());
  EXPECT_BOUND(ana, RampNode::make(x, 2, 4), 0, 15);
  EXPECT_BOUND(ana, RampNode::make(x, -1, 4), -3, 9);
  EXPECT_BOUND(ana, BroadcastNode::make(y, 4), -4, 3);
}

TEST_F(ConstIntBoundTest, Saturation) {
  Var w("w", Int(64));
  EXPECT_BOUND(ana, w * make_const(Int(64), int64_t{4}), kNegInf, kPosInf);
  EXPECT_BOUND(ana, w + make_const(Int(64), int64_t{1}), kNegInf, kPosInf);
  Var v("v", Int(64));
  ana.bind(v, Range(make_const(Int(64), int64_t{0}), make_const(Int(64), int64_t{1} << 62)));
  EXPECT_BOUND(ana, v * make_const(Int(64), int64_t{4}), 0, kPosInf);
  EXPECT_BOUND(ana, v - make_const(Int(64), int64_t{1}), -1, (int64_t{1} << 62) - 2);
  // int32 arithmetic that may leave int32 is widened to the whole type.
  EXPECT_BOUND(ana, z + 1, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  Var u("u", UInt(32));
  EXPECT_BOUND(ana, u - make_const(UInt(32), int64_t{1}), 0, int64_t{0xffffffff});
}

TEST_F(ConstIntBoundTest, LetBindsItsVariable) {
  Var v("v");
  EXPECT_BOUND(ana, LetNode::make(v, x * 2, v + 1), 1, 19);
}

TEST_F(ConstIntBoundTest, BindValue) {
  Var v("v");
  ana.bind(v, x * 3);
  EXPECT_BOUND(ana, v, 0, 27);
  ana.unbind(v);
  EXPECT_BOUND(ana, v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
}

}  // namespace
}  // namespace kiln::arith
