// 2-D convolution templates for x86:
//   conv2d_nchw.x86            direct convolution in NCHW, with groups, stride, padding, dilation;
//   conv2d_nchwc.x86           AutoTVM's conv2d_NCHWc: data in NCHW[ic_bn]c, kernel in
//                              OIHW[ic_bn]i[oc_bn]o, output in NCHW[oc_bn]c, where the block sizes
//                              are the knobs tile_ic / tile_oc (or fixed by the arguments); 1x1
//                              kernels get the conv2d_avx_1x1 schedule (a tile_oh knob); the taps
//                              in the padding are skipped (border and interior regions) rather
//                              than read from a padded copy of the input; the default register
//                              tile's width is a divisor of the output width, or a power of two
//                              with a tail tile where the divisors are too small (odd widths);
//   depthwise_conv2d_nchw.x86  depthwise with a channel multiplier (kernel [C, M, KH, KW]);
//   depthwise_conv2d_nchwc.x86 depthwise (multiplier 1) in the blocked layouts: data NCHW[c_bn]c,
//                              kernel [C/c_bn, 1, KH, KW, 1, c_bn], output NCHW[c_bn]c, with the
//                              block a knob (tile_c) or fixed by the arguments; the channel block
//                              is the vector, and taps in the padding are skipped (border and
//                              interior regions, knob skip_padding) or bounds-checked (masked)
//                              loads rather than reads of a padded copy of the input;
//   conv2d_transpose_nchw.x86  transposed convolution (kernel [IC, OC, KH, KW]), computed as a
//                              stride-1 convolution of the stride-dilated, padded input with the
//                              flipped kernel.
// Integer inputs accumulate in int32. Every template takes an epilogue (bias indexed by the
// output channel).
//
// Schedules: a register tile of output channels x rows x a vectorized run of output columns (or
// of the oc block in NCHWc) is accumulated over the reduction loops, which run outside it; the
// outer loops (batch, channel blocks, rows; rows before blocks where threads should share out rows,
// see rows_outermost_1x1) are fused and parallel; the epilogue is applied on the
// tile; padding, where a template reads a padded copy, is a separate parallel stage.
#include <algorithm>

#include "compiler/ir/op.h"
#include "compiler/ops/conv_common.h"
#include "compiler/ops/templates.h"

namespace kiln::ops {

namespace {

using autotune::Config;
using autotune::ConfigSpace;
using autotune::SplitPolicy;
using contracts::Json;
using namespace detail;
using namespace ir;

enum class Kind { Nchw, Nchwc, Depthwise, DepthwiseNchwc, Transpose };

struct Conv : ConvWindow {
  std::string tmpl;
  Kind kind = Kind::Nchw;
  TensorArg data, kernel;
  int64_t N = 0, C = 0, H = 0, W = 0, OC = 0, KH = 0, KW = 0, groups = 1, multiplier = 1;
  int64_t oph = 0, opw = 0;
  int64_t OH = 0, OW = 0;
  int64_t ic_bn = 0, oc_bn = 0;  // fixed blocks of conv2d_nchwc (0: a knob)
  int64_t c_bn = 0;              // fixed block of depthwise_conv2d_nchwc (0: a knob)
  DataType out;
  Json epilogue;

