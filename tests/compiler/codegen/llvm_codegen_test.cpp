// The LLVM back end on hand-built lowered functions: every IR construct and dtype, compared with
// the interpreter; and the shape of the code it emits (vector instructions, alignment, noalias).
#include "compiler/codegen/llvm/codegen_llvm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/ir/deploy_dtype.h"
#include "compiler/lower/lower.h"
#include "compiler/te/schedule.h"
#include "deploy/thread_pool.h"
#include "tests/compiler/codegen/llvm_harness.h"

namespace kiln {
namespace {

using codegen::LLVMBuildOptions;
using codegen::LLVMModule;
using deploy::Tensor;
using ir::Buffer;
using ir::DataType;
using ir::Expr;
using ir::Float;
using ir::ForKind;
using ir::Int;
using ir::Stmt;
using ir::UInt;
using ir::Var;
using test::expect_same;
using test::filled;
using test::load;
using test::loop;
using test::make_func;
using test::make_tensor;
using test::native_options;
using test::run_interp_and_llvm;
using test::store;
using test::values;

Expr ramp(Expr base, int stride, int lanes) { return ir::RampNode::make(std::move(base), Expr(stride), lanes); }
Expr bcast(Expr v, int lanes) { return ir::BroadcastNode::make(std::move(v), lanes); }

LLVMBuildOptions generic_options() {
  LLVMBuildOptions o;
  o.target = "llvm";
  return o;
}

Tensor zeros(std::vector<int64_t> shape, DataType t) {
  Tensor x = Tensor::empty(std::move(shape), ir::to_deploy_dtype(t));
  std::memset(x.data(), 0, x.nbytes());
  return x;
}

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

ir::LoweredFunc vector_add() {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Buffer B = ir::make_buffer("B", Float(32), {n});
  Buffer C = ir::make_buffer("C", Float(32), {n});
  Var i("i");
  return make_func("vadd", {A, B, C}, {n}, loop(i, n, store(C, load(A, i) + load(B, i), i)));
}

TEST(LLVMCodegenTest, VectorAddOverSymbolicSize) {
  const ir::LoweredFunc f = vector_add();
  LLVMModule m(f, native_options());
  for (int64_t len : {0, 1, 17, 1000}) {
    std::vector<float> a(len), b(len);
    for (int64_t i = 0; i < len; ++i) {
      a[i] = 0.5f * i - 3.0f;
      b[i] = 1.25f * i * i;
    }
    Tensor c = filled<float>({len}, 0.0f);
    m.call("vadd", {make_tensor<float>({len}, a), make_tensor<float>({len}, b), c});
    const auto cv = values<float>(c);
    for (int64_t i = 0; i < len; ++i) EXPECT_EQ(cv[i], a[i] + b[i]) << "i = " << i;
  }
  EXPECT_GT(m.times().total_ms(), 0.0);
}

// A 16-lane vectorized add scheduled through te: the IR holds <16 x float> loads and stores with
// 64-byte alignment and the machine code uses the widest vector registers the host has.
TEST(LLVMCodegenTest, VectorizedLoopEmitsVectorInstructions) {
  auto A = te::placeholder({256}, Float(32), "A");
  auto B = te::placeholder({256}, Float(32), "B");
  auto C = te::compute(
      {256}, [&](Var i) { return A(i) + B(i); }, "C");
  auto s = te::create_schedule({C});
  ir::IterVar o, i;
  (*s)[C].split((*s)[C].axis(0), 16, &o, &i);
  (*s)[C].vectorize(i);
  auto f = lower::lower(*s, {A, B, C}, "vadd16");
  LLVMBuildOptions opt = native_options();
  opt.keep_llvm_ir = true;
  opt.keep_assembly = true;
  const std::string raw = codegen::emit_llvm_ir({f}, opt, false);
  EXPECT_NE(raw.find("fadd contract <16 x float>"), std::string::npos) << raw;
  EXPECT_NE(raw.find("load <16 x float>, <16 x float>* %"), std::string::npos) << raw;
  EXPECT_NE(raw.find("align 64"), std::string::npos) << raw;
  EXPECT_NE(raw.find("noalias"), std::string::npos) << raw;
  EXPECT_NE(raw.find("!alias.scope"), std::string::npos) << raw;
  LLVMModule m(f, opt);
  EXPECT_NE(m.llvm_ir().find("<16 x float>"), std::string::npos);
  const int bits = m.target().vector_bits();
  const std::string reg = bits >= 512 ? "%zmm" : bits >= 256 ? "%ymm" : "%xmm";
  EXPECT_NE(m.assembly().find("vaddps"), std::string::npos) << m.assembly();
  EXPECT_NE(m.assembly().find(reg), std::string::npos) << m.assembly();
  // Aligned vector moves: the index is a multiple of 16 floats in 64-byte aligned buffers.
  if (bits >= 256) {
    EXPECT_NE(m.assembly().find("vmovaps"), std::string::npos) << m.assembly();
  }

  Tensor a = filled<float>({256}, 1.5f), b = filled<float>({256}, 2.0f), c = filled<float>({256}, 0.0f);
  m.call("vadd16", {a, b, c});
  EXPECT_EQ(values<float>(c), std::vector<float>(256, 3.5f));
}

// An unrolled body of vector accesses at constant offsets from one index (rows of 128 floats, four
// vectors of a row and eight rows an iteration): each access's constant is its address's
// displacement, so the body is the loads, multiplications and stores with no integer instruction
// per access (in 32-bit index arithmetic the offsets became `or`s of disjoint bits and a sign
// extension each).
TEST(LLVMCodegenTest, ConstantIndexOffsetsAreAddressDisplacements) {
  auto A = te::placeholder({24, 8, 128}, Float(32), "A");
  auto C = te::compute(
      {24, 8, 128}, [&](Var i, Var r, Var k) { return A(i, r, k) * 2.0f; }, "C");
  auto s = te::create_schedule({C});
  te::Stage st = (*s)[C];
  auto [ko, kv] = st.split(st.axis(2), 16);
  auto [l, u] = st.split(ko, 4);
  st.reorder({st.axis(0), l, u, st.axis(1), kv});
  st.unroll(u);
  st.unroll(st.axis(1));
  st.vectorize(kv);
  auto f = lower::lower(*s, {A, C}, "scale");
  LLVMBuildOptions opt = native_options();
  opt.keep_assembly = true;
  LLVMModule m(f, opt);
  if (m.target().vector_bits() >= 512) {
    const std::string &as = m.assembly();
    // One index an iteration (at most an `or` and a sign extension), none per access (64 a body).
    EXPECT_LE(count(as, "\torl\t") + count(as, "\torq\t") + count(as, "cltq") + count(as, "movslq"), 2u) << as;
  }
  Tensor a = filled<float>({24, 8, 128}, 1.5f), c = filled<float>({24, 8, 128}, 0.0f);
  m.call("scale", {a, c});
  EXPECT_EQ(values<float>(c), std::vector<float>(24 * 8 * 128, 3.0f));
}

TEST(LLVMCodegenTest, AlignmentFollowsTheIndex) {
  Buffer A = ir::make_buffer("A", Float(32), {64});
  Buffer B = ir::make_buffer("B", Float(32), {64});
  Var i("i");
  // B[16i .. 16i+15] = A[16i+1 .. 16i+16]: the store is 64-byte aligned, the load only 4.
  Stmt body = loop(i, 3, store(B, load(A, ramp(i * 16 + 1, 1, 16)), ramp(i * 16, 1, 16)));
  auto f = make_func("shift", {A, B}, {}, body);
  const std::string raw = codegen::emit_llvm_ir({f}, native_options(), false);
  EXPECT_TRUE(std::regex_search(raw, std::regex(R"(load <16 x float>, <16 x float>\* %\S+, align 4)"))) << raw;
  EXPECT_TRUE(std::regex_search(raw, std::regex(R"(store <16 x float> %\S+, <16 x float>\* %\S+, align 64)"))) << raw;
  std::vector<float> a(64);
  for (int k = 0; k < 64; ++k) a[k] = static_cast<float>(k);
  expect_same(run_interp_and_llvm(f, {make_tensor<float>({64}, a), filled<float>({64}, 0.0f)}));
}

template <typename T>
void check_int_division(DataType t) {
  SCOPED_TRACE(t.to_string());
  // Every operator with a variable divisor, a constant divisor and a vector divisor.
  const std::vector<T> as = {-9, -8, -7, -4, -3, -1, 0, 1, 3, 4, 7, 8, 9, std::numeric_limits<T>::min()};
  const std::vector<T> bs = {-7, -3, -2, -1, 1, 2, 3, 4, 8};
  const int na = static_cast<int>(as.size()), nb = static_cast<int>(bs.size());
  Buffer A = ir::make_buffer("A", t, {na}), Bv = ir::make_buffer("B", t, {nb});
  Buffer O = ir::make_buffer("O", t, {4, 3 + static_cast<int>(bs.size()), na, nb});
  Var i("i"), j("j");
  Expr a = load(A, i), b = load(Bv, j);
  std::vector<std::function<Expr(Expr, Expr)>> ops = {
      [](Expr x, Expr y) { return ir::truncdiv(x, y); }, [](Expr x, Expr y) { return ir::truncmod(x, y); },
      [](Expr x, Expr y) { return ir::floordiv(x, y); }, [](Expr x, Expr y) { return ir::floormod(x, y); }};
  std::vector<Stmt> stores;
  for (int op = 0; op < 4; ++op) {
    stores.push_back(store(O, ops[op](a, b), O.offset_of({op, 0, i, j})));
    // Constant divisors.
    for (size_t c = 0; c < bs.size(); ++c) {
      stores.push_back(store(O, ops[op](a, ir::make_const(t, static_cast<int64_t>(bs[c]))),
                             O.offset_of({op, 1 + static_cast<int>(c), i, j})));
    }
  }
  Stmt scalar = loop(i, na, loop(j, nb, ir::BlockNode::make(stores)));
  // Vector forms: lanes over j, divisor loaded as a vector.
  std::vector<Stmt> vstores;
  Var vi("vi");
  Expr va = bcast(load(A, vi), nb), vb = load(Bv, ramp(0, 1, nb));
  for (int op = 0; op < 4; ++op) {
    Expr off = O.offset_of({op, 1 + static_cast<int>(bs.size()), vi, 0});
    vstores.push_back(store(O, ops[op](va, vb), ramp(off, 1, nb)));
    Expr off2 = O.offset_of({op, 2 + static_cast<int>(bs.size()), vi, 0});
    vstores.push_back(store(O, ops[op](va, bcast(ir::make_const(t, int64_t{3}), nb)), ramp(off2, 1, nb)));
  }
  Stmt vector = loop(vi, na, ir::BlockNode::make(vstores));
  auto f = make_func("divmod", {A, Bv, O}, {}, ir::BlockNode::make(scalar, vector));
  const std::vector<T> &av = as, &bv = bs;
  auto r = run_interp_and_llvm(
      f, {make_tensor<T>({na}, av), make_tensor<T>({nb}, bv), filled<T>({4, 3 + nb, na, nb}, T(0))});
  expect_same(r);
}

TEST(LLVMCodegenTest, IntegerDivisionMatchesTheInterpreter) {
  check_int_division<int8_t>(Int(8));
  check_int_division<int16_t>(Int(16));
  check_int_division<int32_t>(Int(32));
  check_int_division<int64_t>(Int(64));
}

TEST(LLVMCodegenTest, UnsignedArithmeticAndWrapping) {
  Buffer A8 = ir::make_buffer("A8", Int(8), {2}), U8 = ir::make_buffer("U8", UInt(8), {4});
  Buffer S16 = ir::make_buffer("S16", Int(16), {1}), I32 = ir::make_buffer("I32", Int(32), {1});
  Buffer U32 = ir::make_buffer("U32", UInt(32), {3}), U64 = ir::make_buffer("U64", UInt(64), {2});
  Stmt body = ir::BlockNode::make({
      store(A8, load(A8, 0) + load(A8, 1), 0),
      store(U8, load(U8, 0) + load(U8, 1), 0),
      store(U8, ir::floordiv(load(U8, 2), load(U8, 3)), 1),
      store(U8, ir::floormod(load(U8, 2), ir::make_const(UInt(8), int64_t{7})), 2),
      store(U8, ir::max(load(U8, 2), load(U8, 3)), 3),
      store(S16, load(S16, 0) * load(S16, 0), 0),
      store(I32, load(I32, 0) + Expr(1), 0),
      store(U32, load(U32, 0) - ir::make_const(UInt(32), int64_t{1}), 0),
      store(U32, ir::truncdiv(load(U32, 1), load(U32, 2)), 1),
      store(U32, ir::cast(UInt(32), load(U32, 1) > load(U32, 2)), 2),
      store(U64, ir::truncdiv(load(U64, 0), ir::make_const(UInt(64), int64_t{3})), 1),
  });
  auto f = make_func("wrap", {A8, U8, S16, I32, U32, U64}, {}, body);
  auto r = run_interp_and_llvm(
      f, {make_tensor<int8_t>({2}, {100, 100}), make_tensor<uint8_t>({4}, {200, 100, 250, 9}),
          make_tensor<int16_t>({1}, {300}), make_tensor<int32_t>({1}, {std::numeric_limits<int32_t>::max()}),
          make_tensor<uint32_t>({3}, {0, 4000000000u, 3}),
          make_tensor<uint64_t>({2}, {std::numeric_limits<uint64_t>::max(), 0})});
  expect_same(r);
  EXPECT_EQ(values<int8_t>(r.llvm[0])[0], -56);
  EXPECT_EQ(values<uint32_t>(r.llvm[4])[0], 4294967295u);
  EXPECT_EQ(values<uint32_t>(r.llvm[4])[1], 1333333333u);
}

TEST(LLVMCodegenTest, CastsBetweenEveryType) {
  const std::vector<DataType> types = {Int(8),   Int(16),  Int(32),   Int(64),   UInt(8),   UInt(16),
                                       UInt(32), UInt(64), Float(16), Float(32), Float(64), ir::Bool()};
  // Values every type holds: small non-negative integers and halves, so that no cast is out of
  // range (the interpreter rejects those).
  const std::vector<double> xs = {0, 1, 2.5, 3.75, 7, 100.5, 0.1};
  const int n = static_cast<int>(xs.size());
  for (DataType from : types) {
    SCOPED_TRACE("from " + from.to_string());
    Buffer X = ir::make_buffer("X", from, {n});
    std::vector<Buffer> outs;
    std::vector<Stmt> stores;
    Var i("i");
    for (DataType to : types) {
      outs.push_back(ir::make_buffer("O_" + to.to_string(), to, {n}));
      stores.push_back(store(outs.back(), ir::cast(to, load(X, i)), i));
      // And through a vector of 4 lanes.
    }
    std::vector<Buffer> params = {X};
    params.insert(params.end(), outs.begin(), outs.end());
    Buffer V = ir::make_buffer("V", Float(32), {4});
    params.push_back(V);
    Stmt vec = store(V, ir::cast(Float(32, 4), ir::cast(from.with_lanes(4), load(X, ramp(0, 1, 4)))), ramp(0, 1, 4));
    auto f = make_func("casts", params, {}, ir::BlockNode::make(loop(i, n, ir::BlockNode::make(stores)), vec));
    std::vector<Tensor> args;
    Tensor x = zeros({n}, from);
    for (int k = 0; k < n; ++k) {
      // Store each value as `from` holds it, through the interpreter's own cast.
      Buffer S = ir::make_buffer("S", Float(64), {1});
      Buffer D = ir::make_buffer("D", from, {1});
      auto conv = make_func("conv", {S, D}, {}, store(D, ir::cast(from, load(S, 0)), 0));
      Tensor s = make_tensor<double>({1}, {xs[static_cast<size_t>(k)]});
      Tensor d = zeros({1}, from);
      interp::run(conv, {s, d});
      std::memcpy(static_cast<char *>(x.data()) + k * d.dtype().bytes(), d.data(), d.dtype().bytes());
    }
    args.push_back(x);
    for (DataType to : types) {
      args.push_back(zeros({n}, to));
    }
    args.push_back(filled<float>({4}, 0.0f));
    expect_same(run_interp_and_llvm(f, args));
  }
}

TEST(LLVMCodegenTest, FloatToIntegerCastsSaturateInsteadOfTrapping) {
  Buffer X = ir::make_buffer("X", Float(32), {4}), O = ir::make_buffer("O", Int(8), {4});
  Var i("i");
  auto f = make_func("sat", {X, O}, {}, loop(i, 4, store(O, ir::cast(Int(8), load(X, i)), i)));
  LLVMModule m(f, native_options());
  Tensor o = filled<int8_t>({4}, 0);
  m.call("sat", {make_tensor<float>({4}, {1000.0f, -1000.0f, std::nanf(""), -3.7f}), o});
  EXPECT_EQ(values<int8_t>(o), (std::vector<int8_t>{127, -128, 0, -3}));
}

// Rounds to half precision by scaling: an independent check of the conversion.
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

// float16 in memory, float in registers: scalar and 8-lane code, with and without hardware
// conversions (the generic x86-64 target has no F16C), bit for bit as the interpreter.
TEST(LLVMCodegenTest, Float16IsStoredAsHalfAndComputedAsFloat) {
  std::vector<float> xs = {1.0f,
                           1.0f + std::ldexp(1.0f, -11),
                           1.0f + 3 * std::ldexp(1.0f, -11),
                           -3.14159265f,
                           0.1f,
                           65504.0f,
                           65519.0f,
                           65520.0f,
                           1e5f,
                           -1e5f,
                           1e-8f,
                           1.5f * std::ldexp(1.0f, -24),
                           2.5f * std::ldexp(1.0f, -24),
                           std::ldexp(1.0f, -14) * 0.999f,
                           0.0f,
                           -0.0f,
                           std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(),
                           -std::numeric_limits<float>::quiet_NaN(),
                           6.1e-5f,
                           -2.98e-8f,
                           33.3f,
                           -0.5f,
                           7.0f};
  const int64_t len = static_cast<int64_t>(xs.size());  // 24: three vectors of 8
  Buffer X = ir::make_buffer("X", Float(32), {len});
  Buffer H = ir::make_buffer("H", Float(16), {len});
  Buffer Y = ir::make_buffer("Y", Float(32), {len});
  Buffer H3 = ir::make_buffer("H3", Float(16), {len});
  Buffer HV = ir::make_buffer("HV", Float(16), {len});
  Buffer D = ir::make_buffer("D", Float(64), {len});
  Var i("i"), j("j"), k("k"), v("v"), w("w");
  Expr idx = ramp(v * 8, 1, 8);
  Stmt body = ir::BlockNode::make({
      loop(i, len, store(H, ir::cast(Float(16), load(X, i)), i)),
      loop(j, len, store(Y, ir::cast(Float(32), load(H, j)), j)),
      loop(k, len, store(H3, load(H, k) * ir::make_const(Float(16), 3.0), k)),
      loop(v, len / 8, store(HV, ir::cast(Float(16, 8), load(X, idx) * bcast(Expr(0.7f), 8)), idx)),
      loop(w, len, store(D, ir::cast(Float(64), ir::cast(Float(16), ir::cast(Float(64), load(X, w)))), w)),
  });
  auto f = make_func("half", {X, H, Y, H3, HV, D}, {}, body);
  for (const LLVMBuildOptions &o : {native_options(), generic_options()}) {
    SCOPED_TRACE(o.target);
    auto r = run_interp_and_llvm(f,
                                 {make_tensor<float>({len}, xs), test::half_tensor({len}, std::vector<uint16_t>(len)),
                                  filled<float>({len}, 0.0f), test::half_tensor({len}, std::vector<uint16_t>(len)),
                                  test::half_tensor({len}, std::vector<uint16_t>(len)), filled<double>({len}, 0.0)},
                                 o);
    expect_same(r);
    const auto y = values<float>(r.llvm[2]);
    for (int64_t x = 0; x < len; ++x) {
      if (!std::isnan(xs[x])) {
        EXPECT_EQ(y[x], reference_half(xs[x])) << xs[x];
      }
    }
  }
  const std::string ir_text = codegen::emit_llvm_ir({f}, native_options(), false);
  if (codegen::LLVMTarget::host().has_feature("f16c")) {
    EXPECT_NE(ir_text.find("load half"), std::string::npos);
    EXPECT_NE(ir_text.find("fpext <8 x half>"), std::string::npos);
  }
}

TEST(LLVMCodegenTest, PredicatedAndStridedVectorAccesses) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Buffer B = ir::make_buffer("B", Float(32), {n});
  Buffer G = ir::make_buffer("G", Float(32), {8});
  Buffer S = ir::make_buffer("S", Float(32), {16});
  Buffer D = ir::make_buffer("D", Float(32), {9});
  Buffer E = ir::make_buffer("E", Float(32), {8});
  Buffer P = ir::make_buffer("P", Float(32), {8});
  Var i("i"), v("v", ir::Int(32, 8));
  Expr idx = ramp(i * 8, 1, 8);
  Expr pred = idx < bcast(n, 8);
  Stmt body = ir::BlockNode::make({
      // A tail by predication: masked loads and stores.
      loop(i, ir::floordiv(n + 7, 8),
           store(B, load(A, idx, pred) * bcast(Expr(2.0f), 8) + bcast(Expr(1.0f), 8), idx, pred)),
      // A gather with stride 2 and one through a computed index.
      store(G, load(A, ramp(0, 2, 8)) + load(A, ir::floormod(ramp(5, 3, 8), bcast(Expr(7), 8))), ramp(0, 1, 8)),
      // A scatter with stride 2, and a predicated scatter.
      store(S, load(A, ramp(0, 1, 8)), ramp(0, 2, 8)),
      store(S, bcast(Expr(-1.0f), 8), ramp(1, 2, 8), ramp(0, 1, 8) < bcast(Expr(3), 8)),
      // An overlapping vector store reads every lane before writing any.
      store(D, load(D, ramp(0, 1, 8)), ramp(1, 1, 8)),
      // A vector variable, a broadcast load.
      ir::LetStmtNode::make(v, ramp(0, 1, 8) * bcast(3, 8),
                            store(E, ir::cast(Float(32, 8), v) + load(A, bcast(Expr(2), 8)), ramp(0, 1, 8))),
      // A predicated scalar store and load.
      store(P, load(A, Expr(1), ir::const_true()), 0, ir::const_true()),
      store(P, Expr(5.0f), 1, n < 0),
  });
  auto f = make_func("vec", {A, B, G, S, D, E, P}, {n}, body);
  std::vector<float> a(21);
  for (int x = 0; x < 21; ++x) a[x] = 1.5f * x - 4;
  auto r = run_interp_and_llvm(
      f, {make_tensor<float>({21}, a), filled<float>({21}, 0.0f), filled<float>({8}, 0.0f), filled<float>({16}, 0.0f),
          make_tensor<float>({9}, {0, 1, 2, 3, 4, 5, 6, 7, 8}), filled<float>({8}, 0.0f), filled<float>({8}, 0.0f)});
  expect_same(r);
  const std::string ir_text = codegen::emit_llvm_ir({f}, native_options(), false);
  EXPECT_NE(ir_text.find("@llvm.masked.load.v8f32"), std::string::npos);
  EXPECT_NE(ir_text.find("@llvm.masked.store.v8f32"), std::string::npos);
  EXPECT_NE(ir_text.find("@llvm.masked.gather.v8f32"), std::string::npos);
  EXPECT_NE(ir_text.find("@llvm.masked.scatter.v8f32"), std::string::npos);
}

// Stride-2 loads of a pair x[2j], x[2j + 1] in one value, or in consecutive stores (a sum
// accumulated tap by tap), read the whole span between them, so it is loaded unmasked and
// deinterleaved; a stride-2 load alone, or paired with one that does not cover the span's last
// element, stays a masked load of its span, which at the very end of a buffer reads nothing past
// it. Values agree with the interpreter either way.
TEST(LLVMCodegenTest, StridedPairsLoadTheirWholeSpanUnmasked) {
  Buffer A = ir::make_buffer("A", Float(32), {32});
  Buffer E = ir::make_buffer("E", Float(32), {31});
  Buffer P = ir::make_buffer("P", Float(32), {16});
  Buffer L = ir::make_buffer("L", Float(32), {8});
  Buffer F = ir::make_buffer("F", Float(32), {8});
  Buffer Q = ir::make_buffer("Q", Float(32), {8});
  Var i("i");
  // Pairs at 16 i and 16 i + 1 (the second pair's span ends at A's last element).
  Stmt pair = loop(i, 2,
                   store(P, load(A, ramp(i * 16, 2, 8)) + load(A, ramp(i * 16 + 1, 2, 8)) * bcast(Expr(2.0f), 8),
                         ramp(i * 8, 1, 8)));
  // E is 31 long: the span of a stride-2 load at 16 is 15 elements, its whole strides 16.
  Stmt lone = store(L, load(E, ramp(16, 2, 8)), ramp(0, 1, 8));
  Stmt far = store(F, load(E, ramp(14, 2, 8)) - load(E, ramp(16, 2, 8)), ramp(0, 1, 8));
  // The pair accumulated by two stores, the second pair ending at A's last element.
  Stmt split = ir::BlockNode::make({store(Q, load(A, ramp(17, 2, 8)), ramp(0, 1, 8)),
                                    store(Q, load(Q, ramp(0, 1, 8)) + load(A, ramp(16, 2, 8)), ramp(0, 1, 8))});
  std::vector<float> a(32), e(31);
  for (int x = 0; x < 32; ++x) a[x] = 0.75f * x - 5;
  for (int x = 0; x < 31; ++x) e[x] = 2.0f * x + 1;
  auto f = make_func("pairs", {A, E, P, L, F, Q}, {}, ir::BlockNode::make({pair, lone, far, split}));
  auto r = run_interp_and_llvm(f, {make_tensor<float>({32}, a), make_tensor<float>({31}, e), filled<float>({16}, 0.0f),
                                   filled<float>({8}, 0.0f), filled<float>({8}, 0.0f), filled<float>({8}, 0.0f)});
  expect_same(r);
  const auto pv = values<float>(r.llvm[2]);
  for (int x = 0; x < 16; ++x) EXPECT_EQ(pv[x], a[2 * x] + a[2 * x + 1] * 2.0f) << x;
  EXPECT_EQ(values<float>(r.llvm[3])[7], e[30]);
  EXPECT_EQ(values<float>(r.llvm[5])[7], a[31] + a[30]);
  const auto only = [&](const Stmt &s, const char *name) {
    return codegen::emit_llvm_ir({make_func(name, {A, E, P, L, F, Q}, {}, s)}, native_options(), false);
  };
  const std::string pair_ir = only(pair, "pair"), lone_ir = only(lone, "lone"), far_ir = only(far, "far");
  const std::string split_ir = only(split, "split");
  EXPECT_EQ(count(split_ir, "llvm.masked.load"), 0u) << split_ir;
  EXPECT_EQ(count(split_ir, "load <16 x float>"), 2u) << split_ir;
  EXPECT_EQ(count(pair_ir, "llvm.masked.load"), 0u) << pair_ir;
  EXPECT_NE(pair_ir.find("load <16 x float>"), std::string::npos) << pair_ir;
  EXPECT_NE(lone_ir.find("@llvm.masked.load.v16f32"), std::string::npos) << lone_ir;
  EXPECT_EQ(lone_ir.find("load <16 x float>"), std::string::npos) << lone_ir;
  EXPECT_EQ(count(far_ir, "call <16 x float> @llvm.masked.load"), 2u) << far_ir;
}

// Masked loads and stores of vectors whose width is no power of two (a padded row of 9 floats, a
// plane of 49) keep every lane's mask: a masked-off lane of a load gives the pad value, not the
// memory under it, and a masked-off lane of a store leaves memory as it was. (On AVX2, LLVM 14
// lowered a <9 x float> masked load as an unmasked load of its last lane, so a 3x3 convolution's
// padded rows read the next row's first element in place of the right padding.)
TEST(LLVMCodegenTest, MaskedAccessesOfEveryWidthKeepTheirMasks) {
  for (const int w : {3, 5, 6, 7, 9, 12, 15, 17, 25, 49}) {
    SCOPED_TRACE(std::to_string(w) + " lanes");
    Buffer A = ir::make_buffer("A", Float(32), {64});
    Buffer L = ir::make_buffer("L", Float(32), {4, 3, w});
    Buffer S = ir::make_buffer("S", Float(32), {4, 3, w});
    Var k("k");
    // Rows k = 0, 1, 2, row 0 masked off whole (a padding row), as a padded copy's loop makes them:
    // the row's condition (a scalar, broadcast) and the lanes' (all but the first and the last, the
    // first only, the last only, every other one).
    const Expr lane = ramp(0, 1, w), row = bcast(Expr(1) <= k, w);
    const std::vector<Expr> masks = {row && (bcast(Expr(1), w) <= lane) && (lane < bcast(Expr(w - 1), w)),
                                     row && (lane < bcast(Expr(1), w)), row && (lane >= bcast(Expr(w - 1), w)),
                                     row && (ir::floormod(lane, bcast(Expr(2), w)) == bcast(Expr(0), w))};
    std::vector<Stmt> stores;
    for (size_t m = 0; m < masks.size(); ++m) {
      const Expr at = ramp((static_cast<int>(m) * 3 + k) * w, 1, w), from = ramp(k * 7 + 1, 1, w);
      stores.push_back(store(L, ir::if_then_else(masks[m], load(A, from, masks[m]), bcast(Expr(0.0f), w)), at));
      stores.push_back(store(S, load(A, from), at, masks[m]));
    }
    auto f = make_func("masked", {A, L, S}, {}, loop(k, 3, ir::BlockNode::make(stores)));
    std::vector<float> a(64);
    for (int x = 0; x < 64; ++x) a[x] = 1.0f + static_cast<float>(x);
    auto r = run_interp_and_llvm(f, {make_tensor<float>({64}, a), filled<float>({4, 3, w}, -7.0f),
                                     filled<float>({4, 3, w}, -7.0f)});
    expect_same(r);
    const auto loaded = values<float>(r.llvm[1]), stored = values<float>(r.llvm[2]);
    const std::vector<std::function<bool(int)>> on = {[&](int j) { return j >= 1 && j < w - 1; },
                                                      [](int j) { return j == 0; },
                                                      [&](int j) { return j == w - 1; },
                                                      [](int j) { return j % 2 == 0; }};
    for (size_t m = 0; m < on.size(); ++m)
      for (int row_k = 0; row_k < 3; ++row_k)
        for (int j = 0; j < w; ++j) {
          const size_t at = (m * 3 + static_cast<size_t>(row_k)) * static_cast<size_t>(w) + static_cast<size_t>(j);
          const bool active = row_k >= 1 && on[m](j);
          const float want = a[static_cast<size_t>(row_k * 7 + 1 + j)];
          EXPECT_EQ(loaded[at], active ? want : 0.0f) << "mask " << m << ", row " << row_k << ", lane " << j;
          EXPECT_EQ(stored[at], active ? want : -7.0f) << "mask " << m << ", row " << row_k << ", lane " << j;
        }
  }
}

// if_then_else evaluates only the branch taken: per lane through masked loads for a vector
// condition. The reads it guards would be out of bounds.
TEST(LLVMCodegenTest, IfThenElseGuardsItsReads) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Buffer B = ir::make_buffer("B", Float(32), {n + 4});
  Buffer V = ir::make_buffer("V", Float(32), {24});
  Var i("i"), v("v");
  Expr idx = ramp(v * 8, 1, 8);
  Expr inner =
      ir::if_then_else(idx < bcast(n + 2, 8), ir::if_then_else(idx < bcast(n, 8), load(A, idx), bcast(Expr(-2.0f), 8)),
                       bcast(Expr(-1.0f), 8));
  Stmt body = ir::BlockNode::make({
      loop(i, n + 4, store(B, ir::if_then_else(i < n, load(A, i), Expr(-1.0f)), i)),
      loop(v, 3, store(V, inner, idx)),
  });
  auto f = make_func("guard", {A, B, V}, {n}, body);
  // A exactly n long (its last element at the end of a page would expose a stray read).
  auto r = run_interp_and_llvm(
      f, {make_tensor<float>({5}, {1, 2, 3, 4, 5}), filled<float>({9}, 0.0f), filled<float>({24}, 0.0f)});
  expect_same(r);
  const auto vv = values<float>(r.llvm[2]);
  EXPECT_EQ(vv[4], 5.0f);
  EXPECT_EQ(vv[5], -2.0f);
  EXPECT_EQ(vv[7], -1.0f);
}

