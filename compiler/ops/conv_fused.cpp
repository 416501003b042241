// conv1x1_depthwise_nchwc.x86: a 1x1 convolution with its epilogue, then a depthwise convolution
// (multiplier 1) of its result with a second epilogue, as one kernel; the pair that MobileNetV2's
// inverted-residual block opens with (the expansion and the depthwise layer).
//
//   expanded = expand_epilogue(conv1x1(data, expand_kernel))      [N, C, H, W]
//   output   = epilogue(depthwise(expanded, depthwise_kernel))    [N, C, OH, OW]
//
// Layouts as conv2d_nchwc.x86 and depthwise_conv2d_nchwc.x86 use them, with the expanded channel
// block shared by the two: data NCHW[ic_bn]c, expand_kernel [C/c_bn, IC/ic_bn, 1, 1, ic_bn, c_bn],
// depthwise_kernel [C/c_bn, 1, KH, KW, 1, c_bn], output NCHW[c_bn]c. The blocks are knobs
// (tile_ic, tile_c) or fixed by the arguments (ic_bn, c_bn).
//
// Schedule: the output rows are cut into bands (knob tile_band); for each batch, channel block and
// band (fused and parallel) the expanded rows the band's windows read, halo rows included, are
// computed into a buffer of the band (recomputing the halo shared with the next band), and the
// depthwise convolution reads them from there, so the expanded tensor never goes to memory. The
// 1x1 stage accumulates a register tile of expand_cols columns x the channel block over the input
// channels; the depthwise stage a tile of tile_ow columns x the block over the taps, whose taps in
// the padding are skipped.
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

const char *const kName = "conv1x1_depthwise_nchwc.x86";

struct Fused : ConvWindow {
  TensorArg data, expand_kernel, depthwise_kernel;
  int64_t N = 0, IC = 0, C = 0, H = 0, W = 0, KH = 0, KW = 0;
  int64_t OH = 0, OW = 0;
  int64_t ic_bn = 0, c_bn = 0;  // fixed blocks (0: a knob)
  DataType out;
  Json expand_epilogue, epilogue;
};

Expr i32(int64_t v) { return Expr(static_cast<int>(v)); }

Fused parse(const Json &args) {
  const std::string t = kName;
  check_keys(t, args,
             {"data", "expand_kernel", "depthwise_kernel", "strides", "padding", "dilation", "ic_bn", "c_bn",
              "out_dtype", "expand_epilogue", "epilogue"});
  Fused f;
  f.data = tensor_arg(t, args, "data", 4);
  f.expand_kernel = tensor_arg(t, args, "expand_kernel", 4);
  f.depthwise_kernel = tensor_arg(t, args, "depthwise_kernel", 4);
  f.N = f.data.shape[0];
  f.IC = f.data.shape[1];
  f.H = f.data.shape[2];
  f.W = f.data.shape[3];
  if (!f.data.dtype.is_float() || !f.expand_kernel.dtype.is_float() || !f.depthwise_kernel.dtype.is_float()) {
    bad_args(t, "the inputs must be float");
  }
  const auto &ek = f.expand_kernel.shape;
  if (ek[1] != f.IC || ek[2] != 1 || ek[3] != 1) {
    bad_args(t, "expand_kernel must be [C, " + std::to_string(f.IC) + ", 1, 1] (a 1x1 kernel over the data's " +
                    std::to_string(f.IC) + " channels)");
  }
  f.C = ek[0];
  const auto &dk = f.depthwise_kernel.shape;
  if (dk[0] != f.C || dk[1] != 1) {
    bad_args(t, "depthwise_kernel must be [" + std::to_string(f.C) + ", 1, KH, KW] (one filter per expanded channel)");
  }
  f.KH = dk[2];
  f.KW = dk[3];
  static_cast<ConvWindow &>(f) = window_arg(t, args);
  const int64_t eh = (f.KH - 1) * f.dh + 1, ew = (f.KW - 1) * f.dw + 1;
  if (f.H + f.pt + f.pb < eh || f.W + f.pl + f.pr < ew) bad_args(t, "the kernel is larger than the padded input");
  f.OH = (f.H + f.pt + f.pb - eh) / f.sh + 1;
  f.OW = (f.W + f.pl + f.pr - ew) / f.sw + 1;
  f.out = dtype_arg(t, args, "out_dtype", f.data.dtype);
  if (!f.out.is_float()) bad_args(t, "out_dtype must be float");
  f.ic_bn = int_arg(t, args, "ic_bn", 0);
  f.c_bn = int_arg(t, args, "c_bn", 0);
  if (f.ic_bn < 0 || (f.ic_bn && f.IC % f.ic_bn)) bad_args(t, "ic_bn must divide the input channels");
  if (f.c_bn < 0 || (f.c_bn && f.C % f.c_bn)) bad_args(t, "c_bn must divide the expanded channels");
  f.expand_epilogue = canonical_epilogue(args.get_or("expand_epilogue", Json::array()), f.out, "workload " + t);
  if (epilogue_dtype(f.expand_epilogue, f.out) != f.out) {
    bad_args(t, "expand_epilogue must keep the dtype " + f.out.to_string());
  }
  f.epilogue = canonical_epilogue(args.get_or("epilogue", Json::array()), f.out, "workload " + t);
  return f;
}

