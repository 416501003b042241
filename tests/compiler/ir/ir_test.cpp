// The expression language: types, promotion, printing, structural equality and hashing, tensors.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "compiler/ir/error.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/op.h"
#include "compiler/ir/structural.h"
#include "compiler/te/tensor.h"

namespace kiln {
namespace {

using namespace ir;

TEST(DataType, PrintsAndParses) {
  EXPECT_EQ(Float(32).to_string(), "float32");
  EXPECT_EQ(Int(8, 16).to_string(), "int8x16");
  EXPECT_EQ(Bool().to_string(), "bool");
  EXPECT_EQ(UInt(64).to_string(), "uint64");
  for (const char *s : {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                        "uint64", "bool", "float32x8", "int8x64"}) {
    EXPECT_EQ(DataType::parse(s).to_string(), s);
  }
  EXPECT_THROW(DataType::parse("float7"), ExprError);
  EXPECT_THROW(DataType::parse("int32x0"), ExprError);
  EXPECT_THROW(DataType::parse("banana"), ExprError);
}

TEST(Expr, LiteralsAdoptTheOtherSidesType) {
  Var x("x", Float(32));
  Expr e = x * 2 + 1;
  EXPECT_EQ(e.type(), Float(32));
  Var i("i", Int(64));
  EXPECT_EQ((i + 3).type(), Int(64));
  Var b("b", Int(8));
  EXPECT_EQ((b + 1).type(), Int(8));
  // A float literal does not turn an int into... it promotes the int to float.
  EXPECT_EQ((Var("k") * 0.5).type(), Float(32));
}

TEST(Expr, MixedTypesPromote) {
  Var a("a", Int(16)), b("b", Int(32)), f("f", Float(32)), d("d", Float(64));
  EXPECT_EQ((a + b).type(), Int(32));
  EXPECT_EQ((b + f).type(), Float(32));
  EXPECT_EQ((f + d).type(), Float(64));
  EXPECT_EQ((a < b).type(), Bool());
  Var v("v", Float(32, 8));
  EXPECT_EQ((v + f).type(), Float(32, 8));
}

TEST(Expr, BadOperandsRaiseExprError) {
  Var h("h", Handle());
  EXPECT_THROW(h + 1, ExprError);
  Var v8("v", Float(32, 8)), v4("w", Float(32, 4));
  EXPECT_THROW(v8 + v4, ExprError);
  EXPECT_THROW(Var("f", Float(32)) % 2, ExprError);
  EXPECT_THROW(floordiv(Var("f", Float(32)), 2), ExprError);
  EXPECT_THROW(Var("u", UInt(32)) + Var("s", Int(32)), ExprError);
  EXPECT_THROW(Expr() + 1, ExprError);
}

TEST(Expr, Intrinsics) {
  Var x("x", Float(32));
  for (Expr e :
       {exp(x), log(x), sqrt(x), rsqrt(x), tanh(x), sigmoid(x), erf(x), fabs(x), floor(x), ceil(x), round(x)}) {
    const auto *c = e.as<CallNode>();
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(is_math_intrinsic(c->name));
    EXPECT_EQ(e.type(), Float(32));
  }
  EXPECT_EQ(pow(x, 2).type(), Float(32));
  EXPECT_EQ(fma(x, x, x).as<CallNode>()->args.size(), 3u);
  // Integers promote to float32 in math functions.
  EXPECT_EQ(exp(Var("i")).type(), Float(32));
  EXPECT_EQ(abs(Var("i")).type(), Int(32));
}

TEST(Expr, Constants) {
  EXPECT_EQ(*as_const_int(make_const(Int(8), int64_t{-3})), -3);
  EXPECT_EQ(*as_const_int(max_value(Int(8))), 127);
  EXPECT_EQ(*as_const_int(min_value(Int(16))), -32768);
  EXPECT_EQ(*as_const_int(max_value(UInt(8))), 255);
  EXPECT_TRUE(is_zero(make_zero(Float(32, 4))) == false);
  EXPECT_EQ(*as_const_float(make_zero(Float(32, 4))), 0.0);
  EXPECT_FLOAT_EQ(static_cast<float>(*as_const_float(max_value(Float(32)))), 3.4028235e38f);
}

TEST(Printer, ReadableText) {
  Var i("i"), n("n");
  Var buf("A", Handle());
  Stmt s = ForNode::make(
      i, 0, n, ForKind::Parallel,
      IfThenElseNode::make(likely(i < 10), StoreNode::make(buf, LoadNode::make(Float(32), buf, i) * 2.0f, i)));
  EXPECT_EQ(to_string(s),
            "for (i, 0, n) parallel {\n"
            "  if (likely((i < 10))) {\n"
            "    A[i] = (A[i] * 2.0f)\n"
            "  }\n"
            "}\n");
  EXPECT_EQ(to_string(floordiv(i, 4) + cast(Int(64), i)), "(int64(floordiv(i, 4)) + int64(i))");
}

// A producer that is not a te operation: the IR needs only what ir::Producer declares.
class TwoOutputs : public Producer {
 public:
  const std::string &producer_name() const override { return name_; }
  int num_outputs() const override { return 2; }
  DataType output_dtype(int value_index) const override { return value_index == 0 ? Float(32) : Int(32); }