TEST(LLVMCodegenTest, ComparisonsMinMaxSelectAndBooleans) {
  for (DataType t : {Int(8), Int(32), Int(64), UInt(16), Float(32), Float(64)}) {
    SCOPED_TRACE(t.to_string());
    const int n = 6;
    Buffer A = ir::make_buffer("A", t, {n}), B = ir::make_buffer("B", t, {n});
    Buffer O = ir::make_buffer("O", t, {4, n});
    Buffer Bo = ir::make_buffer("Bo", ir::Bool(), {7, n});
    Buffer VO = ir::make_buffer("VO", t, {n});
    Var i("i");
    Expr a = load(A, i), b = load(B, i);
    std::vector<Expr> bools = {a == b, a != b, a<b, a <= b, a> b, a >= b, !(a < b) && (a != b || a == b)};
    std::vector<Stmt> stores = {store(O, ir::min(a, b), O.offset_of({0, i})),
                                store(O, ir::max(a, b), O.offset_of({1, i})),
                                store(O, ir::select(a < b, a + b, a - b), O.offset_of({2, i})),
                                store(O, ir::select(load(Bo, Bo.offset_of({2, i})), a, b), O.offset_of({3, i}))};
    for (size_t k = 0; k < bools.size(); ++k)
      stores.push_back(store(Bo, bools[k], Bo.offset_of({static_cast<int>(k), i})));
    Expr va = load(A, ramp(0, 1, n)), vb = load(B, ramp(0, 1, n));
    Stmt vec = store(VO, ir::select(va >= vb || va == vb, ir::max(va, vb), ir::min(va, vb)), ramp(0, 1, n));
    auto f = make_func("cmp", {A, B, O, Bo, VO}, {}, ir::BlockNode::make(loop(i, n, ir::BlockNode::make(stores)), vec));
    std::vector<Tensor> args = {zeros({n}, t), zeros({n}, t)};
    const std::vector<int> av = {0, 5, 3, 2, 9, 1}, bv = {0, 3, 5, 2, 1, 9};
    for (int k = 0; k < n; ++k) {
      Buffer S = ir::make_buffer("S", Int(32), {2});
      Buffer D = ir::make_buffer("D", t, {2});
      auto conv =
          make_func("conv", {S, D}, {},
                    ir::BlockNode::make(store(D, ir::cast(t, load(S, 0)), 0), store(D, ir::cast(t, load(S, 1)), 1)));
      Tensor s = make_tensor<int32_t>({2}, {av[k], bv[k]});
      Tensor d = zeros({2}, t);
      interp::run(conv, {s, d});
      const size_t sz = d.dtype().bytes();
      std::memcpy(static_cast<char *>(args[0].data()) + k * sz, d.data(), sz);
      std::memcpy(static_cast<char *>(args[1].data()) + k * sz, static_cast<char *>(d.data()) + sz, sz);
    }
    args.push_back(zeros({4, n}, t));
    args.push_back(zeros({7, n}, ir::Bool()));
    args.push_back(zeros({n}, t));
    expect_same(run_interp_and_llvm(f, args));
  }
}

