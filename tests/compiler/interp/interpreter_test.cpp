// The interpreter and the C back end on hand-built lowered functions, each compared with values
// computed independently here.
#include "compiler/interp/interpreter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compiler/codegen/c/codegen_c.h"
#include "compiler/te/tensor.h"
#include "tests/compiler/interp/both_backends.h"

namespace kiln {
namespace {

using deploy::Tensor;
using ir::Buffer;
using ir::Expr;
using ir::Float;
using ir::ForKind;
using ir::Int;
using ir::Stmt;
using ir::Var;
using test::expect_error;
using test::filled;
using test::for_both;
using test::load;
using test::loop;
using test::make_func;
using test::make_tensor;
using test::run_both;
using test::store;
using test::values;

Expr ramp(Expr base, int stride, int lanes) { return ir::RampNode::make(std::move(base), Expr(stride), lanes); }
Expr bcast(Expr v, int lanes) { return ir::BroadcastNode::make(std::move(v), lanes); }

ir::LoweredFunc vector_add() {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Buffer B = ir::make_buffer("B", Float(32), {n});
  Buffer C = ir::make_buffer("C", Float(32), {n});
  Var i("i");
  return make_func("vadd", {A, B, C}, {n}, loop(i, n, store(C, load(A, i) + load(B, i), i)));
}

TEST(InterpreterTest, VectorAddOverSymbolicSize) {
  const ir::LoweredFunc f = vector_add();
  for (int64_t len : {0, 1, 17}) {
    std::vector<float> a(len), b(len);
    for (int64_t i = 0; i < len; ++i) {
      a[i] = 0.5f * i - 3.0f;
      b[i] = 1.25f * i * i;
    }
    auto r = run_both(f, {make_tensor<float>({len}, a), make_tensor<float>({len}, b), filled<float>({len}, 0.0f)});
    for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
      const auto c = values<float>(out[2]);
      ASSERT_EQ(c.size(), static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) EXPECT_EQ(c[i], a[i] + b[i]) << "i = " << i;
    });
  }
}

TEST(InterpreterTest, MatmulWithLocalAccumulator) {
  Var M("M"), N("N"), K("K");
  Buffer A = ir::make_buffer("A", Float(32), {M, K});
  Buffer B = ir::make_buffer("B", Float(32), {K, N});
  Buffer C = ir::make_buffer("C", Float(32), {M, N});
  Var i("i"), j("j"), k("k");
  Buffer accb = test::alloc_buffer("acc", Float(32));
  Stmt update = store(accb, load(accb, 0) + load(A, A.offset_of({i, k})) * load(B, B.offset_of({k, j})), 0);
  Stmt body = ir::AllocateNode::make(accb.data, Float(32), {1}, "local",
                                     ir::BlockNode::make({store(accb, Expr(0.0f), 0), loop(k, K, update),
                                                          store(C, load(accb, 0), C.offset_of({i, j}))}));
  auto f = make_func("matmul", {A, B, C}, {M, K, N}, loop(i, M, loop(j, N, body)));

  const int m = 5, n = 7, kk = 9;
  std::vector<float> a(m * kk), b(kk * n);
  for (size_t x = 0; x < a.size(); ++x) a[x] = std::sin(0.3f * x);
  for (size_t x = 0; x < b.size(); ++x) b[x] = std::cos(0.7f * x);
  auto r = run_both(f, {make_tensor<float>({m, kk}, a), make_tensor<float>({kk, n}, b), filled<float>({m, n}, 0.0f)});
  for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
    const auto c = values<float>(out[2]);
    for (int x = 0; x < m; ++x) {
      for (int y = 0; y < n; ++y) {
        double want = 0;
        for (int z = 0; z < kk; ++z) want += static_cast<double>(a[x * kk + z]) * b[z * n + y];
        EXPECT_NEAR(c[x * n + y], want, 1e-5) << x << "," << y;
      }
    }
  });
}

