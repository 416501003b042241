// Neural-network ops: Conv (the conv2d_nchw template for 2-D, a generic compute for 1-D and 3-D),
// ConvTranspose, Gemm, MatMul, pooling, global pooling, BatchNormalization.
#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/graph/op_def.h"
#include "compiler/graph/op_families.h"
#include "compiler/ir/op.h"

namespace kiln::graph::detail {

using ::kiln::detail::concat;

namespace {

using contracts::Json;
using ir::DataType;
using ir::Expr;

// Spatial geometry of a convolution or pooling window over the trailing `n` axes.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
  std::vector<int64_t> out;                               // output spatial extents
};

// Resolves kernel/strides/dilations/pads/auto_pad/ceil_mode for input spatial extents `in`.
Window window(const OpContext &ctx, const std::vector<int64_t> &in, std::vector<int64_t> kernel, bool ceil_mode) {
  const size_t n = in.size();
  Window w;
  w.kernel = std::move(kernel);
  if (w.kernel.size() != n) ctx.fail(concat("kernel_shape has ", w.kernel.size(), " entries for ", n, " spatial axes"));
  w.strides = ctx.node().attr_ints("strides", std::vector<int64_t>(n, 1));
  w.dilations = ctx.node().attr_ints("dilations", std::vector<int64_t>(n, 1));
  w.pads = ctx.node().attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (w.strides.size() != n || w.dilations.size() != n || w.pads.size() != 2 * n)
    ctx.fail("strides, dilations and pads do not match the spatial rank");
  for (size_t a = 0; a < n; ++a) {
    if (w.kernel[a] <= 0 || w.strides[a] <= 0 || w.dilations[a] <= 0)
      ctx.fail("kernel sizes, strides and dilations must be positive");
    if (w.pads[a] < 0 || w.pads[a + n] < 0) ctx.fail("negative pads");
  }
  const std::string auto_pad = ctx.node().attr_string("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t a = 0; a < n; ++a) {
      const int64_t out = (in[a] + w.strides[a] - 1) / w.strides[a];
      const int64_t eff = (w.kernel[a] - 1) * w.dilations[a] + 1;
      const int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[a] + eff - in[a]);
      const int64_t small = total / 2, big = total - small;
      w.pads[a] = auto_pad == "SAME_UPPER" ? small : big;
      w.pads[a + n] = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else if (auto_pad == "VALID") {
    std::fill(w.pads.begin(), w.pads.end(), 0);
  } else if (auto_pad != "NOTSET") {
    ctx.fail(concat("unknown auto_pad '", auto_pad, "'"));
  }
  for (size_t a = 0; a < n; ++a) {
    const int64_t eff = (w.kernel[a] - 1) * w.dilations[a] + 1;
    const int64_t span = in[a] + w.pads[a] + w.pads[a + n] - eff;
    if (span < 0)
      ctx.fail(
          concat("the window (", eff, ") is larger than the padded input (", in[a] + w.pads[a] + w.pads[a + n], ")"));
    int64_t o = (ceil_mode ? (span + w.strides[a] - 1) / w.strides[a] : span / w.strides[a]) + 1;
    // With ceil_mode, the last window must start inside the input or its begin padding.
    if (ceil_mode && (o - 1) * w.strides[a] >= in[a] + w.pads[a]) --o;
    w.out.push_back(o);
  }
  return w;
}

std::vector<int64_t> spatial(const std::vector<int64_t> &s) { return std::vector<int64_t>(s.begin() + 2, s.end()); }

std::vector<int64_t> conv_kernel_shape(const OpContext &ctx) {
  std::vector<int64_t> ks = ctx.node().attr_ints("kernel_shape");
  if (ks.empty()) ks = spatial(ctx.in(1).shape);
  return ks;
}

TensorType conv_type(const OpContext &ctx) {
  const auto &x = ctx.in(0), &w = ctx.in(1);
  if (x.rank() < 3 || w.rank() != x.rank())
    ctx.fail(concat("input ", x.str(), " and weight ", w.str(), " do not match"));
  if (x.dtype != w.dtype) ctx.fail("input and weight dtypes differ");
  const int64_t group = ctx.node().attr_int("group", 1);
  if (group <= 0 || x.shape[1] % group != 0 || w.shape[0] % group != 0)
    ctx.fail(concat("group ", group, " does not divide the channels"));
  if (w.shape[1] * group != x.shape[1])
    ctx.fail(
        concat("the weight ", w.str(), " expects ", w.shape[1] * group, " input channels, the input has ", x.shape[1]));
  if (ctx.has_input(2) && (ctx.in(2).rank() != 1 || ctx.in(2).shape[0] != w.shape[0]))
    ctx.fail(concat("the bias ", ctx.in(2).str(), " does not match ", w.shape[0], " output channels"));
  if (conv_kernel_shape(ctx) != spatial(w.shape)) ctx.fail("kernel_shape differs from the weight's shape");
  Window win = window(ctx, spatial(x.shape), spatial(w.shape), false);
  std::vector<int64_t> out{x.shape[0], w.shape[0]};
  out.insert(out.end(), win.out.begin(), win.out.end());
  return TensorType{x.dtype, out};
}

Kernel conv_kernel(const OpContext &ctx) {
  Kernel k;
  const auto &x = ctx.in(0), &w = ctx.in(1);
  const size_t n = static_cast<size_t>(x.rank() - 2);
  Window win = window(ctx, spatial(x.shape), spatial(w.shape), false);
  const int64_t group = ctx.node().attr_int("group", 1);
  if (n == 2 && x.dtype == ir::Float(32)) {
    k.template_name = "conv2d_nchw.x86";
    Json epi = Json::array();
    if (ctx.has_input(2)) epi.push_back(Json::object({{"op", "bias_add"}}));
    k.template_args = Json::object(
        {{"data", tensor_json(x)},
         {"kernel", tensor_json(w)},
         {"strides", Json::array_of(win.strides)},
         {"dilation", Json::array_of(win.dilations)},
         {"padding", Json::array_of(std::vector<int64_t>{win.pads[0], win.pads[1], win.pads[2], win.pads[3]})},
         {"groups", group},
         {"epilogue", epi}});
    k.input_map = {0, 1};
    if (ctx.has_input(2)) k.input_map.push_back(2);
    return k;
  }
  te::Tensor data = add_input(k, ctx, 0, "x");
  te::Tensor weight = add_input(k, ctx, 1, "w");
  te::Tensor bias;
  if (ctx.has_input(2)) bias = add_input(k, ctx, 2, "b");
  const int64_t cin_g = w.shape[1], cout_g = w.shape[0] / group;
  std::vector<te::IterVar> r{te::reduce_axis(i32(cin_g), "rc")};
  for (size_t a = 0; a < n; ++a) r.push_back(te::reduce_axis(i32(w.shape[a + 2]), concat("rk", a)));
  std::vector<int64_t> out{x.shape[0], w.shape[0]};
  out.insert(out.end(), win.out.begin(), win.out.end());
  const DataType acc = x.dtype.is_float() ? (x.dtype.bits() == 16 ? ir::Float(32) : x.dtype) : ir::Int(32);
  te::Tensor conv = compute(
      out,
      [&](const std::vector<Expr> &i) {
        Expr g = ir::floordiv(i[1], i32(cout_g));
        Expr c = g * i32(cin_g) + r[0]->var;
        std::vector<Expr> src{i[0], c};
        Expr inside = ir::const_true();
        for (size_t a = 0; a < n; ++a) {
          Expr p = i[a + 2] * i32(win.strides[a]) + Expr(r[a + 1]->var) * i32(win.dilations[a]) - i32(win.pads[a]);
          inside = inside && p >= i32(0) && p < i32(x.shape[a + 2]);
          src.push_back(ir::min(ir::max(p, i32(0)), i32(x.shape[a + 2] - 1)));
        }
        std::vector<Expr> widx{i[1], r[0]->var};
        for (size_t a = 0; a < n; ++a) widx.push_back(r[a + 1]->var);
        Expr v = ir::cast(acc, data(src)) * ir::cast(acc, weight(widx));
        return te::sum(ir::select(inside, v, ir::make_zero(acc)), r);
      },
      "conv");
  k.outputs.push_back(compute(
      out,
      [&](const std::vector<Expr> &i) {
        Expr v = conv(i);
        if (bias.defined()) v = v + ir::cast(acc, bias(i[1]));
        return ir::cast(x.dtype, v);
      },
      "conv_out"));
  return k;
}

// ConvTranspose: out[n, oc, o...] = sum over ic in the group and kernel taps k with
// o = i * stride + k * dilation - pad_begin of x[n, ic, i] * w[ic, oc % cout_g, k].
struct TransposeGeom {
  std::vector<int64_t> strides, dilations, pads, out, kernel;
};

TransposeGeom transpose_geom(const OpContext &ctx) {
  const auto &x = ctx.in(0), &w = ctx.in(1);
  const size_t n = static_cast<size_t>(x.rank() - 2);
  TransposeGeom g;
  g.kernel = spatial(w.shape);
  g.strides = ctx.node().attr_ints("strides", std::vector<int64_t>(n, 1));
  g.dilations = ctx.node().attr_ints("dilations", std::vector<int64_t>(n, 1));
  g.pads = ctx.node().attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  std::vector<int64_t> out_pad = ctx.node().attr_ints("output_padding", std::vector<int64_t>(n, 0));
  std::vector<int64_t> out_shape = ctx.node().attr_ints("output_shape");
  if (g.strides.size() != n || g.dilations.size() != n || g.pads.size() != 2 * n || out_pad.size() != n)
    ctx.fail("strides, dilations, pads and output_padding do not match the spatial rank");
  const std::string auto_pad = ctx.node().attr_string("auto_pad", "NOTSET");
  for (size_t a = 0; a < n; ++a) {
    const int64_t full = g.strides[a] * (x.shape[a + 2] - 1) + out_pad[a] + (g.kernel[a] - 1) * g.dilations[a] + 1;
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // The padding that gives the requested size; negative padding extends the output at the end.
      const int64_t target = out_shape.empty() ? x.shape[a + 2] * g.strides[a] : out_shape[out_shape.size() - n + a];
      const int64_t total = full - target;
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor(total / 2)
      const bool upper = auto_pad == "SAME_UPPER";
      g.pads[a] = upper ? half : total - half;
      g.pads[a + n] = total - g.pads[a];
    }
    const int64_t o = full - g.pads[a] - g.pads[a + n];
    if (o <= 0) ctx.fail("the output would be empty");
    g.out.push_back(o);
  }
  return g;
}

