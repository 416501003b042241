// Pooling templates for x86, in NCHW (rank-4 data) or a blocked NCHW[x]c layout (rank 5):
//   pool2d.x86         max or average pooling with kernel, stride, padding, dilation, ceil_mode and
//                      count_include_pad (average pooling needs float data);
//   global_pool2d.x86  max or average over the whole H x W plane.
// Schedule: (batch, channel, row) fused and parallel; a run of output columns (NCHW) or the
// channel block (NCHWc) vectorized (global NCHW pooling: the plane as one contiguous vectorized
// reduction per channel, or, transposed, into 4 partial sums per plane added across a vector of
// planes, each plane read in vectors of 4 or, wide, in full vectors halved down to 4); the window
// reduction runs outside the vector, computed at the
// output tile together with the division and the epilogue. NCHW windows taller than a row may be
// separable: the kernel rows reduced into a row buffer next to the output row, then its columns.
#include <algorithm>

#include "compiler/ir/op.h"
#include "compiler/ops/conv_common.h"
#include "compiler/ops/generic_schedule.h"
#include "compiler/ops/templates.h"

namespace kiln::ops {

namespace {

using autotune::Config;
using autotune::ConfigSpace;
using autotune::SplitPolicy;
using contracts::Json;
using namespace detail;
using namespace ir;

Expr i32(int64_t v) { return Expr(static_cast<int>(v)); }

// The window's strides, padding and dilation (ConvWindow), and its size.
struct Pool : ConvWindow {
  std::string tmpl;
  bool global = false;
  bool is_max = true;
  TensorArg data;
  bool blocked = false;
  int64_t N = 0, C = 0, H = 0, W = 0, CB = 1;
  int64_t kh = 1, kw = 1;
  bool ceil_mode = false, count_include_pad = false;
  int64_t OH = 1, OW = 1;
  Json epilogue;
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d, bool ceil_mode) {
  const int64_t span = in + p0 + p1 - ((k - 1) * d + 1);
  if (span < 0) return 0;
  int64_t o = (ceil_mode ? ceil_div(span, s) : span / s) + 1;
  // A window must start inside the input or the leading padding.
  if (ceil_mode && (o - 1) * s >= in + p0) --o;
  return o;
}

Pool parse(const std::string &tmpl, bool global, const Json &args) {
  Pool p;
  p.tmpl = tmpl;
  p.global = global;
  if (global) {
    check_keys(tmpl, args, {"data", "pool_type", "epilogue"});
  } else {
    check_keys(tmpl, args,
               {"data", "pool_type", "kernel", "strides", "padding", "dilation", "ceil_mode", "count_include_pad",
                "epilogue"});
  }
  p.data = tensor_arg(tmpl, args, "data", -1);
  if (p.data.shape.size() != 4 && p.data.shape.size() != 5) {
    bad_args(tmpl, "data must be NCHW (rank 4) or NCHW[x]c (rank 5)");
  }
  p.blocked = p.data.shape.size() == 5;
  p.N = p.data.shape[0];
  p.C = p.data.shape[1];
  p.H = p.data.shape[2];
  p.W = p.data.shape[3];
  p.CB = p.blocked ? p.data.shape[4] : 1;
  const std::string type = string_arg(tmpl, args, "pool_type", "max");
  if (type != "max" && type != "avg") bad_args(tmpl, "pool_type must be \"max\" or \"avg\"");
  p.is_max = type == "max";
  if (!p.is_max && !p.data.dtype.is_float()) bad_args(tmpl, "average pooling needs float data");
  if (global) {
    p.kh = p.H;
    p.kw = p.W;
  } else {
    const std::vector<int64_t> k = ints_arg(tmpl, args, "kernel", 2, {});
    if (k.empty()) bad_args(tmpl, "missing \"kernel\"");
    p.kh = k[0];
    p.kw = k[1];
    if (p.kh < 1 || p.kw < 1) bad_args(tmpl, "kernel must be positive");
    // Strides default to the kernel: windows side by side.
    static_cast<ConvWindow &>(p) = window_arg(tmpl, args, k);
    if (p.pt >= (p.kh - 1) * p.dh + 1 || p.pb >= (p.kh - 1) * p.dh + 1 || p.pl >= (p.kw - 1) * p.dw + 1 ||
        p.pr >= (p.kw - 1) * p.dw + 1) {
      bad_args(tmpl, "padding must be smaller than the (dilated) window");
    }
    p.ceil_mode = bool_arg(tmpl, args, "ceil_mode", false);
    p.count_include_pad = bool_arg(tmpl, args, "count_include_pad", false);
    p.OH = out_size(p.H, p.kh, p.sh, p.pt, p.pb, p.dh, p.ceil_mode);
    p.OW = out_size(p.W, p.kw, p.sw, p.pl, p.pr, p.dw, p.ceil_mode);
    if (p.OH < 1 || p.OW < 1) bad_args(tmpl, "the output would be empty");
  }
  p.epilogue = canonical_epilogue(args.get_or("epilogue", Json::array()), p.data.dtype, "workload " + tmpl);
  return p;
}

Json canonical(const Pool &p) {
  Json j =
      Json::object({{"data", tensor_json(p.data)}, {"pool_type", p.is_max ? "max" : "avg"}, {"epilogue", p.epilogue}});
  if (!p.global) {
    j.set("kernel", Json::array_of(std::vector<int64_t>{p.kh, p.kw}));
    j.set("strides", Json::array_of(std::vector<int64_t>{p.sh, p.sw}));
    j.set("padding", Json::array_of(std::vector<int64_t>{p.pt, p.pl, p.pb, p.pr}));
    j.set("dilation", Json::array_of(std::vector<int64_t>{p.dh, p.dw}));
    j.set("ceil_mode", p.ceil_mode);
    j.set("count_include_pad", p.count_include_pad);
  }
  return j;
}

std::vector<int64_t> out_shape(const Pool &p) {
  std::vector<int64_t> s = {p.N, p.C, p.OH, p.OW};
  if (p.blocked) s.push_back(p.CB);
  return s;
}

double flop(const Pool &p) {
  double out = static_cast<double>(p.N * p.C * p.CB * p.OH * p.OW);
  return out * static_cast<double>(p.kh * p.kw) + (p.is_max ? 0.0 : out) + epilogue_flop(p.epilogue, out);
}

// The number of window taps along one dimension that fall in [lo, hi) for output position o.
Expr taps(const Expr &o, int64_t k, int64_t s, int64_t d, int64_t p, int64_t lo, int64_t hi) {
  Expr n;
  for (int64_t t = 0; t < k; ++t) {
    Expr pos = o * i32(s) + i32(t * d - p);
    Expr one = select(pos >= i32(lo) && pos < i32(hi), Expr(1), Expr(0));
    n = n.defined() ? n + one : one;
  }
  return n;
}

// Whether the window reduction may run as two: over the kernel rows into a row buffer, then over
// the columns of that buffer (NCHW, a window taller than one row).
bool separable_form(const Pool &p) { return !p.global && !p.blocked && p.kh > 1; }

// Whether the separable form may read the padding inline under likely() bounds, so that lowering
// splits the row stage's vector blocks into border blocks (guarded) and interior ones (unguarded).
bool interior_form(const Pool &p) { return separable_form(p) && (p.pl || p.pr || p.pt || p.pb || p.ceil_mode); }

Compute pool_compute(const Pool &p, bool separable, bool interior) {
  Compute r;
  te::Tensor data = te::placeholder(p.data.shape_exprs(), p.data.dtype, "data");
  r.inputs = {data};
  const DataType dt = p.data.dtype;
  // Rows and columns past the declared padding that ceil_mode windows reach.
  const int64_t eb = std::max(p.pb, (p.OH - 1) * p.sh + (p.kh - 1) * p.dh + 1 - p.H - p.pt);
  const int64_t er = std::max(p.pr, (p.OW - 1) * p.sw + (p.kw - 1) * p.dw + 1 - p.W - p.pl);
  std::vector<int64_t> before = {0, 0, p.pt, p.pl}, after = {0, 0, eb, er};
  if (p.blocked) {
    before.push_back(0);
    after.push_back(0);
  }
  // Max pooling's padding is -inf for floats (ONNX: padding is ignored), the lowest value else.
  const Expr pad_value = p.is_max ? negative_infinity_or_lowest(dt) : make_zero(dt);
  interior = interior && separable;
  te::Tensor src = interior ? data : pad(data, before, after, "data.pad", pad_value);
  if (src != data) r.parts["pad"] = src;
  te::IterVar rh = te::reduce_axis(i32(p.kh), "rh"), rw = te::reduce_axis(i32(p.kw), "rw");
  std::vector<Expr> shape;
  for (int64_t d : out_shape(p)) shape.push_back(i32(d));
  const bool is_max = p.is_max, blocked = p.blocked;
  const int64_t sh = p.sh, sw = p.sw, dh = p.dh, dw = p.dw;
  te::Tensor red;
  if (separable) {
    // rows[n, c, oh, x]: the window's rows reduced, for every column of the padded input. Read
    // in place (interior), the row is as wide as a whole number of 16 columns (the columns past
    // the padded input are padding), so that the row stage's last vector block is whole, its
    // stores unguarded: guarded, the block's kernel rows went through memory one masked store
    // and load at a time (LLVM keeps no masked value in registers).
    const int64_t padded = p.W + p.pl + er, width = interior ? ceil_div(padded, 16) * 16 : padded;
    std::vector<Expr> rshape = {i32(p.N), i32(p.C), i32(p.OH), i32(width)};
    const int64_t pt = p.pt, pl = p.pl, H = p.H, W = p.W;
    te::Tensor rows = te::compute(rshape, te::FCompute([=](const std::vector<Var> &i) {
                                    std::vector<Expr> idx = {i[0], i[1], i[2] * i32(sh) + rh->var * i32(dh), i[3]};
                                    Expr v = src(idx);
                                    if (interior) {
                                      // The input read in place: inside the input under likely().
                                      Expr y = idx[2] - i32(pt), x = idx[3] - i32(pl);
                                      v = if_then_else(likely(y >= i32(0) && y < i32(H) && x >= i32(0) && x < i32(W)),
                                                       data({i[0], i[1], y, x}), pad_value);
                                    }
                                    return is_max ? max_from_negative_infinity(v, {rh}) : sum_from_negative_zero(v, {rh});
                                  }),
                                  is_max ? "pool_max_rows" : "pool_sum_rows", "pool");
    r.parts["rows"] = rows;
    red = te::compute(shape, te::FCompute([=](const std::vector<Var> &i) {
                        std::vector<Expr> idx = {i[0], i[1], i[2], i[3] * i32(sw) + rw->var * i32(dw)};
                        return is_max ? max_from_negative_infinity(rows(idx), {rw}) : sum_from_negative_zero(rows(idx), {rw});
                      }),
                      is_max ? "pool_max" : "pool_sum", "pool");
  } else {
    red = te::compute(
        shape, te::FCompute([=](const std::vector<Var> &i) {
          std::vector<Expr> idx = {i[0], i[1], i[2] * i32(sh) + rh->var * i32(dh), i[3] * i32(sw) + rw->var * i32(dw)};
          if (blocked) idx.push_back(i[4]);
          return is_max ? max_from_negative_infinity(src(idx), {rh, rw}) : sum_from_negative_zero(src(idx), {rh, rw});
        }),
        is_max ? "pool_max" : "pool_sum", "pool");
  }
  r.parts["anchor"] = red;
  te::Tensor res = red;
  if (!is_max) {
    const Pool q = p;
    res = te::compute(shape, te::FCompute([=](const std::vector<Var> &i) {
                        Expr count;
                        if (q.global) {
                          count = i32(q.H * q.W);
                        } else if (q.count_include_pad) {
                          count = taps(i[2], q.kh, q.sh, q.dh, q.pt, -q.pt, q.H + q.pb) *
                                  taps(i[3], q.kw, q.sw, q.dw, q.pl, -q.pl, q.W + q.pr);
                        } else {
                          count =
                              taps(i[2], q.kh, q.sh, q.dh, q.pt, 0, q.H) * taps(i[3], q.kw, q.sw, q.dw, q.pl, 0, q.W);
                        }
                        return red(exprs(i)) / cast(dt, ir::max(count, Expr(1)));
                      }),
                      "pool_avg", "elemwise");
    r.parts["avg"] = res;
  }
  ChannelMap ch{p.C * p.CB, [blocked, cb = p.CB](const std::vector<Var> &i) {
                  return blocked ? i[1] * i32(cb) + i[4] : Expr(i[1]);
                }};
  r.epilogue = build_epilogue(res, p.epilogue, ch, &r.inputs);
  r.outputs = {r.epilogue.empty() ? res : r.epilogue.back()};
  return r;
}

// The output stage and the reduction stage computed inside its tiles.
OutputAndAcc pool_stages(te::Schedule &s, const Compute &c) {
  inline_epilogue(s, c);
  if (c.has_part("avg")) {
    if (!c.epilogue.empty()) s[c.part("avg")].compute_inline();
    return {c.outputs[0], c.part("anchor")};
  }
  return prepare_anchor(s, c);
}

void define_pool_space(ConfigSpace &s, const Pool &p) {
  s.define_split("tile_ow", p.OW, 2, p.blocked ? SplitPolicy::factors(16) : SplitPolicy::verbose(64));
  s.define_bool("unroll_kw");
  if (!p.global) s.define_bool("unroll_kh");
  if (p.pt || p.pl || p.pb || p.pr || p.ceil_mode) s.define_bool("pad_inline");
  if (separable_form(p)) s.define_bool("separable");
  if (interior_form(p)) s.define_bool("interior");
}

Config default_pool(const ConfigSpace &s, const Pool &p, const Target &t) {
  const int64_t lanes = t.lanes(p.data.dtype);
  // NCHW: a run of output columns along the width, read with contiguous loads (a stride of 2 to 4
  // is a contiguous load and a shuffle); wider strides read with gathers take short runs over a
  // padded copy.
  const bool strided = !p.blocked && p.sw > 1;
  int64_t owi =
      p.blocked ? largest_divisor_at_most(p.OW, 8) : largest_divisor_at_most(p.OW, strided ? lanes : 2 * lanes);
  if (!p.blocked && owi < lanes / 2 && p.OW >= lanes) owi = lanes;
  // Strided: whole vectors, the row's tail split off by loop partitioning, rather than a divisor
  // of the row that is no multiple of a vector (14 of 28 columns: vectors of 8, 4 and 2 lanes).
  if (strided && p.OW >= lanes && owi % lanes != 0) owi = lanes;
  std::vector<std::pair<std::string, Json>> v = {
      {"tile_ow", Json::array_of(std::vector<int64_t>{ceil_div(p.OW, owi), owi})},
      {"unroll_kw", Json(p.kw <= 4 ? 1 : 0)},
      // The direct form's window rows unrolled too for windows of up to 4x4: no loop over them, and
      // the sum's first addition (of the identity) gone, so each output vector is its window's
      // strided loads and their adds in one block.
      {"unroll_kh", Json(p.kh <= 4 && p.kw <= 4 ? 1 : 0)}};
  // Separable where windows overlap along H (a kernel taller than the stride: each input row is
  // read by several output rows' windows, and the row buffer reads it once per output row instead
  // of once per window column); its row stage then reads the padding inline, vectorized along the
  // padded width, rather than from a padded copy of the rows.
  const bool separable = s.has_knob("separable") && p.kh > p.sh;
  if (s.has_knob("separable")) v.emplace_back("separable", Json(separable ? 1 : 0));
  if (s.has_knob("pad_inline")) v.emplace_back("pad_inline", Json(strided && !separable ? 0 : 1));
  // The separable form's row stage in vector blocks with the border blocks split off.
  if (s.has_knob("interior")) v.emplace_back("interior", Json(separable ? 1 : 0));
  return s.from_values(v);
}

void schedule_pool(te::Schedule &s, const Compute &c, const Config &cfg, const Target &t) {
  auto [out, acc] = pool_stages(s, c);
  te::Stage O = s[out];
  const bool blocked = out.ndim() == 5;
  auto ows = autotune::apply_split(O, O.axis(3), cfg.split("tile_ow"));
  std::vector<IterVar> order = {O.axis(0), O.axis(1), O.axis(2), ows[0], ows[1]};
  if (blocked) order.push_back(O.axis(4));
  O.reorder(order);
  IterVar par;
  O.fuse({O.axis(0), O.axis(1), O.axis(2)}, &par);
  O.parallel(par);
  if (blocked) {
    O.unroll(ows[1]);
    O.vectorize(O.axis(4));
  } else {
    O.vectorize(ows[1]);
  }
  te::Stage A = s[acc];
  A.compute_at(O, ows[0]);
  const bool separable = c.has_part("rows");
  if (separable) {
    // The row buffer of one output row, next to it (in L1): the kernel rows reduced, vectorized
    // along the whole padded width; the columns then reduced from it.
    te::Stage R = s[c.part("rows")];
    R.compute_at(O, par);
    if (c.attrs.count("interior")) {
      // Vector blocks, each reducing its kernel rows in registers; the blocks whose columns all
      // lie inside the input lose their bounds checks when lowering partitions the block loop.
      IterVar xo, xi;
      R.split(R.axis(3), static_cast<int>(t.lanes(c.outputs[0].dtype())), &xo, &xi);
      R.reorder({xo, R.reduce_axis(0), xi});
      R.unroll(R.reduce_axis(0));
      R.vectorize(xi);
    } else {
      R.reorder({R.reduce_axis(0), R.axis(3)});
      R.unroll(R.reduce_axis(0));
      R.vectorize(R.axis(3));
    }
    A.reorder({A.reduce_axis(0), A.axis(3)});
    if (cfg.choice_bool("unroll_kw")) A.unroll(A.reduce_axis(0));
  } else {
    std::vector<IterVar> a_order = {A.reduce_axis(0), A.reduce_axis(1), A.axis(3)};
    if (blocked) a_order.push_back(A.axis(4));
    A.reorder(a_order);
    if (cfg.choice_bool("unroll_kw")) A.unroll(A.reduce_axis(1));
    if (cfg.has("unroll_kh") && cfg.choice_bool("unroll_kh")) A.unroll(A.reduce_axis(0));
  }
  if (blocked) {
    A.unroll(A.axis(3));
    A.vectorize(A.axis(4));
  } else {
    A.vectorize(A.axis(3));
  }
  if (c.has_part("pad")) {
    te::Stage P = s[c.part("pad")];
    if (cfg.choice_bool("pad_inline")) {
      P.compute_inline();
    } else {
      // The padded rows one output row reads, made next to it (in L1) rather than a padded copy
      // of the whole input written to memory and read back.
      P.compute_at(O, par);
      P.vectorize(P.axis(blocked ? 4 : 3));
    }
  }
}

// --- global pooling ---

void define_global_space(ConfigSpace &s, const Pool &p, const Target &t) {
  s.define_split("tile_c", p.C, 2, SplitPolicy::factors(64));
  // NCHW: the vector block of each plane's row reduction (a vector, half of one or a quarter).
  if (!p.blocked) {
    const int64_t lanes = t.lanes(p.data.dtype);
    std::vector<int64_t> blocks;
    for (int64_t b = lanes; b >= 1 && b * 4 >= lanes; b /= 2) blocks.push_back(b);
    s.define_choice("block", blocks);
    // Several planes at once: each plane summed into 4 partial sums, then the partial sums of a
    // vector of planes added vertically (stride-4 loads) instead of a tree per plane.
    s.define_bool("transpose");
    // Transposed: each plane first summed in full vectors into one vector of partial sums (a
    // masked tail), which is then folded into the 4 partial sums, rather than read as vectors of 4.
    s.define_bool("wide");
  }
}

Config default_global(const ConfigSpace &s, const Pool &p, const Target &t) {
  if (p.blocked) {
    const int64_t tc = largest_divisor_at_most(p.C, 4);
    return s.from_values({{"tile_c", Json::array_of(std::vector<int64_t>{p.C / tc, tc})}});
  }
  // About 6 KiB of input a parallel chunk (at least 8 planes): small planes in few chunks.
  const int64_t plane = p.H * p.W;
  const int64_t tc = largest_divisor_at_most(p.C, std::max<int64_t>(8, 1600 / plane));
  // A plane shorter than four vectors is summed in half vectors (or less), down to a block four
  // times shorter than the plane: fewer masked lanes and one step less in the tree.
  const int64_t lanes = t.lanes(p.data.dtype);
  int64_t block = lanes;
  while (block * 4 > plane && block * 4 > lanes) block /= 2;
  // Planes under four vectors: transposed, the per-plane trees replaced by vertical adds of a
  // vector of planes' partial sums.
  const bool transpose = plane < 4 * lanes;
  // Planes of at least two vectors: read in full vectors before the fold to 4 partial sums.
  const bool wide = transpose && plane >= 2 * lanes;
  return s.from_values({{"tile_c", Json::array_of(std::vector<int64_t>{p.C / tc, tc})},
                        {"block", Json(block)},
                        {"transpose", Json(transpose ? 1 : 0)},
                        {"wide", Json(wide ? 1 : 0)}});
}

void schedule_global(te::Schedule &s, const Compute &c, const Config &cfg, const Target &t) {
  auto [out, acc] = pool_stages(s, c);
  te::Stage O = s[out];
  const bool blocked = out.ndim() == 5;
  auto cs = autotune::apply_split(O, O.axis(1), cfg.split("tile_c"));
  IterVar par;
  O.fuse(O.axis(0), cs[0], &par);
  O.parallel(par);
  if (blocked) {
    O.vectorize(O.axis(4));
    te::Stage A = s[acc];
    A.compute_at(O, par);
    A.reorder({A.axis(1), A.reduce_axis(0), A.reduce_axis(1), A.axis(4)});
    A.vectorize(A.axis(4));
  } else {
    if (cfg.has("transpose") && cfg.choice_bool("transpose")) {
      // Each plane into 4 partial sums (vectors of 4 along the plane), then the chunk's planes
      // side by side: the 4 partial sums of a vector of planes added vertically.
      te::Stage A = s[acc];
      IterVar k, ko, ki;
      A.fuse({A.reduce_axis(0), A.reduce_axis(1)}, &k);
      // Wide: the plane in full vectors into one vector of partial sums per plane, then halved
      // (its two halves added) down to the 4 partial sums.
      std::vector<te::Tensor> halves;
      const bool wide = cfg.has("wide") && cfg.choice_bool("wide");
      int64_t width = wide ? std::max<int64_t>(t.lanes(acc.dtype()), 4) : 4;
      A.split(k, i32(width), &ko, &ki);
      while (width > 4) {
        halves.push_back(s.rfactor(acc, ki, 4));
        width /= 2;
        A = s[acc];
        A.split(A.reduce_axis(0), i32(width), &ko, &ki);
      }
      te::Tensor rf = s.rfactor(acc, ki, 4);
      te::Stage R = s[rf];
      R.compute_at(O, par);
      IterVar plane = R.axis(1);
      if (wide) {
        // Four planes an iteration: a plane is about 14 instructions, the loop's own are 3.
        IterVar co;
        R.split(R.axis(1), i32(4), &co, &plane);
        R.reorder({co, plane, R.reduce_axis(0), R.axis(4)});
        R.unroll(plane);
      } else {
        R.reorder({R.axis(1), R.reduce_axis(0), R.axis(4)});
      }
      R.vectorize(R.axis(4));
      // Each wider partial sum computed at the plane of the narrower one that reads it.
      te::Stage into = R;
      IterVar at = plane;
      for (auto h = halves.rbegin(); h != halves.rend(); ++h) {
        te::Stage H = s[*h];
        H.compute_at(into, at);
        H.reorder({H.reduce_axis(0), H.axis(4)});
        H.unroll(H.reduce_axis(0));
        H.vectorize(H.axis(4));
        into.unroll(into.reduce_axis(0));
        into = H;
        at = H.axis(1);
      }
      A.compute_at(O, par);
      A.reorder({A.reduce_axis(0), A.axis(1)});
      A.unroll(A.reduce_axis(0));
      A.vectorize(A.axis(1));
      O.vectorize(cs[1]);
    } else {
      // Each channel's plane is contiguous: one vectorized row reduction over it.
      schedule_row_reduction(s, acc, O, par, cfg.choice_int("block"));
    }
  }
}

std::vector<ArgumentSpec> pool_arguments(bool global) {
  std::vector<ArgumentSpec> args = {tensor_spec("data", -1, "NCHW (rank 4) or NCHW[x]c (rank 5)"),
                                    {"pool_type", "\"max\" | \"avg\"", "\"max\"", "the reduction"}};
  if (!global) {
    args.push_back({"kernel", "int or [int, int]", "", "the window along H and W"});
    args.push_back({"strides", "int or [int, int]", "the kernel", "the stride along H and W"});
    args.push_back({"padding", "int, [int, int] or [int, int, int, int]", "0",
                    "padding: all sides, [H, W] on both sides, or [top, left, bottom, right]"});
    args.push_back({"dilation", "int or [int, int]", "[1, 1]", "the window's dilation"});
    args.push_back({"ceil_mode", "bool", "false", "round the output size up"});
    args.push_back({"count_include_pad", "bool", "false", "average over the padding too"});
  }
  args.push_back(epilogue_spec());
  return args;
}

Template pool_template(const std::string &name, bool global, const std::string &summary) {
  Template t;
  t.name = name;
  // global_pool2d version 2: NCHW planes are one vectorized row reduction (no tile_w knob);
  // version 3: the knob block (that reduction's vector block); version 4: the knob transpose;
  // version 5: average pooling's sums start from -0.0 (sum_from_negative_zero); version 6: the
  // knob wide (transposed planes read in full vectors before the fold to 4 partial sums); version 7:
  // max pooling starts from -inf (max_from_negative_infinity).
  // pool2d version 2: the separable knob (NCHW rows reduced into a row buffer, then columns);
  // version 3: the interior knob (the separable row stage's border vector blocks split off);
  // version 4: the unroll_kh knob (the direct form's window rows unrolled); average pooling's sums
  // start from -0.0; version 5: the interior form's row buffer a whole number of 16 columns wide,
  // max pooling from -inf and padded with it.
  t.version = global ? 7 : 5;
  t.summary = summary;
  t.arguments = pool_arguments(global);
  const Json data =
      Json::object({{"shape", Json::array_of(std::vector<int64_t>{1, 16, 14, 14})}, {"dtype", "float32"}});
  t.example = global ? Json::object({{"data", data}})
                     : Json::object({{"data", data}, {"kernel", 3}, {"strides", 2}, {"padding", 1}});
  t.canonicalize = [name, global](const Json &a) { return canonical(parse(name, global, a)); };
  t.flop = [name, global](const Json &a) { return flop(parse(name, global, a)); };
  t.define_space = [name, global](ConfigSpace &s, const Json &a, const Target &tg) {
    Pool p = parse(name, global, a);
    global ? define_global_space(s, p, tg) : define_pool_space(s, p);
  };
  t.default_config = [name, global](const ConfigSpace &s, const Json &a, const Target &tg) {
    Pool p = parse(name, global, a);
    return global ? default_global(s, p, tg) : default_pool(s, p, tg);
  };
  t.compute = [name, global](const Json &a, const Config &cfg) {
    auto on = [&cfg](const char *knob) { return cfg.defined() && cfg.has(knob) && cfg.choice_bool(knob); };
    const bool separable = on("separable"), interior = separable && on("interior");
    Compute c = pool_compute(parse(name, global, a), separable, interior);
    if (interior) c.attrs["interior"] = 1;
    return c;
  };
  t.schedule = [global](te::Schedule &s, const Compute &c, const Config &cfg, const Target &tg) {
    global ? schedule_global(s, c, cfg, tg) : schedule_pool(s, c, cfg, tg);
  };
  return t;
}

}  // namespace

void register_pool_templates(Registry &r) {
  r.add(pool_template("pool2d.x86", false, "max/average 2-D pooling, NCHW or NCHW[x]c"));
  r.add(pool_template("global_pool2d.x86", true, "global max/average pooling, NCHW or NCHW[x]c"));
}

}  // namespace kiln::ops