template <typename T>
void check_div_mod(ir::DataType t) {
  SCOPED_TRACE(t.to_string());
  const T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  std::vector<std::pair<T, T>> pairs = {{7, 2},  {-7, 2}, {7, -2}, {-7, -2}, {0, 3},  {-1, 5},
                                        {1, -5}, {6, 3},  {-6, 3}, {6, -3},  {lo, 3}, {hi, -7}};
  // INT_MIN / -1 traps in C for int32 and int64; int8 promotes to int and wraps on the way back.
  if (sizeof(T) == 1) pairs.push_back({lo, -1});
  const int64_t len = static_cast<int64_t>(pairs.size());
  Var n("n");
  Buffer A = ir::make_buffer("A", t, {n}), B = ir::make_buffer("B", t, {n});
  std::vector<Buffer> outs;
  for (const char *name : {"D", "M", "FD", "FM"}) outs.push_back(ir::make_buffer(name, t, {n}));
  Var i("i");
  Expr a = load(A, i), b = load(B, i);
  Stmt body = ir::BlockNode::make({store(outs[0], ir::truncdiv(a, b), i), store(outs[1], ir::truncmod(a, b), i),
                                   store(outs[2], ir::floordiv(a, b), i), store(outs[3], ir::floormod(a, b), i)});
  auto f = make_func("divmod", {A, B, outs[0], outs[1], outs[2], outs[3]}, {n}, loop(i, n, body));
  std::vector<T> av, bv;
  for (auto [x, y] : pairs) {
    av.push_back(x);
    bv.push_back(y);
  }
  std::vector<Tensor> args = {make_tensor<T>({len}, av), make_tensor<T>({len}, bv)};
  for (int o = 0; o < 4; ++o) args.push_back(filled<T>({len}, T(0)));
  auto r = run_both(f, args);
  for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
    const auto d = values<T>(out[2]), m = values<T>(out[3]), fd = values<T>(out[4]), fm = values<T>(out[5]);
    for (int64_t x = 0; x < len; ++x) {
      const int64_t p = av[x], q = bv[x];
      const int64_t floor_q = static_cast<int64_t>(std::floor(static_cast<long double>(p) / q));
      SCOPED_TRACE(::testing::Message() << p << " and " << q);
      EXPECT_EQ(d[x], static_cast<T>(p / q));
      EXPECT_EQ(m[x], static_cast<T>(p % q));
      EXPECT_EQ(fd[x], static_cast<T>(floor_q));
      // p - q * floor(p / q), wrapping like the machine (it fits T, but not every step fits int64).
      const uint64_t rem = static_cast<uint64_t>(p) - static_cast<uint64_t>(q) * static_cast<uint64_t>(floor_q);
      EXPECT_EQ(fm[x], static_cast<T>(rem));
    }
  });
}

TEST(InterpreterTest, TruncAndFloorDivisionOnNegativeValues) {
  check_div_mod<int8_t>(Int(8));
  check_div_mod<int32_t>(Int(32));
  check_div_mod<int64_t>(Int(64));
}

