// Normalization templates for x86:
//   softmax.x86     softmax (or log-softmax) along one axis of a float tensor;
//   layer_norm.x86  layer normalization over the trailing axes, with optional scale (gamma) and
//                   shift (beta) of the normalized shape.
// Schedule: the dimensions before the normalized ones are fused and parallel; the reductions
// (max and sum; layer norm's sum and sum of squares of the row shifted by its first element, one
// tuple reduction so one reading pass) are computed at that loop, so each row's statistics live in
// a small buffer next to the elementwise stages that use them; the innermost dimensions are
// vectorized; the epilogue is applied in the same loop nest. Softmax along the last axis takes
// `rows` rows a parallel iteration with the loops of each stage over them innermost but for the
// vector, so the rows' chains of dependent instructions interleave (schedule_softmax).
#include <algorithm>
#include <functional>

#include "compiler/ir/op.h"
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

// Vectorizes the run of innermost loops `axes` (fused) of a stage, split by `block`. With
// `unroll`, the loop over the blocks is unrolled by 4 (or 2) vectors where that divides the run:
// the loop's overhead then shares out over several vectors' loads and stores.
void vectorize_run(te::Stage st, const std::vector<IterVar> &axes, int64_t extent, int64_t block, bool unroll = false) {
  if (axes.empty()) return;
  IterVar f;
  st.fuse(axes, &f);
  if (extent <= block) {
    st.vectorize(f);
    return;
  }
  IterVar o, i;
  st.split(f, static_cast<int>(block), &o, &i);
  st.vectorize(i);
  if (!unroll) return;
  for (int64_t u : {4, 2}) {
    if (extent % (block * u) == 0 && extent > block * u) {
      IterVar oo, oi;
      st.split(o, static_cast<int>(u), &oo, &oi);
      st.unroll(oi);
      return;
    }
  }
}

// Moves the loops over the rows `row_axes` of a stage (the rows of one parallel iteration) just
// outside its innermost (vectorized) loop, and unrolls them: the rows' statements are then side by
// side in each iteration over the row's vectors.
void rows_innermost(te::Stage st, const std::vector<IterVar> &row_axes) {
  std::vector<IterVar> order;
  const std::vector<IterVar> &leaves = st->leaf_iter_vars;
  for (const IterVar &iv : leaves) {
    bool is_row = false;
    for (const IterVar &r : row_axes) is_row = is_row || iv.same_as(r);
    if (!is_row && !iv.same_as(leaves.back())) order.push_back(iv);
  }
  order.insert(order.end(), row_axes.begin(), row_axes.end());
  order.push_back(leaves.back());
  st.reorder(order);
  for (const IterVar &r : row_axes) st.unroll(r);
}

// --- softmax ---

struct Softmax {
  TensorArg data;
  int64_t axis = 0;
  bool log = false;
  Json epilogue;
};

Softmax parse_softmax(const std::string &tmpl, const Json &args) {
  check_keys(tmpl, args, {"data", "axis", "log", "epilogue"});
  Softmax s;
  s.data = tensor_arg(tmpl, args, "data", -1);
  if (!s.data.dtype.is_float()) bad_args(tmpl, "softmax needs float data");
  const int64_t rank = static_cast<int64_t>(s.data.shape.size());
  s.axis = int_arg(tmpl, args, "axis", -1);
  if (s.axis < -rank || s.axis >= rank) bad_args(tmpl, "axis is out of range");
  if (s.axis < 0) s.axis += rank;
  s.log = bool_arg(tmpl, args, "log", false);
  s.epilogue = canonical_epilogue(args.get_or("epilogue", Json::array()), s.data.dtype, "workload " + tmpl);
  return s;
}

Json canonical(const Softmax &s) {
  return Json::object({{"data", tensor_json(s.data)}, {"axis", s.axis}, {"log", s.log}, {"epilogue", s.epilogue}});
}

