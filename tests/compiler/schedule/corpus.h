#pragma once
// A corpus of operators for property tests: each builds its tensors (inputs first, outputs last)
// with concrete shapes.
#include <functional>
#include <string>
#include <vector>

#include "compiler/ir/op.h"
#include "compiler/te/tensor.h"

namespace kiln::testing {

struct CorpusOp {
  std::string name;
  std::vector<te::Tensor> args;              // inputs then outputs
  std::vector<std::vector<int64_t>> shapes;  // concrete shape of each arg
  double tolerance;
};

inline std::vector<int64_t> const_shape(const te::Tensor &t) {
  std::vector<int64_t> s;
  for (const auto &d : t.shape()) s.push_back(*ir::as_const_int(d));
  return s;
}

inline CorpusOp make_op(std::string name, std::vector<te::Tensor> args, double tol) {
  CorpusOp op{std::move(name), std::move(args), {}, tol};
  for (const auto &t : op.args) op.shapes.push_back(const_shape(t));
  return op;
}

inline CorpusOp corpus_matmul() {
  using namespace ir;
  auto A = te::placeholder({12, 10}, Float(32), "A");
  auto B = te::placeholder({10, 14}, Float(32), "B");
  auto k = te::reduce_axis(10, "k");
  auto C = te::compute(
      {12, 14}, [&](Var i, Var j) { return te::sum(A(i, k) * B(k, j), {k}); }, "C");
  return make_op("matmul", {A, B, C}, 1e-4);
}

// NCHW conv2d with padding 1 and stride 2: a padding stage, then the convolution.
inline CorpusOp corpus_conv2d() {
  using namespace ir;
  const int n = 1, c = 3, h = 9, w = 9, oc = 4, kh = 3, kw = 3, pad = 1, stride = 2;
  const int oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
  auto X = te::placeholder({n, c, h, w}, Float(32), "X");
  auto W = te::placeholder({oc, c, kh, kw}, Float(32), "W");
  auto P = te::compute(
      {n, c, h + 2 * pad, w + 2 * pad},
      [&](Var b, Var ci, Var y, Var x) {
        Expr inside = y >= pad && y < h + pad && x >= pad && x < w + pad;
        return if_then_else(inside, X(b, ci, y - pad, x - pad), make_zero(Float(32)));
      },
      "pad");
  auto rc = te::reduce_axis(c, "rc"), ry = te::reduce_axis(kh, "ry"), rx = te::reduce_axis(kw, "rx");
  auto Y = te::compute(
      {n, oc, oh, ow},
      [&](Var b, Var o, Var y, Var x) {
        return te::sum(P(b, rc, y * stride + ry, x * stride + rx) * W(o, rc, ry, rx), {rc, ry, rx});
      },
      "conv");
  return make_op("conv2d", {X, W, Y}, 1e-4);
}

inline CorpusOp corpus_depthwise() {
  using namespace ir;
  const int c = 4, h = 8, w = 8, k = 3;
  auto X = te::placeholder({1, c, h, w}, Float(32), "X");
  auto W = te::placeholder({c, 1, k, k}, Float(32), "W");
  auto ry = te::reduce_axis(k, "ry"), rx = te::reduce_axis(k, "rx");
  auto Y = te::compute(
      {1, c, h - k + 1, w - k + 1},
      [&](Var b, Var ch, Var y, Var x) {
        return te::sum(X(b, ch, y + ry, x + rx) * W(ch, 0, ry, rx), {ry, rx});
      },
      "dwconv");
  return make_op("depthwise_conv2d", {X, W, Y}, 1e-4);
}

inline CorpusOp corpus_maxpool() {
  using namespace ir;
  auto X = te::placeholder({2, 3, 9, 9}, Float(32), "X");
  auto ry = te::reduce_axis(3, "ry"), rx = te::reduce_axis(3, "rx");
  auto Y = te::compute(
      {2, 3, 4, 4},
      [&](Var b, Var c, Var y, Var x) {
        return te::max(X(b, c, y * 2 + ry, x * 2 + rx), {ry, rx});
      },
      "maxpool");
  return make_op("max_pool", {X, Y}, 0.0);
}

inline CorpusOp corpus_avgpool() {
  using namespace ir;
  auto X = te::placeholder({2, 3, 8, 8}, Float(32), "X");
  auto ry = te::reduce_axis(2, "ry"), rx = te::reduce_axis(2, "rx");
  auto S = te::compute(
      {2, 3, 4, 4},
      [&](Var b, Var c, Var y, Var x) {
        return te::sum(X(b, c, y * 2 + ry, x * 2 + rx), {ry, rx});
      },
      "poolsum");
  auto Y = te::compute(
      {2, 3, 4, 4}, [&](Var b, Var c, Var y, Var x) { return S(b, c, y, x) * 0.25f; }, "avgpool");
  return make_op("avg_pool", {X, Y}, 1e-5);
}

inline CorpusOp corpus_softmax() {
  using namespace ir;
  const int m = 6, n = 13;
  auto X = te::placeholder({m, n}, Float(32), "X");
  auto k1 = te::reduce_axis(n, "k1");
  auto M = te::compute(
      {m}, [&](Var i) { return te::max(X(i, k1), {k1}); }, "rowmax");
  auto E = te::compute(
      {m, n}, [&](Var i, Var j) { return exp(X(i, j) - M(i)); }, "exp");
  auto k2 = te::reduce_axis(n, "k2");
  auto S = te::compute(
      {m}, [&](Var i) { return te::sum(E(i, k2), {k2}); }, "expsum");
  auto Y = te::compute(
      {m, n}, [&](Var i, Var j) { return E(i, j) / S(i); }, "softmax");
  return make_op("softmax", {X, Y}, 1e-5);
}

inline CorpusOp corpus_transpose() {
  using namespace ir;
  auto X = te::placeholder({5, 7, 3}, Float(32), "X");
  auto Y = te::compute(
      {3, 5, 7}, [&](Var a, Var b, Var c) { return X(b, c, a); }, "transpose");
  return make_op("transpose", {X, Y}, 0.0);
}

inline CorpusOp corpus_bias_relu() {
  using namespace ir;
  auto X = te::placeholder({4, 6, 10}, Float(32), "X");
  auto Bv = te::placeholder({6}, Float(32), "bias");
  auto R = te::placeholder({4, 6, 10}, Float(32), "residual");
  auto A = te::compute(
      {4, 6, 10}, [&](Var n, Var c, Var w) { return X(n, c, w) + Bv(c); }, "add_bias");
  auto Y = te::compute(
      {4, 6, 10}, [&](Var n, Var c, Var w) { return max(A(n, c, w), 0.0f); }, "relu");
  auto Z = te::compute(
      {4, 6, 10}, [&](Var n, Var c, Var w) { return Y(n, c, w) + R(n, c, w); }, "residual_add");
  return make_op("bias_relu_residual", {X, Bv, R, Z}, 0.0);
}

inline CorpusOp corpus_custom_reduce() {
  using namespace ir;
  auto X = te::placeholder({9, 11}, Int(32), "X");
  auto k = te::reduce_axis(11, "k");
  // Sum of squares minus one per element, as a user-defined commutative reducer over int32.
  te::Reducer sumsq([](Expr a, Expr b) { return a + b; }, [](DataType t) { return make_zero(t); });
  auto Y = te::compute(
      {9}, [&](Var i) { return sumsq(X(i, k) * X(i, k) - 1, {k}); }, "sumsq");
  auto k2 = te::reduce_axis(11, "k2");
  te::Reducer absmax([](Expr a, Expr b) { return max(a, b); }, [](DataType t) { return min_value(t); });
  auto Z = te::compute(
      {9}, [&](Var i) { return absmax(abs(X(i, k2)) + Y(i), {k2}); }, "absmax");
  return make_op("custom_reduce", {X, Z}, 0.0);
}

inline std::vector<std::function<CorpusOp()>> corpus() {
  return {corpus_matmul,  corpus_conv2d,    corpus_depthwise, corpus_maxpool,      corpus_avgpool,
          corpus_softmax, corpus_transpose, corpus_bias_relu, corpus_custom_reduce};
}

}  // namespace kiln::testing