TEST(InterpreterTest, IntegerArithmeticWrapsToItsWidth) {
  Buffer A8 = ir::make_buffer("A8", Int(8), {2}), U8 = ir::make_buffer("U8", ir::UInt(8), {2});
  Buffer S16 = ir::make_buffer("S16", ir::Int(16), {1}), I32 = ir::make_buffer("I32", Int(32), {1});
  Buffer U32 = ir::make_buffer("U32", ir::UInt(32), {1});
  Stmt body = ir::BlockNode::make({
      store(A8, load(A8, 0) + load(A8, 1), 0),                                 // 100 + 100
      store(U8, load(U8, 0) + load(U8, 1), 0),                                 // 200 + 100
      store(S16, load(S16, 0) * load(S16, 0), 0),                              // 300 * 300
      store(I32, load(I32, 0) + Expr(1), 0),                                   // INT32_MAX + 1
      store(U32, load(U32, 0) - ir::make_const(ir::UInt(32), int64_t{1}), 0),  // 0 - 1
  });
  auto f = make_func("wrap", {A8, U8, S16, I32, U32}, {}, body);
  auto r = run_both(
      f, {make_tensor<int8_t>({2}, {100, 100}), make_tensor<uint8_t>({2}, {200, 100}), make_tensor<int16_t>({1}, {300}),
          make_tensor<int32_t>({1}, {std::numeric_limits<int32_t>::max()}), make_tensor<uint32_t>({1}, {0})});
  for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
    EXPECT_EQ(values<int8_t>(out[0])[0], -56);
    EXPECT_EQ(values<uint8_t>(out[1])[0], 44);
    EXPECT_EQ(values<int16_t>(out[2])[0], static_cast<int16_t>(90000 - 65536));
    EXPECT_EQ(values<int32_t>(out[3])[0], std::numeric_limits<int32_t>::min());
    EXPECT_EQ(values<uint32_t>(out[4])[0], 4294967295u);
  });
}

// Rounds to half precision by scaling: an independent check of the bit-level conversion.
float reference_half(float x) {
  if (std::isnan(x)) return x;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65520.0) return std::copysign(std::numeric_limits<float>::infinity(), x);
  int e;
  std::frexp(a, &e);
  const int exp = std::max(e - 1, -14);
  const double q = std::ldexp(1.0, exp - 10);
  return static_cast<float>(std::copysign(std::nearbyint(a / q) * q, static_cast<double>(x)));
}

TEST(InterpreterTest, Float16StoresRoundToNearestEven) {
  const std::vector<float> xs = {1.0f,
                                 1.0f + std::ldexp(1.0f, -11),      // a tie: stays at 1
                                 1.0f + 3 * std::ldexp(1.0f, -11),  // a tie: rounds up to even
                                 1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20),
                                 -3.14159265f,
                                 0.1f,
                                 65504.0f,
                                 65519.0f,
                                 65520.0f,
                                 1e5f,
                                 -1e5f,
                                 1e-8f,
                                 1.5f * std::ldexp(1.0f, -24),  // a subnormal tie
                                 2.5f * std::ldexp(1.0f, -24),
                                 std::ldexp(1.0f, -14) * 0.999f,
                                 0.0f,
                                 -0.0f,
                                 std::numeric_limits<float>::quiet_NaN()};
  const int64_t len = static_cast<int64_t>(xs.size());
  Var n("n");
  Buffer X = ir::make_buffer("X", Float(32), {n});
  Buffer H = ir::make_buffer("H", Float(16), {n});
  Buffer Y = ir::make_buffer("Y", Float(32), {n});
  Buffer H3 = ir::make_buffer("H3", Float(16), {n});
  Buffer Z = ir::make_buffer("Z", Float(32), {1});
  Var i("i"), j("j"), k("k");
  Stmt body = ir::BlockNode::make({
      store(Z, ir::CastNode::make(Float(32), ir::make_const(Float(16), 0.1)), 0),  // a half immediate
      loop(i, n, store(H, ir::cast(Float(16), load(X, i)), i)),
      loop(j, n, store(Y, ir::cast(Float(32), load(H, j)), j)),
      loop(k, n, store(H3, load(H, k) * ir::make_const(Float(16), 3.0), k)),
  });
  auto f = make_func("half", {X, H, Y, H3, Z}, {n}, body);
  auto r = run_both(
      f, {make_tensor<float>({len}, xs), test::half_tensor({len}, std::vector<uint16_t>(len)),
          filled<float>({len}, 0.0f), test::half_tensor({len}, std::vector<uint16_t>(len)), filled<float>({1}, 0.0f)});
  for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
    const auto y = values<float>(out[2]);
    const auto h3 = values<uint16_t>(out[3]);
    EXPECT_EQ(values<float>(out[4])[0], reference_half(0.1f));
    for (int64_t x = 0; x < len; ++x) {
      SCOPED_TRACE(::testing::Message() << "x = " << xs[x]);
      const float want = reference_half(xs[x]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(y[x]));
        continue;
      }
      EXPECT_EQ(y[x], want);
      EXPECT_EQ(std::signbit(y[x]), std::signbit(want));
      // Decode the stored bits of H3 independently.
      const uint16_t bits = h3[x];
      const int e = (bits >> 10) & 0x1f, mant = bits & 0x3ff;
      double v =
          e == 0x1f ? (mant ? NAN : INFINITY) : (e == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, e - 25));
      if (bits & 0x8000) v = -v;
      EXPECT_EQ(static_cast<float>(v), reference_half(want * 3.0f));
    }
  });
}