Json canonical(const Fused &f) {
  Json j = Json::object({{"data", tensor_json(f.data)},
                         {"expand_kernel", tensor_json(f.expand_kernel)},
                         {"depthwise_kernel", tensor_json(f.depthwise_kernel)},
                         {"strides", Json::array_of(std::vector<int64_t>{f.sh, f.sw})},
                         {"padding", Json::array_of(std::vector<int64_t>{f.pt, f.pl, f.pb, f.pr})},
                         {"dilation", Json::array_of(std::vector<int64_t>{f.dh, f.dw})},
                         {"out_dtype", f.out.to_string()},
                         {"expand_epilogue", f.expand_epilogue},
                         {"epilogue", f.epilogue}});
  if (f.ic_bn) j.set("ic_bn", f.ic_bn);
  if (f.c_bn) j.set("c_bn", f.c_bn);
  return j;
}

// The useful work: the two convolutions and their epilogues once each (the halo rows a band
// recomputes are not counted).
double flop(const Fused &f) {
  const double mid = static_cast<double>(f.N * f.C * f.H * f.W);
  const double out = static_cast<double>(f.N * f.C * f.OH * f.OW);
  return 2.0 * mid * static_cast<double>(f.IC) + epilogue_flop(f.expand_epilogue, mid) +
         2.0 * out * static_cast<double>(f.KH * f.KW) + epilogue_flop(f.epilogue, out);
}