template <typename T>
void check_math(DataType t, double tol, int lanes) {
  SCOPED_TRACE(t.to_string() + " x" + std::to_string(lanes));
  const std::vector<std::string> names = {"exp",  "log",   "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
                                          "fabs", "floor", "ceil", "round", "pow",  "fma"};
  const int len = 16;
  Buffer X = ir::make_buffer("X", t, {len}), Y = ir::make_buffer("Y", t, {len}), Z = ir::make_buffer("Z", t, {len});
  Buffer O = ir::make_buffer("O", t, {static_cast<int>(names.size()), len});
  Var i("i");
  Expr idx = lanes == 1 ? Expr(i) : ramp(i * lanes, 1, lanes);
  Expr x = load(X, idx), y = load(Y, idx), z = load(Z, idx);
  std::vector<Expr> calls = {ir::exp(x),     ir::log(x),    ir::sqrt(x),     ir::rsqrt(x), ir::tanh(x),
                             ir::sigmoid(x), ir::erf(x),    ir::fabs(x),     ir::floor(x), ir::ceil(x),
                             ir::round(x),   ir::pow(x, y), ir::fma(x, y, z)};
  std::vector<Stmt> stores;
  for (size_t c = 0; c < calls.size(); ++c) {
    Expr base = static_cast<int>(c) * len;
    Expr o = lanes == 1 ? base + i : ramp(base + i * lanes, 1, lanes);
    stores.push_back(store(O, calls[c], o));
  }
  auto f = make_func("math", {X, Y, Z, O}, {}, loop(i, len / lanes, ir::BlockNode::make(stores)));
  std::vector<T> xv(len), yv(len), zv(len);
  for (int k = 0; k < len; ++k) {
    xv[k] = static_cast<T>(0.15 + 0.5 * k);
    yv[k] = static_cast<T>(1.3 - 0.25 * k);
    zv[k] = static_cast<T>(0.5 * k - 1);
  }
  xv[4] = static_cast<T>(2.5);
  auto r = run_interp_and_llvm(f, {make_tensor<T>({len}, xv), make_tensor<T>({len}, yv), make_tensor<T>({len}, zv),
                                   filled<T>({static_cast<int64_t>(names.size()), len}, T(0))});
  const auto a = values<T>(r.interp[3]), b = values<T>(r.llvm[3]);
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_NEAR(b[k], a[k], tol * std::max<double>(1.0, std::fabs(a[k]))) << names[k / len] << " at " << k % len;
  }
}