TEST(InterpreterTest, IfThenElseDoesNotEvaluateTheGuardedRead) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Buffer B = ir::make_buffer("B", Float(32), {n + 4});
  Buffer V = ir::make_buffer("V", Float(32), {12});
  Var i("i"), v("v");
  Expr idx = ramp(v * 4, 1, 4);
  Stmt body = ir::BlockNode::make({
      loop(i, n + 4, store(B, ir::if_then_else(i < n, load(A, i), Expr(-1.0f)), i)),
      loop(v, 3, store(V, ir::if_then_else(idx < bcast(n, 4), load(A, idx), bcast(Expr(-1.0f), 4)), idx)),
  });
  auto f = make_func("guard", {A, B, V}, {n}, body);
  const std::vector<float> a = {1, 2, 3, 4, 5};
  auto r = run_both(f, {make_tensor<float>({5}, a), filled<float>({9}, 0.0f), filled<float>({12}, 0.0f)});
  for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
    const auto b = values<float>(out[1]);
    const auto vv = values<float>(out[2]);
    for (int x = 0; x < 9; ++x) EXPECT_EQ(b[x], x < 5 ? a[x] : -1.0f) << x;
    for (int x = 0; x < 12; ++x) EXPECT_EQ(vv[x], x < 5 ? a[x] : -1.0f) << x;
  });
}

TEST(InterpreterTest, SelectChoosesPerLane) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Buffer B = ir::make_buffer("B", Float(32), {n});
  Var i("i");
  Expr a = load(A, i);
  auto f = make_func("sel", {A, B}, {n}, loop(i, n, store(B, ir::select(a > 0.0f, a, Expr(0.0f) - a), i)));
  const std::vector<float> av = {-2, -0.5f, 0, 0.5f, 3};
  auto r = run_both(f, {make_tensor<float>({5}, av), filled<float>({5}, 0.0f)});
  for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
    const auto b = values<float>(out[1]);
    for (int x = 0; x < 5; ++x) EXPECT_EQ(b[x], std::fabs(av[x]));
  });
}

TEST(InterpreterTest, SelectEvaluatesBothValuesSoAnOutOfBoundsReadIsReported) {
  // A select may evaluate both sides (a vector select does): a guarded read belongs in
  // if_then_else, and the interpreter says so.
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Buffer B = ir::make_buffer("B", Float(32), {n + 1});
  Var i("i");
  auto f = make_func("bad_guard", {A, B}, {n}, loop(i, n + 1, store(B, ir::select(i < n, load(A, i), Expr(0.0f)), i)));
  expect_error<RuntimeError>(
      [&] {
        interp::run(f, {filled<float>({3}, 1.0f), filled<float>({4}, 0.0f)});
      },
      {"out-of-bounds load from buffer A", "index 3", "[0, 3)"});
}