 private:
  std::string name_ = "argmax";
};

TEST(Producer, NodesReferToProducersThroughTheInterface) {
  auto p = std::make_shared<TwoOutputs>();
  Var i("i");
  Expr v = ProducerLoadNode::make(p, 0, {i});
  Expr k = ProducerLoadNode::make(p, 1, {i});
  EXPECT_EQ(v.type(), Float(32));
  EXPECT_EQ(k.type(), Int(32));
  EXPECT_THROW(ProducerLoadNode::make(p, 2, {i}), InternalError);
  Stmt s = ProducerRealizeNode::make(p, 1, {Range(0, 8)}, "global", ProducerStoreNode::make(p, 1, k + 1, {i}));
  EXPECT_EQ(to_string(s), "realize argmax.v1([0, 8]) {\n  argmax.v1(i) = (argmax.v1(i) + 1)\n}\n");
  // Producers are compared by identity.
  auto q = std::make_shared<TwoOutputs>();
  EXPECT_TRUE(structural_equal(v, ProducerLoadNode::make(p, 0, {i})));
  EXPECT_FALSE(structural_equal(v, ProducerLoadNode::make(q, 0, {i})));
  EXPECT_FALSE(structural_equal(v, ProducerLoadNode::make(p, 0, {i + 0})));
}

TEST(Structural, EqualityMapsBoundVariables) {
  Var i("i"), j("j"), buf("A", Handle());
  auto loop = [&](Var v) {
    return ForNode::make(v, 0, 8, ForKind::Serial, StoreNode::make(buf, cast(Float(32), v), v));
  };
  EXPECT_TRUE(structural_equal(loop(i), loop(j)));
  EXPECT_EQ(structural_hash(loop(i)), structural_hash(loop(j)));
  Var x("x"), y("y");
  EXPECT_FALSE(structural_equal(x + 1, y + 1));
  EXPECT_TRUE(structural_equal(x + 1, y + 1, FreeVars::Mapped));
  EXPECT_EQ(structural_hash(x + 1, FreeVars::Mapped), structural_hash(y + 1, FreeVars::Mapped));
  EXPECT_FALSE(structural_equal(x + 1, x + 2));
  EXPECT_FALSE(structural_equal(x + y, x + x, FreeVars::Mapped));
  EXPECT_FALSE(structural_equal(x + x, x + y, FreeVars::Mapped));
  EXPECT_NE(structural_hash(x + 1), structural_hash(x + 2));
  EXPECT_TRUE(structural_equal(min(x, 3) * 2, min(x, 3) * 2));
  EXPECT_EQ(structural_hash(min(x, 3) * 2), structural_hash(min(x, 3) * 2));
  // Types matter.
  EXPECT_FALSE(structural_equal(make_const(Int(32), int64_t{1}), make_const(Int(64), int64_t{1})));
  EXPECT_FALSE(structural_equal(loop(i), loop(Var("k", Int(64)))));
}

TEST(Structural, BoundVariablesMatchOneToOneWithinTheirScope) {
  Var i("i"), j("j"), k("k"), buf("A", Handle());
  auto store = [&](Expr v) { return StoreNode::make(buf, cast(Float(32), v), 0); };
  auto nest = [&](Var outer, Var inner, Expr value) {
    return ForNode::make(outer, 0, 4, ForKind::Serial, ForNode::make(inner, 0, 4, ForKind::Serial, store(value)));
  };
  EXPECT_TRUE(structural_equal(nest(i, j, i * 4 + j), nest(j, k, j * 4 + k)));
  // Two loops over the same variable are not two different loops.
  EXPECT_FALSE(structural_equal(nest(i, j, i * 4 + j), nest(k, k, k * 4 + k)));
  EXPECT_FALSE(structural_equal(nest(k, k, k * 4 + k), nest(i, j, i * 4 + j)));
  EXPECT_FALSE(structural_equal(nest(i, j, i * 4 + j), nest(i, j, j * 4 + i)));
  // After its loop a variable is free again: the second i below is compared by identity.
  Stmt a = BlockNode::make(ForNode::make(i, 0, 4, ForKind::Serial, store(i)), store(i));
  Stmt b = BlockNode::make(ForNode::make(j, 0, 4, ForKind::Serial, store(j)), store(i));
  Stmt c = BlockNode::make(ForNode::make(j, 0, 4, ForKind::Serial, store(j)), store(j));
  EXPECT_TRUE(structural_equal(a, b));
  EXPECT_EQ(structural_hash(a), structural_hash(b));
  EXPECT_FALSE(structural_equal(a, c));
  // A free variable does not match a bound one.
  EXPECT_FALSE(structural_equal(ForNode::make(i, 0, 4, ForKind::Serial, store(i)),
                                ForNode::make(j, 0, 4, ForKind::Serial, store(i))));
  // Let and Allocate bind too.
  Var t("t"), u("u");
  EXPECT_TRUE(structural_equal(LetNode::make(t, i + 1, t * 2), LetNode::make(u, i + 1, u * 2)));
  EXPECT_FALSE(structural_equal(LetNode::make(t, i + 1, t * 2), LetNode::make(u, i + 1, t * 2)));
  Var p("p", Handle()), q("q", Handle());
  auto alloc = [&](Var v) {
    return AllocateNode::make(v, Float(32), {Expr(4)}, "local", StoreNode::make(v, Expr(1.0f), 0));
  };
  EXPECT_TRUE(structural_equal(alloc(p), alloc(q)));
  EXPECT_EQ(structural_hash(alloc(p)), structural_hash(alloc(q)));
}

TEST(Structural, FloatImmediatesCompareByTheirBits) {
  EXPECT_TRUE(structural_equal(Expr(1.5f), Expr(1.5f)));
  EXPECT_FALSE(structural_equal(make_const(Float(32), 0.0), make_const(Float(32), -0.0)));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(structural_equal(make_const(Float(64), nan), make_const(Float(64), nan)));
  EXPECT_EQ(structural_hash(make_const(Float(64), nan)), structural_hash(make_const(Float(64), nan)));
}

TEST(Structural, ReductionsCompareAxesAndCombinersByStructure) {
  auto A = te::placeholder({16}, Float(32), "A");
  auto sum_of = [&](const std::string &axis_name, Expr extent) {
    IterVar k = te::reduce_axis(std::move(extent), axis_name);
    return te::sum(A(k), {k});
  };
  // Two calls of te::sum make two combiners and two axes of the same shape.
  EXPECT_TRUE(structural_equal(sum_of("k", 16), sum_of("r", 16)));
  EXPECT_EQ(structural_hash(sum_of("k", 16)), structural_hash(sum_of("r", 16)));
  EXPECT_FALSE(structural_equal(sum_of("k", 16), sum_of("k", 8)));
  IterVar k = te::reduce_axis(16, "k");
  EXPECT_FALSE(structural_equal(te::sum(A(k), {k}), te::max(A(k), {k})));
  EXPECT_FALSE(structural_equal(te::sum(A(k), {k}), te::sum(A(k) * 2.0f, {k})));
}

TEST(Tensor, ComputeAndReduce) {
  Var n = te::var("n");
  auto A = te::placeholder({n, 16}, Float(32), "A");
  auto k = te::reduce_axis(16, "k");
  auto S = te::compute(
      {n}, [&](Var i) { return te::sum(A(i, k), {k}); }, "S");
  EXPECT_EQ(S.ndim(), 1);
  EXPECT_EQ(S.dtype(), Float(32));
  auto inputs = S.op()->input_tensors();
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0], A);
  auto order = te::post_dfs_order({S.op()});
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], A.op());
}

