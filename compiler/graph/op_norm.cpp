// Normalizations: LayerNormalization (with its optional Mean and InvStdDev outputs),
// InstanceNormalization, LRN.
#include <algorithm>
#include <cmath>

#include "compiler/graph/op_def.h"
#include "compiler/graph/op_families.h"
#include "compiler/ir/op.h"

namespace kiln::graph::detail {

using ::kiln::detail::concat;

namespace {

using ir::DataType;
using ir::Expr;

DataType accumulator(DataType t) { return t.bits() == 64 ? t : ir::Float(32); }

// Mean and 1 / sqrt(variance + eps) over the axes in `axes` (sorted), kept as extent-1 axes.
struct Moments {
  te::Tensor mean, inv_std;
};

Moments moments(const te::Tensor &x, const std::vector<int64_t> &shape, const std::vector<int64_t> &axes, double eps,
                DataType acc) {
  std::vector<int64_t> rshape = shape;
  int64_t count = 1;
  for (int64_t a : axes) {
    rshape[static_cast<size_t>(a)] = 1;
    count *= shape[static_cast<size_t>(a)];
  }
  auto raxes = [&](const char *p) {
    std::vector<te::IterVar> r;
    for (int64_t a : axes) r.push_back(te::reduce_axis(i32(shape[static_cast<size_t>(a)]), concat(p, a)));
    return r;
  };
  auto src = [&](const std::vector<Expr> &i, const std::vector<te::IterVar> &r) {
    std::vector<Expr> s = i;
    for (size_t j = 0; j < axes.size(); ++j) s[static_cast<size_t>(axes[j])] = r[j]->var;
    return s;
  };
  const int rank = static_cast<int>(shape.size());
  auto r1 = raxes("m");
  te::Tensor sum = compute(
      rshape, [&](const std::vector<Expr> &i) { return te::sum(ir::cast(acc, at(x, rank, src(i, r1))), r1); }, "sum");
  te::Tensor mean = compute(
      rshape,
      [&](const std::vector<Expr> &i) { return at(sum, rank, i) / ir::make_const(acc, static_cast<double>(count)); },
      "mean");
  auto r2 = raxes("v");
  te::Tensor sq = compute(
      rshape,
      [&](const std::vector<Expr> &i) {
        Expr d = ir::cast(acc, at(x, rank, src(i, r2))) - at(mean, rank, i);
        return te::sum(d * d, r2);
      },
      "sqsum");
  te::Tensor inv = compute(
      rshape,
      [&](const std::vector<Expr> &i) {
        return ir::make_const(acc, 1.0) /
               ir::sqrt(at(sq, rank, i) / ir::make_const(acc, static_cast<double>(count)) + ir::make_const(acc, eps));
      },
      "inv_std");
  return {mean, inv};
}

std::vector<Expr> reduced_index(const std::vector<Expr> &i, const std::vector<int64_t> &axes) {
  std::vector<Expr> s = i;
  for (int64_t a : axes) s[static_cast<size_t>(a)] = i32(0);
  return s;
}

}  // namespace

void register_norm_ops() {
  {
    // LayerNormalization(X, Scale, B?) {axis, epsilon, stash_type} -> Y, Mean?, InvStdDev?
    OpDef d;
    d.name = "LayerNormalization";
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.max_outputs = 3;
    d.infer = [](const OpContext &ctx) {
      const auto &x = ctx.in(0);
      if (!x.dtype.is_float()) ctx.fail("needs a float input");
      const int64_t axis = ctx.axis(ctx.node().attr_int("axis", -1), x.rank());
      std::vector<int64_t> norm(x.shape.begin() + axis, x.shape.end());
      for (int i = 1; i < 3; ++i) {
        if (!ctx.has_input(i)) continue;
        // Scale and B broadcast to the normalized shape.
        if (broadcast_shapes(ctx, {ctx.in(i).shape, norm}) != norm)
          ctx.fail(concat("input ", i, " ", ctx.in(i).str(), " does not broadcast to the normalized shape"));
      }
      std::vector<int64_t> stat = x.shape;
      for (size_t a = static_cast<size_t>(axis); a < stat.size(); ++a) stat[a] = 1;
      const DataType st = ctx.node().attr_int("stash_type", 1) == 1 ? ir::Float(32) : x.dtype;
      return std::vector<TensorType>{x, TensorType{st, stat}, TensorType{st, stat}};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      const int64_t first = ctx.axis(ctx.node().attr_int("axis", -1), ctx.in(0).rank());
      const std::vector<int64_t> norm(ctx.in(0).shape.begin() + first, ctx.in(0).shape.end());
      // Float32 with the normalized shape's scale and bias and no statistics outputs: the
      // layer_norm template (scale and bias are its inputs).
      auto exact = [&](int i) { return ctx.in(i).shape == norm && ctx.in(i).dtype == ir::Float(32); };
      if (ctx.in(0).dtype == ir::Float(32) && ctx.num_outputs() == 1 && exact(1) && (!ctx.has_input(2) || exact(2))) {
        std::vector<int64_t> axes;
        for (int64_t a = first; a < ctx.in(0).rank(); ++a) axes.push_back(a);
        k.template_name = "layer_norm.x86";
        k.template_args = contracts::Json::object({{"data", tensor_json(ctx.in(0))},
                                                   {"axes", contracts::Json::array_of(axes)},
                                                   {"epsilon", ctx.node().attr_float("epsilon", 1e-5)},
                                                   {"scale", true},
                                                   {"center", ctx.has_input(2)},
                                                   {"epilogue", contracts::Json::array()}});
        k.input_map = {0, 1};
        if (ctx.has_input(2)) k.input_map.push_back(2);
        return k;
      }
      te::Tensor x = add_input(k, ctx, 0, "x"), scale = add_input(k, ctx, 1, "scale"), bias;
      if (ctx.has_input(2)) bias = add_input(k, ctx, 2, "bias");
      const auto shape = ctx.in(0).shape;
      const int rank = ctx.in(0).rank();
      const int64_t axis = ctx.axis(ctx.node().attr_int("axis", -1), rank);
      std::vector<int64_t> axes;
      for (int64_t a = axis; a < rank; ++a) axes.push_back(a);
      const DataType dt = ctx.in(0).dtype;
      const DataType st = ctx.node().attr_int("stash_type", 1) == 1 ? ir::Float(32) : dt;
      const DataType acc = dt.bits() == 64 ? dt : st.bits() == 16 ? ir::Float(32) : st;
      Moments m = moments(x, shape, axes, ctx.node().attr_float("epsilon", 1e-5), acc);
      const auto ss = ctx.in(1).shape;
      const auto bs = ctx.has_input(2) ? ctx.in(2).shape : std::vector<int64_t>{};
      k.outputs.push_back(compute(
          shape,
          [&](const std::vector<Expr> &i) {
            std::vector<Expr> tail(i.begin() + axis, i.end());
            Expr y = (ir::cast(acc, at(x, rank, i)) - at(m.mean, rank, reduced_index(i, axes))) *
                     at(m.inv_std, rank, reduced_index(i, axes));
            y = y * ir::cast(acc, at(scale, static_cast<int>(ss.size()), broadcast_index(ss, tail)));
            if (bias.defined()) y = y + ir::cast(acc, at(bias, static_cast<int>(bs.size()), broadcast_index(bs, tail)));
            return ir::cast(dt, y);
          },
          "layer_norm"));
      if (ctx.num_outputs() > 1) {
        std::vector<int64_t> stat = shape;
        for (int64_t a : axes) stat[static_cast<size_t>(a)] = 1;
        k.outputs.push_back(compute(
            stat, [&](const std::vector<Expr> &i) { return ir::cast(st, at(m.mean, rank, i)); }, "mean_out"));
        if (ctx.num_outputs() > 2)
          k.outputs.push_back(compute(
              stat, [&](const std::vector<Expr> &i) { return ir::cast(st, at(m.inv_std, rank, i)); }, "inv_std_out"));
      }
      return k;
    };
    register_op(std::move(d));
  }
  {
    // InstanceNormalization(x, scale, B) {epsilon}: per sample and channel over the spatial axes.
    OpDef d;
    d.name = "InstanceNormalization";
    d.min_inputs = d.max_inputs = 3;
    d.infer = [](const OpContext &ctx) {
      const auto &x = ctx.in(0);
      if (!x.dtype.is_float()) ctx.fail("needs a float input");
      if (x.rank() < 3) ctx.fail("needs an input of rank 3 or more");
      for (int i = 1; i < 3; ++i) {
        if (ctx.in(i).shape != std::vector<int64_t>{x.shape[1]})
          ctx.fail(concat("input ", i, " is ", ctx.in(i).str(), ", expected [", x.shape[1], "]"));
      }
      return std::vector<TensorType>{x};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x"), scale = add_input(k, ctx, 1, "scale"),
                 bias = add_input(k, ctx, 2, "bias");
      const auto shape = ctx.in(0).shape;
      const int rank = ctx.in(0).rank();
      std::vector<int64_t> axes;
      for (int64_t a = 2; a < rank; ++a) axes.push_back(a);
      const DataType dt = ctx.in(0).dtype, acc = accumulator(dt);
      Moments m = moments(x, shape, axes, ctx.node().attr_float("epsilon", 1e-5), acc);
      k.outputs.push_back(compute(
          shape,
          [&](const std::vector<Expr> &i) {
            auto r = reduced_index(i, axes);
            Expr y = (ir::cast(acc, x(i)) - m.mean(r)) * m.inv_std(r) * ir::cast(acc, scale(i[1])) +
                     ir::cast(acc, bias(i[1]));
            return ir::cast(dt, y);
          },
          "instance_norm"));
      return k;
    };
    register_op(std::move(d));
  }
  {
    // LRN(X) {alpha, beta, bias, size} across channels.
    OpDef d;
    d.name = "LRN";
    d.infer = [](const OpContext &ctx) {
      if (!ctx.in(0).dtype.is_float()) ctx.fail("needs a float input");
      if (ctx.in(0).rank() < 3) ctx.fail("needs an input of rank 3 or more");
      if (ctx.node().attr_int("size", 0) <= 0) ctx.fail("size must be positive");
      return std::vector<TensorType>{ctx.in(0)};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      const auto shape = ctx.in(0).shape;
      const int64_t size = ctx.node().attr_int("size", 1);
      const double alpha = ctx.node().attr_float("alpha", 1e-4), beta = ctx.node().attr_float("beta", 0.75),
                   bias = ctx.node().attr_float("bias", 1.0);
      const int64_t lo = (size - 1) / 2;
      const DataType dt = ctx.in(0).dtype, acc = accumulator(dt);
      te::IterVar r = te::reduce_axis(i32(size), "c");
      te::Tensor sq = compute(
          shape,
          [&](const std::vector<Expr> &i) {
            std::vector<Expr> s = i;
            Expr c = i[1] - i32(lo) + Expr(r->var);
            s[1] = ir::min(ir::max(c, i32(0)), i32(shape[1] - 1));
            Expr v = ir::cast(acc, x(s));
            return te::sum(ir::select(c >= i32(0) && c < i32(shape[1]), v * v, ir::make_zero(acc)), {r});
          },
          "lrn_sq");
      k.outputs.push_back(compute(
          shape,
          [&](const std::vector<Expr> &i) {
            Expr den =
                ir::pow(ir::make_const(acc, bias) + ir::make_const(acc, alpha / static_cast<double>(size)) * sq(i),
                        ir::make_const(acc, beta));
            return ir::cast(dt, ir::cast(acc, x(i)) / den);
          },
          "lrn"));
      return k;
    };
    register_op(std::move(d));
  }
}

}  // namespace kiln::graph::detail