void conv_transpose() {
  OpDef d;
  d.name = "ConvTranspose";
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.flops = [](const OpContext &ctx) {
    const auto &w = ctx.in(1);
    return 2.0 * static_cast<double>(ctx.in(0).numel()) * static_cast<double>(w.numel() / w.shape[0]);
  };
  d.infer = [](const OpContext &ctx) {
    const auto &x = ctx.in(0), &w = ctx.in(1);
    if (x.rank() < 3 || w.rank() != x.rank())
      ctx.fail(concat("input ", x.str(), " and weight ", w.str(), " do not match"));
    const int64_t group = ctx.node().attr_int("group", 1);
    if (group <= 0 || x.shape[1] != w.shape[0] || x.shape[1] % group != 0)
      ctx.fail(
          concat("the weight ", w.str(), " does not match the input's channels ", x.shape[1], " with group ", group));
    TransposeGeom g = transpose_geom(ctx);
    std::vector<int64_t> out{x.shape[0], w.shape[1] * group};
    out.insert(out.end(), g.out.begin(), g.out.end());
    return std::vector<TensorType>{TensorType{x.dtype, out}};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    const auto &xt = ctx.in(0), &wt = ctx.in(1);
    te::Tensor x = add_input(k, ctx, 0, "x"), w = add_input(k, ctx, 1, "w"), b;
    if (ctx.has_input(2)) b = add_input(k, ctx, 2, "b");
    const size_t n = static_cast<size_t>(xt.rank() - 2);
    const int64_t group = ctx.node().attr_int("group", 1);
    const int64_t cin_g = xt.shape[1] / group, cout_g = wt.shape[1];
    TransposeGeom g = transpose_geom(ctx);
    std::vector<int64_t> out{xt.shape[0], cout_g * group};
    out.insert(out.end(), g.out.begin(), g.out.end());
    std::vector<te::IterVar> r{te::reduce_axis(i32(cin_g), "rc")};
    for (size_t a = 0; a < n; ++a) r.push_back(te::reduce_axis(i32(g.kernel[a]), concat("rk", a)));
    const DataType acc = xt.dtype.bits() == 16 ? ir::Float(32) : xt.dtype;
    te::Tensor conv = compute(
        out,
        [&](const std::vector<Expr> &i) {
          Expr grp = ir::floordiv(i[1], i32(cout_g));
          Expr ic = grp * i32(cin_g) + r[0]->var;
          std::vector<Expr> src{i[0], ic};
          Expr ok = ir::const_true();
          for (size_t a = 0; a < n; ++a) {
            // i * s = o + pad - k * d must be a multiple of s inside the input.
            Expr num = i[a + 2] + i32(g.pads[a]) - Expr(r[a + 1]->var) * i32(g.dilations[a]);
            Expr q = ir::floordiv(num, i32(g.strides[a]));
            ok = ok && num >= i32(0) && ir::floormod(num, i32(g.strides[a])) == i32(0) && q < i32(xt.shape[a + 2]);
            src.push_back(ir::min(ir::max(q, i32(0)), i32(xt.shape[a + 2] - 1)));
          }
          std::vector<Expr> widx{ic, ir::floormod(i[1], i32(cout_g))};
          for (size_t a = 0; a < n; ++a) widx.push_back(r[a + 1]->var);
          return te::sum(ir::select(ok, ir::cast(acc, x(src)) * ir::cast(acc, w(widx)), ir::make_zero(acc)), r);
        },
        "conv_transpose");
    k.outputs.push_back(compute(
        out,
        [&](const std::vector<Expr> &i) {
          Expr v = conv(i);
          if (b.defined()) v = v + ir::cast(acc, b(i[1]));
          return ir::cast(xt.dtype, v);
        },
        "conv_transpose_out"));
    return k;
  };
  register_op(std::move(d));
}