TEST(Tensor, MistakesRaiseExprError) {
  auto A = te::placeholder({4, 4}, Float(32), "A");
  EXPECT_THROW(A(1), ExprError);                                     // wrong rank
  EXPECT_THROW(A(Var("f", Float(32)), 0), ExprError);                // float index
  EXPECT_THROW(te::placeholder({0, 4}, Float(32), "Z"), ExprError);  // empty dimension
  EXPECT_THROW(te::placeholder({Var("x", Float(32))}, Float(32)), ExprError);
  auto k = te::reduce_axis(4, "k");
  EXPECT_THROW(te::compute(
                   {4}, [&](Var i) { return te::sum(A(i, k), {k}) + 1.0f; }, "bad"),
               ExprError);
  EXPECT_THROW(te::sum(A(0, 0), {}), ExprError);
  EXPECT_THROW(te::reduce_axis(0, "k0"), ExprError);
  EXPECT_THROW(te::compute(
                   {4, 4}, [&](Var i) { return A(i, i); }, "arity"),
               ExprError);
}

TEST(Tensor, CustomAndTupleReducers) {
  auto A = te::placeholder({8, 8}, Float(32), "A");
  auto k = te::reduce_axis(8, "k");
  te::Reducer absmax([](Expr a, Expr b) { return max(fabs(a), fabs(b)); }, [](DataType t) { return make_zero(t); });
  auto M = te::compute(
      {8}, [&](Var i) { return absmax(A(i, k), {k}); }, "M");
  EXPECT_NE(M.op()->input_tensors().size(), 0u);
  auto k2 = te::reduce_axis(8, "k2");
  auto outs = te::compute_multi(
      {8},
      [&](const std::vector<Var> &i) {
        return te::tuple_reduce(
            [](const std::vector<Var> &l, const std::vector<Var> &r) {
              Expr take_r = r[1] > l[1];
              return std::vector<Expr>{select(take_r, r[0], l[0]), select(take_r, r[1], l[1])};
            },
            {Expr(-1), min_value(Float(32))}, {Expr(Var(k2->var)), A(i[0], k2)}, {k2});
      },
      "argmax");
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].dtype(), Int(32));
  EXPECT_EQ(outs[1].dtype(), Float(32));
}

}  // namespace
}  // namespace kiln
