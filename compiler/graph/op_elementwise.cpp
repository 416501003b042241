// Elementwise ops: unary math and activations, binary and variadic ops with numpy broadcasting,
// comparisons and logic, Where, Cast, Clip, Dropout (inference: a copy).
#include <cmath>
#include <limits>

#include "compiler/graph/op_def.h"
#include "compiler/graph/op_families.h"
#include "compiler/ir/op.h"

namespace kiln::graph::detail {

using ::kiln::detail::concat;

namespace {

using ir::DataType;
using ir::Expr;
using UnaryFn = std::function<Expr(const Expr &x, const Node &n)>;

Expr fconst(const Expr &like, double v) { return ir::make_const(like.type(), v); }

bool is_float(DataType t) { return t.is_float(); }

void require_float(const OpContext &ctx, int i) {
  if (!is_float(ctx.in(i).dtype)) ctx.fail(concat("needs a float input, got ", dtype_name(ctx.in(i).dtype)));
}

void require_same_dtype(const OpContext &ctx, int a, int b) {
  if (ctx.in(a).dtype != ctx.in(b).dtype)
    ctx.fail(concat("inputs ", a, " and ", b, " have different dtypes: ", dtype_name(ctx.in(a).dtype), " and ",
                    dtype_name(ctx.in(b).dtype)));
}

// A unary op: output dtype = input dtype unless `out` says otherwise.
void unary(const std::string &name, UnaryFn f, bool float_only = true,
           std::function<DataType(DataType)> out = nullptr) {
  OpDef d;
  d.name = name;
  d.infer = [float_only, out](const OpContext &ctx) {
    if (float_only) require_float(ctx, 0);
    TensorType t = ctx.in(0);
    if (out) t.dtype = out(t.dtype);
    return std::vector<TensorType>{t};
  };
  d.kernel = [f, name](const OpContext &ctx) {
    Kernel k;
    te::Tensor x = add_input(k, ctx, 0, "x");
    const int rank = ctx.in(0).rank();
    const Node &n = ctx.node();
    k.outputs.push_back(compute(
        ctx.in(0).shape, [&](const std::vector<Expr> &i) { return f(at(x, rank, i), n); }, name));
    return k;
  };
  register_op(std::move(d));
}

// A binary op with broadcasting. `same` requires both dtypes to match; `out` gives the output dtype
// from the input dtype (default: the same).
void binary(const std::string &name, std::function<Expr(Expr, Expr, const Node &, DataType)> f, bool same = true,
            std::function<DataType(DataType)> out = nullptr, bool float_only = false) {
  OpDef d;
  d.name = name;
  d.min_inputs = d.max_inputs = 2;
  d.infer = [same, out, float_only](const OpContext &ctx) {
    if (same) require_same_dtype(ctx, 0, 1);
    if (float_only) require_float(ctx, 0);
    TensorType t;
    t.shape = broadcast_shapes(ctx, {ctx.in(0).shape, ctx.in(1).shape});
    t.dtype = out ? out(ctx.in(0).dtype) : ctx.in(0).dtype;
    return std::vector<TensorType>{t};
  };
  d.kernel = [f, name](const OpContext &ctx) {
    Kernel k;
    te::Tensor a = add_input(k, ctx, 0, "a");
    te::Tensor b = add_input(k, ctx, 1, "b");
    const auto sa = ctx.in(0).shape, sb = ctx.in(1).shape;
    const auto shape = broadcast_shapes(ctx, {sa, sb});
    const DataType dt = ctx.in(0).dtype;
    const Node &n = ctx.node();
    k.outputs.push_back(compute(
        shape,
        [&](const std::vector<Expr> &i) {
          Expr x = at(a, static_cast<int>(sa.size()), broadcast_index(sa, i));
          Expr y = at(b, static_cast<int>(sb.size()), broadcast_index(sb, i));
          return f(x, y, n, dt);
        },
        name));
    return k;
  };
  register_op(std::move(d));
}

// Sum, Mean, Max, Min: one or more inputs, broadcast.
void variadic(const std::string &name, std::function<Expr(Expr, Expr)> combine, bool mean = false) {
  OpDef d;
  d.name = name;
  d.min_inputs = 1;
  d.max_inputs = 1 << 16;
  d.infer = [](const OpContext &ctx) {
    std::vector<std::vector<int64_t>> shapes;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      require_same_dtype(ctx, 0, i);
      shapes.push_back(ctx.in(i).shape);
    }
    return std::vector<TensorType>{TensorType{ctx.in(0).dtype, broadcast_shapes(ctx, shapes)}};
  };
  d.kernel = [combine, mean, name](const OpContext &ctx) {
    Kernel k;
    std::vector<te::Tensor> in;
    std::vector<std::vector<int64_t>> shapes;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      in.push_back(add_input(k, ctx, i));
      shapes.push_back(ctx.in(i).shape);
    }
    const auto shape = broadcast_shapes(ctx, shapes);
    k.outputs.push_back(compute(
        shape,
        [&](const std::vector<Expr> &idx) {
          Expr r;
          for (size_t i = 0; i < in.size(); ++i) {
            Expr x = at(in[i], static_cast<int>(shapes[i].size()), broadcast_index(shapes[i], idx));
            r = r.defined() ? combine(r, x) : x;
          }
          if (mean) r = r / ir::make_const(r.type(), static_cast<double>(in.size()));
          return r;
        },
        name));
    return k;
  };
  register_op(std::move(d));
}

