// Ops of the blocked NCHW[x]c layout, made by the layout pass (passes/alter_layout.cpp); frontends
// never produce them. A tensor in NCHW[x]c has shape [N, C/x, H, W, x]: channel c of NCHW is
// element [n, c / x, h, w, c % x].
//
//   ConvNCHWc(x, w, b?, extra...) {Conv's attributes, epilogue, ic_bn, oc_bn, depthwise}
//     a 2-D float32 convolution with data in NCHW[ic_bn]c and output in NCHW[oc_bn]c, built from
//     conv2d_nchwc.x86 (groups 1; weight pre-packed as [OC/oc_bn, C/ic_bn, KH, KW, ic_bn, oc_bn])
//     or depthwise_conv2d_nchwc.x86 (depthwise = 1, multiplier 1, ic_bn = oc_bn; weight
//     [C/c_bn, 1, KH, KW, 1, c_bn]). The bias stays [OC]; the extra inputs of the epilogue (a
//     residual) are in the output's layout. The workload's arguments are the NCHW/OIHW shapes and
//     the node's blocks, fixed (ic_bn, oc_bn; c_bn for depthwise): a node's kernel is the workload
//     the tuner tunes, and its tuned configs tune the schedule with the blocks held.
//   ExpandDepthwiseNCHWc(x, w1, w2, b1?, b2?) {strides, dilations, pads, ic_bn, oc_bn, expand_bias,
//     bias, expand_epilogue, epilogue}: a 1x1 ConvNCHWc (w1 packed, data block ic_bn, output block
//     oc_bn, bias b1 when expand_bias = 1, epilogue expand_epilogue) read only by a depthwise
//     ConvNCHWc (w2 packed, geometry strides/dilations/pads, bias b2 when bias = 1, epilogue), as
//     one kernel: conv1x1_depthwise_nchwc.x86 (passes/fuse_expand_depthwise.cpp makes it). The
//     epilogues take no extra tensors.
//   LayoutTransform(x) {src_block, dst_block}: NCHW (block 0) <-> NCHW[x]c, NCHW[x]c <-> NCHW[y]c,
//     built from layout_transform.x86.
//   PoolNCHWc(x) {mode, global, kernel_shape, strides, pads, dilations, ceil_mode,
//     count_include_pad}: max or average pooling (or the global one) on NCHW[x]c data, built from
//     pool2d.x86 / global_pool2d.x86.
#include <algorithm>
#include <tuple>

#include "compiler/graph/op_def.h"
#include "compiler/graph/op_families.h"
#include "compiler/ir/op.h"

namespace kiln::graph::detail {

using ::kiln::detail::concat;

namespace {

using contracts::Json;
using ir::Expr;

Json shape_json(const std::vector<int64_t> &shape, ir::DataType dtype) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", dtype_name(dtype)}});
}

// Output extent of a window of `k` taps with stride s, dilation d and pads p0, p1 over `in`.
int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, bool ceil_mode) {
  const int64_t span = in + p0 + p1 - ((k - 1) * d + 1);
  if (span < 0) return 0;
  int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (o - 1) * s >= in + p0) --o;
  return o;
}

struct Geometry {
  std::vector<int64_t> strides, dilations, pads;
};

Geometry geometry(const OpContext &ctx) {
  Geometry g;
  g.strides = ctx.node().attr_ints("strides", {1, 1});
  g.dilations = ctx.node().attr_ints("dilations", {1, 1});
  g.pads = ctx.node().attr_ints("pads", {0, 0, 0, 0});
  if (g.strides.size() != 2 || g.dilations.size() != 2 || g.pads.size() != 4)
    ctx.fail("strides, dilations and pads must be 2-D");
  for (int64_t v : g.strides)
    if (v <= 0) ctx.fail("strides must be positive");
  for (int64_t v : g.dilations)
    if (v <= 0) ctx.fail("dilations must be positive");
  for (int64_t v : g.pads)
    if (v < 0) ctx.fail("negative pads");
  return g;
}