TEST(LLVMCodegenTest, MathIntrinsicsMatchTheInterpreter) {
  check_math<float>(Float(32), 2e-6, 1);
  check_math<float>(Float(32), 2e-6, 8);
  check_math<double>(Float(64), 1e-13, 1);
  check_math<double>(Float(64), 1e-13, 4);
}

// Distance in units in the last place between two floats (0 for two NaNs).
int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<int64_t>::max();
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? static_cast<int64_t>(std::numeric_limits<int32_t>::min()) - i : static_cast<int64_t>(i);
  };
  return std::llabs(ordered(a) - ordered(b));
}

// With approx_math, exp, log, tanh, sigmoid and erf on float32 are inline vector code within
// 2 ULP of the correctly rounded value everywhere: subnormals, the limits of the range,
// infinities and NaN included.
TEST(LLVMCodegenTest, ApproximateMathIsVectorCodeWithinTwoUlps) {
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           1.0f,
                           -1.0f,
                           0.625f,
                           -0.625f,
                           88.7228f,
                           88.73f,
                           -87.34f,
                           -103.9f,
                           -104.0f,
                           std::numeric_limits<float>::min(),
                           std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i < 60000; ++i) xs.push_back(-20.0f + 40.0f * static_cast<float>(i) / 60000.0f);  // dense
  for (int e = -149; e < 128; ++e) {  // every binade, both signs
    for (int k = 0; k < 64; ++k) {
      const float v = std::ldexp(1.0f + static_cast<float>(k) / 64.0f, e);
      xs.push_back(v);
      xs.push_back(-v);
    }
  }
  std::mt19937 bits(12345);  // random bit patterns: every sign, exponent and NaN payload
  for (int k = 0; k < 20000; ++k) {
    const uint32_t b = static_cast<uint32_t>(bits());
    float v;
    std::memcpy(&v, &b, sizeof v);
    xs.push_back(v);
  }
  while (xs.size() % 64 != 0) xs.push_back(0.5f);
  // Vectors of 16 lanes and blocks of 64 (on AVX-512, exp splits these into vscalefps's width).
  for (const int lanes : {16, 64}) {
    SCOPED_TRACE(std::to_string(lanes) + " lanes");
    const int n = static_cast<int>(xs.size());
    const std::vector<std::string> names = {"exp", "log", "tanh", "sigmoid", "erf"};
    Buffer X = ir::make_buffer("X", Float(32), {n});
    Buffer O = ir::make_buffer("O", Float(32), {static_cast<int>(names.size()), n});
    Var i("i"), j("j");
    auto call = [](const std::string &name, Expr x) {
      if (name == "exp") return ir::exp(x);
      if (name == "log") return ir::log(x);
      if (name == "tanh") return ir::tanh(x);
      if (name == "sigmoid") return ir::sigmoid(x);
      return ir::erf(x);
    };
    std::vector<Stmt> vector_stores, scalar_stores;
    for (size_t c = 0; c < names.size(); ++c) {
      const int base = static_cast<int>(c) * n;
      vector_stores.push_back(
          store(O, call(names[c], load(X, ramp(i * lanes, 1, lanes))), ramp(base + i * lanes, 1, lanes)));
      scalar_stores.push_back(store(O, call(names[c], load(X, j)), base + j));
    }
    // Vector code for most elements, scalar code for the first 64.
    Stmt body = ir::BlockNode::make(loop(i, n / lanes, ir::BlockNode::make(vector_stores)),
                                    loop(j, 64, ir::BlockNode::make(scalar_stores)));
    auto f = make_func("approx", {X, O}, {}, body);
    LLVMBuildOptions o = native_options();
    o.approx_math = true;
    const std::string ir_text = codegen::emit_llvm_ir({f}, o, false);
    for (const char *fn : {"@expf", "@logf", "@tanhf", "@erff", "@llvm.exp.", "@llvm.log."}) {
      EXPECT_EQ(ir_text.find(fn), std::string::npos) << fn;
    }
    LLVMBuildOptions exact = native_options();
    exact.approx_math = false;
    EXPECT_NE(codegen::emit_llvm_ir({f}, exact, false).find("@tanhf"), std::string::npos);
    EXPECT_EQ(LLVMBuildOptions().approx_math, true) << "fast vector math is the default";
    LLVMBuildOptions avx512 = o;
    avx512.target = "llvm -mcpu=znver4";
    EXPECT_NE(codegen::emit_llvm_ir({f}, avx512, false).find("@llvm.x86.avx512.mask.scalef.ps.512"), std::string::npos)
        << "exp on AVX-512 applies 2^n with vscalefps, at every vector width";

    for (const LLVMBuildOptions &target : {o, [&] {
                                             LLVMBuildOptions g = generic_options();
                                             g.approx_math = true;
                                             return g;
                                           }()}) {
      SCOPED_TRACE(target.target);
      LLVMModule m(f, target);
      Tensor out = filled<float>({static_cast<int64_t>(names.size()), n}, 0.0f);
      m.call("approx", {make_tensor<float>({n}, xs), out});
      const auto got = values<float>(out);
      for (size_t c = 0; c < names.size(); ++c) {
        int64_t worst = 0;
        float worst_x = 0;
        for (int k = 0; k < n; ++k) {
          const double x = xs[static_cast<size_t>(k)];
          double want = 0;
          if (names[c] == "exp") want = std::exp(x);
          if (names[c] == "log") want = std::log(x);
          if (names[c] == "tanh") want = std::tanh(x);
          if (names[c] == "sigmoid") want = 1.0 / (1.0 + std::exp(-x));
          if (names[c] == "erf") want = std::erf(x);
          const int64_t d =
              ulp_distance(got[c * static_cast<size_t>(n) + static_cast<size_t>(k)], static_cast<float>(want));
          if (d > worst) {
            worst = d;
            worst_x = xs[static_cast<size_t>(k)];
          }
        }
        EXPECT_LE(worst, 2) << names[c] << " is " << worst << " ULP off at x = " << worst_x;
      }
    }
  }
}