Compute softmax_compute(const Softmax &sm) {
  Compute r;
  te::Tensor x = te::placeholder(sm.data.shape_exprs(), sm.data.dtype, "data");
  r.inputs = {x};
  const size_t a = static_cast<size_t>(sm.axis);
  std::vector<Expr> shape = sm.data.shape_exprs(), rshape = shape;
  rshape.erase(rshape.begin() + static_cast<long>(a));
  if (rshape.empty()) rshape.push_back(Expr(1));
  const bool scalar_rows = shape.size() == 1;
  // An index of x from a reduced index and the axis position.
  auto full = [a, scalar_rows](const std::vector<Var> &ri, Expr k) {
    std::vector<Expr> idx;
    if (!scalar_rows) idx.assign(ri.begin(), ri.end());
    idx.insert(idx.begin() + static_cast<long>(a), std::move(k));
    return idx;
  };
  auto reduced = [a, scalar_rows](const std::vector<Var> &i) {
    if (scalar_rows) return std::vector<Expr>{Expr(0)};
    std::vector<Expr> idx(i.begin(), i.end());
    idx.erase(idx.begin() + static_cast<long>(a));
    return idx;
  };
  te::IterVar k1 = te::reduce_axis(shape[a], "k");
  te::Tensor mx = te::compute(rshape, te::FCompute([=](const std::vector<Var> &i) {
                                return max_from_negative_infinity(x(full(i, k1->var)), {k1});
                              }),
                              "softmax.max", "softmax");
  te::Tensor e =
      te::compute(shape, te::FCompute([=](const std::vector<Var> &i) { return ir::exp(x(exprs(i)) - mx(reduced(i))); }),
                  "softmax.exp", "softmax");
  te::IterVar k2 = te::reduce_axis(shape[a], "k");
  te::Tensor sum = te::compute(rshape, te::FCompute([=](const std::vector<Var> &i) {
                                 return sum_from_negative_zero(e(full(i, k2->var)), {k2});
                               }),
                               "softmax.sum", "softmax");
  const bool log = sm.log;
  te::Tensor out = te::compute(shape, te::FCompute([=](const std::vector<Var> &i) {
                                 if (log) return x(exprs(i)) - mx(reduced(i)) - ir::log(sum(reduced(i)));
                                 // One division per row: the reciprocal is loop-invariant in the row.
                                 return e(exprs(i)) * (make_const(x.dtype(), 1.0) / sum(reduced(i)));
                               }),
                               log ? "log_softmax" : "softmax", "softmax");
  r.parts["max"] = mx;
  r.parts["exp"] = e;
  r.parts["sum"] = sum;
  r.parts["anchor"] = out;
  ChannelMap ch{shape.size() > 1 ? sm.data.shape[1] : sm.data.shape[0],
                [](const std::vector<Var> &i) { return Expr(i[i.size() > 1 ? 1 : 0]); }};
  r.epilogue = build_epilogue(out, sm.epilogue, ch, &r.inputs);
  r.outputs = {r.epilogue.empty() ? out : r.epilogue.back()};
  return r;
}

void define_softmax_space(ConfigSpace &s, const Softmax &sm) {
  const int64_t len = sm.data.shape[static_cast<size_t>(sm.axis)];
  const bool last = sm.axis + 1 == static_cast<int64_t>(sm.data.shape.size());
  if (last) s.define_split("tile_k", len, 2, SplitPolicy::verbose(64));
  if (!sm.log) s.define_bool("exp_inline");
  // The exps stored and summed in one loop over the row (schedule_softmax); 0 is version 3's two.
  if (last && !sm.log) s.define_bool("one_pass");
  // Rows a parallel iteration along the last axis, their stages interleaved (schedule_softmax).
  if (last && sm.axis > 0) s.define_choice("rows", {1, 2, 4, 8, 16});
}

// The rows a parallel iteration interleaves by default: short rows are latency bound (the chain
// max -> tree -> exps -> sum -> tree -> division of one row), so several rows' chains side by side
// fill the out-of-order window; a long row has enough independent work of its own. No more rows
// than the dimension before the axis has (the block's rows past it are skipped, not computed).
int64_t softmax_default_rows(const Softmax &sm, const Target &t) {
  const int64_t len = sm.data.shape[static_cast<size_t>(sm.axis)];
  const int64_t dim = sm.data.shape[static_cast<size_t>(sm.axis - 1)];
  const int64_t vectors = ceil_div(len, t.lanes(sm.data.dtype));
  // By the row's vectors, the same at 8 and 16 lanes: 8 rows of up to 4 vectors, 4 of 5 to 8, one
  // row of more. Measured on Zen 3 (AVX2; more rows' vectors spill its 16 registers) and on Zen 4
  // and Zen 5 (AVX-512, where rows of 8 vectors ran 4-10 % faster 4 at a time than 8, and rows of 16
  // vectors 10-18 % faster one at a time than 4).
  if (vectors > 8) return 1;
  int64_t rows = vectors <= 4 ? 8 : 4;
  while (rows > dim) rows /= 2;
  return rows;
}