// The blocks a blocked convolution node names (attributes ic_bn and oc_bn), checked against its
// NCHW[ic_bn]c data `x`.
std::pair<int64_t, int64_t> node_blocks(const OpContext &ctx, const TensorType &x) {
  const int64_t ic_bn = ctx.node().attr_int("ic_bn", 0), oc_bn = ctx.node().attr_int("oc_bn", 0);
  if (ic_bn <= 0 || oc_bn <= 0) ctx.fail("ic_bn and oc_bn must be positive");
  if (x.shape[4] != ic_bn) ctx.fail(concat("the data ", x.str(), " is not in NCHW", ic_bn, "c"));
  return {ic_bn, oc_bn};
}

// The output shape NCHW[oc_bn]c of a KH x KW window over an H x W input with the geometry `g`.
std::vector<int64_t> window_output(const OpContext &ctx, const Geometry &g, int64_t N, int64_t OC, int64_t H, int64_t W,
                                   int64_t KH, int64_t KW, int64_t oc_bn) {
  const int64_t oh = window_out(H, KH, g.strides[0], g.dilations[0], g.pads[0], g.pads[2], false);
  const int64_t ow = window_out(W, KW, g.strides[1], g.dilations[1], g.pads[1], g.pads[3], false);
  if (oh <= 0 || ow <= 0) ctx.fail("the window is larger than the padded input");
  return {N, OC / oc_bn, oh, ow, oc_bn};
}

// --- ConvNCHWc ---

struct BlockedConv {
  int64_t N, C, H, W, OC, KH, KW, ic_bn, oc_bn;
  bool depthwise;
  Geometry geo;
  std::vector<int64_t> out;  // NCHW[oc_bn]c
};

BlockedConv blocked_conv(const OpContext &ctx) {
  const TensorType &x = ctx.in(0), &w = ctx.in(1);
  if (x.dtype != ir::Float(32) || w.dtype != ir::Float(32)) ctx.fail("takes float32 data and weights");
  if (x.rank() != 5 || w.rank() != 6)
    ctx.fail(concat("takes NCHW[x]c data and a packed weight, got ", x.str(), " and ", w.str()));
  BlockedConv c;
  c.depthwise = ctx.node().attr_int("depthwise", 0) != 0;
  std::tie(c.ic_bn, c.oc_bn) = node_blocks(ctx, x);
  c.N = x.shape[0];
  c.C = x.shape[1] * c.ic_bn;
  c.H = x.shape[2];
  c.W = x.shape[3];
  c.KH = w.shape[2];
  c.KW = w.shape[3];
  if (c.depthwise) {
    if (c.ic_bn != c.oc_bn || w.shape[0] != x.shape[1] || w.shape[1] != 1 || w.shape[4] != 1 || w.shape[5] != c.oc_bn)
      ctx.fail(concat("the depthwise weight ", w.str(), " does not match the data ", x.str()));
    c.OC = c.C;
  } else {
    if (w.shape[1] != x.shape[1] || w.shape[4] != c.ic_bn || w.shape[5] != c.oc_bn)
      ctx.fail(concat("the packed weight ", w.str(), " does not match the data ", x.str(), " and oc_bn ", c.oc_bn));
    c.OC = w.shape[0] * c.oc_bn;
  }
  if (ctx.has_input(2) && (ctx.in(2).rank() != 1 || ctx.in(2).shape[0] != c.OC))
    ctx.fail(concat("the bias ", ctx.in(2).str(), " does not match ", c.OC, " output channels"));
  c.geo = geometry(ctx);
  c.out = window_output(ctx, c.geo, c.N, c.OC, c.H, c.W, c.KH, c.KW, c.oc_bn);
  return c;
}