// Compute parts: "expand" (the 1x1 accumulation), "expanded" (the last stage of its epilogue, or
// "expand" itself), "anchor" (the depthwise accumulation); Compute::epilogue is the second
// epilogue; the first epilogue's stages are "expand.epilogue.<k>" (attrs "expand_epilogue_stages").
Compute fused_compute(const Fused &f, int64_t icb, int64_t cb) {
  Compute r;
  const int64_t icc = f.IC / icb, cc = f.C / cb;
  te::Tensor data = te::placeholder({i32(f.N), i32(icc), i32(f.H), i32(f.W), i32(icb)}, f.data.dtype, "data");
  te::Tensor ek =
      te::placeholder({i32(cc), i32(icc), i32(1), i32(1), i32(icb), i32(cb)}, f.expand_kernel.dtype, "expand_kernel");
  te::Tensor dk = te::placeholder({i32(cc), i32(1), i32(f.KH), i32(f.KW), i32(1), i32(cb)}, f.depthwise_kernel.dtype,
                                  "depthwise_kernel");
  r.inputs = {data, ek, dk};
  const DataType out = f.out;
  te::IterVar ric = te::reduce_axis(i32(icc), "ic.outer"), rib = te::reduce_axis(i32(icb), "ic.inner");
  te::Tensor expand =
      te::compute({i32(f.N), i32(cc), i32(f.H), i32(f.W), i32(cb)}, te::FCompute([=](const std::vector<Var> &i) {
                    return te::sum(cast(out, data(i[0], ric->var, i[2], i[3], rib->var)) *
                                       cast(out, ek(i[1], ric->var, 0, 0, rib->var, i[4])),
                                   {ric, rib});
                  }),
                  "conv1x1_nchwc", "conv2d");
  ChannelMap ch{f.C, [cb](const std::vector<Var> &i) { return i[1] * i32(cb) + i[4]; }};
  std::vector<te::Tensor> first = build_epilogue(expand, f.expand_epilogue, ch, &r.inputs);
  te::Tensor mid = first.empty() ? expand : first.back();
  r.parts["expand"] = expand;
  r.parts["expanded"] = mid;
  for (size_t k = 0; k < first.size(); ++k) r.parts["expand.epilogue." + std::to_string(k)] = first[k];
  r.attrs["expand_epilogue_stages"] = static_cast<int64_t>(first.size());

  te::IterVar kh = te::reduce_axis(i32(f.KH), "kh"), kw = te::reduce_axis(i32(f.KW), "kw");
  const int64_t sh = f.sh, sw = f.sw, dh = f.dh, dw = f.dw, pt = f.pt, pl = f.pl, H = f.H, W = f.W;
  const bool top = f.pt > 0, bottom = (f.OH - 1) * f.sh + (f.KH - 1) * f.dh - f.pt >= f.H;
  const bool left = f.pl > 0, right = (f.OW - 1) * f.sw + (f.KW - 1) * f.dw - f.pl >= f.W;
  te::Tensor conv = te::compute(
      {i32(f.N), i32(cc), i32(f.OH), i32(f.OW), i32(cb)}, te::FCompute([=](const std::vector<Var> &i) {
        Expr y = i[2] * i32(sh) + kh->var * i32(dh) - i32(pt), x = i[3] * i32(sw) + kw->var * i32(dw) - i32(pl);
        // The taps in the zero padding are skipped: the band buffer holds nothing there.
        Expr cond;
        auto both = [&cond](Expr e) { cond = cond.defined() ? (cond && e) : e; };
        if (top) both(y >= 0);
        if (bottom) both(y < i32(H));
        if (left) both(x >= 0);
        if (right) both(x < i32(W));
        return te::sum(mid(i[0], i[1], y, x, i[4]) * cast(out, dk(i[1], 0, kh->var, kw->var, 0, i[4])), {kh, kw},
                       cond.defined() ? likely(cond) : Expr());
      }),
      "depthwise_conv2d_nchwc", "conv2d");
  r.parts["anchor"] = conv;
  r.epilogue = build_epilogue(conv, f.epilogue, ch, &r.inputs);
  r.outputs = {r.epilogue.empty() ? conv : r.epilogue.back()};
  return r;
}

// tile_ic, tile_c: the input and expanded channel blocks; tile_band: the output rows of a band;
// expand_cols: the columns of the 1x1 stage's register tile (1 to kMaxExpandCols, a tail tile
// where it does not divide the width); tile_ow: the columns of the depthwise stage's register tile.
constexpr int64_t kMaxExpandCols = 16;

// Every inner size from 1 to min(extent, cap), tails allowed: a band or a tile need not divide
// the rows or columns (odd widths such as 7, 14 or 112 / 2 = 56 rows of the strided layers).
SplitPolicy every_size(int64_t extent, int64_t cap) {
  std::vector<std::vector<int64_t>> sizes;
  for (int64_t v = 1; v <= std::min(extent, cap); ++v) sizes.push_back({v});
  return SplitPolicy::candidate(sizes);
}

void define_space(ConfigSpace &s, const Fused &f, const Target &t) {
  s.define_split("tile_ic", f.IC, 2, f.ic_bn ? SplitPolicy::candidate({{f.ic_bn}}) : SplitPolicy::factors());
  s.define_split("tile_c", f.C, 2, f.c_bn ? SplitPolicy::candidate({{f.c_bn}}) : SplitPolicy::factors());
  s.define_split("tile_band", f.OH, 2, every_size(f.OH, 64));
  std::vector<int64_t> cols;
  for (int64_t v = 1; v <= kMaxExpandCols; ++v) cols.push_back(v);
  s.define_choice("expand_cols", cols);
  s.define_split("tile_ow", f.OW, 2, every_size(f.OW, 32));
  const int64_t lanes = t.lanes(f.out), regs = t.vector_registers();
  s.add_constraint("register_tiles_within_" + std::to_string(regs - 2) + "_vectors",
                   {"tile_c", "expand_cols", "tile_ow"}, [lanes, regs](const Config &cfg) {
                     const int64_t nv = ceil_div(cfg.split("tile_c").back(), lanes);
                     return cfg.choice_int("expand_cols") * nv <= regs - 2 &&
                            cfg.split("tile_ow").back() * nv <= regs - 2;
                   });
}