Config default_softmax(const ConfigSpace &s, const Softmax &sm, const Target &t) {
  std::vector<std::pair<std::string, Json>> v;
  if (s.has_knob("tile_k")) {
    const int64_t len = sm.data.shape[static_cast<size_t>(sm.axis)];
    const int64_t lanes = t.lanes(sm.data.dtype);
    int64_t b = std::min(len, lanes);
    v.emplace_back("tile_k", Json::array_of(std::vector<int64_t>{ceil_div(len, b), b}));
  }
  if (s.has_knob("exp_inline")) v.emplace_back("exp_inline", Json(0));
  if (s.has_knob("one_pass")) v.emplace_back("one_pass", Json(1));
  if (s.has_knob("rows")) v.emplace_back("rows", Json(softmax_default_rows(sm, t)));
  return s.from_values(v);
}

void schedule_softmax(te::Schedule &s, const Compute &c, const Config &cfg) {
  inline_epilogue(s, c);
  const te::Tensor &anchor = c.part("anchor");
  if (!c.epilogue.empty()) s[anchor].compute_inline();
  te::Tensor out = c.outputs[0];
  te::Stage O = s[out];
  const int nd = out.ndim();
  const int axis = static_cast<int>(c.attrs.at("axis"));
  const bool last = axis == nd - 1;
  const bool exp_inline = cfg.has("exp_inline") && cfg.choice_bool("exp_inline");
  const bool has_exp = cfg.has("exp_inline");  // softmax (not log-softmax) reads the exp stage
  auto extent = [&](int from, int to) {
    int64_t n = 1;
    for (int d = from; d < to; ++d) n *= as_const_int(out.shape()[static_cast<size_t>(d)]).value_or(1);
    return n;
  };
  const int64_t block = last ? cfg.split("tile_k")[1] : 64;
  // Rows a parallel iteration (along the last axis): every stage runs over all of them with the
  // loop over the rows inside its loop over the row's vectors (unrolled), so the rows' chains of
  // dependent instructions (reduction, tree, exps, division) interleave in one loop body.
  const int64_t rows = cfg.has("rows") ? cfg.choice_int("rows") : 1;
  const bool interleave = last && axis > 0 && rows > 1;
  IterVar par, rows_inner;
  if (axis > 0) {
    std::vector<IterVar> pre;
    for (int d = 0; d < axis; ++d) pre.push_back(O.axis(static_cast<size_t>(d)));
    if (interleave) {
      // The split is of the last dimension before the axis, not of the fused rows, so that the
      // stages' bounds at the parallel loop are the block's rows.
      IterVar ro, ri;
      O.split(pre.back(), static_cast<int>(rows), &ro, &ri);
      pre.back() = ro;
      rows_inner = ri;
    }
    O.fuse(pre, &par);
    O.parallel(par);
  }
  // Output: vectorize the run after the axis, or the axis itself when it is last.
  {
    std::vector<IterVar> run;
    for (int d = last ? axis : axis + 1; d < nd; ++d) run.push_back(O.axis(static_cast<size_t>(d)));
    vectorize_run(O, run, extent(last ? axis : axis + 1, nd), block, true);
  }
  if (interleave) rows_innermost(O, {rows_inner});
  te::Stage M = s[c.part("max")], S = s[c.part("sum")], E = s[c.part("exp")];
  // One pass (one_pass): the sum's loop also computes the exps, whose registers its accumulators
  // share, so with interleaved rows (independent chains already) each row has one accumulator
  // (two for two rows).
  const int64_t sum_accumulators = interleave ? std::max<int64_t>(1, 4 / rows) : 4;
  const bool one_pass = last && has_exp && !exp_inline && cfg.has("one_pass") && cfg.choice_bool("one_pass") &&
                        ceil_div(extent(axis, nd), row_reduction_width(extent(axis, nd), block, sum_accumulators)) > 1;
  // The exp stage first: compute_at needs the attach stage to read the producer already, and the
  // max stage is read through it.
  if (!has_exp || exp_inline) {
    E.compute_inline();
  } else {
    if (par.defined()) E.compute_at(O, par);
    std::vector<IterVar> run;
    std::vector<IterVar> row_axes;
    for (int d = 0; d < axis; ++d) row_axes.push_back(E.axis(static_cast<size_t>(d)));
    for (int d = last ? axis : axis + 1; d < nd; ++d) run.push_back(E.axis(static_cast<size_t>(d)));
    // One pass: the exp's loop over the row in the sum's steps (the width of its accumulators, one
    // vector store of that width an iteration, the rows inside), fused with the sum's loop, which
    // then reads each exp just stored rather than the row again.
    const int64_t len = extent(axis, nd), width = row_reduction_width(len, block, sum_accumulators);
    if (one_pass) {
      IterVar f, o, i;
      E.fuse(run, &f);
      E.split(f, static_cast<int>(width), &o, &i);
      E.vectorize(i);
      if (interleave) rows_innermost(E, row_axes);
      E.fuse_with_next(o);
    } else {
      vectorize_run(E, run, extent(last ? axis : axis + 1, nd), block, true);
      if (interleave) rows_innermost(E, row_axes);
    }
  }
  for (te::Stage st : {M, S}) {
    // Reduction outside the vectorized trailing dimensions (when there are any).
    const int rnd = static_cast<int>(st->op->output_shape(0).size());
    const bool scalar_rows = nd == 1;
    std::vector<IterVar> post;
    if (!scalar_rows) {
      for (int d = axis; d < rnd; ++d) post.push_back(st.axis(static_cast<size_t>(d)));
    }
    if (!post.empty()) {
      if (par.defined()) st.compute_at(O, par);
      std::vector<IterVar> order = {st.reduce_axis(0)};
      order.insert(order.end(), post.begin(), post.end());
      st.reorder(order);
      vectorize_run(st, post, extent(axis + 1, nd), 64);
    } else {
      const bool sum = st.get() == S.get();
      schedule_row_reduction(s, st->origin_op->output(0), O, par, block, interleave,
                             sum && one_pass ? sum_accumulators : 4);
    }
  }
}