void conv_nchwc() {
  OpDef d;
  d.name = "ConvNCHWc";
  d.internal = true;
  d.min_inputs = 2;
  d.max_inputs = 64;
  d.infer = [](const OpContext &ctx) {
    const BlockedConv c = blocked_conv(ctx);
    const TensorType t{ir::Float(32), c.out};
    check_epilogue_inputs(ctx, 3, t);
    return std::vector<TensorType>{t};
  };
  d.kernel = [](const OpContext &ctx) {
    const BlockedConv c = blocked_conv(ctx);
    Json epi = Json::array();
    if (ctx.has_input(2)) epi.push_back(Json::object({{"op", "bias_add"}}));
    const Json list = fused_epilogue(ctx);
    for (size_t j = 0; j < list.size(); ++j) epi.push_back(list[j]);
    const std::vector<int64_t> kernel =
        c.depthwise ? std::vector<int64_t>{c.C, 1, c.KH, c.KW} : std::vector<int64_t>{c.OC, c.C, c.KH, c.KW};
    Kernel k;
    k.template_name = c.depthwise ? "depthwise_conv2d_nchwc.x86" : "conv2d_nchwc.x86";
    k.template_args = Json::object({{"data", shape_json({c.N, c.C, c.H, c.W}, ir::Float(32))},
                                    {"kernel", shape_json(kernel, ir::Float(32))},
                                    {"strides", Json::array_of(c.geo.strides)},
                                    {"dilation", Json::array_of(c.geo.dilations)},
                                    {"padding", Json::array_of(c.geo.pads)},
                                    {"epilogue", epi}});
    if (c.depthwise) {
      k.template_args.set("c_bn", c.oc_bn);
    } else {
      k.template_args.set("ic_bn", c.ic_bn);
      k.template_args.set("oc_bn", c.oc_bn);
    }
    k.input_map = {0, 1};
    if (ctx.has_input(2)) k.input_map.push_back(2);
    for (int i = 3; i < ctx.num_inputs(); ++i) k.input_map.push_back(i);
    return k;
  };
  d.flops = [](const OpContext &ctx) {
    const BlockedConv c = blocked_conv(ctx);
    int64_t out = 1;
    for (int64_t e : c.out) out *= e;
    const int64_t taps = (c.depthwise ? 1 : c.C) * c.KH * c.KW;
    return 2.0 * static_cast<double>(out) * static_cast<double>(taps);
  };
  register_op(std::move(d));
}

// --- ExpandDepthwiseNCHWc ---

struct ExpandDepthwise {
  int64_t N, IC, C, H, W, KH, KW, ic_bn, oc_bn;
  bool expand_bias, bias;
  Geometry geo;
  std::vector<int64_t> out;  // NCHW[oc_bn]c
};

ExpandDepthwise expand_depthwise(const OpContext &ctx) {
  const TensorType &x = ctx.in(0), &w1 = ctx.in(1), &w2 = ctx.in(2);
  if (x.dtype != ir::Float(32) || w1.dtype != ir::Float(32) || w2.dtype != ir::Float(32))
    ctx.fail("takes float32 data and weights");
  if (x.rank() != 5 || w1.rank() != 6 || w2.rank() != 6)
    ctx.fail(concat("takes NCHW[x]c data and packed weights, got ", x.str(), ", ", w1.str(), " and ", w2.str()));
  ExpandDepthwise e;
  std::tie(e.ic_bn, e.oc_bn) = node_blocks(ctx, x);
  e.N = x.shape[0];
  e.IC = x.shape[1] * e.ic_bn;
  e.H = x.shape[2];
  e.W = x.shape[3];
  if (w1.shape[1] != x.shape[1] || w1.shape[2] != 1 || w1.shape[3] != 1 || w1.shape[4] != e.ic_bn ||
      w1.shape[5] != e.oc_bn)
    ctx.fail(concat("the packed 1x1 weight ", w1.str(), " does not match the data ", x.str(), " and oc_bn ", e.oc_bn));
  e.C = w1.shape[0] * e.oc_bn;
  if (w2.shape[0] != w1.shape[0] || w2.shape[1] != 1 || w2.shape[4] != 1 || w2.shape[5] != e.oc_bn)
    ctx.fail(concat("the depthwise weight ", w2.str(), " does not match the 1x1 weight ", w1.str()));
  e.KH = w2.shape[2];
  e.KW = w2.shape[3];
  e.expand_bias = ctx.node().attr_int("expand_bias", 0) != 0;
  e.bias = ctx.node().attr_int("bias", 0) != 0;
  const int inputs = 3 + (e.expand_bias ? 1 : 0) + (e.bias ? 1 : 0);
  if (ctx.num_inputs() != inputs) ctx.fail(concat("takes ", inputs, " inputs with its biases, got ", ctx.num_inputs()));
  for (int i = 3; i < inputs; ++i) {
    if (ctx.in(i).rank() != 1 || ctx.in(i).shape[0] != e.C)
      ctx.fail(concat("the bias ", ctx.in(i).str(), " does not match ", e.C, " channels"));
  }
  e.geo = geometry(ctx);
  e.out = window_output(ctx, e.geo, e.N, e.C, e.H, e.W, e.KH, e.KW, e.oc_bn);
  return e;
}

