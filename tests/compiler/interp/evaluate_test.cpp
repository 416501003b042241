// evaluate() and execute(): IR outside a lowered function, with variables and buffers bound by the
// caller, compared with values computed here.
#include "compiler/interp/evaluate.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/ir/function.h"
#include "compiler/ir/op.h"

namespace kiln::interp {
namespace {

using namespace ir;

TEST(Evaluate, ExpressionsOverBoundVariables) {
  Var x("x"), y("y");
  Bindings b;
  b.set(x, 7).set(y, -2);
  EXPECT_EQ(evaluate(x * 3 + y, b).as_int(), 19);
  EXPECT_EQ(evaluate(floordiv(x, y), b).as_int(), -4);
  EXPECT_EQ(evaluate(truncdiv(x, y), b).as_int(), -3);
  EXPECT_TRUE(evaluate(x > y && y < 0, b).as_bool());
  EXPECT_FALSE(evaluate(x == y, b).as_bool());
  // Binding a variable again replaces its value.
  b.set(x, 1);
  EXPECT_EQ(evaluate(x * 3 + y, b).as_int(), 1);
  // Lets inside the expression, and variables of other types.
  Var t("t");
  EXPECT_EQ(evaluate(LetNode::make(t, x + 1, t * t), b).as_int(), 4);
  Var c("c", Int(8)), f("f", Float(32));
  b.set(c, 300).set(f, 0.5f);
  EXPECT_EQ(evaluate(c, b).as_int(), 300 - 256);  // wrapped to int8
  EXPECT_EQ(evaluate(f * 3.0f, b)[0].f, 1.5);
  Value v = evaluate(RampNode::make(x, y, 4), b);
  ASSERT_EQ(v.lanes(), 4);
  EXPECT_EQ(v.to_string(), "[1, -1, -3, -5]");
}

TEST(Evaluate, FailuresRaiseTheInterpretersErrors) {
  Var x("x"), y("y");
  Bindings b;
  b.set(x, 1).set(y, 0);
  EXPECT_THROW(evaluate(floordiv(x, y), b), RuntimeError);
  EXPECT_THROW(evaluate(x + Var("z"), b), InternalError);
  Var buf = make_buffer("A", Float(32), {Expr(4)}).data;
  EXPECT_THROW(evaluate(LoadNode::make(Float(32), buf, x), b), InternalError);
  b.bind(buf, deploy::Tensor::empty({4}, deploy::DType::of<float>()));
  EXPECT_THROW(evaluate(x, b), InternalError);
}

TEST(Execute, StatementsWriteToBoundTensors) {
  Buffer a = make_buffer("A", Float(32), {Expr(4)}), out = make_buffer("B", Float(32), {Expr(4)});
  Var i("i"), n("n");
  deploy::Tensor ta = deploy::Tensor::empty({4}, deploy::DType::of<float>());
  deploy::Tensor tb = deploy::Tensor::empty({4}, deploy::DType::of<float>());
  for (int k = 0; k < 4; ++k) {
    ta.data_as<float>()[k] = static_cast<float>(k + 1);
    tb.data_as<float>()[k] = 0.0f;
  }
  Stmt s = ForNode::make(i, 0, n, ForKind::Serial,
                         StoreNode::make(out.data, LoadNode::make(Float(32), a.data, i) * 2.0f, i));
  Bindings b;
  b.bind(a.data, ta).bind(out.data, tb).set(n, 3);
  execute(s, b);
  EXPECT_EQ(std::vector<float>(tb.data_as<float>(), tb.data_as<float>() + 4), (std::vector<float>{2, 4, 6, 0}));
  b.set(n, 5);
  EXPECT_THROW(execute(s, b), RuntimeError);  // A[4] is out of bounds
}

}  // namespace
}  // namespace kiln::interp