// exp with approx_math is within 1 ULP of the correctly rounded value on a sweep of the whole
// float range (every 1021st bit pattern: each binade of both signs at many mantissas, every float
// around the overflow and underflow limits, subnormal results, infinities and NaN), on the native target
// (vscalefps where AVX-512 has it) and the generic one.
TEST(LLVMCodegenTest, ApproximateExpIsWithinOneUlpOverTheWholeRange) {
  std::vector<float> xs;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 1021) {
    const uint32_t u = static_cast<uint32_t>(b);
    float v;
    std::memcpy(&v, &u, sizeof v);
    xs.push_back(v);
  }
  // Every float near the limits, where the last multiplication rounds to inf, to subnormals and to 0.
  for (float v = 88.0f; v <= 89.5f; v = std::nextafter(v, 100.0f)) xs.push_back(v);
  for (float v = -86.5f; v >= -105.0f; v = std::nextafter(v, -200.0f)) xs.push_back(v);
  for (float v : {88.72283935546875f, 88.7228394f, -87.3365479f, -103.972084f, -103.972076f, 0.0f, -0.0f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()})
    xs.push_back(v);
  while (xs.size() % 16 != 0) xs.push_back(1.0f);
  const int n = static_cast<int>(xs.size());
  Buffer X = ir::make_buffer("X", Float(32), {n}), O = ir::make_buffer("O", Float(32), {n});
  Var i("i");
  auto f = make_func("exp_sweep", {X, O}, {},
                     loop(i, n / 16, store(O, ir::exp(load(X, ramp(i * 16, 1, 16))), ramp(i * 16, 1, 16))));
  LLVMBuildOptions native = native_options(), generic = generic_options();
  native.approx_math = generic.approx_math = true;
  for (const LLVMBuildOptions &target : {native, generic}) {
    SCOPED_TRACE(target.target);
    LLVMModule m(f, target);
    Tensor out = filled<float>({n}, 0.0f);
    m.call("exp_sweep", {make_tensor<float>({n}, xs), out});
    const auto got = values<float>(out);
    int64_t worst = 0;
    float worst_x = 0;
    for (int k = 0; k < n; ++k) {
      const float x = xs[static_cast<size_t>(k)];
      const int64_t d = ulp_distance(got[static_cast<size_t>(k)], static_cast<float>(std::exp(static_cast<double>(x))));
      if (d > worst) {
        worst = d;
        worst_x = x;
      }
    }
    EXPECT_LE(worst, 1) << "exp is " << worst << " ULP off at x = " << worst_x;
  }
}