TEST(InterpreterTest, VectorRampBroadcastLoadStoreWithPredicate) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Buffer B = ir::make_buffer("B", Float(32), {n});
  Buffer G = ir::make_buffer("G", Float(32), {4});
  Buffer D = ir::make_buffer("D", Float(32), {5});
  Buffer E = ir::make_buffer("E", Float(32), {4});
  Var i("i"), v("v", ir::Int(32, 4));
  Expr idx = ramp(i * 4, 1, 4);
  Expr pred = idx < bcast(n, 4);
  Stmt body = ir::BlockNode::make({
      // A tail handled by predication: n need not be a multiple of 4.
      loop(i, ir::floordiv(n + 3, 4),
           store(B, load(A, idx, pred) * bcast(Expr(2.0f), 4) + bcast(Expr(1.0f), 4), idx, pred)),
      // A strided gather.
      store(G, load(A, ramp(0, 2, 4)), ramp(0, 1, 4)),
      // An overlapping vector store reads every lane before writing any.
      store(D, load(D, ramp(0, 1, 4)), ramp(1, 1, 4)),
      // A vector variable.
      ir::LetStmtNode::make(v, ramp(0, 1, 4) * bcast(3, 4), store(E, ir::cast(Float(32, 4), v), ramp(0, 1, 4))),
  });
  auto f = make_func("vec", {A, B, G, D, E}, {n}, body);
  std::vector<float> a(10);
  for (int x = 0; x < 10; ++x) a[x] = 1.5f * x - 4;
  auto r = run_both(f, {make_tensor<float>({10}, a), filled<float>({10}, 0.0f), filled<float>({4}, 0.0f),
                        make_tensor<float>({5}, {0, 1, 2, 3, 4}), filled<float>({4}, 0.0f)});
  for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
    const auto b = values<float>(out[1]);
    for (int x = 0; x < 10; ++x) EXPECT_EQ(b[x], a[x] * 2 + 1) << x;
    const auto g = values<float>(out[2]);
    for (int x = 0; x < 4; ++x) EXPECT_EQ(g[x], a[2 * x]);
    EXPECT_EQ(values<float>(out[3]), (std::vector<float>{0, 0, 1, 2, 3}));
    EXPECT_EQ(values<float>(out[4]), (std::vector<float>{0, 3, 6, 9}));
  });
}

template <typename T>
void check_math(ir::DataType t, double tol) {
  SCOPED_TRACE(t.to_string());
  const std::vector<std::string> names = {"exp",  "log",   "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
                                          "fabs", "floor", "ceil", "round", "pow",  "fma"};
  const int len = 9;
  Buffer X = ir::make_buffer("X", t, {len}), Y = ir::make_buffer("Y", t, {len}), Z = ir::make_buffer("Z", t, {len});
  Buffer O = ir::make_buffer("O", t, {static_cast<int>(names.size()), len});
  Var i("i");
  Expr x = load(X, i), y = load(Y, i), z = load(Z, i);
  std::vector<Expr> calls = {ir::exp(x),     ir::log(x),    ir::sqrt(x),     ir::rsqrt(x), ir::tanh(x),
                             ir::sigmoid(x), ir::erf(x),    ir::fabs(x),     ir::floor(x), ir::ceil(x),
                             ir::round(x),   ir::pow(x, y), ir::fma(x, y, z)};
  std::vector<Stmt> stores;
  for (size_t c = 0; c < calls.size(); ++c) stores.push_back(store(O, calls[c], O.offset_of({static_cast<int>(c), i})));
  auto f = make_func("math", {X, Y, Z, O}, {}, loop(i, len, ir::BlockNode::make(stores)));
  std::vector<T> xv(len), yv(len), zv(len);
  for (int k = 0; k < len; ++k) {
    xv[k] = static_cast<T>(0.15 + 0.5 * k);  // includes 2.65 and exact halves for round
    yv[k] = static_cast<T>(1.3 - 0.25 * k);
    zv[k] = static_cast<T>(0.5 * k - 1);
  }
  xv[4] = static_cast<T>(2.5);
  auto r = run_both(f, {make_tensor<T>({len}, xv), make_tensor<T>({len}, yv), make_tensor<T>({len}, zv),
                        filled<T>({static_cast<int64_t>(names.size()), len}, T(0))});
  for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
    const auto o = values<T>(out[3]);
    for (size_t c = 0; c < names.size(); ++c) {
      for (int k = 0; k < len; ++k) {
        const double a = xv[k], b = yv[k], cc = zv[k];
        double want = 0;
        const std::string &nm = names[c];
        if (nm == "exp") want = std::exp(a);
        if (nm == "log") want = std::log(a);
        if (nm == "sqrt") want = std::sqrt(a);
        if (nm == "rsqrt") want = 1 / std::sqrt(a);
        if (nm == "tanh") want = std::tanh(a);
        if (nm == "sigmoid") want = 1 / (1 + std::exp(-a));
        if (nm == "erf") want = std::erf(a);
        if (nm == "fabs") want = std::fabs(a);
        if (nm == "floor") want = std::floor(a);
        if (nm == "ceil") want = std::ceil(a);
        if (nm == "round") want = std::round(a);
        if (nm == "pow") want = std::pow(a, b);
        if (nm == "fma") want = a * b + cc;
        EXPECT_NEAR(o[c * len + k], want, tol * std::max(1.0, std::fabs(want))) << nm << "(" << a << ")";
      }
    }
  });
}