// The expanded rows a band of `rows` output rows reads.
int64_t band_input_rows(const Fused &f, int64_t rows) { return (rows - 1) * f.sh + (f.KH - 1) * f.dh + 1; }

// The widest block of at most two vectors that divides `channels` and is whole vectors or a part of
// one (a block of 24 floats, a vector and a half, is slow in both stages): the blocks the graph's
// layout pass gives these layers.
int64_t vector_block(int64_t channels, int64_t lanes) {
  for (int64_t b = std::min(channels, 2 * lanes); b > 1; --b) {
    if (channels % b == 0 && (b % lanes == 0 || lanes % b == 0)) return b;
  }
  return 1;
}

// Blocks of up to two vectors (as the layout pass gives the two layers) where the channels allow;
// the band as many output rows as keep its expanded rows within about 192 KB (in L2, with the
// halo recomputed a small fraction of the rows); register tiles of 8 (1x1) and up to 10 (depthwise)
// columns of the block.
Config default_config(const ConfigSpace &s, const Fused &f, const Target &t) {
  const int64_t lanes = t.lanes(f.out), regs = t.vector_registers();
  const int64_t icb = f.ic_bn ? f.ic_bn : vector_block(f.IC, lanes);
  const int64_t cb = f.c_bn ? f.c_bn : vector_block(f.C, lanes);
  const int64_t vecs = ceil_div(cb, lanes);
  const int64_t row_bytes = ((f.OW - 1) * f.sw + (f.KW - 1) * f.dw + 1) * cb * f.out.bytes();
  int64_t band = 1;
  while (band < std::min<int64_t>(f.OH, 64) && band_input_rows(f, band + 1) * row_bytes <= 192 * 1024) ++band;
  // Bands of (nearly) equal rows: the parallel loop's iterations then cost the same, where a band
  // of 50 rows and a tail of 6 left one of two threads waiting on the other's last large band.
  band = ceil_div(f.OH, ceil_div(f.OH, band));
  const int64_t budget = std::max<int64_t>(1, (regs - 2) / vecs);
  // The 1x1 stage's columns as conv2d_nchwc's one-row tile picks them: up to 16 accumulators next
  // to the kernel vectors and a broadcast, a divisor of the width (a whole row of a 7 or 14 wide
  // input) unless that wastes half the room.
  const int64_t acc = std::max<int64_t>(1, std::min<int64_t>(16, regs - vecs - 1));
  const int64_t ecols = tile_columns(f.W, std::min<int64_t>(kMaxExpandCols, std::max<int64_t>(1, acc / vecs)));
  const int64_t owi = std::max<int64_t>(1, std::min<int64_t>({f.OW, budget * 2 / 3, 10}));
  return s.from_values({{"tile_ic", Json::array_of(std::vector<int64_t>{f.IC / icb, icb})},
                        {"tile_c", Json::array_of(std::vector<int64_t>{f.C / cb, cb})},
                        {"tile_band", Json::array_of(std::vector<int64_t>{ceil_div(f.OH, band), band})},
                        {"expand_cols", Json(ecols)},
                        {"tile_ow", Json::array_of(std::vector<int64_t>{ceil_div(f.OW, owi), owi})}});
}