TEST(LLVMCodegenTest, AllocationsOnStackAndHeapAndLets) {
  Var n("n");
  Buffer O = ir::make_buffer("O", Int(32), {n});
  Buffer P = ir::make_buffer("P", Float(32), {64});
  Var i("i"), j("j"), x("x"), k("k"), m("m");
  Buffer Big = test::alloc_buffer("big", Int(32), "global");
  Buffer Small = test::alloc_buffer("small", Float(32), "local");
  Buffer Large = test::alloc_buffer("large", Float(32), "global");  // 400 KB constant: heap
  Expr lt = ir::LetNode::make(x, load(Big, j) * 2, ir::max(x + x, Expr(7)) - ir::min(x, Expr(3)));
  Stmt body = ir::BlockNode::make(
      ir::AllocateNode::make(Big.data, Int(32), {n}, "global",
                             ir::BlockNode::make({loop(i, n, store(Big, i - 2, i)),
                                                  ir::ForNode::make(j, 2, n - 2, ForKind::Serial, store(O, lt, j))})),
      ir::AllocateNode::make(
          Small.data, Float(32), {16}, "local",
          ir::AllocateNode::make(
              Large.data, Float(32), {100000}, "global",
              loop(k, 4,
                   ir::BlockNode::make(
                       {loop(m, 16, store(Small, ir::cast(Float(32), k * 16 + m), m)),
                        store(Large, load(Small, ramp(0, 1, 16)), ramp(k * 16, 1, 16)),
                        store(P, load(Large, ramp(k * 16, 1, 16)) * bcast(Expr(2.0f), 16), ramp(k * 16, 1, 16))})))));
  auto f = make_func("lets", {O, P}, {n}, body);
  auto r = run_interp_and_llvm(f, {filled<int32_t>({70000}, -99), filled<float>({64}, 0.0f)});
  expect_same(r);
  const std::string ir_text = codegen::emit_llvm_ir({f}, native_options(), false);
  EXPECT_NE(ir_text.find("alloca [16 x float], align 64"), std::string::npos) << ir_text;
  EXPECT_EQ(count(ir_text, "call i8* @aligned_alloc"), 2u);
  EXPECT_EQ(count(ir_text, "call void @free"), 2u);
}