// MatMul with numpy semantics: 1-D operands are promoted and the added axis removed; batch axes
// broadcast.
struct MatMulShape {
  std::vector<int64_t> batch;
  int64_t m = 1, n = 1, kdim = 1;
  bool a_vec = false, b_vec = false;
  std::vector<int64_t> out;
};

MatMulShape matmul_shape(const OpContext &ctx) {
  const auto &a = ctx.in(0).shape, &b = ctx.in(1).shape;
  if (a.empty() || b.empty()) ctx.fail("MatMul of a scalar");
  if (ctx.in(0).dtype != ctx.in(1).dtype) ctx.fail("the operands' dtypes differ");
  MatMulShape s;
  s.a_vec = a.size() == 1;
  s.b_vec = b.size() == 1;
  std::vector<int64_t> ab = s.a_vec ? std::vector<int64_t>{} : std::vector<int64_t>(a.begin(), a.end() - 2);
  std::vector<int64_t> bb = s.b_vec ? std::vector<int64_t>{} : std::vector<int64_t>(b.begin(), b.end() - 2);
  s.m = s.a_vec ? 1 : a[a.size() - 2];
  s.kdim = a.back();
  const int64_t kb = s.b_vec ? b[0] : b[b.size() - 2];
  s.n = s.b_vec ? 1 : b.back();
  if (s.kdim != kb) ctx.fail(concat("inner dimensions differ: ", ctx.in(0).str(), " x ", ctx.in(1).str()));
  s.batch = broadcast_shapes(ctx, {ab, bb});
  s.out = s.batch;
  if (!s.a_vec) s.out.push_back(s.m);
  if (!s.b_vec) s.out.push_back(s.n);
  return s;
}