TEST(InterpreterTest, MathIntrinsicsMatchTheStandardLibrary) {
  check_math<float>(Float(32), 2e-6);
  check_math<double>(Float(64), 1e-13);
}

TEST(InterpreterTest, AssertFailureRaisesInTheInterpreterAndReturnsAnAssertStatusInC) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Var i("i");
  Buffer T = test::alloc_buffer("tmp", Float(32), "global");
  // A large allocation lives on the heap in C: the failure path frees it.
  Stmt body = ir::AllocateNode::make(
      T.data, Float(32), {n * 20000}, "global",
      ir::AssertStmtNode::make(
          n > 4, "n must be greater than 4",
          loop(i, n, ir::BlockNode::make({store(T, load(A, i) * 2.0f, i * 20000), store(A, load(T, i * 20000), i)}))));
  auto f = make_func("checked", {A}, {n}, body);
  expect_error<RuntimeError>([&] { interp::run(f, {filled<float>({3}, 1.0f)}); }, {"n must be greater than 4"});
  codegen::CModule m(f, KILN_C_COMPILER);
  Tensor small = filled<float>({3}, 1.0f);
  EXPECT_EQ(m.call({small}), kKilnErrorAssert);
  EXPECT_EQ(m.last_error(), "n must be greater than 4");
  auto r = run_both(f, {filled<float>({6}, 1.5f)});
  for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
    EXPECT_EQ(values<float>(out[0]), std::vector<float>(6, 3.0f));
  });
}

TEST(InterpreterTest, LetAndLoopsWithNonZeroMinAndHeapAllocations) {
  Var n("n");
  Buffer O = ir::make_buffer("O", Int(32), {n});
  Var i("i"), j("j"), x("x");
  Buffer Big = test::alloc_buffer("big", Int(32), "global");
  Expr lt = ir::LetNode::make(x, load(Big, j) * 2, ir::max(x + x, Expr(7)) - ir::min(x, Expr(3)));
  Stmt body =
      ir::AllocateNode::make(Big.data, Int(32), {n}, "global",
                             ir::BlockNode::make({loop(i, n, store(Big, i - 2, i)),
                                                  ir::ForNode::make(j, 2, n - 2, ForKind::Serial, store(O, lt, j))}));
  auto f = make_func("lets", {O}, {n}, body);
  const int64_t len = 70000;  // 280 KB: malloc in C
  auto r = run_both(f, {filled<int32_t>({len}, -99)});
  for_both(r, [&](const std::vector<Tensor> &out, const std::string &) {
    const auto o = values<int32_t>(out[0]);
    EXPECT_EQ(o[0], -99);
    EXPECT_EQ(o[1], -99);
    for (int64_t k = 2; k < len; ++k) {
      const int32_t xv = static_cast<int32_t>((k - 2) * 2);
      ASSERT_EQ(o[k], std::max(xv + xv, 7) - std::min(xv, 3)) << k;
    }
  });
}