// --- layer norm ---

struct LayerNorm {
  TensorArg data;
  int64_t first = 0;  // first normalized dimension
  double epsilon = 1e-5;
  bool scale = true, center = true;
  Json epilogue;
};

LayerNorm parse_layer_norm(const std::string &tmpl, const Json &args) {
  check_keys(tmpl, args, {"data", "axes", "epsilon", "scale", "center", "epilogue"});
  LayerNorm l;
  l.data = tensor_arg(tmpl, args, "data", -1);
  if (!l.data.dtype.is_float()) bad_args(tmpl, "layer_norm needs float data");
  const int64_t rank = static_cast<int64_t>(l.data.shape.size());
  std::vector<int64_t> axes = {-1};
  if (const Json *a = args.find("axes")) {
    axes = a->is_int() ? std::vector<int64_t>{a->as_int()}
                       : ints_arg(tmpl, args, "axes", a->is_array() ? a->size() : 1, {});
  }
  if (axes.empty()) bad_args(tmpl, "axes must not be empty");
  for (auto &x : axes) {
    if (x < -rank || x >= rank) bad_args(tmpl, "axes are out of range");
    if (x < 0) x += rank;
  }
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] != rank - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(i)) {
      bad_args(tmpl, "axes must be the trailing dimensions");
    }
  }
  l.first = axes[0];
  if (const Json *e = args.find("epsilon")) {
    if (!e->is_number() || e->as_double() < 0) bad_args(tmpl, "epsilon must be a non-negative number");
    l.epsilon = e->as_double();
  }
  l.scale = bool_arg(tmpl, args, "scale", true);
  l.center = bool_arg(tmpl, args, "center", true);
  l.epilogue = canonical_epilogue(args.get_or("epilogue", Json::array()), l.data.dtype, "workload " + tmpl);
  return l;
}

Json canonical(const LayerNorm &l) {
  std::vector<int64_t> axes;
  for (int64_t d = l.first; d < static_cast<int64_t>(l.data.shape.size()); ++d) axes.push_back(d);
  return Json::object({{"data", tensor_json(l.data)},
                       {"axes", Json::array_of(axes)},
                       {"epsilon", l.epsilon},
                       {"scale", l.scale},
                       {"center", l.center},
                       {"epilogue", l.epilogue}});
}

