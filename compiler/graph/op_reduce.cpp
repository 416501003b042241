// Reductions: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare}, ArgMax, ArgMin,
// Softmax, LogSoftmax, Hardmax, CumSum, TopK.
#include <algorithm>
#include <limits>

#include "compiler/graph/op_def.h"
#include "compiler/graph/op_families.h"
#include "compiler/ir/op.h"

namespace kiln::graph::detail {

using ::kiln::detail::concat;

namespace {

using ir::DataType;
using ir::Expr;

// The reduced axes (sorted) of a Reduce* node: input 1 or the `axes` attribute; none means all,
// unless noop_with_empty_axes.
std::vector<int64_t> reduce_axes(const OpContext &ctx, bool *noop) {
  const int64_t rank = ctx.in(0).rank();
  std::vector<int64_t> axes = ctx.has_input(1) ? ctx.const_ints(1) : ctx.node().attr_ints("axes");
  *noop = false;
  if (axes.empty()) {
    if (ctx.node().attr_int("noop_with_empty_axes", 0) != 0) {
      *noop = true;
      return {};
    }
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  for (auto &a : axes) a = ctx.axis(a, rank);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

std::vector<int64_t> reduced_shape(const std::vector<int64_t> &in, const std::vector<int64_t> &axes, bool keep) {
  std::vector<int64_t> out;
  for (size_t a = 0; a < in.size(); ++a) {
    const bool r = std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(a));
    if (!r)
      out.push_back(in[a]);
    else if (keep)
      out.push_back(1);
  }
  return out;
}

enum class Kind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

void reduce_op(const std::string &name, Kind kind) {
  OpDef d;
  d.name = name;
  d.max_inputs = 2;
  d.const_inputs = {1};
  d.infer = [](const OpContext &ctx) {
    bool noop;
    auto axes = reduce_axes(ctx, &noop);
    if (noop) return std::vector<TensorType>{ctx.in(0)};
    const bool keep = ctx.node().attr_int("keepdims", 1) != 0;
    return std::vector<TensorType>{TensorType{ctx.in(0).dtype, reduced_shape(ctx.in(0).shape, axes, keep)}};
  };
  d.kernel = [kind, name](const OpContext &ctx) {
    Kernel k;
    te::Tensor x = add_input(k, ctx, 0, "x");
    bool noop;
    auto axes = reduce_axes(ctx, &noop);
    const auto in = ctx.in(0).shape;
    const int rank = ctx.in(0).rank();
    const DataType dt = ctx.in(0).dtype;
    if (noop) {
      k.outputs.push_back(compute(
          in, [&](const std::vector<Expr> &i) { return at(x, rank, i); }, name));
      return k;
    }
    const bool keep = ctx.node().attr_int("keepdims", 1) != 0;
    int64_t count = 1;
    for (int64_t a : axes) count *= in[static_cast<size_t>(a)];
    // Accumulate floats of 16 bits in float32.
    const DataType acc = dt.is_float() && dt.bits() == 16 ? ir::Float(32) : dt;
    std::vector<int64_t> out_shape = reduced_shape(in, axes, keep);
    if (count == 0) {
      // An empty reduction: the identity.
      double v = 0;
      if (kind == Kind::Prod) v = 1;
      if (kind == Kind::Max) v = -std::numeric_limits<double>::infinity();
      if (kind == Kind::Min) v = std::numeric_limits<double>::infinity();
      if (kind == Kind::LogSum || kind == Kind::LogSumExp) v = -std::numeric_limits<double>::infinity();
      Expr c = dt.is_float() ? ir::make_const(dt, v)
                             : (kind == Kind::Max   ? ir::min_value(dt)
                                : kind == Kind::Min ? ir::max_value(dt)
                                                    : ir::make_const(dt, static_cast<int64_t>(v)));
      k.outputs.push_back(compute(
          out_shape, [&](const std::vector<Expr> &) { return c; }, name));
      return k;
    }
    std::vector<te::IterVar> raxes;
    for (int64_t a : axes) raxes.push_back(te::reduce_axis(i32(in[static_cast<size_t>(a)]), concat("r", a)));
    auto source_index = [&](const std::vector<Expr> &i) {
      std::vector<Expr> src;
      size_t oi = 0, ri = 0;
      for (size_t a = 0; a < in.size(); ++a) {
        if (std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(a))) {
          src.push_back(raxes[ri++]->var);
          if (keep) ++oi;
        } else {
          src.push_back(i[oi++]);
        }
      }
      return src;
    };
    te::Tensor maxed;
    if (kind == Kind::LogSumExp) {
      maxed = compute(
          out_shape,
          [&](const std::vector<Expr> &i) { return te::max(ir::cast(acc, at(x, rank, source_index(i))), raxes); },
          name + "_max");
      raxes.clear();
      for (int64_t a : axes) raxes.push_back(te::reduce_axis(i32(in[static_cast<size_t>(a)]), concat("s", a)));
    }
    te::Tensor r = compute(
        out_shape,
        [&](const std::vector<Expr> &i) {
          Expr v = ir::cast(acc, at(x, rank, source_index(i)));
          switch (kind) {
            case Kind::Max:
              return te::max(v, raxes);
            case Kind::Min:
              return te::min(v, raxes);
            case Kind::Prod:
              return te::prod(v, raxes);
            case Kind::L1:
              return te::sum(ir::abs(v), raxes);
            case Kind::L2:
            case Kind::SumSquare:
              return te::sum(v * v, raxes);
            case Kind::LogSumExp:
              return te::sum(ir::exp(v - at(maxed, static_cast<int>(out_shape.size()), i)), raxes);
            case Kind::Sum:
            case Kind::Mean:
            case Kind::LogSum:
              return te::sum(v, raxes);
          }
          return Expr();
        },
        name + "_acc");
    const int orank = static_cast<int>(out_shape.size());
    k.outputs.push_back(compute(
        out_shape,
        [&](const std::vector<Expr> &i) {
          Expr v = at(r, orank, i);
          switch (kind) {
            case Kind::Mean:
              v = dt.is_float() ? v / ir::make_const(acc, static_cast<double>(count))
                                : ir::truncdiv(v, ir::make_const(acc, count));
              break;
            case Kind::L2:
              v = dt.is_float() ? ir::sqrt(v) : ir::cast(acc, ir::sqrt(ir::cast(ir::Float(64), v)));
              break;
            case Kind::LogSum:
              v = ir::log(v);
              break;
            case Kind::LogSumExp:
              v = ir::log(v) + at(maxed, orank, i);
              break;
            default:
              break;
          }
          return ir::cast(dt, v);
        },
        name));
    return k;
  };
  register_op(std::move(d));
}

void arg_op(const std::string &name, bool is_max) {
  OpDef d;
  d.name = name;
  d.infer = [](const OpContext &ctx) {
    const int64_t rank = ctx.in(0).rank();
    const int64_t axis = ctx.axis(ctx.node().attr_int("axis", 0), std::max<int64_t>(rank, 1));
    if (rank > 0 && ctx.in(0).shape[static_cast<size_t>(axis)] == 0) ctx.fail("the reduced axis is empty");
    const bool keep = ctx.node().attr_int("keepdims", 1) != 0;
    return std::vector<TensorType>{TensorType{ir::Int(64), reduced_shape(ctx.in(0).shape, {axis}, keep)}};
  };
  d.kernel = [is_max, name](const OpContext &ctx) {
    Kernel k;
    te::Tensor x = add_input(k, ctx, 0, "x");
    const auto in = ctx.in(0).shape;
    const int64_t axis = ctx.axis(ctx.node().attr_int("axis", 0), static_cast<int64_t>(in.size()));
    const bool keep = ctx.node().attr_int("keepdims", 1) != 0;
    const bool last = ctx.node().attr_int("select_last_index", 0) != 0;
    auto out_shape = reduced_shape(in, {axis}, keep);
    te::IterVar r = te::reduce_axis(i32(in[static_cast<size_t>(axis)]), "r");
    const DataType dt = ctx.in(0).dtype;
    auto outs = te::compute_multi(
        kernel_shape(out_shape),
        [&](const std::vector<ir::Var> &vars) {
          std::vector<Expr> src;
          size_t oi = 0;
          for (size_t a = 0; a < in.size(); ++a) {
            if (static_cast<int64_t>(a) == axis) {
              src.push_back(r->var);
              if (keep) ++oi;
            } else {
              src.push_back(vars[oi++]);
            }
          }
          auto combine = [&](const std::vector<ir::Var> &l, const std::vector<ir::Var> &rr) {
            // (index, value): prefer the better value; on a tie, the first (or last) index.
            Expr better = is_max ? Expr(rr[1]) > Expr(l[1]) : Expr(rr[1]) < Expr(l[1]);
            Expr tie = Expr(rr[1]) == Expr(l[1]);
            Expr earlier = last ? Expr(rr[0]) > Expr(l[0]) : Expr(rr[0]) < Expr(l[0]);
            Expr take = better || (tie && earlier);
            return std::vector<Expr>{ir::select(take, rr[0], l[0]), ir::select(take, rr[1], l[1])};
          };
          Expr worst = is_max ? ir::min_value(dt) : ir::max_value(dt);
          return te::tuple_reduce(combine, {i32(last ? -1 : std::numeric_limits<int32_t>::max()), worst},
                                  {Expr(r->var), x(src)}, {r});
        },
        name + "_red");
    const int orank = static_cast<int>(out_shape.size());
    k.outputs.push_back(compute(
        out_shape, [&](const std::vector<Expr> &i) { return ir::cast(ir::Int(64), at(outs[0], orank, i)); }, name));
    return k;
  };
  register_op(std::move(d));
}

// Softmax-like ops over one axis, or (legacy, attribute "coerce_2d" = 1) over every axis from it.
enum class SoftKind { Softmax, LogSoftmax, Hardmax };

void softmax_op(const std::string &name, SoftKind kind) {
  OpDef d;
  d.name = name;
  d.infer = [](const OpContext &ctx) {
    if (!ctx.in(0).dtype.is_float()) ctx.fail("needs a float input");
    ctx.axis(ctx.node().attr_int("axis", -1), std::max(ctx.in(0).rank(), 1));
    return std::vector<TensorType>{ctx.in(0)};
  };
  d.kernel = [kind, name](const OpContext &ctx) {
    Kernel k;
    const auto in = ctx.in(0).shape;
    const int rank = ctx.in(0).rank();
    const int64_t axis = ctx.axis(ctx.node().attr_int("axis", -1), std::max(rank, 1));
    const bool coerce = ctx.node().attr_int("coerce_2d", 0) != 0;
    // Float32 softmax over one axis (or from the last axis on): the softmax template.
    if (kind != SoftKind::Hardmax && ctx.in(0).dtype == ir::Float(32) && rank >= 1 && (!coerce || axis == rank - 1)) {
      k.template_name = "softmax.x86";
      k.template_args = contracts::Json::object({{"data", tensor_json(ctx.in(0))},
                                                 {"axis", axis},
                                                 {"log", kind == SoftKind::LogSoftmax},
                                                 {"epilogue", contracts::Json::array()}});
      k.input_map = {0};
      return k;
    }
    te::Tensor x = add_input(k, ctx, 0, "x");
    std::vector<int64_t> axes;
    for (int64_t a = axis; a < (coerce ? rank : axis + 1); ++a) axes.push_back(a);
    const DataType dt = ctx.in(0).dtype;
    const DataType acc = dt.bits() == 16 ? ir::Float(32) : dt;
    // Reduced tensors keep the input's rank (extent 1 on reduced axes).
    std::vector<int64_t> rshape = in;
    for (int64_t a : axes) rshape[static_cast<size_t>(a)] = 1;
    auto make_axes = [&](const char *p) {
      std::vector<te::IterVar> r;
      for (int64_t a : axes) r.push_back(te::reduce_axis(i32(in[static_cast<size_t>(a)]), concat(p, a)));
      return r;
    };
    auto src_of = [&](const std::vector<Expr> &i, const std::vector<te::IterVar> &r) {
      std::vector<Expr> s = i;
      for (size_t j = 0; j < axes.size(); ++j) s[static_cast<size_t>(axes[j])] = r[j]->var;
      return s;
    };
    auto ridx = [&](const std::vector<Expr> &i) {
      std::vector<Expr> s = i;
      for (int64_t a : axes) s[static_cast<size_t>(a)] = i32(0);
      return s;
    };
    if (kind == SoftKind::Hardmax) {
      // 1 at the first maximum along the axes, 0 elsewhere: the first index whose value is the max.
      auto r1 = make_axes("m");
      te::Tensor mx = compute(
          rshape, [&](const std::vector<Expr> &i) { return te::max(at(x, rank, src_of(i, r1)), r1); }, name + "_max");
      // Flat position along the reduced axes of the first maximum.
      auto r2 = make_axes("f");
      auto flat = [&](const std::vector<Expr> &s) {
        Expr f = i32(0);
        for (int64_t a : axes) f = f * i32(in[static_cast<size_t>(a)]) + s[static_cast<size_t>(a)];
        return f;
      };
      te::Tensor first = compute(
          rshape,
          [&](const std::vector<Expr> &i) {
            auto s = src_of(i, r2);
            return te::min(ir::select(at(x, rank, s) == at(mx, rank, ridx(i)), flat(s), i32(1 << 30)), r2);
          },
          name + "_first");
      k.outputs.push_back(compute(
          in,
          [&](const std::vector<Expr> &i) {
            return ir::select(flat(i) == at(first, rank, ridx(i)), ir::make_const(dt, 1.0), ir::make_const(dt, 0.0));
          },
          name));
      return k;
    }
    auto r1 = make_axes("m");
    te::Tensor mx = compute(
        rshape, [&](const std::vector<Expr> &i) { return te::max(ir::cast(acc, at(x, rank, src_of(i, r1))), r1); },
        name + "_max");
    auto r2 = make_axes("s");
    te::Tensor sum = compute(
        rshape,
        [&](const std::vector<Expr> &i) {
          return te::sum(ir::exp(ir::cast(acc, at(x, rank, src_of(i, r2))) - at(mx, rank, ridx(i))), r2);
        },
        name + "_sum");
    k.outputs.push_back(compute(
        in,
        [&](const std::vector<Expr> &i) {
          Expr v = ir::cast(acc, at(x, rank, i)) - at(mx, rank, ridx(i));
          Expr s = at(sum, rank, ridx(i));
          return ir::cast(dt, kind == SoftKind::Softmax ? ir::exp(v) / s : v - ir::log(s));
        },
        name));
    return k;
  };
  register_op(std::move(d));
}

}  // namespace

void register_reduce_ops() {
  reduce_op("ReduceSum", Kind::Sum);
  reduce_op("ReduceMean", Kind::Mean);
  reduce_op("ReduceMax", Kind::Max);
  reduce_op("ReduceMin", Kind::Min);
  reduce_op("ReduceProd", Kind::Prod);
  reduce_op("ReduceL1", Kind::L1);
  reduce_op("ReduceL2", Kind::L2);
  reduce_op("ReduceLogSum", Kind::LogSum);
  reduce_op("ReduceLogSumExp", Kind::LogSumExp);
  reduce_op("ReduceSumSquare", Kind::SumSquare);
  arg_op("ArgMax", true);
  arg_op("ArgMin", false);
  softmax_op("Softmax", SoftKind::Softmax);
  softmax_op("LogSoftmax", SoftKind::LogSoftmax);
  softmax_op("Hardmax", SoftKind::Hardmax);
  {
    // CumSum(x, axis) {exclusive, reverse}
    OpDef d;
    d.name = "CumSum";
    d.min_inputs = d.max_inputs = 2;
    d.const_inputs = {1};
    d.infer = [](const OpContext &ctx) {
      ctx.axis(ctx.const_ints(1).at(0), ctx.in(0).rank());
      return std::vector<TensorType>{ctx.in(0)};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      const auto in = ctx.in(0).shape;
      const size_t axis = static_cast<size_t>(ctx.axis(ctx.const_ints(1).at(0), ctx.in(0).rank()));
      const bool excl = ctx.node().attr_int("exclusive", 0) != 0, rev = ctx.node().attr_int("reverse", 0) != 0;
      const int64_t n = in[axis];
      te::IterVar r = te::reduce_axis(i32(n), "r");
      k.outputs.push_back(compute(
          in,
          [&](const std::vector<Expr> &i) {
            std::vector<Expr> s = i;
            s[axis] = r->var;
            Expr j = i[axis];
            Expr cond =
                rev ? (excl ? Expr(r->var) > j : Expr(r->var) >= j) : (excl ? Expr(r->var) < j : Expr(r->var) <= j);
            return te::sum(ir::select(cond, x(s), ir::make_zero(x.dtype())), {r});
          },
          "cumsum"));
      return k;
    };
    register_op(std::move(d));
  }
  {
    // TopK(x, k) {axis, largest, sorted}: values and int64 indices, ranked by comparing every pair
    // of elements along the axis (ties: the lower index first).
    OpDef d;
    d.name = "TopK";
    d.min_inputs = d.max_inputs = 2;
    d.const_inputs = {1};
    d.min_outputs = d.max_outputs = 2;
    d.infer = [](const OpContext &ctx) {
      const int64_t rank = ctx.in(0).rank();
      const int64_t axis = ctx.axis(ctx.node().attr_int("axis", -1), rank);
      const int64_t kk = ctx.const_ints(1).at(0);
      const int64_t n = ctx.in(0).shape[static_cast<size_t>(axis)];
      if (kk < 0 || kk > n) ctx.fail(concat("k = ", kk, " is outside [0, ", n, "]"));
      std::vector<int64_t> s = ctx.in(0).shape;
      s[static_cast<size_t>(axis)] = kk;
      return std::vector<TensorType>{TensorType{ctx.in(0).dtype, s}, TensorType{ir::Int(64), s}};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      const auto in = ctx.in(0).shape;
      const size_t axis = static_cast<size_t>(ctx.axis(ctx.node().attr_int("axis", -1), ctx.in(0).rank()));
      const int64_t kk = ctx.const_ints(1).at(0);
      const bool largest = ctx.node().attr_int("largest", 1) != 0;
      const int64_t n = in[axis];
      te::IterVar r = te::reduce_axis(i32(n), "r");
      // rank[i] = how many elements come before element i.
      te::Tensor rnk = compute(
          in,
          [&](const std::vector<Expr> &i) {
            std::vector<Expr> s = i;
            s[axis] = r->var;
            Expr a = x(s), b = x(i);
            Expr before = largest ? a > b : a < b;
            before = before || (a == b && Expr(r->var) < i[axis]);
            return te::sum(ir::select(before, i32(1), i32(0)), {r});
          },
          "rank");
      std::vector<int64_t> oshape = in;
      oshape[axis] = kk;
      te::IterVar r2 = te::reduce_axis(i32(n), "e");
      te::Tensor idx = compute(
          oshape,
          [&](const std::vector<Expr> &i) {
            std::vector<Expr> s = i;
            s[axis] = r2->var;
            return te::sum(ir::select(rnk(s) == i[axis], Expr(r2->var), i32(0)), {r2});
          },
          "topk_index");
      k.outputs.push_back(compute(
          oshape,
          [&](const std::vector<Expr> &i) {
            std::vector<Expr> s = i;
            s[axis] = idx(i);
            return x(s);
          },
          "values"));
      k.outputs.push_back(compute(
          oshape, [&](const std::vector<Expr> &i) { return ir::cast(ir::Int(64), idx(i)); }, "indices"));
      return k;
    };
    register_op(std::move(d));
  }
}

}  // namespace kiln::graph::detail