void schedule(te::Schedule &s, const Compute &c, const Config &cfg) {
  // The depthwise stage and its epilogue: batch, band and channel block fused and parallel; the
  // rows of a band one at a time, a register tile of columns x the block accumulated over the taps.
  // Bands outside the blocks: threads share out rows, as the 1x1 layers around do, so each reads
  // the rows it wrote in the layer before (conv2d.cpp, rows_outermost_1x1); and a band's input rows,
  // which the expansion reads for every block, stay in the cache from one block to the next.
  auto [out, acc] = prepare_anchor(s, c);
  te::Stage O = s[out];
  const auto band = cfg.split("tile_band"), tow = cfg.split("tile_ow");
  auto ys = autotune::apply_split(O, O.axis(2), band);
  auto xs = autotune::apply_split(O, O.axis(3), tow);
  O.reorder({O.axis(0), ys[0], O.axis(1), ys[1], xs[0], xs[1], O.axis(4)});
  IterVar par;
  O.fuse({O.axis(0), ys[0], O.axis(1)}, &par);
  O.parallel(par);
  O.unroll(xs[1]);
  O.vectorize(O.axis(4));
  te::Stage A = s[acc];
  A.compute_at(O, xs[0]);
  A.reorder({A.reduce_axis(0), A.reduce_axis(1), A.axis(2), A.axis(3), A.axis(4)});
  A.unroll(A.reduce_axis(1));
  A.unroll(A.reduce_axis(0));
  A.unroll(A.axis(2));
  A.unroll(A.axis(3));
  A.vectorize(A.axis(4));

  // The expanded rows of the band, computed at the band: the first epilogue inlined into its last
  // stage, which the 1x1 accumulation is computed into a tile of columns at a time.
  const int64_t stages = c.attrs.at("expand_epilogue_stages");
  for (int64_t k = 0; k + 1 < stages; ++k) s[c.part("expand.epilogue." + std::to_string(k))].compute_inline();
  te::Tensor mid = c.part("expanded"), mid_acc = c.part("expand");
  if (stages == 0) {
    mid_acc = s.cache_write(mid, "global");
  }
  te::Stage M = s[mid];
  M.compute_at(O, par);
  IterVar mxo, mxi;
  M.split(M.axis(3), static_cast<int>(cfg.choice_int("expand_cols")), &mxo, &mxi);
  M.unroll(mxi);
  M.vectorize(M.axis(4));
  te::Stage E = s[mid_acc];
  E.compute_at(M, mxo);
  E.reorder({E.reduce_axis(0), E.reduce_axis(1), E.axis(2), E.axis(3), E.axis(4)});
  E.unroll(E.axis(2));
  E.unroll(E.axis(3));
  E.vectorize(E.axis(4));
}

Compute compute_for(const Json &a, const Config &cfg) {
  return fused_compute(parse(a), cfg.split("tile_ic").back(), cfg.split("tile_c").back());
}

Template fused_template() {
  auto t4 = [](std::vector<int64_t> shape) {
    return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
  };
  Template t;
  t.name = kName;
  // 2: expand_cols takes every value from 1 to 16 (was 1, 2, 4, 6, 8, 12, 16).
  t.version = 2;
  t.summary = "a 1x1 convolution and a depthwise convolution of its result, in NCHW[x]c, as one kernel";
  t.arguments = {tensor_spec("data", 4, "the input [N, IC, H, W]"),
                 tensor_spec("expand_kernel", 4, "the 1x1 kernel [C, IC, 1, 1]"),
                 tensor_spec("depthwise_kernel", 4, "the depthwise kernel [C, 1, KH, KW]"),
                 {"strides", "int or [int, int]", "[1, 1]", "the depthwise stride along H and W"},
                 {"padding", "int, [int, int] or [int, int, int, int]", "0",
                  "the depthwise zero padding: all sides, [H, W] on both sides, or [top, left, bottom, right]"},
                 {"dilation", "int or [int, int]", "[1, 1]", "the depthwise kernel's dilation along H and W"},
                 {"ic_bn", "int", "0 (a knob)", "a fixed input channel block; divides IC"},
                 {"c_bn", "int", "0 (a knob)", "a fixed expanded (and output) channel block; divides C"},
                 out_dtype_spec(),
                 epilogue_spec("elementwise ops fused after the 1x1 convolution (keeping its dtype)"),
                 epilogue_spec("elementwise ops fused after the depthwise convolution")};
  // The first of the two epilogue arguments is the expansion's.
  t.arguments[t.arguments.size() - 2].name = "expand_epilogue";
  t.example = Json::object({{"data", t4({1, 16, 14, 14})},
                            {"expand_kernel", t4({96, 16, 1, 1})},
                            {"depthwise_kernel", t4({96, 1, 3, 3})},
                            {"strides", 2},
                            {"padding", 1}});
  t.canonicalize = [](const Json &a) { return canonical(parse(a)); };
  t.flop = [](const Json &a) { return flop(parse(a)); };
  t.define_space = [](ConfigSpace &s, const Json &a, const Target &tg) { define_space(s, parse(a), tg); };
  t.default_config = [](const ConfigSpace &s, const Json &a, const Target &tg) {
    return default_config(s, parse(a), tg);
  };
  t.compute = compute_for;
  t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) { schedule(s, c, cfg); };
  return t;
}

}  // namespace

void register_fused_conv_templates(Registry &r) { r.add(fused_template()); }

}  // namespace kiln::ops