int64_t norm_size(const LayerNorm &l) {
  int64_t n = 1;
  for (size_t d = static_cast<size_t>(l.first); d < l.data.shape.size(); ++d) n *= l.data.shape[d];
  return n;
}

// The extent of the last dimension before the normalized ones (1 where there is none): the rows
// tile_rows blocks.
int64_t norm_rows(const LayerNorm &l) { return l.first > 0 ? l.data.shape[static_cast<size_t>(l.first - 1)] : 1; }

Compute layer_norm_compute(const LayerNorm &l, bool one_pass) {
  Compute r;
  te::Tensor x = te::placeholder(l.data.shape_exprs(), l.data.dtype, "data");
  r.inputs = {x};
  const size_t first = static_cast<size_t>(l.first), nd = l.data.shape.size();
  std::vector<Expr> shape = l.data.shape_exprs();
  std::vector<Expr> pre(shape.begin(), shape.begin() + static_cast<long>(first));
  std::vector<Expr> norm(shape.begin() + static_cast<long>(first), shape.end());
  const bool no_pre = pre.empty();
  if (no_pre) pre.push_back(Expr(1));
  te::Tensor gamma, beta;
  if (l.scale) {
    gamma = te::placeholder(norm, l.data.dtype, "gamma");
    r.inputs.push_back(gamma);
  }
  if (l.center) {
    beta = te::placeholder(norm, l.data.dtype, "beta");
    r.inputs.push_back(beta);
  }
  const DataType dt = l.data.dtype;
  const Expr inv_n = make_const(dt, 1.0 / static_cast<double>(norm_size(l)));
  const Expr eps = make_const(dt, l.epsilon);
  auto row = [no_pre](const std::vector<Var> &i, size_t first_dim) {
    if (no_pre) return std::vector<Expr>{Expr(0)};
    return std::vector<Expr>(i.begin(), i.begin() + static_cast<long>(first_dim));
  };
  auto make_axes = [&](const char *prefix) {
    std::vector<te::IterVar> ax;
    for (size_t d = first; d < nd; ++d) ax.push_back(te::reduce_axis(shape[d], prefix + std::to_string(d - first)));
    return ax;
  };
  auto x_at = [x, no_pre](const std::vector<Var> &i, const std::vector<te::IterVar> &ax) {
    std::vector<Expr> idx;
    if (!no_pre) idx.assign(i.begin(), i.end());
    for (const auto &a : ax) idx.push_back(a->var);
    return x(idx);
  };
  // The row's mean and 1 / sqrt(variance + epsilon), as expressions of the row's index.
  std::function<Expr(const std::vector<Expr> &)> mean_of, rstd_of;
  if (one_pass) {
    // The statistics in one reading pass: the sum and the sum of squares of the row shifted by its
    // first element, one tuple reduction (one loop, so one read of the row). The shift keeps the
    // variance of data with a large mean accurate: the shifted values are of the order of the
    // spread, not of the mean, so S2 / n - (S1 / n)^2 does not cancel catastrophically.
    std::vector<te::IterVar> ax = make_axes("k");
    auto shift_at = [x, no_pre, first, nd](const std::vector<Expr> &i) {
      std::vector<Expr> idx;
      if (!no_pre) idx.assign(i.begin(), i.end());
      for (size_t d = first; d < nd; ++d) idx.push_back(Expr(0));
      return x(idx);
    };
    // The identity -0.0, as sum_from_negative_zero's: no addition of the identity at the start of
    // the accumulators and of each level of the reduction tree, on the row's critical path.
    const Expr neg_zero = make_const(dt, -0.0);
    std::vector<te::Tensor> stats = te::compute_multi(
        pre,
        [=](const std::vector<Var> &i) {
          Expr d = x_at(i, ax) - shift_at(exprs(i));
          return te::tuple_reduce(
              [](const std::vector<Var> &l, const std::vector<Var> &r) {
                return std::vector<Expr>{l[0] + r[0], l[1] + r[1]};
              },
              {neg_zero, neg_zero}, {d, d * d}, ax);
        },
        "layer_norm.stats", "layer_norm");
    te::Tensor s1 = stats[0], s2 = stats[1];
    // The mean of the shifted row; the row's mean and variance from it.
    mean_of = [=](const std::vector<Expr> &rw) { return shift_at(rw) + s1(rw) * inv_n; };
    rstd_of = [=](const std::vector<Expr> &rw) {
      Expr m = s1(rw) * inv_n;
      return ir::rsqrt(ir::max(s2(rw) * inv_n - m * m, make_zero(dt)) + eps);
    };
    r.parts["stats"] = s1;
  } else {
    // Two passes (the parts the CUDA template schedules): the sum, then the centred sum of squares.
    std::vector<te::IterVar> ax1 = make_axes("k");
    te::Tensor s1 = te::compute(
        pre, te::FCompute([=](const std::vector<Var> &i) { return sum_from_negative_zero(x_at(i, ax1), ax1); }),
        "layer_norm.sum", "layer_norm");
    te::Tensor mean = te::compute(pre, te::FCompute([=](const std::vector<Var> &i) { return s1(exprs(i)) * inv_n; }),
                                  "layer_norm.mean", "layer_norm");
    std::vector<te::IterVar> ax2 = make_axes("j");
    te::Tensor s2 = te::compute(pre, te::FCompute([=](const std::vector<Var> &i) {
                                  Expr d = x_at(i, ax2) - mean(exprs(i));
                                  return sum_from_negative_zero(d * d, ax2);
                                }),
                                "layer_norm.var", "layer_norm");
    mean_of = [=](const std::vector<Expr> &rw) { return mean(rw); };
    rstd_of = [=](const std::vector<Expr> &rw) { return ir::rsqrt(s2(rw) * inv_n + eps); };
    r.parts["sum"] = s1;
    r.parts["mean"] = mean;
    r.parts["var"] = s2;
  }
  te::Tensor out = te::compute(shape, te::FCompute([=](const std::vector<Var> &i) {
                                 std::vector<Expr> rw = row(i, first);
                                 std::vector<Expr> ni(i.begin() + static_cast<long>(first), i.end());
                                 Expr v = (x(exprs(i)) - mean_of(rw)) * rstd_of(rw);
                                 if (gamma.defined()) v = v * gamma(ni);
                                 if (beta.defined()) v = v + beta(ni);
                                 return v;
                               }),
                               "layer_norm", "layer_norm");
  r.parts["anchor"] = out;
  ChannelMap ch{l.data.shape.back(), [](const std::vector<Var> &i) { return Expr(i.back()); }};
  r.epilogue = build_epilogue(out, l.epilogue, ch, &r.inputs);
  r.outputs = {r.epilogue.empty() ? out : r.epilogue.back()};
  return r;
}