// An epilogue attribute with a bias_add first when the node has that bias.
Json epilogue_with_bias(const OpContext &ctx, const std::string &key, bool bias) {
  Json list;
  try {
    list = Json::parse(ctx.node().attr_string(key, "[]"));
  } catch (const std::exception &e) {
    ctx.fail(concat(key, " is not JSON: ", e.what()));
  }
  if (!list.is_array()) ctx.fail(concat(key, " must be a JSON list"));
  if (epilogue_inputs(list) != 0) ctx.fail(concat(key, " must not read extra tensors"));
  Json epi = Json::array();
  if (bias) epi.push_back(Json::object({{"op", "bias_add"}}));
  for (size_t j = 0; j < list.size(); ++j) epi.push_back(list[j]);
  return epi;
}

void expand_depthwise_nchwc() {
  OpDef d;
  d.name = "ExpandDepthwiseNCHWc";
  d.internal = true;
  // Made after the epilogue fusion, from two convolutions with theirs: nothing more fuses into it.
  d.pattern = OpPattern::kOpaque;
  d.min_inputs = 3;
  d.max_inputs = 5;
  d.infer = [](const OpContext &ctx) {
    return std::vector<TensorType>{TensorType{ir::Float(32), expand_depthwise(ctx).out}};
  };
  d.kernel = [](const OpContext &ctx) {
    const ExpandDepthwise e = expand_depthwise(ctx);
    Kernel k;
    k.template_name = "conv1x1_depthwise_nchwc.x86";
    k.template_args = Json::object({{"data", shape_json({e.N, e.IC, e.H, e.W}, ir::Float(32))},
                                    {"expand_kernel", shape_json({e.C, e.IC, 1, 1}, ir::Float(32))},
                                    {"depthwise_kernel", shape_json({e.C, 1, e.KH, e.KW}, ir::Float(32))},
                                    {"strides", Json::array_of(e.geo.strides)},
                                    {"dilation", Json::array_of(e.geo.dilations)},
                                    {"padding", Json::array_of(e.geo.pads)},
                                    {"ic_bn", e.ic_bn},
                                    {"c_bn", e.oc_bn},
                                    {"expand_epilogue", epilogue_with_bias(ctx, "expand_epilogue", e.expand_bias)},
                                    {"epilogue", epilogue_with_bias(ctx, "epilogue", e.bias)}});
    // The template's inputs: data, the two kernels, then the epilogues' biases in order.
    k.input_map = {0, 1, 2};
    for (int i = 3; i < ctx.num_inputs(); ++i) k.input_map.push_back(i);
    return k;
  };
  d.flops = [](const OpContext &ctx) {
    const ExpandDepthwise e = expand_depthwise(ctx);
    const double mid = static_cast<double>(e.N * e.C * e.H * e.W);
    const double out = static_cast<double>(e.N * e.C * e.out[2] * e.out[3]);
    return 2.0 * mid * static_cast<double>(e.IC) + 2.0 * out * static_cast<double>(e.KH * e.KW);
  };
  register_op(std::move(d));
}

// --- LayoutTransform ---

// The channel count of a tensor in NCHW (block 0) or NCHW[block]c.
int64_t channels(const TensorType &t, int64_t block) { return block == 0 ? t.shape[1] : t.shape[1] * t.shape[4]; }