// The interpreter and the C back end check arguments with the same entry code
// (lower::make_packed_api): a bad call is a RuntimeError in one and kKilnErrorArgument in the
// other, with the same message.
TEST(InterpreterTest, ArgumentErrorsNameTheArgument) {
  const ir::LoweredFunc f = vector_add();
  codegen::CModule m(f, KILN_C_COMPILER);
  auto both = [&](const std::vector<Tensor> &args, const std::string &message) {
    expect_error<RuntimeError>([&] { interp::run(f, args); }, {message});
    EXPECT_EQ(m.call(args), kKilnErrorArgument) << message;
    EXPECT_EQ(m.last_error(), message);
  };
  const Tensor a = filled<float>({32}, 1.0f);
  both({a, a}, "vadd: expected 3 arguments (A, B, C)");
  both({a, filled<int32_t>({32}, 1), a}, "vadd: argument 2 (B): expected dtype float32");
  both({filled<float>({4, 8}, 1.0f), a, a}, "vadd: argument 1 (A): expected 1 dimensions");
  both({a, filled<float>({16}, 1.0f), a},
       "vadd: argument 2 (B): dimension 0 must be n (dimension 0 of argument 1 (A))");
  both({a, a, Tensor()}, "vadd: argument 3 (C): the data pointer is null");
  both({a, filled<float>({33}, 1.0f).view(1, {32}), a},
       "vadd: argument 2 (B): the data pointer is not 64-byte aligned");

  Var n("n");
  Buffer W = ir::make_buffer("W", Float(32), {4, n});
  Buffer P = ir::make_buffer("P", Float(32), {n + 1});
  Var i("i");
  auto g = make_func("shapes", {W, P}, {n}, loop(i, n, store(P, load(W, i), i)));
  expect_error<RuntimeError>(
      [&] {
        interp::run(g, {filled<float>({5, 8}, 0.0f), filled<float>({9}, 0.0f)});
      },
      {"shapes: argument 1 (W): dimension 0 must be 4"});
  expect_error<RuntimeError>(
      [&] {
        interp::run(g, {filled<float>({4, 8}, 0.0f), filled<float>({8}, 0.0f)});
      },
      {"shapes: argument 2 (P): dimension 0 must be (n + 1)"});
  // A size that is no whole dimension of an argument cannot be given by any call.
  Buffer Q = ir::make_buffer("Q", Float(32), {n + 1});
  auto h = make_func("underived", {Q}, {n}, loop(i, n, store(Q, Expr(0.0f), i)));
  expect_error<ExprError>([&] { interp::run(h, {filled<float>({3}, 0.0f)}); },
                          {"function underived: size n is not a whole dimension of any argument"});
}

TEST(InterpreterTest, OutOfBoundsAccessesAreReported) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Buffer B = ir::make_buffer("B", Float(32), {n + 1});
  Var i("i");
  auto read = make_func("read", {A, B}, {n}, loop(i, n + 1, store(B, load(A, i), i)));
  expect_error<RuntimeError>(
      [&] {
        interp::run(read, {filled<float>({4}, 0.0f), filled<float>({5}, 0.0f)});
      },
      {"function read: out-of-bounds load from buffer A: index 4 is outside [0, 4)"});
  auto write = make_func("write", {A, B}, {n}, loop(i, n, store(A, load(B, i), i - 1)));
  expect_error<RuntimeError>(
      [&] {
        interp::run(write, {filled<float>({4}, 0.0f), filled<float>({5}, 0.0f)});
      },
      {"out-of-bounds store to buffer A: index -1"});
  Buffer T = test::alloc_buffer("t", Float(32));
  auto local =
      make_func("local", {A}, {n}, ir::AllocateNode::make(T.data, Float(32), {4}, "local", store(T, Expr(1.0f), n)));
  expect_error<RuntimeError>([&] { interp::run(local, {filled<float>({4}, 0.0f)}); },
                             {"out-of-bounds store to buffer t: index 4 is outside [0, 4)"});
  // A vector store: lanes are checked before any is written.
  auto vec = make_func("vec", {A}, {n}, store(A, bcast(Expr(1.0f), 4), ramp(2, 1, 4)));
  Tensor a = filled<float>({4}, 0.0f);
  expect_error<RuntimeError>([&] { interp::run(vec, {a}); }, {"index 4"});
  EXPECT_EQ(values<float>(a), std::vector<float>(4, 0.0f));
}