// The blocks of rows a parallel iteration of layer norm pipelines (the knob pipeline: up to that
// many; 0 or 1 is version 5's loop nest, one block an iteration): the largest divisor of the number
// of blocks no larger than the knob, so that every parallel iteration has the same serial loop.
int64_t pipeline_blocks(const Config &cfg, const Compute &c, int first, int64_t rows_block) {
  if (!cfg.has("pipeline")) return 1;
  const int64_t want = cfg.choice_int("pipeline");
  const te::Tensor &out = c.outputs[0];
  // The parallel iterations of version 5: the dimensions before the normalized ones fused, the
  // last of them in blocks of rows_block.
  int64_t blocks = 1;
  for (int d = 0; d < first; ++d) {
    const int64_t e = as_const_int(out.shape()[static_cast<size_t>(d)]).value_or(1);
    blocks *= d + 1 == first ? ceil_div(e, rows_block) : e;
  }
  return largest_divisor_at_most(blocks, want);
}

void schedule_layer_norm(te::Schedule &s, const Compute &c, const Config &cfg) {
  inline_epilogue(s, c);
  const te::Tensor &anchor = c.part("anchor");
  if (!c.epilogue.empty()) s[anchor].compute_inline();
  const bool one_pass = c.has_part("stats");
  if (c.has_part("mean")) s[c.part("mean")].compute_inline();
  te::Tensor out = c.outputs[0];
  te::Stage O = s[out];
  const int nd = out.ndim();
  const int first = static_cast<int>(c.attrs.at("first"));
  const int64_t block = cfg.split("tile_n")[1];
  int64_t n = 1;
  for (int d = first; d < nd; ++d) n *= as_const_int(out.shape()[static_cast<size_t>(d)]).value_or(1);
  IterVar par, rows_inner;
  std::vector<IterVar> norm;
  for (int d = first; d < nd; ++d) norm.push_back(O.axis(static_cast<size_t>(d)));
  if (first > 0) {
    std::vector<IterVar> pre;
    for (int d = 0; d < first; ++d) pre.push_back(O.axis(static_cast<size_t>(d)));
    // A block of rows of the last dimension before the normalized ones per parallel iteration: the
    // statistics of all its rows first, interleaved (each reduction loop and level of the tree
    // updates every row of the block, so the rows' chains overlap), then their normalization, the
    // rows still in L1. The split is of that dimension, not of the fused rows,
    // so that the statistics' bounds at the parallel loop are the block's rows.
    const int64_t rows_block = cfg.has("tile_rows") ? cfg.split("tile_rows")[1] : 1;
    if (rows_block > 1) {
      IterVar ro, ri;
      O.split(pre.back(), static_cast<int>(rows_block), &ro, &ri);
      pre.back() = ro;
      rows_inner = ri;
    }
    O.fuse(pre, &par);
    // Pipelined blocks (the knob pipeline): a parallel iteration runs a serial loop over several
    // blocks, and the next block's statistics are computed in the loop that normalizes this one
    // (Stage::pipeline), so the next rows' reads from L2 overlap this block's arithmetic and writes.
    // Only rows whose statistics take more than one step of their loop have the loop to pipeline.
    const bool steps = ceil_div(n, row_reduction_width(n, block)) > 1;
    const int64_t blocks = steps ? pipeline_blocks(cfg, c, first, rows_block) : 1;
    if (blocks > 1) {
      IterVar po, pi;
      O.split(par, static_cast<int>(blocks), &po, &pi);
      O.parallel(po);
      O.pipeline(pi);
      par = pi;
    } else {
      O.parallel(par);
    }
  }
  vectorize_run(O, norm, n, block, true);
  // The block's rows innermost but for the vector: gamma's and beta's vectors are loaded once for
  // all of them.
  if (rows_inner.defined()) rows_innermost(O, {rows_inner});
  // The statistics of the block's rows interleaved: each reduction loop and level of the tree
  // updates every row of the block.
  const bool interleave = rows_inner.defined();
  if (one_pass) {
    schedule_row_reduction(s, c.part("stats"), O, par, block, interleave);
  } else {
    for (const char *part : {"sum", "var"}) schedule_row_reduction(s, c.part(part), O, par, block, interleave);
  }
}