void matmul() {
  OpDef d;
  d.name = "MatMul";
  d.min_inputs = d.max_inputs = 2;
  d.infer = [](const OpContext &ctx) {
    return std::vector<TensorType>{TensorType{ctx.in(0).dtype, matmul_shape(ctx).out}};
  };
  d.flops = [](const OpContext &ctx) {
    MatMulShape s = matmul_shape(ctx);
    return 2.0 * static_cast<double>(TensorType{ctx.in(0).dtype, s.out}.numel()) * static_cast<double>(s.kdim);
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    MatMulShape s = matmul_shape(ctx);
    if (ctx.in(0).rank() == 2 && ctx.in(1).rank() == 2 && ctx.in(0).dtype == ir::Float(32)) {
      k.template_name = "matmul.x86";
      k.template_args = Json::object({{"a", tensor_json(ctx.in(0))}, {"b", tensor_json(ctx.in(1))}});
      k.input_map = {0, 1};
      return k;
    }
    // Batched float32 products of rank 3 whose b batch is a's or 1: the batch_matmul template (the
    // fusion pass brings other ranks to this form with views).
    if (ctx.in(0).rank() == 3 && ctx.in(1).rank() == 3 && ctx.in(0).dtype == ir::Float(32) &&
        (ctx.in(1).shape[0] == ctx.in(0).shape[0] || ctx.in(1).shape[0] == 1)) {
      k.template_name = "batch_matmul.x86";
      k.template_args = Json::object({{"a", tensor_json(ctx.in(0))},
                                      {"b", tensor_json(ctx.in(1))},
                                      {"transpose_b", false},
                                      {"out_dtype", "float32"},
                                      {"epilogue", Json::array()}});
      k.input_map = {0, 1};
      return k;
    }
    te::Tensor a = add_input(k, ctx, 0, "a"), b = add_input(k, ctx, 1, "b");
    const auto as = ctx.in(0).shape, bs = ctx.in(1).shape;
    const DataType dt = ctx.in(0).dtype;
    const DataType acc = dt.is_float() ? (dt.bits() == 16 ? ir::Float(32) : dt) : dt;
    te::IterVar r = te::reduce_axis(i32(s.kdim), "k");
    const size_t nb = s.batch.size();
    te::Tensor mm = compute(
        s.out,
        [&](const std::vector<Expr> &i) {
          std::vector<Expr> bi(i.begin(), i.begin() + static_cast<std::ptrdiff_t>(nb));
          Expr row = s.a_vec ? i32(0) : i[nb];
          Expr col = s.b_vec ? i32(0) : i[nb + (s.a_vec ? 0 : 1)];
          std::vector<Expr> ai, bidx;
          if (!s.a_vec) {
            std::vector<int64_t> ab(as.begin(), as.end() - 2);
            ai = broadcast_index(ab, bi);
            ai.push_back(row);
          }
          ai.push_back(r->var);
          bidx.push_back(r->var);
          if (!s.b_vec) {
            std::vector<int64_t> bbt(bs.begin(), bs.end() - 2);
            bidx = broadcast_index(bbt, bi);
            bidx.push_back(r->var);
            bidx.push_back(col);
          }
          return te::sum(ir::cast(acc, a(ai)) * ir::cast(acc, b(bidx)), {r});
        },
        "matmul");
    const int orank = static_cast<int>(s.out.size());
    k.outputs.push_back(compute(
        s.out, [&](const std::vector<Expr> &i) { return ir::cast(dt, at(mm, orank, i)); }, "matmul_out"));
    return k;
  };
  register_op(std::move(d));
}