  bool is_1x1() const { return KH == 1 && KW == 1; }
};

Conv parse(const std::string &tmpl, Kind kind, const Json &args) {
  Conv c;
  c.tmpl = tmpl;
  c.kind = kind;
  switch (kind) {
    case Kind::Nchw:
      check_keys(tmpl, args, {"data", "kernel", "strides", "padding", "dilation", "groups", "out_dtype", "epilogue"});
      break;
    case Kind::Nchwc:
      check_keys(tmpl, args,
                 {"data", "kernel", "strides", "padding", "dilation", "ic_bn", "oc_bn", "out_dtype", "epilogue"});
      break;
    case Kind::Depthwise:
      check_keys(tmpl, args, {"data", "kernel", "strides", "padding", "dilation", "out_dtype", "epilogue"});
      break;
    case Kind::DepthwiseNchwc:
      check_keys(tmpl, args, {"data", "kernel", "strides", "padding", "dilation", "c_bn", "out_dtype", "epilogue"});
      break;
    case Kind::Transpose:
      check_keys(tmpl, args, {"data", "kernel", "strides", "padding", "output_padding", "out_dtype", "epilogue"});
      break;
  }
  c.data = tensor_arg(tmpl, args, "data", 4);
  c.kernel = tensor_arg(tmpl, args, "kernel", 4);
  c.N = c.data.shape[0];
  c.C = c.data.shape[1];
  c.H = c.data.shape[2];
  c.W = c.data.shape[3];
  c.KH = c.kernel.shape[2];
  c.KW = c.kernel.shape[3];
  static_cast<ConvWindow &>(c) = window_arg(tmpl, args);
  if (c.data.dtype.is_float() != c.kernel.dtype.is_float()) bad_args(tmpl, "mixing float and integer inputs");
  c.out = dtype_arg(tmpl, args, "out_dtype", default_accumulator(c.data.dtype));
  if (c.out.is_float() != c.data.dtype.is_float())
    bad_args(tmpl, "out_dtype must be float for float inputs, int for ints");

  if (kind == Kind::Transpose) {
    auto op = ints_arg(tmpl, args, "output_padding", 2, {0, 0});
    c.oph = op[0];
    c.opw = op[1];
    if (c.oph < 0 || c.opw < 0 || c.oph >= c.sh || c.opw >= c.sw) {
      bad_args(tmpl, "output_padding must be in [0, stride)");
    }
    if (c.kernel.shape[0] != c.C) bad_args(tmpl, "kernel must be [IC, OC, KH, KW] with IC = data channels");
    c.OC = c.kernel.shape[1];
    c.OH = (c.H - 1) * c.sh - c.pt - c.pb + c.KH + c.oph;
    c.OW = (c.W - 1) * c.sw - c.pl - c.pr + c.KW + c.opw;
  } else {
    if (kind == Kind::Depthwise || kind == Kind::DepthwiseNchwc) {
      if (c.kernel.shape[0] != c.C) bad_args(tmpl, "depthwise kernel must be [C, multiplier, KH, KW]");
      c.multiplier = c.kernel.shape[1];
      if (kind == Kind::DepthwiseNchwc && c.multiplier != 1) {
        bad_args(tmpl,
                 "the blocked depthwise template takes a channel multiplier of 1, got " + std::to_string(c.multiplier));
      }
      c.OC = c.C * c.multiplier;
    } else {
      c.OC = c.kernel.shape[0];
      if (kind == Kind::Nchw) c.groups = int_arg(tmpl, args, "groups", 1);
      if (c.groups < 1 || c.C % c.groups != 0 || c.OC % c.groups != 0) {
        bad_args(tmpl, "groups must divide the input and output channels");
      }
      if (c.kernel.shape[1] != c.C / c.groups) {
        bad_args(tmpl, "kernel must be [OC, C/groups, KH, KW]: expected " + std::to_string(c.C / c.groups) +
                           " input channels, got " + std::to_string(c.kernel.shape[1]));
      }
    }
    int64_t eh = (c.KH - 1) * c.dh + 1, ew = (c.KW - 1) * c.dw + 1;
    c.OH = (c.H + c.pt + c.pb - eh) / c.sh + 1;
    c.OW = (c.W + c.pl + c.pr - ew) / c.sw + 1;
    if (c.H + c.pt + c.pb < eh || c.W + c.pl + c.pr < ew) bad_args(tmpl, "the kernel is larger than the padded input");
  }
  if (c.OH < 1 || c.OW < 1) bad_args(tmpl, "the output would be empty");
  if (kind == Kind::Nchwc) {
    c.ic_bn = int_arg(tmpl, args, "ic_bn", 0);
    c.oc_bn = int_arg(tmpl, args, "oc_bn", 0);
    if (c.ic_bn < 0 || (c.ic_bn && c.C % c.ic_bn)) bad_args(tmpl, "ic_bn must divide the input channels");
    if (c.oc_bn < 0 || (c.oc_bn && c.OC % c.oc_bn)) bad_args(tmpl, "oc_bn must divide the output channels");
  }
  if (kind == Kind::DepthwiseNchwc) {
    c.c_bn = int_arg(tmpl, args, "c_bn", 0);
    if (c.c_bn < 0 || (c.c_bn && c.C % c.c_bn)) bad_args(tmpl, "c_bn must divide the channels");
  }
  c.epilogue = canonical_epilogue(args.get_or("epilogue", Json::array()), c.out, "workload " + tmpl);
  return c;
}

Json canonical(const Conv &c) {
  Json j = Json::object({{"data", tensor_json(c.data)},
                         {"kernel", tensor_json(c.kernel)},
                         {"strides", Json::array_of(std::vector<int64_t>{c.sh, c.sw})},
                         {"padding", Json::array_of(std::vector<int64_t>{c.pt, c.pl, c.pb, c.pr})},
                         {"out_dtype", c.out.to_string()},
                         {"epilogue", c.epilogue}});
  if (c.kind == Kind::Transpose) {
    j.set("output_padding", Json::array_of(std::vector<int64_t>{c.oph, c.opw}));
  } else {
    j.set("dilation", Json::array_of(std::vector<int64_t>{c.dh, c.dw}));
  }
  if (c.kind == Kind::Nchw) j.set("groups", c.groups);
  if (c.kind == Kind::Nchwc) {
    if (c.ic_bn) j.set("ic_bn", c.ic_bn);
    if (c.oc_bn) j.set("oc_bn", c.oc_bn);
  }
  if (c.kind == Kind::DepthwiseNchwc && c.c_bn) j.set("c_bn", c.c_bn);
  return j;
}

double flop(const Conv &c) {
  double out = static_cast<double>(c.N * c.OC * c.OH * c.OW);
  const bool dw = c.kind == Kind::Depthwise || c.kind == Kind::DepthwiseNchwc;
  double per = dw ? static_cast<double>(c.KH * c.KW) : static_cast<double>(c.C / c.groups * c.KH * c.KW);
  return 2.0 * out * per + epilogue_flop(c.epilogue, out);
}

Expr i32(int64_t v) { return Expr(static_cast<int>(v)); }

// --- NCHW direct, depthwise and transpose: one schedule over an [N, OC, OH, OW] anchor ---

Compute nchw_compute(const Conv &c) {
  Compute r;
  te::Tensor data = te::placeholder(c.data.shape_exprs(), c.data.dtype, "data");
  te::Tensor kernel = te::placeholder(c.kernel.shape_exprs(), c.kernel.dtype, "kernel");
  r.inputs = {data, kernel};
  const DataType out = c.out;
  te::Tensor src;
  if (c.kind == Kind::Transpose) {
    // The input dilated by the stride and padded so that a stride-1 convolution with the flipped
    // kernel gives the transposed convolution: position y holds data[(y - bt) / s] when y - bt is
    // a non-negative multiple of s below H * s.
    const int64_t bt = c.KH - 1 - c.pt, bl = c.KW - 1 - c.pl;
    const int64_t sh = c.sh, sw = c.sw, H = c.H, W = c.W;
    src = te::compute(
        {i32(c.N), i32(c.C), i32(c.OH + c.KH - 1), i32(c.OW + c.KW - 1)},
        [=](Var n, Var ch, Var y, Var x) {
          Expr yy = y - i32(bt), xx = x - i32(bl);
          Expr cond = yy >= 0 && xx >= 0 && floormod(yy, i32(sh)) == 0 && floormod(xx, i32(sw)) == 0 &&
                      floordiv(yy, i32(sh)) < i32(H) && floordiv(xx, i32(sw)) < i32(W);
          return if_then_else(cond, data(n, ch, floordiv(yy, i32(sh)), floordiv(xx, i32(sw))), make_zero(data.dtype()));
        },
        "data.dilate_pad", "pad");
    r.parts["pad"] = src;
  } else {
    src = pad(data, {0, 0, c.pt, c.pl}, {0, 0, c.pb, c.pr}, "data.pad");
    if (src != data) r.parts["pad"] = src;
  }
  te::Tensor conv;
  const int64_t sh = c.kind == Kind::Transpose ? 1 : c.sh, sw = c.kind == Kind::Transpose ? 1 : c.sw;
  const int64_t dh = c.kind == Kind::Transpose ? 1 : c.dh, dw = c.kind == Kind::Transpose ? 1 : c.dw;
  te::IterVar kh = te::reduce_axis(i32(c.KH), "kh"), kw = te::reduce_axis(i32(c.KW), "kw");
  std::vector<Expr> oshape = {i32(c.N), i32(c.OC), i32(c.OH), i32(c.OW)};
  if (c.kind == Kind::Depthwise) {
    const int64_t m = c.multiplier;
    conv = te::compute(
        oshape,
        [=](Var n, Var oc, Var y, Var x) {
          Expr ic = m == 1 ? Expr(oc) : floordiv(oc, i32(m));
          Expr q = m == 1 ? Expr(0) : floormod(oc, i32(m));
          return te::sum(cast(out, src(n, ic, y * i32(sh) + kh->var * i32(dh), x * i32(sw) + kw->var * i32(dw))) *
                             cast(out, kernel(ic, q, kh->var, kw->var)),
                         {kh, kw});
        },
        "depthwise_conv2d", "conv2d");
  } else {
    const int64_t icpg = c.C / c.groups, ocpg = c.OC / c.groups;
    const int64_t KH = c.KH, KW = c.KW;
    const bool transpose = c.kind == Kind::Transpose;
    te::IterVar ic = te::reduce_axis(i32(icpg), "ic");
    conv = te::compute(
        oshape,
        [=](Var n, Var oc, Var y, Var x) {
          Expr ch = c.groups == 1 ? Expr(ic->var) : floordiv(oc, i32(ocpg)) * i32(icpg) + ic->var;
          Expr w = transpose ? kernel(ic->var, oc, i32(KH - 1) - kh->var, i32(KW - 1) - kw->var)
                             : kernel(oc, ic->var, kh->var, kw->var);
          return te::sum(
              cast(out, src(n, ch, y * i32(sh) + kh->var * i32(dh), x * i32(sw) + kw->var * i32(dw))) * cast(out, w),
              {ic, kh, kw});
        },
        transpose ? "conv2d_transpose" : "conv2d", "conv2d");
  }
  r.parts["anchor"] = conv;
  ChannelMap ch{c.OC, [](const std::vector<Var> &i) { return Expr(i[1]); }};
  r.epilogue = build_epilogue(conv, c.epilogue, ch, &r.inputs);
  r.outputs = {r.epilogue.empty() ? conv : r.epilogue.back()};
  return r;
}

void define_nchw_space(ConfigSpace &s, const Conv &c) {
  if (c.kind != Kind::Depthwise) s.define_split("tile_oc", c.OC, 2, SplitPolicy::factors(32));
  s.define_split("tile_oh", c.OH, 2, SplitPolicy::factors(8));
  s.define_split("tile_ow", c.OW, 2, SplitPolicy::verbose(64));
  s.define_bool("unroll_kw");
  // The register tile: output channels x rows of accumulators per vector of columns.
  if (c.kind != Kind::Depthwise) s.add_product_limit("register_tile", {{"tile_oc", 1}, {"tile_oh", 1}}, 1, 32);
}

// Width of the vectorized column run: a divisor of OW, preferably a multiple of the vector width.
int64_t column_block(int64_t ow, int64_t lanes, int64_t cap) {
  for (int64_t d = std::min(ow, cap); d >= lanes; --d) {
    if (ow % d == 0 && d % lanes == 0) return d;
  }
  return largest_divisor_at_most(ow, std::min(cap, std::max<int64_t>(lanes, 1)));
}

Config default_nchw(const ConfigSpace &s, const Conv &c, const Target &t) {
  const int64_t lanes = t.lanes(c.out);
  const int64_t owi = column_block(c.OW, lanes, 2 * lanes);
  const int64_t vecs = ceil_div(owi, lanes);
  const int64_t budget = std::max<int64_t>(1, (t.vector_registers() - 4) / vecs);
  std::vector<std::pair<std::string, Json>> v;
  int64_t oci = 1;
  if (c.kind != Kind::Depthwise) {
    oci = largest_divisor_at_most(c.OC, std::min<int64_t>(8, budget));
    v.emplace_back("tile_oc", Json::array_of(std::vector<int64_t>{c.OC / oci, oci}));
  }
  const int64_t ohi = largest_divisor_at_most(c.OH, std::min<int64_t>(c.kind == Kind::Depthwise ? 4 : 2, budget / oci));
  v.emplace_back("tile_oh", Json::array_of(std::vector<int64_t>{c.OH / ohi, ohi}));
  v.emplace_back("tile_ow", Json::array_of(std::vector<int64_t>{ceil_div(c.OW, owi), owi}));
  v.emplace_back("unroll_kw", Json(c.KW <= 5 ? 1 : 0));
  return s.from_values(v);
}

void schedule_pad(te::Schedule &s, const Compute &c) {
  if (!c.has_part("pad")) return;
  te::Tensor p = c.part("pad");
  te::Stage P = s[p];
  // Batch and channel (block) loops, plus the rows in a blocked layout, fused and parallel; the
  // innermost dimension vectorized.
  const size_t nd = static_cast<size_t>(p.ndim());
  IterVar f;
  std::vector<IterVar> outer;
  for (size_t i = 0; i < nd - 2; ++i) outer.push_back(P.axis(i));
  P.fuse(outer, &f);
  P.parallel(f);
  P.vectorize(P.axis(nd - 1));
}

void schedule_nchw(te::Schedule &s, const Compute &c, const Config &cfg, Kind kind) {
  auto [out, acc] = prepare_anchor(s, c);
  te::Stage O = s[out];
  const bool dw = kind == Kind::Depthwise;
  const auto toh = cfg.split("tile_oh"), tow = cfg.split("tile_ow");
  const int64_t oci = dw ? 1 : cfg.split("tile_oc")[1];
  IterVar oco, ocin;
  if (dw) {
    oco = O.axis(1);
  } else {
    auto ocs = autotune::apply_split(O, O.axis(1), cfg.split("tile_oc"));
    oco = ocs[0];
    ocin = ocs[1];
  }
  auto ohs = autotune::apply_split(O, O.axis(2), toh);
  auto ows = autotune::apply_split(O, O.axis(3), tow);
  std::vector<IterVar> order = {O.axis(0), oco, ohs[0], ows[0]};
  if (!dw) order.push_back(ocin);
  order.insert(order.end(), {ohs[1], ows[1]});
  O.reorder(order);
  IterVar par;
  O.fuse({O.axis(0), oco, ohs[0]}, &par);
  O.parallel(par);
  if (!dw && oci * toh[1] <= 32) O.unroll(ocin);
  O.vectorize(ows[1]);

  te::Stage A = s[acc];
  A.compute_at(O, ows[0]);
  std::vector<IterVar> a_order;
  for (size_t i = 0; i < (dw ? 2u : 3u); ++i) a_order.push_back(A.reduce_axis(i));
  a_order.insert(a_order.end(), {A.axis(1), A.axis(2), A.axis(3)});
  A.reorder(a_order);
  if (cfg.choice_bool("unroll_kw")) A.unroll(A.reduce_axis(dw ? 1 : 2));
  if (oci * toh[1] <= 32) {
    A.unroll(A.axis(1));
    A.unroll(A.axis(2));
  }
  A.vectorize(A.axis(3));
  schedule_pad(s, c);
}

// --- NCHWc ---

struct Blocks {
  int64_t ic_bn, oc_bn;
};

Blocks blocks_of(const Config &cfg) { return {cfg.split("tile_ic").back(), cfg.split("tile_oc").back()}; }

// The taps of a window that fall in the zero padding add nothing, so they are skipped rather than
// read from a padded copy of the input: the reduction runs under likely() bounds checks of the
// input position, which loop partitioning turns into border and interior regions. An interior
// region reads the input directly; a row of taps in the padding drops out of the kernel-row loop
// (its check depends on that loop alone), and once the register tile is unrolled the column taps
// of a border tile fold to constants.
struct PaddingChecks {
  bool top, bottom, left, right;
};

PaddingChecks padding_checks(const Conv &c) {
  // Which bounds an input position can cross: below zero with padding before, at or past the end
  // when the last output's window reaches beyond it.
  return {c.pt > 0, (c.OH - 1) * c.sh + (c.KH - 1) * c.dh - c.pt >= c.H, c.pl > 0,
          (c.OW - 1) * c.sw + (c.KW - 1) * c.dw - c.pl >= c.W};
}

// The conjunction of the checks that apply to input position (y, x); undefined when none does.
Expr inside_input(const PaddingChecks &p, const Expr &y, const Expr &x, int64_t H, int64_t W) {
  Expr cond;
  auto both = [&cond](Expr e) { cond = cond.defined() ? (cond && e) : e; };
  if (p.top) both(y >= 0);
  if (p.bottom) both(y < i32(H));
  if (p.left) both(x >= 0);
  if (p.right) both(x < i32(W));
  return cond;
}

Compute nchwc_compute(const Conv &c, const Blocks &b) {
  Compute r;
  const int64_t icc = c.C / b.ic_bn, occ = c.OC / b.oc_bn;
  te::Tensor data = te::placeholder({i32(c.N), i32(icc), i32(c.H), i32(c.W), i32(b.ic_bn)}, c.data.dtype, "data");
  te::Tensor kernel =
      te::placeholder({i32(occ), i32(icc), i32(c.KH), i32(c.KW), i32(b.ic_bn), i32(b.oc_bn)}, c.kernel.dtype, "kernel");
  r.inputs = {data, kernel};
  te::IterVar ric = te::reduce_axis(i32(icc), "ic.outer"), rkh = te::reduce_axis(i32(c.KH), "kh"),
              rkw = te::reduce_axis(i32(c.KW), "kw"), rib = te::reduce_axis(i32(b.ic_bn), "ic.inner");
  const DataType out = c.out;
  const int64_t sh = c.sh, sw = c.sw, dh = c.dh, dw = c.dw, pt = c.pt, pl = c.pl, H = c.H, W = c.W;
  const PaddingChecks checks = padding_checks(c);
  te::Tensor conv = te::compute(
      {i32(c.N), i32(occ), i32(c.OH), i32(c.OW), i32(b.oc_bn)}, te::FCompute([=](const std::vector<Var> &i) {
        Expr y = i[2] * i32(sh) + rkh->var * i32(dh) - i32(pt), x = i[3] * i32(sw) + rkw->var * i32(dw) - i32(pl);
        Expr d = data(i[0], ric->var, y, x, rib->var);
        Expr w = kernel(i[1], ric->var, rkh->var, rkw->var, rib->var, i[4]);
        Expr cond = inside_input(checks, y, x, H, W);
        return te::sum(cast(out, d) * cast(out, w), {ric, rkh, rkw, rib}, cond.defined() ? likely(cond) : Expr());
      }),
      "conv2d_nchwc", "conv2d");
  r.parts["anchor"] = conv;
  const int64_t bn = b.oc_bn;
  ChannelMap ch{c.OC, [bn](const std::vector<Var> &i) { return i[1] * i32(bn) + i[4]; }};
  r.epilogue = build_epilogue(conv, c.epilogue, ch, &r.inputs);
  r.outputs = {r.epilogue.empty() ? conv : r.epilogue.back()};
  return r;
}

void define_nchwc_space(ConfigSpace &s, const Conv &c) {
  s.define_split("tile_ic", c.C, 2, c.ic_bn ? SplitPolicy::candidate({{c.ic_bn}}) : SplitPolicy::factors());
  s.define_split("tile_oc", c.OC, 2, c.oc_bn ? SplitPolicy::candidate({{c.oc_bn}}) : SplitPolicy::factors());
  s.define_split("tile_ow", c.OW, 2, SplitPolicy::verbose(64));
  if (c.is_1x1()) {
    s.define_choice("tile_oh", c.OH > 1 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1});
  } else {
    s.define_bool("unroll_kw");
    s.define_bool("prefetch_weights");
  }
}

// The register tile of conv2d_nchwc: rows x cols output positions (more than one row only for 1x1
// kernels), each a block of oc_bn output channels held in `vecs` vectors. A step of the reduction
// (one input channel of one kernel tap) loads a broadcast input per position and a kernel vector
// per vector of the block, and issues rows x cols x vecs FMAs, one into each accumulator.
struct NchwcTile {
  int64_t oc_bn = 1, vecs = 1, rows = 1, cols = 1;
  int64_t accumulators() const { return rows * cols * vecs; }
  int64_t loads() const { return rows * cols + vecs; }
};

// The default picks the register tile with a small throughput model: with two FMA pipes of
// latency four (and two load ports), a step runs at peak when it has at least 8 independent
// accumulators and no more loads than FMAs, so the fraction of peak is
// accumulators / max(accumulators, loads, 8). One vector of output channels is load-bound
// (n FMAs for n + 1 loads), so the block is two vectors unless that leaves too few columns that
// divide the output width (then one vector with more columns does better). The accumulators stay
// within the register file next to the kernel vectors and a broadcast, and within 16: more do not
// add throughput, and on AVX-512 the larger tiles measured slower. Ties go to more accumulators,
// then to fewer loads. The block is the widest of that many vectors that divides the output
// channels and is a vector block (ops::vector_block: 24 channels take 8, not 24), the block the layout
// pass gives a graph's convolution anyway, so that the default a tuning job measures for a
// convolution's free-block task is the kernel the untuned graph runs.
// A strided 1x1 kernel is the exception: its input positions are not contiguous (each broadcast
// reads its own part of a line) and no tap shares them, so the input side of a step costs more
// than the loads count; with the 32 registers of AVX-512 its tile grows to 28 accumulators (two
// vectors by 14 columns; the kernel vectors then come from memory as FMA operands). The block stays
// two vectors, the layout its neighbours in a network agree on. On ResNet-18's downsampling 1x1
// layers (sweep_bench --configs 0, three runs each) this took 64 -> 128 from 0.95-0.97 of oneDNN
// to 0.99-1.00 and 128 -> 256 from 0.96-0.99 to 1.05; 256 -> 512 (7 columns) is unchanged.
Config default_nchwc(const ConfigSpace &s, const Conv &c, const Target &t) {
  const int64_t lanes = t.lanes(c.out), regs = t.vector_registers();
  const bool wide_tile = c.is_1x1() && (c.sh > 1 || c.sw > 1) && regs >= 32;  // see above
  const int64_t min_acc = 8, max_acc = wide_tile ? 28 : 2 * min_acc;
  auto efficiency = [min_acc](const NchwcTile &x) {
    const int64_t a = x.accumulators();
    return static_cast<double>(a) / static_cast<double>(std::max({a, x.loads(), min_acc}));
  };
  const bool two_rows = c.is_1x1() && c.OH > 1 && c.OH % 2 == 0;
  NchwcTile best;
  double best_eff = -1;
  for (int64_t want_vecs : {2, 1}) {
    if (c.oc_bn && want_vecs == 1) break;  // a fixed block has one tile width
    NchwcTile x;
    x.oc_bn = c.oc_bn ? c.oc_bn : widest_vector_block(c.OC, lanes, want_vecs);
    x.vecs = ceil_div(x.oc_bn, lanes);
    const int64_t limit = std::max<int64_t>(1, std::min(max_acc, wide_tile ? regs - 1 : regs - x.vecs - 1));
    for (int64_t rows : {1, 2}) {
      if (rows == 2 && !two_rows) break;
      x.rows = rows;
      x.cols = tile_columns(c.OW, std::max<int64_t>(1, limit / (x.vecs * rows)));
      const double e = efficiency(x);
      const bool tie = e > best_eff - 1e-9 && e < best_eff + 1e-9;
      if (e > best_eff + 1e-9 || (tie && x.accumulators() > best.accumulators()) ||
          (tie && x.accumulators() == best.accumulators() && x.loads() < best.loads())) {
        best = x;
        best_eff = e;
      }
    }
  }
  // Input blocks of two vectors, like the output blocks where the channels allow, so that chained
  // layers agree on the layout; an input position is then at least a 64-byte line on AVX-512, and
  // the skipped positions of a strided 1x1 kernel are not read. Smaller and larger blocks
  // measured the same.
  const int64_t ic_bn = c.ic_bn ? c.ic_bn : largest_divisor_at_most(c.C, 2 * lanes);
  std::vector<std::pair<std::string, Json>> v = {
      {"tile_ic", Json::array_of(std::vector<int64_t>{c.C / ic_bn, ic_bn})},
      {"tile_oc", Json::array_of(std::vector<int64_t>{c.OC / best.oc_bn, best.oc_bn})},
      {"tile_ow", Json::array_of(std::vector<int64_t>{ceil_div(c.OW, best.cols), best.cols})}};
  if (c.is_1x1()) {
    v.emplace_back("tile_oh", Json(best.rows));
  } else {
    // Unrolling the kernel row shares the broadcast inputs of overlapping taps; its inputs and
    // kernel vectors need the half of the register file that the accumulators leave.
    v.emplace_back("unroll_kw", Json(best.accumulators() <= regs / 2 ? 1 : 0));
    // Weights of 1 MiB and more (a core's L2 or more) do not stay in the caches from one run of a
    // model to the next; in ResNet-18 the prefetch took layer 3's and layer 4's 3x3 convolutions
    // (1.2-9.4 MB of weights) 5-25% faster in the model.
    const int64_t weight_bytes = c.OC * c.C * c.KH * c.KW * c.kernel.dtype.bytes();
    v.emplace_back("prefetch_weights", Json(weight_bytes >= (int64_t{1} << 20) ? 1 : 0));
  }
  return s.from_values(v);
}

// The weights of one oc block are read from the start for each output row; across the blocks they
// are one pass over the whole kernel, which a model's other layers evict from the caches between
// two runs. The knob prefetch_weights spreads a software prefetch of the next oc block's weights
// over the block's rows: each iteration of the innermost reduction loop that is not unrolled
// (ic.inner) prefetches the next cache lines of the next block in memory order, so the block is in
// the cache when its first row starts, fetched at the pace of the compute rather than at once.
void prefetch_next_weights(te::Stage &A, const te::Tensor &kernel, bool unroll_kw) {
  std::vector<int64_t> d;
  for (const auto &x : kernel.shape()) d.push_back(*as_const_int(x));
  const int64_t occ_n = d[0], icc = d[1], KH = d[2], KW = d[3], ibn = d[4], obn = d[5];
  const int64_t rows = *as_const_int(A->op->output_shape(0)[2]);
  IterVar ric = A.reduce_axis(0), rkh = A.reduce_axis(1), rkw = A.reduce_axis(2), rib = A.reduce_axis(3);
  // The iteration's number within the row, and the iterations in a row.
  Expr it = ric->var * i32(KH) + rkh->var;
  if (!unroll_kw) it = it * i32(KW) + rkw->var;
  it = it * i32(ibn) + rib->var;
  const int64_t per_row = icc * KH * (unroll_kw ? 1 : KW) * ibn;
  const int64_t line = std::max<int64_t>(1, 64 / kernel.dtype().bytes());  // elements in a cache line
  const int64_t block = icc * KH * KW * ibn * obn;
  const int64_t per_iteration = ceil_div(ceil_div(block, line), per_row * rows);
  Expr next = min(A.axis(1)->var + 1, i32(occ_n - 1));
  for (int64_t j = 0; j < per_iteration; ++j) {
    Expr f = min(((A.axis(2)->var * i32(per_row) + it) * i32(per_iteration) + i32(j)) * i32(line), i32(block - 1));
    A.prefetch(kernel, rib,
               {next, f / i32(KH * KW * ibn * obn), f / i32(KW * ibn * obn) % i32(KH), f / i32(ibn * obn) % i32(KW),
                f / i32(obn) % i32(ibn), f % i32(obn)});
  }
}

int64_t elements(const te::Tensor &t) {
  int64_t n = 1;
  for (const auto &x : t.shape()) n *= *as_const_int(x);
  return n;
}

// Whether a 1x1 convolution's parallel loop takes its rows outside its output channel blocks.
// A parallel loop's iterations are cut into one contiguous range per thread
// (deploy/thread_pool.h), and a model's kernels run one after another on the same threads. Where
// consecutive kernels cut their tensors alike, each thread reads what it wrote itself, from its own
// core's caches; a line the other core wrote costs several times more (on a 2-core VM whose cores
// pass a cache line in about 200 ns, two threads copying a 1.6 MB tensor took 6x as long when each
// copied the half the other had written). A 1x1 convolution reads every input channel of its rows. Cut by output channel blocks (the
// 3x3 layers' order, which keeps a block's weights in the cache across its rows), each thread
// reads the whole input, half of it written by the other; cut by rows, each reads the rows it
// wrote in the layer before, which the depthwise and expand-depthwise templates cut by rows too.
// A thread then sweeps all the weights once per row: cheap where they are no larger than the
// input, which holds for the early, wide layers; later layers of large weights (960 channels at
// 7x7) keep the blocks outside.
bool rows_outermost_1x1(const Compute &c) { return elements(c.inputs[1]) <= elements(c.inputs[0]); }

void schedule_nchwc(te::Schedule &s, const Compute &c, const Config &cfg, bool one_by_one) {
  auto [out, acc] = prepare_anchor(s, c);
  te::Stage O = s[out];
  const auto tow = cfg.split("tile_ow");
  const int64_t oh_f = one_by_one ? cfg.choice_int("tile_oh") : 1;
  auto ows = autotune::apply_split(O, O.axis(3), tow);
  IterVar oh_outer = O.axis(2), oh_inner;
  if (one_by_one && oh_f > 1) O.split(O.axis(2), static_cast<int>(oh_f), &oh_outer, &oh_inner);
  const bool rows_outside = one_by_one && rows_outermost_1x1(c);
  std::vector<IterVar> outer = {O.axis(0), O.axis(1), oh_outer};
  if (rows_outside) std::swap(outer[1], outer[2]);
  std::vector<IterVar> order = outer;
  order.push_back(ows[0]);
  if (oh_inner.defined()) order.push_back(oh_inner);
  order.insert(order.end(), {ows[1], O.axis(4)});
  O.reorder(order);
  IterVar par;
  O.fuse(outer, &par);
  O.parallel(par);
  if (tow[1] * oh_f <= 32) O.unroll(ows[1]);
  O.vectorize(O.axis(4));

  te::Stage A = s[acc];
  A.compute_at(O, ows[0]);
  IterVar ric = A.reduce_axis(0), rkh = A.reduce_axis(1), rkw = A.reduce_axis(2), rib = A.reduce_axis(3);
  if (!one_by_one && cfg.choice_bool("unroll_kw")) {
    A.reorder({ric, rkh, rib, rkw, A.axis(2), A.axis(3), A.axis(4)});
    A.unroll(rkw);
  } else {
    A.reorder({ric, rkh, rkw, rib, A.axis(2), A.axis(3), A.axis(4)});
  }
  if (!one_by_one && cfg.choice_bool("prefetch_weights"))
    prefetch_next_weights(A, c.inputs[1], cfg.choice_bool("unroll_kw"));
  // A single row stays a plain loop, which simplification replaces by its row: the padding checks
  // then depend on the kernel-row loop alone, and its taps in the padding drop out.
  if (tow[1] * oh_f <= 32) {
    if (oh_f > 1) A.unroll(A.axis(2));
    A.unroll(A.axis(3));
  }
  A.vectorize(A.axis(4));
}

// --- depthwise in NCHWc ---

// Taps in the zero padding are skipped in one of two forms: `skip` puts the bounds checks on the
// reduction under likely(), which loop partitioning turns into border and interior regions (as in
// conv2d_nchwc: the interior reads the input with no check and no mask); otherwise each tap's load
// is masked by its check.
Compute depthwise_nchwc_compute(const Conv &c, int64_t cb, bool skip) {
  Compute r;
  const int64_t cc = c.C / cb;
  te::Tensor data = te::placeholder({i32(c.N), i32(cc), i32(c.H), i32(c.W), i32(cb)}, c.data.dtype, "data");
  te::Tensor kernel =
      te::placeholder({i32(cc), i32(1), i32(c.KH), i32(c.KW), i32(1), i32(cb)}, c.kernel.dtype, "kernel");
  r.inputs = {data, kernel};
  te::IterVar kh = te::reduce_axis(i32(c.KH), "kh"), kw = te::reduce_axis(i32(c.KW), "kw");
  const DataType out = c.out;
  const int64_t sh = c.sh, sw = c.sw, dh = c.dh, dw = c.dw, pt = c.pt, pl = c.pl, H = c.H, W = c.W;
  const PaddingChecks checks = padding_checks(c);
  te::Tensor conv = te::compute(
      {i32(c.N), i32(cc), i32(c.OH), i32(c.OW), i32(cb)}, te::FCompute([=](const std::vector<Var> &i) {
        Expr y = i[2] * i32(sh) + kh->var * i32(dh) - i32(pt), x = i[3] * i32(sw) + kw->var * i32(dw) - i32(pl);
        Expr v = data(i[0], i[1], y, x, i[4]);
        Expr cond = inside_input(checks, y, x, H, W);
        Expr w = kernel(i[1], 0, kh->var, kw->var, 0, i[4]);
        if (skip) return te::sum(cast(out, v) * cast(out, w), {kh, kw}, cond.defined() ? likely(cond) : Expr());
        // The padding is zero: a tap outside the input reads nothing, a masked load once the
        // channel block is vectorized.
        if (cond.defined()) v = if_then_else(likely(cond), v, make_zero(v.type()));
        return te::sum(cast(out, v) * cast(out, w), {kh, kw});
      }),
      "depthwise_conv2d_nchwc", "conv2d");
  r.parts["anchor"] = conv;
  ChannelMap ch{c.C, [cb](const std::vector<Var> &i) { return i[1] * i32(cb) + i[4]; }};
  r.epilogue = build_epilogue(conv, c.epilogue, ch, &r.inputs);
  r.outputs = {r.epilogue.empty() ? conv : r.epilogue.back()};
  return r;
}

// tile_c: the channel block (the vector); tile_oh, tile_ow: the register tile of output rows and
// columns (each a vector of the block) accumulated over the kernel taps; unroll_kw, unroll_kh:
// unrolling the taps lets overlapping windows share their loads; skip_padding: the taps in the
// padding skipped by border and interior regions rather than masked loads.
void define_depthwise_nchwc_space(ConfigSpace &s, const Conv &c, const Target &t) {
  s.define_split("tile_c", c.C, 2, c.c_bn ? SplitPolicy::candidate({{c.c_bn}}) : SplitPolicy::factors());
  s.define_split("tile_oh", c.OH, 2, SplitPolicy::verbose(4));
  s.define_split("tile_ow", c.OW, 2, SplitPolicy::verbose(32));
  s.define_bool("unroll_kw");
  s.define_bool("unroll_kh");
  s.define_bool("skip_padding");
  // Accumulators within the vector registers, next to a kernel vector and an input vector.
  const int64_t lanes = t.lanes(c.out), regs = t.vector_registers();
  s.add_constraint("register_tile_within_" + std::to_string(regs - 2) + "_vectors", {"tile_c", "tile_oh", "tile_ow"},
                   [lanes, regs](const Config &cfg) {
                     const int64_t nv = ceil_div(cfg.split("tile_c").back(), lanes);
                     return cfg.split("tile_oh").back() * cfg.split("tile_ow").back() * nv <= regs - 2;
                   });
}

Config default_depthwise_nchwc(const ConfigSpace &s, const Conv &c, const Target &t) {
  const int64_t lanes = t.lanes(c.out);
  const int64_t cb = c.c_bn ? c.c_bn : widest_vector_block(c.C, lanes, 1);  // see default_nchwc
  const int64_t budget = std::max<int64_t>(1, (t.vector_registers() - 2) / ceil_div(cb, lanes));
  // Two rows when there are enough, and as many columns as a third of the budget per row: about
  // two thirds of the registers accumulate.
  const int64_t ohi = c.OH >= 4 && budget >= 4 ? 2 : 1;
  const int64_t owi = largest_divisor_at_most(c.OW, std::max<int64_t>(1, budget / (3 * ohi) * 2));
  return s.from_values({{"tile_c", Json::array_of(std::vector<int64_t>{c.C / cb, cb})},
                        {"tile_oh", Json::array_of(std::vector<int64_t>{ceil_div(c.OH, ohi), ohi})},
                        {"tile_ow", Json::array_of(std::vector<int64_t>{ceil_div(c.OW, owi), owi})},
                        {"unroll_kw", Json(c.KW <= 5 ? 1 : 0)},
                        {"unroll_kh", Json(c.KH <= 5 ? 1 : 0)},
                        {"skip_padding", Json(1)}});
}

void schedule_depthwise_nchwc(te::Schedule &s, const Compute &c, const Config &cfg) {
  auto [out, acc] = prepare_anchor(s, c);
  te::Stage O = s[out];
  const auto toh = cfg.split("tile_oh"), tow = cfg.split("tile_ow");
  auto ohs = autotune::apply_split(O, O.axis(2), toh);
  auto ows = autotune::apply_split(O, O.axis(3), tow);
  O.reorder({O.axis(0), O.axis(1), ohs[0], ows[0], ohs[1], ows[1], O.axis(4)});
  // The row tiles join the parallel loop only when the channel blocks are too few to share out
  // among threads. Otherwise they stay a loop of their own, whose first and last tiles
  // loop partitioning peels: the rows' padding checks then leave the interior tiles, where in the
  // fused loop they were branches on every tile's taps of the first and last kernel rows (and the
  // kernel vectors they kept out of the registers were reloaded from the stack on every tile).
  // Joined, the row tiles go outside the channel blocks, so threads share out rows, as the 1x1
  // layers around do (rows_outermost_1x1): each reads the rows it wrote in the layer before.
  IterVar par;
  if (cfg.split("tile_c")[0] >= 8) {
    O.fuse({O.axis(0), O.axis(1)}, &par);
  } else {
    O.reorder({O.axis(0), ohs[0], O.axis(1), ows[0], ohs[1], ows[1], O.axis(4)});
    O.fuse({O.axis(0), ohs[0], O.axis(1)}, &par);
  }
  O.parallel(par);
  const bool small = toh[1] * tow[1] <= 64;
  if (small) {
    O.unroll(ohs[1]);
    O.unroll(ows[1]);
  }
  O.vectorize(O.axis(4));

  // The taps run outside the register tile.
  te::Stage A = s[acc];
  A.compute_at(O, ows[0]);
  IterVar kh = A.reduce_axis(0), kw = A.reduce_axis(1);
  A.reorder({kh, kw, A.axis(2), A.axis(3), A.axis(4)});
  if (cfg.choice_bool("unroll_kw")) A.unroll(kw);
  if (cfg.choice_bool("unroll_kh")) A.unroll(kh);
  if (small) {
    A.unroll(A.axis(2));
    A.unroll(A.axis(3));
  }
  A.vectorize(A.axis(4));
}

// --- registration ---

std::vector<ArgumentSpec> conv_arguments(Kind kind) {
  std::vector<ArgumentSpec> args = {tensor_spec("data", 4, "the input [N, C, H, W]")};
  switch (kind) {
    case Kind::Nchw:
    case Kind::Nchwc:
      args.push_back(tensor_spec("kernel", 4, "[OC, C / groups, KH, KW]"));
      break;
    case Kind::Depthwise:
      args.push_back(tensor_spec("kernel", 4, "[C, multiplier, KH, KW]"));
      break;
    case Kind::DepthwiseNchwc:
      args.push_back(tensor_spec("kernel", 4, "[C, 1, KH, KW]"));
      break;
    case Kind::Transpose:
      args.push_back(tensor_spec("kernel", 4, "[C, OC, KH, KW]"));
      break;
  }
  args.push_back({"strides", "int or [int, int]", "[1, 1]", "the stride along H and W"});
  args.push_back({"padding", "int, [int, int] or [int, int, int, int]", "0",
                  "zero padding: all sides, [H, W] on both sides, or [top, left, bottom, right]"});
  if (kind == Kind::Transpose) {
    args.push_back({"output_padding", "int or [int, int]", "[0, 0]",
                    "extra output rows and columns at the bottom and right, below the stride"});
  } else {
    args.push_back({"dilation", "int or [int, int]", "[1, 1]", "the kernel's dilation along H and W"});
  }
  if (kind == Kind::Nchw) args.push_back({"groups", "int", "1", "channel groups; divides C and OC"});
  if (kind == Kind::Nchwc) {
    args.push_back({"ic_bn", "int", "0 (a knob)", "a fixed input channel block; divides C"});
    args.push_back({"oc_bn", "int", "0 (a knob)", "a fixed output channel block; divides OC"});
  }
  if (kind == Kind::DepthwiseNchwc) args.push_back({"c_bn", "int", "0 (a knob)", "a fixed channel block; divides C"});
  args.push_back(out_dtype_spec());
  args.push_back(epilogue_spec());
  return args;
}

Json conv_example(Kind kind) {
  auto t = [](std::vector<int64_t> shape) {
    return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
  };
  switch (kind) {
    case Kind::Nchw:
    case Kind::Nchwc:
      return Json::object({{"data", t({1, 16, 14, 14})}, {"kernel", t({32, 16, 3, 3})}, {"padding", 1}});
    case Kind::Depthwise:
    case Kind::DepthwiseNchwc:
      return Json::object({{"data", t({1, 16, 14, 14})}, {"kernel", t({16, 1, 3, 3})}, {"padding", 1}});
    case Kind::Transpose:
      break;
  }
  return Json::object({{"data", t({1, 16, 7, 7})}, {"kernel", t({16, 8, 3, 3})}, {"strides", 2}, {"padding", 1}});
}

Template conv_template(const std::string &name, Kind kind, const std::string &summary) {
  Template t;
  t.name = name;
  // depthwise_conv2d_nchwc 2: the skip_padding knob (border and interior regions); conv2d_nchwc 2:
  // the prefetch_weights knob.
  t.version = kind == Kind::DepthwiseNchwc || kind == Kind::Nchwc ? 2 : 1;
  t.summary = summary;
  t.arguments = conv_arguments(kind);
  t.example = conv_example(kind);
  t.canonicalize = [name, kind](const Json &a) { return canonical(parse(name, kind, a)); };
  t.flop = [name, kind](const Json &a) { return flop(parse(name, kind, a)); };
  if (kind == Kind::DepthwiseNchwc) {
    t.define_space = [name](ConfigSpace &s, const Json &a, const Target &tg) {
      define_depthwise_nchwc_space(s, parse(name, Kind::DepthwiseNchwc, a), tg);
    };
    t.default_config = [name](const ConfigSpace &s, const Json &a, const Target &tg) {
      return default_depthwise_nchwc(s, parse(name, Kind::DepthwiseNchwc, a), tg);
    };
    t.compute = [name](const Json &a, const Config &cfg) {
      return depthwise_nchwc_compute(parse(name, Kind::DepthwiseNchwc, a), cfg.split("tile_c").back(),
                                     cfg.choice_bool("skip_padding"));
    };
    t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
      schedule_depthwise_nchwc(s, c, cfg);
    };
  } else if (kind == Kind::Nchwc) {
    t.define_space = [name](ConfigSpace &s, const Json &a, const Target &) {
      define_nchwc_space(s, parse(name, Kind::Nchwc, a));
    };
    t.default_config = [name](const ConfigSpace &s, const Json &a, const Target &tg) {
      return default_nchwc(s, parse(name, Kind::Nchwc, a), tg);
    };
    t.compute = [name](const Json &a, const Config &cfg) {
      return nchwc_compute(parse(name, Kind::Nchwc, a), blocks_of(cfg));
    };
    t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
      schedule_nchwc(s, c, cfg, cfg.has("tile_oh"));
    };
  } else {
    t.define_space = [name, kind](ConfigSpace &s, const Json &a, const Target &) {
      define_nchw_space(s, parse(name, kind, a));
    };
    t.default_config = [name, kind](const ConfigSpace &s, const Json &a, const Target &tg) {
      return default_nchw(s, parse(name, kind, a), tg);
    };
    t.compute = [name, kind](const Json &a, const Config &) { return nchw_compute(parse(name, kind, a)); };
    t.schedule = [kind](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
      schedule_nchw(s, c, cfg, kind);
    };
  }
  return t;
}

}  // namespace