Template softmax_template() {
  Template t;
  t.name = "softmax.x86";
  // Version 2: the row's sum starts from -0.0 (sum_from_negative_zero).
  // Version 3: the knob rows, rows a parallel iteration along the last axis with their stages
  // interleaved (rows=1 is version 2's loop nest).
  // Version 4: the knob one_pass, the exps stored and summed in one loop (Stage::fuse_with_next);
  // one_pass=0 is version 3's loop nest.
  t.version = 4;
  t.summary = "softmax or log-softmax along one axis";
  t.arguments = {tensor_spec("data", -1, "float data"),
                 {"axis", "int", "-1", "the axis normalized over; negative counts from the end"},
                 {"log", "bool", "false", "log-softmax"},
                 epilogue_spec()};
  t.example = Json::object({{"data", Json::object({{"shape", Json::array_of(std::vector<int64_t>{8, 128})}})}});
  const std::string name = t.name;
  t.canonicalize = [name](const Json &a) { return canonical(parse_softmax(name, a)); };
  t.flop = [name](const Json &a) {
    Softmax s = parse_softmax(name, a);
    return 5.0 * static_cast<double>(s.data.numel()) + epilogue_flop(s.epilogue, static_cast<double>(s.data.numel()));
  };
  t.define_space = [name](ConfigSpace &s, const Json &a, const Target &) {
    define_softmax_space(s, parse_softmax(name, a));
  };
  t.default_config = [name](const ConfigSpace &s, const Json &a, const Target &tg) {
    return default_softmax(s, parse_softmax(name, a), tg);
  };
  t.compute = [name](const Json &a, const Config &) {
    Softmax sm = parse_softmax(name, a);
    Compute c = softmax_compute(sm);
    c.attrs["axis"] = sm.axis;
    return c;
  };
  t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
    schedule_softmax(s, c, cfg);
  };
  return t;
}