void gemm() {
  OpDef d;
  d.name = "Gemm";
  d.min_inputs = 2;
  d.max_inputs = 3;
  auto dims = [](const OpContext &ctx) {
    const auto &a = ctx.in(0).shape, &b = ctx.in(1).shape;
    if (a.size() != 2 || b.size() != 2) ctx.fail("A and B must be matrices");
    const bool ta = ctx.node().attr_int("transA", 0) != 0, tb = ctx.node().attr_int("transB", 0) != 0;
    const int64_t m = ta ? a[1] : a[0], ka = ta ? a[0] : a[1];
    const int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
    if (ka != kb) ctx.fail(concat("inner dimensions differ: ", ctx.in(0).str(), " x ", ctx.in(1).str()));
    return std::vector<int64_t>{m, n, ka};
  };
  d.flops = [dims](const OpContext &ctx) {
    auto v = dims(ctx);
    return 2.0 * static_cast<double>(v[0]) * static_cast<double>(v[1]) * static_cast<double>(v[2]);
  };
  d.infer = [dims](const OpContext &ctx) {
    auto v = dims(ctx);
    if (ctx.in(0).dtype != ctx.in(1).dtype) ctx.fail("A and B dtypes differ");
    if (ctx.has_input(2)) broadcast_shapes(ctx, {ctx.in(2).shape, {v[0], v[1]}});
    if (ctx.has_input(2) && broadcast_shapes(ctx, {ctx.in(2).shape, {v[0], v[1]}}) != std::vector<int64_t>{v[0], v[1]})
      ctx.fail(concat("C ", ctx.in(2).str(), " does not broadcast to [", v[0], ",", v[1], "]"));
    return std::vector<TensorType>{TensorType{ctx.in(0).dtype, {v[0], v[1]}}};
  };
  d.kernel = [dims](const OpContext &ctx) {
    Kernel k;
    auto v = dims(ctx);
    const double alpha = ctx.node().attr_float("alpha", 1.0), beta = ctx.node().attr_float("beta", 1.0);
    const bool ta = ctx.node().attr_int("transA", 0) != 0, tb = ctx.node().attr_int("transB", 0) != 0;
    const DataType dt = ctx.in(0).dtype;
    // The dense template: y = x W^T (+ bias over columns).
    const bool bias_vec = ctx.has_input(2) && ctx.in(2).rank() == 1 && ctx.in(2).shape[0] == v[1];
    if (dt == ir::Float(32) && !ta && tb && alpha == 1.0 && beta == 1.0 && (!ctx.has_input(2) || bias_vec)) {
      k.template_name = "dense_pack.x86";
      Json epi = Json::array();
      if (ctx.has_input(2)) epi.push_back(Json::object({{"op", "bias_add"}}));
      k.template_args =
          Json::object({{"data", tensor_json(ctx.in(0))}, {"weight", tensor_json(ctx.in(1))}, {"epilogue", epi}});
      k.input_map = {0, 1};
      if (ctx.has_input(2)) k.input_map.push_back(2);
      return k;
    }
    // y = x B (+ bias over columns): the matmul template, whose b is [K, N].
    if (dt == ir::Float(32) && !ta && !tb && alpha == 1.0 && beta == 1.0 && (!ctx.has_input(2) || bias_vec)) {
      k.template_name = "matmul.x86";
      Json epi = Json::array();
      if (ctx.has_input(2)) epi.push_back(Json::object({{"op", "bias_add"}}));
      k.template_args = Json::object({{"a", tensor_json(ctx.in(0))}, {"b", tensor_json(ctx.in(1))}, {"epilogue", epi}});
      k.input_map = {0, 1};
      if (ctx.has_input(2)) k.input_map.push_back(2);
      return k;
    }
    te::Tensor a = add_input(k, ctx, 0, "a"), b = add_input(k, ctx, 1, "b"), c;
    if (ctx.has_input(2)) c = add_input(k, ctx, 2, "c");
    te::IterVar r = te::reduce_axis(i32(v[2]), "k");
    const DataType acc = dt.bits() == 16 && dt.is_float() ? ir::Float(32) : dt;
    te::Tensor mm = compute(
        {v[0], v[1]},
        [&](const std::vector<Expr> &i) {
          Expr x = ta ? a(r->var, i[0]) : a(i[0], r->var);
          Expr y = tb ? b(i[1], r->var) : b(r->var, i[1]);
          return te::sum(ir::cast(acc, x) * ir::cast(acc, y), {r});
        },
        "gemm");
    const auto cs = ctx.has_input(2) ? ctx.in(2).shape : std::vector<int64_t>{};
    k.outputs.push_back(compute(
        {v[0], v[1]},
        [&](const std::vector<Expr> &i) {
          Expr y = mm(i);
          if (alpha != 1.0) y = y * ir::make_const(acc, alpha);
          if (c.defined()) {
            Expr cv = ir::cast(acc, at(c, static_cast<int>(cs.size()), broadcast_index(cs, i)));
            y = y + (beta != 1.0 ? cv * ir::make_const(acc, beta) : cv);
          }
          return ir::cast(dt, y);
        },
        "gemm_out"));
    return k;
  };
  register_op(std::move(d));
}

// MaxPool (with optional int64 Indices), AveragePool, LpPool over N-d windows.
enum class Pool { Max, Avg, Lp };