TEST(LLVMCodegenTest, AssertFailureReturnsAnErrorAndFreesMemory) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n});
  Var i("i");
  Buffer T = test::alloc_buffer("tmp", Float(32), "global");
  Stmt body = ir::AllocateNode::make(
      T.data, Float(32), {n * 20000}, "global",
      ir::AssertStmtNode::make(
          n > 4, "n must be greater than 4",
          loop(i, n, ir::BlockNode::make({store(T, load(A, i) * 2.0f, i * 20000), store(A, load(T, i * 20000), i)}))));
  auto f = make_func("checked", {A}, {n}, body);
  LLVMModule m(f, native_options());
  Tensor small = filled<float>({3}, 1.0f);
  EXPECT_EQ(m.call_status("checked", {small}), kKilnErrorAssert);
  EXPECT_EQ(m.last_error(), "n must be greater than 4");
  try {
    m.call("checked", {small});
    FAIL() << "expected KernelError";
  } catch (const deploy::KernelError &e) {
    EXPECT_EQ(e.code(), kKilnErrorAssert);
    EXPECT_STREQ(e.what(), "n must be greater than 4");
  }
  Tensor ok = filled<float>({6}, 1.5f);
  m.call("checked", {ok});
  EXPECT_EQ(values<float>(ok), std::vector<float>(6, 3.0f));
  // The failure path frees the heap buffer: as many frees as there are exits after the malloc.
  const std::string ir_text = codegen::emit_llvm_ir({f}, native_options(), false);
  EXPECT_EQ(count(ir_text, "call void @free"), 2u) << ir_text;
}