Template layer_norm_template() {
  Template t;
  t.name = "layer_norm.x86";
  // Version 3: the statistics start from -0.0 (no addition of the identity in the reduction tree).
  // Version 4: the knob tile_rows, rows a parallel iteration (statistics of the block, then its
  // normalization).
  // Version 5: the block's statistics interleaved (each reduction loop and level of the tree over
  // all of the block's rows); two rows a block by default where they divide the rows.
  // Version 6: the knob pipeline, blocks of rows a parallel iteration pipelined (the next block's
  // statistics in the loop that normalizes this one, Stage::pipeline); the default pipelines up to
  // 32 rows of one row a block in tensors up to 1 MiB.
  // Version 7: the pipelined default takes blocks of two rows where two divide the rows.
  t.version = 7;
  t.summary = "layer normalization over the trailing axes";
  t.arguments = {tensor_spec("data", -1, "float data"),
                 {"axes", "int or [int, ...]", "[-1]", "the trailing axes normalized over"},
                 {"epsilon", "number", "1e-05", "added to the variance"},
                 {"scale", "bool", "true", "multiply by a gamma input of the normalized shape"},
                 {"center", "bool", "true", "add a beta input of the normalized shape"},
                 epilogue_spec()};
  t.example = Json::object({{"data", Json::object({{"shape", Json::array_of(std::vector<int64_t>{8, 128})}})}});
  const std::string name = t.name;
  t.canonicalize = [name](const Json &a) { return canonical(parse_layer_norm(name, a)); };
  t.flop = [name](const Json &a) {
    LayerNorm l = parse_layer_norm(name, a);
    const double n = static_cast<double>(l.data.numel());
    return 8.0 * n + epilogue_flop(l.epilogue, n);
  };
  t.define_space = [name](ConfigSpace &s, const Json &a, const Target &) {
    s.define_split("tile_n", norm_size(parse_layer_norm(name, a)), 2, SplitPolicy::verbose(64));
    s.define_bool("one_pass");
    s.define_split("tile_rows", norm_rows(parse_layer_norm(name, a)), 2, SplitPolicy::factors(8));
    // Blocks of rows a parallel iteration pipelines (schedule_layer_norm); 0 is version 5's nest.
    s.define_choice("pipeline", {0, 4, 8, 16, 32, 64});
  };
  t.default_config = [name](const ConfigSpace &s, const Json &a, const Target &tg) {
    LayerNorm l = parse_layer_norm(name, a);
    const int64_t n = norm_size(l), b = std::min<int64_t>(n, tg.lanes(l.data.dtype));
    // A tensor the cache can serve (up to 1 MiB): up to 32 blocks a parallel iteration pipelined
    // (the next block's statistics in the loop that normalizes this one), two rows a block where
    // two divide the rows and a row is at most 2048 values (one load of gamma and beta for both
    // rows' normalization), else one. On layer norm 1x128x768 at one thread on a Zen 4 machine two
    // rows a block took 8.1-8.7 us against 9.5-10.0 for one (4.3-4.4 against 4.9-5.3 at two
    // threads); one row a block had taken 5.5-6.3 us against 7.2-7.7 for version 5's default on a
    // Zen 5 machine. Past 1 MiB memory bounds it (1x384x1024 took the same time with and without),
    // so it keeps one row a block and version 5's loop nest (docs/compiler.md).
    const int64_t rows = norm_rows(l);
    const int64_t bytes = l.data.numel() * static_cast<int64_t>(l.data.dtype.bytes());
    const bool pipelined = bytes <= (int64_t{1} << 20);
    const int64_t block = pipelined && rows % 2 == 0 && n <= 2048 ? 2 : 1;
    return s.from_values({{"tile_n", Json::array_of(std::vector<int64_t>{ceil_div(n, b), b})},
                          {"one_pass", Json(1)},
                          {"tile_rows", Json::array_of(std::vector<int64_t>{rows / block, block})},
                          {"pipeline", Json(pipelined ? 32 : 0)}});
  };
  t.compute = [name](const Json &a, const Config &cfg) {
    LayerNorm l = parse_layer_norm(name, a);
    // A config without the knob (another target's template over this compute) takes two passes.
    Compute c = layer_norm_compute(l, cfg.defined() && cfg.has("one_pass") && cfg.choice_bool("one_pass"));
    c.attrs["first"] = l.first;
    return c;
  };
  t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
    schedule_layer_norm(s, c, cfg);
  };
  return t;
}

}  // namespace

void register_norm_templates(Registry &r) {
  r.add(softmax_template());
  r.add(layer_norm_template());
}

}  // namespace kiln::ops