void pool(const std::string &name, Pool kind) {
  OpDef d;
  d.name = name;
  d.max_outputs = kind == Pool::Max ? 2 : 1;
  d.infer = [](const OpContext &ctx) {
    const auto &x = ctx.in(0);
    if (x.rank() < 3) ctx.fail(concat("needs an input of rank 3 or more, got ", x.str()));
    const std::vector<int64_t> ks = ctx.node().attr_ints("kernel_shape");
    if (ks.empty()) ctx.fail("kernel_shape is required");
    Window w = window(ctx, spatial(x.shape), ks, ctx.node().attr_int("ceil_mode", 0) != 0);
    std::vector<int64_t> out{x.shape[0], x.shape[1]};
    out.insert(out.end(), w.out.begin(), w.out.end());
    return std::vector<TensorType>{TensorType{x.dtype, out}, TensorType{ir::Int(64), out}};
  };
  d.kernel = [kind, name](const OpContext &ctx) {
    Kernel k;
    te::Tensor x = add_input(k, ctx, 0, "x");
    const auto &xt = ctx.in(0);
    const size_t n = static_cast<size_t>(xt.rank() - 2);
    Window w =
        window(ctx, spatial(xt.shape), ctx.node().attr_ints("kernel_shape"), ctx.node().attr_int("ceil_mode", 0) != 0);
    std::vector<int64_t> out{xt.shape[0], xt.shape[1]};
    out.insert(out.end(), w.out.begin(), w.out.end());
    const DataType dt = xt.dtype;
    const DataType acc = dt.is_float() && dt.bits() == 16 ? ir::Float(32) : dt;
    const bool count_pad = ctx.node().attr_int("count_include_pad", 0) != 0;
    const int64_t p = ctx.node().attr_int("p", 2);
    auto taps = [&](const char *pfx) {
      std::vector<te::IterVar> r;
      for (size_t a = 0; a < n; ++a) r.push_back(te::reduce_axis(i32(w.kernel[a]), concat(pfx, a)));
      return r;
    };
    // Source position and whether it is inside the input.
    auto source = [&](const std::vector<Expr> &i, const std::vector<te::IterVar> &r, Expr *inside) {
      std::vector<Expr> src{i[0], i[1]};
      *inside = ir::const_true();
      for (size_t a = 0; a < n; ++a) {
        Expr pos = i[a + 2] * i32(w.strides[a]) + Expr(r[a]->var) * i32(w.dilations[a]) - i32(w.pads[a]);
        *inside = *inside && pos >= i32(0) && pos < i32(xt.shape[a + 2]);
        src.push_back(ir::min(ir::max(pos, i32(0)), i32(xt.shape[a + 2] - 1)));
      }
      return src;
    };
    if (kind == Pool::Max) {
      auto r = taps("r");
      te::Tensor mx = compute(
          out,
          [&](const std::vector<Expr> &i) {
            Expr inside;
            auto src = source(i, r, &inside);
            return te::max(ir::select(inside, x(src), ir::min_value(dt)), r);
          },
          name);
      k.outputs.push_back(mx);
      if (ctx.num_outputs() > 1) {
        // The first (row-major) position holding the maximum; storage_order 1 means column-major.
        const bool col_major = ctx.node().attr_int("storage_order", 0) != 0;
        auto r2 = taps("q");
        te::Tensor first = compute(
            out,
            [&](const std::vector<Expr> &i) {
              Expr inside;
              auto src = source(i, r2, &inside);
              Expr flat = i[0] * i32(xt.shape[1]) + i[1];
              if (!col_major) {
                for (size_t a = 0; a < n; ++a) flat = flat * i32(xt.shape[a + 2]) + src[a + 2];
              } else {
                Expr sp = i32(0);
                for (size_t a = n; a-- > 0;) sp = sp * i32(xt.shape[a + 2]) + src[a + 2];
                int64_t spatial_n = 1;
                for (size_t a = 0; a < n; ++a) spatial_n *= xt.shape[a + 2];
                flat = flat * i32(spatial_n) + sp;
              }
              return te::min(ir::select(inside && x(src) == mx(i), flat, i32(std::numeric_limits<int32_t>::max())), r2);
            },
            name + "_index");
        k.outputs.push_back(compute(
            out, [&](const std::vector<Expr> &i) { return ir::cast(ir::Int(64), first(i)); }, name + "_indices"));
      }
      return k;
    }
    auto r = taps("r");
    te::Tensor s = compute(
        out,
        [&](const std::vector<Expr> &i) {
          Expr inside;
          auto src = source(i, r, &inside);
          Expr v = ir::cast(acc, x(src));
          if (kind == Pool::Lp)
            v = p == 1 ? ir::abs(v)
                       : (p == 2 ? v * v : ir::pow(ir::abs(v), ir::make_const(acc, static_cast<double>(p))));
          return te::sum(ir::select(inside, v, ir::make_zero(acc)), r);
        },
        name + "_sum");
    k.outputs.push_back(compute(
        out,
        [&](const std::vector<Expr> &i) {
          Expr v = s(i);
          if (kind == Pool::Lp) {
            v = p == 1 ? v : (p == 2 ? ir::sqrt(v) : ir::pow(v, ir::make_const(acc, 1.0 / static_cast<double>(p))));
            return ir::cast(dt, v);
          }
          // The number of taps counted: inside the input, or inside the padded input.
          Expr cnt = i32(1);
          for (size_t a = 0; a < n; ++a) {
            Expr lo = i[a + 2] * i32(w.strides[a]) - i32(w.pads[a]);
            const int64_t eff = (w.kernel[a] - 1) * w.dilations[a] + 1;
            Expr hi = lo + i32(eff);  // exclusive
            const int64_t lim_lo = count_pad ? -w.pads[a] : 0;
            const int64_t lim_hi = count_pad ? xt.shape[a + 2] + w.pads[a + n] : xt.shape[a + 2];
            // Taps k with lo + k * dil in [lim_lo, lim_hi).
            Expr first = ir::max(i32(0), ir::floordiv(i32(lim_lo) - lo + i32(w.dilations[a] - 1), i32(w.dilations[a])));
            Expr last = ir::min(i32(w.kernel[a] - 1), ir::floordiv(i32(lim_hi - 1) - lo, i32(w.dilations[a])));
            (void)hi;
            cnt = cnt * ir::max(last - first + i32(1), i32(1));
          }
          return ir::cast(dt, v / ir::cast(acc, cnt));
        },
        name));
    return k;
  };
  register_op(std::move(d));
}