void layout_transform() {
  OpDef d;
  d.name = kLayoutTransformOp;
  d.internal = true;
  d.infer = [](const OpContext &ctx) {
    const TensorType &x = ctx.in(0);
    const int64_t src = ctx.node().attr_int("src_block", 0), dst = ctx.node().attr_int("dst_block", 0);
    if (src < 0 || dst < 0) ctx.fail("blocks must not be negative");
    if (x.rank() != (src == 0 ? 4 : 5) || (src != 0 && x.shape[4] != src))
      ctx.fail(concat("the input ", x.str(), " is not in ", src == 0 ? std::string("NCHW") : concat("NCHW", src, "c")));
    const int64_t c = channels(x, src);
    std::vector<int64_t> out{x.shape[0], c, x.shape[2], x.shape[3]};
    if (dst != 0) {
      if (c % dst != 0) ctx.fail(concat("block ", dst, " does not divide ", c, " channels"));
      out = {x.shape[0], c / dst, x.shape[2], x.shape[3], dst};
    }
    return std::vector<TensorType>{TensorType{x.dtype, out}};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    k.template_name = "layout_transform.x86";
    k.template_args = Json::object({{"data", shape_json(ctx.in(0).shape, ctx.in(0).dtype)},
                                    {"src_block", ctx.node().attr_int("src_block", 0)},
                                    {"dst_block", ctx.node().attr_int("dst_block", 0)}});
    k.input_map = {0};
    return k;
  };
  d.flops = [](const OpContext &) { return 0.0; };
  register_op(std::move(d));
}

// --- PoolNCHWc ---

struct BlockedPool {
  bool global, is_max;
  std::vector<int64_t> kernel;
  Geometry geo;
  bool ceil_mode, count_include_pad;
  std::vector<int64_t> out;
};

BlockedPool blocked_pool(const OpContext &ctx) {
  const TensorType &x = ctx.in(0);
  if (x.rank() != 5) ctx.fail(concat("takes NCHW[x]c data, got ", x.str()));
  BlockedPool p;
  const std::string mode = ctx.node().attr_string("mode", "max");
  if (mode != "max" && mode != "avg") ctx.fail(concat("unknown mode '", mode, "'"));
  p.is_max = mode == "max";
  if (!p.is_max && x.dtype != ir::Float(32)) ctx.fail("average pooling takes float32 data");
  p.global = ctx.node().attr_int("global", 0) != 0;
  p.ceil_mode = ctx.node().attr_int("ceil_mode", 0) != 0;
  p.count_include_pad = ctx.node().attr_int("count_include_pad", 0) != 0;
  if (p.global) {
    p.out = {x.shape[0], x.shape[1], 1, 1, x.shape[4]};
    return p;
  }
  p.kernel = ctx.node().attr_ints("kernel_shape");
  if (p.kernel.size() != 2 || p.kernel[0] <= 0 || p.kernel[1] <= 0) ctx.fail("kernel_shape must be two positive sizes");
  p.geo = geometry(ctx);
  const int64_t oh = window_out(x.shape[2], p.kernel[0], p.geo.strides[0], p.geo.dilations[0], p.geo.pads[0],
                                p.geo.pads[2], p.ceil_mode);
  const int64_t ow = window_out(x.shape[3], p.kernel[1], p.geo.strides[1], p.geo.dilations[1], p.geo.pads[1],
                                p.geo.pads[3], p.ceil_mode);
  if (oh <= 0 || ow <= 0) ctx.fail("the window is larger than the padded input");
  p.out = {x.shape[0], x.shape[1], oh, ow, x.shape[4]};
  return p;
}

void pool_nchwc() {
  OpDef d;
  d.name = "PoolNCHWc";
  d.internal = true;
  d.infer = [](const OpContext &ctx) {
    return std::vector<TensorType>{TensorType{ctx.in(0).dtype, blocked_pool(ctx).out}};
  };
  d.kernel = [](const OpContext &ctx) {
    const BlockedPool p = blocked_pool(ctx);
    Kernel k;
    k.template_name = p.global ? "global_pool2d.x86" : "pool2d.x86";
    Json args =
        Json::object({{"data", shape_json(ctx.in(0).shape, ctx.in(0).dtype)}, {"pool_type", p.is_max ? "max" : "avg"}});
    if (!p.global) {
      args.set("kernel", Json::array_of(p.kernel));
      args.set("strides", Json::array_of(p.geo.strides));
      args.set("padding", Json::array_of(p.geo.pads));
      args.set("dilation", Json::array_of(p.geo.dilations));
      args.set("ceil_mode", Json(p.ceil_mode));
      args.set("count_include_pad", Json(p.count_include_pad));
    }
    k.template_args = args;
    k.input_map = {0};
    return k;
  };
  register_op(std::move(d));
}

}  // namespace

void register_layout_ops() {
  conv_nchwc();
  expand_depthwise_nchwc();
  layout_transform();
  pool_nchwc();
}

}  // namespace kiln::graph::detail