TEST(InterpreterTest, StepLimitStopsRunawayLoops) {
  Buffer A = ir::make_buffer("A", Float(32), {1});
  Var i("i");
  auto f = make_func("forever", {A}, {}, loop(i, Expr(2000000000), store(A, Expr(1.0f), 0)));
  interp::RunOptions opt;
  opt.max_steps = 10000;
  expect_error<RuntimeError>([&] { interp::run(f, {filled<float>({1}, 0.0f)}, opt); },
                             {"function forever: step limit of 10000"});
}

TEST(InterpreterTest, IntegerDivisionByZeroAndBadCastsAreErrors) {
  Buffer A = ir::make_buffer("A", Int(32), {2});
  auto div = make_func("div", {A}, {}, store(A, load(A, 0) / load(A, 1), 0));
  expect_error<RuntimeError>(
      [&] {
        interp::run(div, {make_tensor<int32_t>({2}, {7, 0})});
      },
      {"integer division by zero", "with operands 7 and 0"});
  Buffer F = ir::make_buffer("F", Float(32), {1});
  Buffer I = ir::make_buffer("I", Int(8), {1});
  auto cast = make_func("cast", {F, I}, {}, store(I, ir::cast(Int(8), load(F, 0)), 0));
  expect_error<RuntimeError>(
      [&] {
        interp::run(cast, {make_tensor<float>({1}, {300.0f}), filled<int8_t>({1}, 0)});
      },
      {"cast of 300 (float32) to int8 is out of range"});
  Tensor ok = filled<int8_t>({1}, 0);
  interp::run(cast, {make_tensor<float>({1}, {-127.9f}), ok});
  EXPECT_EQ(values<int8_t>(ok)[0], -127);
}

TEST(InterpreterTest, UnwrittenAllocationsArePoisoned) {
  Buffer A = ir::make_buffer("A", Float(32), {1});
  Buffer B = ir::make_buffer("B", Int(32), {1});
  Buffer T = test::alloc_buffer("t", Float(32)), U = test::alloc_buffer("u", Int(32));
  auto f =
      make_func("poison", {A, B}, {},
                ir::AllocateNode::make(
                    T.data, Float(32), {2}, "local",
                    ir::AllocateNode::make(U.data, Int(32), {2}, "local",
                                           ir::BlockNode::make({store(A, load(T, 1), 0), store(B, load(U, 1), 0)}))));
  Tensor a = filled<float>({1}, 0.0f), b = filled<int32_t>({1}, 0);
  interp::run(f, {a, b});
  EXPECT_TRUE(std::isnan(values<float>(a)[0]));
  EXPECT_EQ(static_cast<uint32_t>(values<int32_t>(b)[0]), 0xCDCDCDCDu);
}

TEST(InterpreterTest, UnloweredNodesAreInternalErrors) {
  te::Tensor P = te::placeholder({4}, Float(32), "P");
  Buffer A = ir::make_buffer("A", Float(32), {4});
  auto f = make_func("unlowered", {A}, {}, store(A, P(0), 0));
  expect_error<InternalError>([&] { interp::run(f, {filled<float>({4}, 0.0f)}); }, {"ProducerLoad"});
  expect_error<InternalError>([&] { codegen::codegen_c(f); }, {"ProducerLoad"});
}

}  // namespace
}  // namespace kiln