void global_pool(const std::string &name, bool is_max) {
  OpDef d;
  d.name = name;
  d.infer = [](const OpContext &ctx) {
    const auto &x = ctx.in(0);
    if (x.rank() < 3) ctx.fail(concat("needs an input of rank 3 or more, got ", x.str()));
    std::vector<int64_t> out{x.shape[0], x.shape[1]};
    out.resize(x.shape.size(), 1);
    return std::vector<TensorType>{TensorType{x.dtype, out}};
  };
  d.kernel = [is_max, name](const OpContext &ctx) {
    Kernel k;
    const auto &xt = ctx.in(0);
    te::Tensor x = add_input(k, ctx, 0, "x");
    const size_t n = static_cast<size_t>(xt.rank() - 2);
    std::vector<te::IterVar> r;
    int64_t count = 1;
    for (size_t a = 0; a < n; ++a) {
      r.push_back(te::reduce_axis(i32(xt.shape[a + 2]), concat("r", a)));
      count *= xt.shape[a + 2];
    }
    std::vector<int64_t> out{xt.shape[0], xt.shape[1]};
    out.resize(xt.shape.size(), 1);
    const DataType dt = xt.dtype, acc = dt.bits() == 16 ? ir::Float(32) : dt;
    te::Tensor red = compute(
        out,
        [&](const std::vector<Expr> &i) {
          std::vector<Expr> src{i[0], i[1]};
          for (size_t a = 0; a < n; ++a) src.push_back(r[a]->var);
          return is_max ? te::max(ir::cast(acc, x(src)), r) : te::sum(ir::cast(acc, x(src)), r);
        },
        name + "_red");
    k.outputs.push_back(compute(
        out,
        [&](const std::vector<Expr> &i) {
          Expr v = red(i);
          if (!is_max) v = v / ir::make_const(acc, static_cast<double>(count));
          return ir::cast(dt, v);
        },
        name));
    return k;
  };
  register_op(std::move(d));
}

void batch_norm() {
  // BatchNormalization(x, scale, bias, mean, var) {epsilon} at inference.
  OpDef d;
  d.name = "BatchNormalization";
  d.min_inputs = d.max_inputs = 5;
  d.max_outputs = 1;
  d.infer = [](const OpContext &ctx) {
    const auto &x = ctx.in(0);
    if (x.rank() < 2) ctx.fail("needs an input of rank 2 or more");
    if (ctx.node().attr_int("training_mode", 0) != 0)
      ctx.fail("training mode is not supported: Kiln compiles for inference");
    for (int i = 1; i < 5; ++i) {
      if (ctx.in(i).rank() != 1 || ctx.in(i).shape[0] != x.shape[1])
        ctx.fail(concat("input ", i, " is ", ctx.in(i).str(), ", expected [", x.shape[1], "]"));
    }
    return std::vector<TensorType>{x};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    te::Tensor x = add_input(k, ctx, 0, "x"), sc = add_input(k, ctx, 1, "scale"), b = add_input(k, ctx, 2, "bias"),
               mean = add_input(k, ctx, 3, "mean"), var = add_input(k, ctx, 4, "var");
    const double eps = ctx.node().attr_float("epsilon", 1e-5);
    const DataType dt = ctx.in(0).dtype, acc = dt.bits() == 16 ? ir::Float(32) : dt;
    auto f = [&](const te::Tensor &t, const Expr &c) { return ir::cast(acc, t(c)); };
    k.outputs.push_back(compute(
        ctx.in(0).shape,
        [&](const std::vector<Expr> &i) {
          Expr c = i[1];
          Expr y =
              (ir::cast(acc, x(i)) - f(mean, c)) / ir::sqrt(f(var, c) + ir::make_const(acc, eps)) * f(sc, c) + f(b, c);
          return ir::cast(dt, y);
        },
        "batch_norm"));
    return k;
  };
  register_op(std::move(d));
}

}  // namespace

contracts::Json tensor_json(const TensorType &t) {
  return contracts::Json::object({{"shape", contracts::Json::array_of(t.shape)}, {"dtype", dtype_name(t.dtype)}});
}