namespace detail {

ConvWindow window_arg(const std::string &tmpl, const Json &args, const std::vector<int64_t> &default_strides) {
  const std::vector<int64_t> strides = ints_arg(tmpl, args, "strides", 2, default_strides);
  const std::vector<int64_t> dilation = ints_arg(tmpl, args, "dilation", 2, {1, 1});
  const std::vector<int64_t> padding = padding_arg(tmpl, args);
  ConvWindow w;
  w.sh = strides[0];
  w.sw = strides[1];
  w.dh = dilation[0];
  w.dw = dilation[1];
  w.pt = padding[0];
  w.pl = padding[1];
  w.pb = padding[2];
  w.pr = padding[3];
  if (w.sh < 1 || w.sw < 1) bad_args(tmpl, "strides must be positive");
  if (w.dh < 1 || w.dw < 1) bad_args(tmpl, "dilation must be positive");
  for (int64_t x : padding) {
    if (x < 0) bad_args(tmpl, "padding must not be negative");
  }
  return w;
}

int64_t tile_columns(int64_t width, int64_t cap) {
  const int64_t d = largest_divisor_at_most(width, cap);
  if (width <= cap || 2 * d > cap) return d;
  int64_t p = 1;
  while (2 * p <= cap) p *= 2;
  return p;
}

}  // namespace detail

void register_conv2d_templates(Registry &r) {
  r.add(conv_template("conv2d_nchw.x86", Kind::Nchw, "direct 2-D convolution in NCHW (groups, stride, dilation)"));
  r.add(conv_template("conv2d_nchwc.x86", Kind::Nchwc,
                      "2-D convolution in the blocked NCHW[x]c layout; the block sizes are knobs"));
  r.add(conv_template("depthwise_conv2d_nchw.x86", Kind::Depthwise,
                      "depthwise 2-D convolution in NCHW with a channel multiplier"));
  r.add(conv_template("depthwise_conv2d_nchwc.x86", Kind::DepthwiseNchwc,
                      "depthwise 2-D convolution in the blocked NCHW[x]c layout; the block size is a knob"));
  r.add(conv_template("conv2d_transpose_nchw.x86", Kind::Transpose, "transposed 2-D convolution in NCHW"));
}

}  // namespace kiln::ops