TEST(LLVMCodegenTest, ThreadLoopsRunSeriallyAndBarriersAreRejected) {
  Buffer A = ir::make_buffer("A", Int(32), {4, 8});
  Var bx("bx"), tx("tx");
  Stmt body =
      loop(bx, 4, loop(tx, 8, store(A, bx * 10 + tx, A.offset_of({bx, tx})), ForKind::ThreadBinding, "threadIdx.x"),
           ForKind::ThreadBinding, "blockIdx.x");
  auto f = make_func("threads", {A}, {}, body);
  expect_same(run_interp_and_llvm(f, {filled<int32_t>({4, 8}, 0)}));

  Stmt sync = ir::EvaluateNode::make(
      ir::CallNode::make(Int(32), ir::intrinsic::kSyncThreads, {}, ir::CallNode::Kind::Intrinsic));
  auto g = make_func("barrier", {A}, {},
                     loop(tx, 8, ir::BlockNode::make(sync, store(A, tx, tx)), ForKind::ThreadBinding, "threadIdx.x"));
  test::expect_error<UserError>([&] { LLVMModule m(g, native_options()); }, {"barrier", "barriers"});
}

// Records which threads ran a parallel loop: each iteration stores its thread's slot.
TEST(LLVMCodegenTest, ParallelLoopsRunOnThePoolAndNestedOnesSerially) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Float(32), {n, 64});
  Buffer B = ir::make_buffer("B", Float(32), {n, 64});
  Var i("i"), j("j"), k("k");
  Buffer T = test::alloc_buffer("row", Float(32), "local");
  // for i parallel: allocate row[64]; for j parallel (nested: serial): row[j] = A[i, j] * 2;
  //                 for k: B[i, k] = row[k] + i
  Stmt inner = ir::AllocateNode::make(
      T.data, Float(32), {64}, "local",
      ir::BlockNode::make(loop(j, 64, store(T, load(A, A.offset_of({i, j})) * 2.0f, j), ForKind::Parallel),
                          loop(k, 64, store(B, load(T, k) + ir::cast(Float(32), i), B.offset_of({i, k})))));
  auto f = make_func("par", {A, B}, {n}, ir::ForNode::make(i, 1, n - 1, ForKind::Parallel, inner));
  const std::string ir_text = codegen::emit_llvm_ir({f}, native_options(), false);
  EXPECT_EQ(count(ir_text, "define internal i32 @par__parallel_"), 1u) << ir_text;
  deploy::set_num_threads(2);
  Tensor a = filled<float>({37, 64}, 1.25f);
  expect_same(run_interp_and_llvm(f, {a, filled<float>({37, 64}, -1.0f)}));
  deploy::set_num_threads(0);
}

TEST(LLVMCodegenTest, FailureInsideAParallelLoopIsReported) {
  Var n("n");
  Buffer A = ir::make_buffer("A", Int(32), {n});
  Var i("i");
  Buffer T = test::alloc_buffer("tmp", Int(32), "global");
  Stmt body = ir::AllocateNode::make(
      T.data, Int(32), {n * 10000}, "global",
      loop(i, n,
           ir::AssertStmtNode::make(
               load(A, i) >= 0, "A must not be negative",
               ir::BlockNode::make(store(T, load(A, i), i * 10000), store(A, load(T, i * 10000) + 1, i))),
           ForKind::Parallel));
  auto f = make_func("par_check", {A}, {n}, body);
  LLVMModule m(f, native_options());
  Tensor good = make_tensor<int32_t>({6}, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(m.call_status("par_check", {good}), 0);
  EXPECT_EQ(values<int32_t>(good), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  Tensor bad = make_tensor<int32_t>({6}, {0, 1, 2, 3, -4, 5});
  EXPECT_EQ(m.call_status("par_check", {bad}), kKilnErrorAssert);
  EXPECT_EQ(m.last_error(), "A must not be negative");
}

TEST(LLVMCodegenTest, ModularAlignmentThroughLets) {
  Buffer A = ir::make_buffer("A", Float(32), {256});
  Buffer B = ir::make_buffer("B", Float(32), {256});
  Var i("i"), base("base"), off("off");
  // base = i * 32 (a multiple of 32); off = base + 16: aligned to 64 bytes; off + 8: only 32.
  Stmt body =
      loop(i, 8,
           ir::LetStmtNode::make(
               base, i * 32,
               ir::LetStmtNode::make(off, base + 16,
                                     ir::BlockNode::make(store(B, load(A, ramp(off, 1, 16)), ramp(off, 1, 16)),
                                                         store(B, load(A, ramp(base, 1, 8)), ramp(base + 8, 1, 8))))));
  auto f = make_func("lets_align", {A, B}, {}, body);
  const std::string raw = codegen::emit_llvm_ir({f}, native_options(), false);
  EXPECT_TRUE(std::regex_search(raw, std::regex(R"(load <16 x float>, <16 x float>\* %\S+, align 64)"))) << raw;
  EXPECT_TRUE(std::regex_search(raw, std::regex(R"(store <8 x float> %\S+, <8 x float>\* %\S+, align 32)"))) << raw;
  std::vector<float> a(256);
  for (int k = 0; k < 256; ++k) a[k] = static_cast<float>(k % 17);
  expect_same(run_interp_and_llvm(f, {make_tensor<float>({256}, a), filled<float>({256}, 0.0f)}));
}

TEST(LLVMCodegenTest, UnloweredNodesAreInternalErrors) {
  auto X = te::placeholder({4}, Float(32), "X");
  Buffer O = ir::make_buffer("O", Float(32), {4});
  auto f = make_func("bad", {O}, {}, store(O, X(0), 0));
  EXPECT_THROW(LLVMModule(f, native_options()), InternalError);
}

TEST(LLVMCodegenTest, FunctionNamesAreSanitisedAndMustBeDistinct) {
  ir::LoweredFunc f = vector_add();
  f.name = "my kernel";
  LLVMModule m(f, native_options());
  EXPECT_EQ(m.module().functions().at(0).name, "my kernel");
  EXPECT_NE(m.function("my kernel"), nullptr);
  ir::LoweredFunc g = vector_add();
  g.name = "my-kernel";
  EXPECT_THROW(LLVMModule({f, g}, native_options()), UserError);
}

}  // namespace
}  // namespace kiln