// FusedConv(x, w, b?, extra...) {Conv's attributes, epilogue}: a 2-D float32 Conv with a chain of
// elementwise ops applied to its output in the same kernel (compiler/ops/epilogue.h descriptors, as
// a JSON list in the string attribute `epilogue`); descriptors that read a tensor (add, multiply,
// prelu) take the extra inputs in order. Made by the fusion pass (passes/fuse_epilogues.cpp).
Json fused_epilogue(const OpContext &ctx) {
  Json list;
  try {
    list = Json::parse(ctx.node().attr_string("epilogue", "[]"));
  } catch (const std::exception &e) {
    ctx.fail(concat("epilogue is not JSON: ", e.what()));
  }
  if (!list.is_array()) ctx.fail("epilogue must be a JSON list");
  return list;
}

int epilogue_inputs(const Json &list) {
  int n = 0;
  for (size_t k = 0; k < list.size(); ++k) {
    const std::string op = list[k].get_or("op", Json("")).as_string();
    if (op == "add" || op == "multiply" || op == "prelu" || op == "bias_add") ++n;
    if (op == "expr") n += static_cast<int>(list[k].get_or("inputs", Json::array()).size());
  }
  return n;
}

void check_epilogue_inputs(const OpContext &ctx, int first, const TensorType &out) {
  const Json list = fused_epilogue(ctx);
  const int extras = std::max(0, ctx.num_inputs() - first);
  if (epilogue_inputs(list) != extras)
    ctx.fail(concat("the epilogue reads ", epilogue_inputs(list), " tensors, the node has ", extras, " extra inputs"));
  int i = first;
  for (size_t k = 0; k < list.size(); ++k) {
    const std::string op = list[k].get_or("op", Json("")).as_string();
    if (op == "add" || op == "multiply") {
      // A tensor of the output's type (a residual, in the output's layout).
      if (ctx.in(i) != out)
        ctx.fail(concat("extra input ", i, " is ", ctx.in(i).str(), ", not the output's ", out.str()));
      ++i;
    } else if (op == "prelu" || op == "bias_add") {
      if (ctx.in(i).dtype != out.dtype) ctx.fail(concat("extra input ", i, " is ", ctx.in(i).str()));
      ++i;
    } else if (op == "expr") {
      // "full": a tensor of the output's type; "channel": one value per channel; {"broadcast":
      // dims}: a tensor of shape dims.
      const Json kinds = list[k].get_or("inputs", Json::array());
      for (const auto &kind : kinds.as_array()) {
        const bool full = kind.is_string() && kind.as_string() == "full";
        const Json *dims = kind.is_object() ? kind.find("broadcast") : nullptr;
        if (dims) {
          const TensorType want{out.dtype, dims->as_int_vector()};
          if (ctx.in(i) != want) ctx.fail(concat("extra input ", i, " is ", ctx.in(i).str(), ", not ", want.str()));
        } else if (full ? ctx.in(i) != out : ctx.in(i).dtype != out.dtype) {
          ctx.fail(
              concat("extra input ", i, " is ", ctx.in(i).str(), full ? concat(", not the output's ", out.str()) : ""));
        }
        ++i;
      }
    }
  }
}

void fused_conv() {
  OpDef d;
  d.name = "FusedConv";
  d.internal = true;
  d.min_inputs = 2;
  d.max_inputs = 64;
  d.infer = [](const OpContext &ctx) {
    TensorType t = conv_type(ctx);
    if (t.rank() != 4 || t.dtype != ir::Float(32)) ctx.fail("fuses 2-D float32 convolutions only");
    check_epilogue_inputs(ctx, 3, t);
    return std::vector<TensorType>{t};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k = conv_kernel(ctx);
    Json epi = k.template_args["epilogue"];
    const Json list = fused_epilogue(ctx);
    for (size_t j = 0; j < list.size(); ++j) epi.push_back(list[j]);
    k.template_args.set("epilogue", epi);
    for (int i = 3; i < ctx.num_inputs(); ++i) k.input_map.push_back(i);
    return k;
  };
  d.flops = [](const OpContext &ctx) {
    double taps = static_cast<double>(ctx.in(1).numel() / ctx.in(1).shape[0]);
    return 2.0 * static_cast<double>(conv_type(ctx).numel()) * taps;
  };
  register_op(std::move(d));
}

void register_nn_ops() {
  fused_conv();
  {
    OpDef d;
    d.name = "Conv";
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.infer = [](const OpContext &ctx) { return std::vector<TensorType>{conv_type(ctx)}; };
    d.kernel = conv_kernel;
    d.flops = [](const OpContext &ctx) {
      double taps = static_cast<double>(ctx.in(1).numel() / ctx.in(1).shape[0]);
      return 2.0 * static_cast<double>(conv_type(ctx).numel()) * taps;
    };
    register_op(std::move(d));
  }
  conv_transpose();
  matmul();
  gemm();
  pool("MaxPool", Pool::Max);
  pool("AveragePool", Pool::Avg);
  pool("LpPool", Pool::Lp);
  global_pool("GlobalAveragePool", false);
  global_pool("GlobalMaxPool", true);
  batch_norm();
}

}  // namespace kiln::graph::detail