DataType to_bool_type(DataType) { return ir::Bool(); }

Expr int_pow(Expr x, Expr y) {
  // Integer power through double: exact for the magnitudes integer tensors hold.
  return ir::cast(x.type(), ir::nearbyint(ir::pow(ir::cast(ir::Float(64), x), ir::cast(ir::Float(64), y))));
}

}  // namespace

void register_elementwise_ops() {
  using ir::make_const;
  // --- unary float math ---
  unary("Exp", [](const Expr &x, const Node &) { return ir::exp(x); });
  unary("Log", [](const Expr &x, const Node &) { return ir::log(x); });
  unary("Sqrt", [](const Expr &x, const Node &) { return ir::sqrt(x); });
  unary("Tanh", [](const Expr &x, const Node &) { return ir::tanh(x); });
  unary("Sigmoid", [](const Expr &x, const Node &) { return ir::sigmoid(x); });
  unary("Erf", [](const Expr &x, const Node &) { return ir::erf(x); });
  unary("Floor", [](const Expr &x, const Node &) { return ir::floor(x); });
  unary("Ceil", [](const Expr &x, const Node &) { return ir::ceil(x); });
  unary("Round", [](const Expr &x, const Node &) { return ir::nearbyint(x); });
  unary("Sin", [](const Expr &x, const Node &) { return ir::sin(x); });
  unary("Cos", [](const Expr &x, const Node &) { return ir::cos(x); });
  unary("Tan", [](const Expr &x, const Node &) { return ir::tan(x); });
  unary("Asin", [](const Expr &x, const Node &) { return ir::asin(x); });
  unary("Acos", [](const Expr &x, const Node &) { return ir::acos(x); });
  unary("Atan", [](const Expr &x, const Node &) { return ir::atan(x); });
  unary("Sinh", [](const Expr &x, const Node &) { return ir::sinh(x); });
  unary("Cosh", [](const Expr &x, const Node &) { return ir::cosh(x); });
  unary("Asinh", [](const Expr &x, const Node &) { return ir::asinh(x); });
  unary("Acosh", [](const Expr &x, const Node &) { return ir::acosh(x); });
  unary("Atanh", [](const Expr &x, const Node &) { return ir::atanh(x); });
  unary("Reciprocal", [](const Expr &x, const Node &) { return fconst(x, 1.0) / x; });
  unary("Softplus", [](const Expr &x, const Node &) {
    // log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|).
    return ir::max(x, fconst(x, 0.0)) + ir::log(fconst(x, 1.0) + ir::exp(-ir::fabs(x)));
  });
  unary("Softsign", [](const Expr &x, const Node &) { return x / (fconst(x, 1.0) + ir::fabs(x)); });
  unary("Elu", [](const Expr &x, const Node &n) {
    const double alpha = n.attr_float("alpha", 1.0);
    return ir::select(x < fconst(x, 0.0), fconst(x, alpha) * (ir::exp(x) - fconst(x, 1.0)), x);
  });
  unary("Celu", [](const Expr &x, const Node &n) {
    const double alpha = n.attr_float("alpha", 1.0);
    return ir::max(x, fconst(x, 0.0)) +
           ir::min(fconst(x, 0.0), fconst(x, alpha) * (ir::exp(x / fconst(x, alpha)) - fconst(x, 1.0)));
  });
  unary("Selu", [](const Expr &x, const Node &n) {
    const double alpha = n.attr_float("alpha", 1.67326319217681884765625);
    const double gamma = n.attr_float("gamma", 1.05070102214813232421875);
    return fconst(x, gamma) * ir::select(x <= fconst(x, 0.0), fconst(x, alpha) * ir::exp(x) - fconst(x, alpha), x);
  });
  unary("LeakyRelu", [](const Expr &x, const Node &n) {
    const double alpha = n.attr_float("alpha", 0.01);
    return ir::select(x < fconst(x, 0.0), fconst(x, alpha) * x, x);
  });
  unary("ThresholdedRelu", [](const Expr &x, const Node &n) {
    const double alpha = n.attr_float("alpha", 1.0);
    return ir::select(x > fconst(x, alpha), x, fconst(x, 0.0));
  });
  unary("HardSigmoid", [](const Expr &x, const Node &n) {
    const double alpha = n.attr_float("alpha", 0.2), beta = n.attr_float("beta", 0.5);
    return ir::max(fconst(x, 0.0), ir::min(fconst(x, 1.0), fconst(x, alpha) * x + fconst(x, beta)));
  });
  unary("HardSwish", [](const Expr &x, const Node &) {
    return x * ir::max(fconst(x, 0.0), ir::min(fconst(x, 1.0), x * fconst(x, 1.0 / 6.0) + fconst(x, 0.5)));
  });
  unary("Mish", [](const Expr &x, const Node &) {
    return x * ir::tanh(ir::max(x, fconst(x, 0.0)) + ir::log(fconst(x, 1.0) + ir::exp(-ir::fabs(x))));
  });
  unary(
      "Shrink",
      [](const Expr &x, const Node &n) {
        const double lambd = n.attr_float("lambd", 0.5), bias = n.attr_float("bias", 0.0);
        if (!x.type().is_float()) {
          Expr xf = ir::cast(ir::Float(64), x);
          Expr r = ir::select(xf < make_const(ir::Float(64), -lambd), xf + make_const(ir::Float(64), bias),
                              ir::select(xf > make_const(ir::Float(64), lambd), xf - make_const(ir::Float(64), bias),
                                         make_const(ir::Float(64), 0.0)));
          return ir::cast(x.type(), r);
        }
        return ir::select(x < fconst(x, -lambd), x + fconst(x, bias),
                          ir::select(x > fconst(x, lambd), x - fconst(x, bias), fconst(x, 0.0)));
      },
      false);
  // --- unary on any number ---
  unary(
      "Abs", [](const Expr &x, const Node &) { return ir::abs(x); }, false);
  unary(
      "Neg", [](const Expr &x, const Node &) { return -x; }, false);
  unary(
      "Relu", [](const Expr &x, const Node &) { return ir::max(x, make_const(x.type(), int64_t{0})); }, false);
  unary(
      "Sign",
      [](const Expr &x, const Node &) {
        Expr zero = make_const(x.type(), int64_t{0});
        return ir::select(x > zero, make_const(x.type(), int64_t{1}),
                          ir::select(x < zero, make_const(x.type(), int64_t{-1}), zero));
      },
      false);
  unary(
      "Not", [](const Expr &x, const Node &) { return !x; }, false);
  unary(
      "IsNaN", [](const Expr &x, const Node &) { return x != x; }, true, to_bool_type);
  unary(
      "IsInf",
      [](const Expr &x, const Node &n) {
        const bool pos = n.attr_int("detect_positive", 1) != 0, neg = n.attr_int("detect_negative", 1) != 0;
        Expr inf = fconst(x, std::numeric_limits<double>::infinity());
        Expr r = ir::const_false();
        if (pos) r = r || x == inf;
        if (neg) r = r || x == -inf;
        return r;
      },
      true, to_bool_type);
  unary(
      "Identity", [](const Expr &x, const Node &) { return x; }, false);

  // --- binary arithmetic ---
  binary("Add", [](Expr a, Expr b, const Node &, DataType) { return a + b; });
  binary("Sub", [](Expr a, Expr b, const Node &, DataType) { return a - b; });
  binary("Mul", [](Expr a, Expr b, const Node &, DataType) { return a * b; });
  binary("Div", [](Expr a, Expr b, const Node &, DataType t) { return t.is_float() ? a / b : ir::truncdiv(a, b); });
  binary(
      "Pow",
      [](Expr a, Expr b, const Node &, DataType t) {
        if (!t.is_float()) return int_pow(a, b);
        if (!b.type().is_float() || b.type() != t) b = ir::cast(t, b);
        return ir::pow(a, b);
      },
      false);
  binary("Mod", [](Expr a, Expr b, const Node &n, DataType t) {
    if (n.attr_int("fmod", 0) != 0 || t.is_float()) {
      if (t.is_float()) {
        // C fmod: a - trunc(a / b) * b, in double for accuracy.
        Expr ad = ir::cast(ir::Float(64), a), bd = ir::cast(ir::Float(64), b);
        Expr q = ad / bd;
        Expr tq = ir::select(q < make_const(ir::Float(64), 0.0), ir::ceil(q), ir::floor(q));
        return ir::cast(t, ad - tq * bd);
      }
      return ir::truncmod(a, b);
    }
    return ir::floormod(a, b);
  });
  binary("PRelu", [](Expr x, Expr slope, const Node &, DataType) {
    return ir::select(x < ir::make_const(x.type(), int64_t{0}), slope * x, x);
  });
  binary("BitShift", [](Expr a, Expr b, const Node &n, DataType t) {
    // Shifts of unsigned integers as multiplication and division by powers of two.
    Expr p = int_pow(ir::make_const(t, int64_t{2}), b);
    return n.attr_string("direction", "LEFT") == "RIGHT" ? ir::truncdiv(a, p) : a * p;
  });
  // --- comparisons and logic: bool out ---
  binary(
      "Equal", [](Expr a, Expr b, const Node &, DataType) { return a == b; }, true, to_bool_type);
  binary(
      "Greater", [](Expr a, Expr b, const Node &, DataType) { return a > b; }, true, to_bool_type);
  binary(
      "GreaterOrEqual", [](Expr a, Expr b, const Node &, DataType) { return a >= b; }, true, to_bool_type);
  binary(
      "Less", [](Expr a, Expr b, const Node &, DataType) { return a < b; }, true, to_bool_type);
  binary(
      "LessOrEqual", [](Expr a, Expr b, const Node &, DataType) { return a <= b; }, true, to_bool_type);
  binary(
      "And", [](Expr a, Expr b, const Node &, DataType) { return a && b; }, true, to_bool_type);
  binary(
      "Or", [](Expr a, Expr b, const Node &, DataType) { return a || b; }, true, to_bool_type);
  binary(
      "Xor", [](Expr a, Expr b, const Node &, DataType) { return a != b; }, true, to_bool_type);
  // --- variadic ---
  variadic("Sum", [](Expr a, Expr b) { return a + b; });
  variadic(
      "Mean", [](Expr a, Expr b) { return a + b; }, true);
  variadic("Max", [](Expr a, Expr b) { return ir::max(a, b); });
  variadic("Min", [](Expr a, Expr b) { return ir::min(a, b); });

  // --- Where(cond, x, y) ---
  {
    OpDef d;
    d.name = "Where";
    d.min_inputs = d.max_inputs = 3;
    d.infer = [](const OpContext &ctx) {
      if (!ctx.in(0).dtype.is_bool()) ctx.fail("the condition must be bool");
      require_same_dtype(ctx, 1, 2);
      return std::vector<TensorType>{
          TensorType{ctx.in(1).dtype, broadcast_shapes(ctx, {ctx.in(0).shape, ctx.in(1).shape, ctx.in(2).shape})}};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor c = add_input(k, ctx, 0, "cond"), x = add_input(k, ctx, 1, "x"), y = add_input(k, ctx, 2, "y");
      const auto sc = ctx.in(0).shape, sx = ctx.in(1).shape, sy = ctx.in(2).shape;
      const auto shape = broadcast_shapes(ctx, {sc, sx, sy});
      k.outputs.push_back(compute(
          shape,
          [&](const std::vector<Expr> &i) {
            return ir::select(at(c, static_cast<int>(sc.size()), broadcast_index(sc, i)),
                              at(x, static_cast<int>(sx.size()), broadcast_index(sx, i)),
                              at(y, static_cast<int>(sy.size()), broadcast_index(sy, i)));
          },
          "where"));
      return k;
    };
    register_op(std::move(d));
  }
  // --- Cast {to: dtype name} ---
  {
    OpDef d;
    d.name = "Cast";
    d.infer = [](const OpContext &ctx) {
      const std::string to = ctx.node().attr_string("to", "");
      auto t = dtype_from_name(to);
      if (!t) ctx.fail(concat("cannot cast to '", to, "'"));
      return std::vector<TensorType>{TensorType{*t, ctx.in(0).shape}};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      const DataType to = *dtype_from_name(ctx.node().attr_string("to", ""));
      const DataType from = ctx.in(0).dtype;
      const int rank = ctx.in(0).rank();
      k.outputs.push_back(compute(
          ctx.in(0).shape,
          [&](const std::vector<Expr> &i) {
            Expr v = at(x, rank, i);
            if (to.is_bool()) return v != ir::make_const(from, int64_t{0});
            if (from.is_float() && to.is_float() && from.bits() == 16 && to.bits() == 64)
              return ir::cast(to, ir::cast(ir::Float(32), v));
            return ir::cast(to, v);
          },
          "cast"));
      return k;
    };
    register_op(std::move(d));
  }
  // --- Clip(x, min?, max?) with min and max as scalar inputs ---
  {
    OpDef d;
    d.name = "Clip";
    d.max_inputs = 3;
    d.infer = [](const OpContext &ctx) {
      for (int i = 1; i < 3; ++i) {
        if (!ctx.has_input(i)) continue;
        if (ctx.in(i).numel() != 1) ctx.fail(concat("input ", i, " must be a scalar, got ", ctx.in(i).str()));
        require_same_dtype(ctx, 0, i);
      }
      return std::vector<TensorType>{ctx.in(0)};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      te::Tensor lo, hi;
      if (ctx.has_input(1)) lo = add_input(k, ctx, 1, "lo");
      if (ctx.has_input(2)) hi = add_input(k, ctx, 2, "hi");
      const int rank = ctx.in(0).rank();
      k.outputs.push_back(compute(
          ctx.in(0).shape,
          [&](const std::vector<Expr> &i) {
            Expr v = at(x, rank, i);
            if (lo.defined())
              v = ir::max(
                  v, lo(std::vector<Expr>(static_cast<size_t>(lo.ndim()), ir::make_const(ir::Int(32), int64_t{0}))));
            if (hi.defined())
              v = ir::min(
                  v, hi(std::vector<Expr>(static_cast<size_t>(hi.ndim()), ir::make_const(ir::Int(32), int64_t{0}))));
            return v;
          },
          "clip"));
      return k;
    };
    register_op(std::move(d));
  }
  // --- Dropout(x, ratio?, training_mode?) at inference: y = x, mask = true ---
  {
    OpDef d;
    d.name = "Dropout";
    d.max_inputs = 3;
    d.max_outputs = 2;
    d.infer = [](const OpContext &ctx) {
      if (ctx.has_input(2) && (!ctx.is_constant(2) || ctx.const_ints(2).at(0) != 0))
        ctx.fail(
            "training mode is not supported: Kiln compiles for inference (training_mode must be a constant false)");
      return std::vector<TensorType>{ctx.in(0), TensorType{ir::Bool(), ctx.in(0).shape}};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      const int rank = ctx.in(0).rank();
      k.outputs.push_back(compute(
          ctx.in(0).shape, [&](const std::vector<Expr> &i) { return at(x, rank, i); }, "y"));
      if (ctx.num_outputs() > 1)
        k.outputs.push_back(compute(
            ctx.in(0).shape, [&](const std::vector<Expr> &) { return ir::const_true(); }, "mask"));
      return k;
    };
    register_op(std::move(d));
  }
}

}  // namespace kiln::graph::detail
