// Ops outside the main families: the losses NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss,
// Einsum, QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear, OneHot, EyeLike, GatherND,
// ScatterElements, ScatterND, MeanVarianceNormalization, LpNormalization, and the windows
// HannWindow, HammingWindow and BlackmanWindow.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "compiler/graph/op_def.h"
#include "compiler/graph/op_families.h"
#include "compiler/ir/deploy_dtype.h"
#include "compiler/ir/float16.h"
#include "compiler/ir/op.h"

namespace kiln::graph::detail {

using ::kiln::detail::concat;

namespace {

using ir::DataType;
using ir::Expr;
using Index = std::vector<Expr>;

// Floats of 16 bits are computed in float32; other types in themselves.
DataType acc_type(DataType dt) { return dt.is_float() && dt.bits() == 16 ? ir::Float(32) : dt; }

void require_float(const OpContext &ctx, int i) {
  if (!ctx.in(i).dtype.is_float()) ctx.fail(concat("input ", i, " must be float, got ", dtype_name(ctx.in(i).dtype)));
}

void require_int(const OpContext &ctx, int i) {
  if (!ctx.in(i).dtype.is_integer_like())
    ctx.fail(concat("input ", i, " must be an integer tensor, got ", dtype_name(ctx.in(i).dtype)));
}

// An index read from a tensor, as int32, made non-negative by adding `dim` when negative.
Expr wrap_index(const Expr &v, int64_t dim) {
  Expr j = ir::cast(ir::Int(32), v);
  return ir::select(j < i32(0), j + i32(dim), j);
}

Expr clamp_index(const Expr &j, int64_t dim) { return ir::min(ir::max(j, i32(0)), i32(std::max<int64_t>(dim - 1, 0))); }

// The dtype named by attribute `key` (a dtype name such as "float32"), or `fallback` when absent.
DataType attr_dtype(const OpContext &ctx, const std::string &key, DataType fallback) {
  if (!ctx.node().has_attr(key)) return fallback;
  const std::string name = ctx.node().attr_string(key, "");
  auto t = dtype_from_name(name);
  if (!t) ctx.fail(concat(key, " '", name, "' is not a dtype Kiln supports"));
  return *t;
}

// A tensor of dtype `dt` and shape `shape` whose element k is value(k), converted to dt.
deploy::Tensor fill_tensor(const OpContext &ctx, DataType dt, const std::vector<int64_t> &shape,
                           const std::function<double(int64_t)> &value) {
  deploy::Tensor t = deploy::Tensor::empty(shape, ir::to_deploy_dtype(dt));
  const int64_t n = t.numel();
  void *p = t.data();
  for (int64_t k = 0; k < n; ++k) {
    const double v = value(k);
    if (dt.is_float() && dt.bits() == 64)
      static_cast<double *>(p)[k] = v;
    else if (dt.is_float() && dt.bits() == 32)
      static_cast<float *>(p)[k] = static_cast<float>(v);
    else if (dt.is_float() && dt.bits() == 16)
      static_cast<uint16_t *>(p)[k] = ir::float_to_half(static_cast<float>(v));
    else if (dt.is_bool())
      static_cast<uint8_t *>(p)[k] = v != 0 ? 1 : 0;
    else if (dt.is_int() && dt.bits() == 8)
      static_cast<int8_t *>(p)[k] = static_cast<int8_t>(v);
    else if (dt.is_int() && dt.bits() == 16)
      static_cast<int16_t *>(p)[k] = static_cast<int16_t>(v);
    else if (dt.is_int() && dt.bits() == 32)
      static_cast<int32_t *>(p)[k] = static_cast<int32_t>(v);
    else if (dt.is_int() && dt.bits() == 64)
      static_cast<int64_t *>(p)[k] = static_cast<int64_t>(v);
    else if (dt.is_uint() && dt.bits() == 8)
      static_cast<uint8_t *>(p)[k] = static_cast<uint8_t>(v);
    else if (dt.is_uint() && dt.bits() == 16)
      static_cast<uint16_t *>(p)[k] = static_cast<uint16_t>(v);
    else if (dt.is_uint() && dt.bits() == 32)
      static_cast<uint32_t *>(p)[k] = static_cast<uint32_t>(v);
    else if (dt.is_uint() && dt.bits() == 64)
      static_cast<uint64_t *>(p)[k] = static_cast<uint64_t>(v);
    else
      ctx.fail(concat("cannot produce ", dtype_name(dt), " values"));
  }
  return t;
}

// --- NegativeLogLikelihoodLoss(input, target, weight?) and SoftmaxCrossEntropyLoss(scores,
// labels, weights?) {reduction, ignore_index}: input [N, C, d1..dk], target [N, d1..dk] ---

std::string loss_reduction(const OpContext &ctx) {
  const std::string r = ctx.node().attr_string("reduction", "mean");
  if (r != "none" && r != "sum" && r != "mean") ctx.fail(concat("unknown reduction '", r, "'"));
  return r;
}

void loss_op(const std::string &name, bool softmax) {
  OpDef d;
  d.name = name;
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.max_outputs = softmax ? 2 : 1;
  d.infer = [](const OpContext &ctx) {
    const TensorType &x = ctx.in(0), &t = ctx.in(1);
    require_float(ctx, 0);
    require_int(ctx, 1);
    if (x.rank() < 2) ctx.fail(concat("input 0 must have rank 2 or more ([N, C, ...]), got ", x.str()));
    std::vector<int64_t> want = x.shape;
    want.erase(want.begin() + 1);
    if (t.shape != want)
      ctx.fail(concat("the target is ", t.str(), ", input 0 ", x.str(), " needs the shape ",
                      TensorType{t.dtype, want}.str()));
    if (ctx.has_input(2)) {
      const TensorType &w = ctx.in(2);
      if (w.dtype != x.dtype || w.shape != std::vector<int64_t>{x.shape[1]})
        ctx.fail(concat("the weight is ", w.str(), ", it must be ", TensorType{x.dtype, {x.shape[1]}}.str()));
    }
    const std::string r = loss_reduction(ctx);
    std::vector<TensorType> out{TensorType{x.dtype, r == "none" ? t.shape : std::vector<int64_t>{}}, x};
    return out;
  };
  d.kernel = [softmax, name](const OpContext &ctx) {
    Kernel k;
    te::Tensor x = add_input(k, ctx, 0, "x");
    te::Tensor target = add_input(k, ctx, 1, "target");
    te::Tensor w;
    if (ctx.has_input(2)) w = add_input(k, ctx, 2, "weight");
    const std::vector<int64_t> xs = ctx.in(0).shape, ts = ctx.in(1).shape;
    const int64_t classes = xs[1];
    const DataType dt = ctx.in(0).dtype, tdt = ctx.in(1).dtype;
    const DataType acc = acc_type(dt);
    const std::string reduction = loss_reduction(ctx);
    const bool has_ii = ctx.node().has_attr("ignore_index");
    const int64_t ii = ctx.node().attr_int("ignore_index", 0);

    // Log-probabilities: the input itself, or its log-softmax over axis 1.
    te::Tensor lp;
    if (softmax) {
      std::vector<int64_t> rshape = xs;
      rshape[1] = 1;
      auto over_c = [&](const Index &i, const te::IterVar &r) {
        Index s = i;
        s[1] = r->var;
        return ir::cast(acc, x(s));
      };
      auto at_c0 = [](const Index &i) {
        Index s = i;
        s[1] = i32(0);
        return s;
      };
      te::IterVar r1 = te::reduce_axis(i32(classes), "c");
      te::Tensor mx = compute(
          rshape, [&](const Index &i) { return te::max(over_c(i, r1), {r1}); }, name + "_max");
      te::IterVar r2 = te::reduce_axis(i32(classes), "c");
      te::Tensor se = compute(
          rshape, [&](const Index &i) { return te::sum(ir::exp(over_c(i, r2) - mx(at_c0(i))), {r2}); }, name + "_sum");
      lp = compute(
          xs, [&](const Index &i) { return ir::cast(acc, x(i)) - mx(at_c0(i)) - ir::log(se(at_c0(i))); },
          name + "_log_prob");
    }
    auto log_prob = [&](const Index &i) { return softmax ? lp(i) : ir::cast(acc, x(i)); };
    // For a target position j: whether it is ignored, its weight (0 when ignored) and its loss.
    auto ignored = [&](const Index &j) { return has_ii ? target(j) == ir::make_const(tdt, ii) : ir::const_false(); };
    auto cls = [&](const Index &j) { return clamp_index(ir::cast(ir::Int(32), target(j)), classes); };
    auto weight = [&](const Index &j) {
      Expr v = w.defined() ? ir::cast(acc, w(cls(j))) : ir::make_one(acc);
      return ir::select(ignored(j), ir::make_zero(acc), v);
    };
    auto loss = [&](const Index &j) {
      Index s{j[0], cls(j)};
      s.insert(s.end(), j.begin() + 1, j.end());
      return ir::select(ignored(j), ir::make_zero(acc), -log_prob(s) * weight(j));
    };
    if (reduction == "none") {
      k.outputs.push_back(compute(
          ts, [&](const Index &j) { return ir::cast(dt, loss(j)); }, name));
    } else {
      auto all_positions = [&]() {
        std::vector<te::IterVar> r;
        for (size_t a = 0; a < ts.size(); ++a) r.push_back(te::reduce_axis(i32(ts[a]), concat("j", a)));
        return r;
      };
      auto vars = [](const std::vector<te::IterVar> &r) {
        Index j;
        for (const auto &v : r) j.push_back(v->var);
        return j;
      };
      const auto r1 = all_positions();
      te::Tensor total = compute(
          {}, [&](const Index &) { return te::sum(loss(vars(r1)), r1); }, name + "_total");
      if (reduction == "sum") {
        k.outputs.push_back(compute(
            {}, [&](const Index &) { return ir::cast(dt, at(total, 0, {})); }, name));
      } else {
        const auto r2 = all_positions();
        te::Tensor wsum = compute(
            {}, [&](const Index &) { return te::sum(weight(vars(r2)), r2); }, name + "_weight");
        k.outputs.push_back(compute(
            {}, [&](const Index &) { return ir::cast(dt, at(total, 0, {}) / at(wsum, 0, {})); }, name));
      }
    }
    if (softmax && ctx.num_outputs() > 1)
      k.outputs.push_back(compute(
          xs, [&](const Index &i) { return ir::cast(dt, lp(i)); }, "log_prob"));
    return k;
  };
  register_op(std::move(d));
}

// --- Einsum(inputs...) {equation} ---

// Axis labels: a letter's character code, or kEllipsis + e for the e-th (right-aligned) dimension
// covered by "...".
constexpr int kEllipsis = 256;

struct EinsumSpec {
  std::vector<std::vector<int>> inputs;  // the labels of each input's axes
  std::vector<int> output;               // the labels of the output's axes
  std::map<int, int64_t> extent;         // every label's extent
};

std::vector<int> einsum_term(const OpContext &ctx, const std::string &term, int rank, int ellipsis_rank,
                             bool *has_ellipsis) {
  std::vector<int> labels;
  *has_ellipsis = false;
  for (size_t c = 0; c < term.size(); ++c) {
    if (term.compare(c, 3, "...") == 0) {
      if (*has_ellipsis) ctx.fail(concat("the term '", term, "' has more than one ellipsis"));
      *has_ellipsis = true;
      int n = ellipsis_rank;
      if (rank >= 0) {
        int letters = 0;
        for (char ch : term) letters += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
        n = rank - letters;
        if (n < 0) ctx.fail(concat("the term '", term, "' has more labels than its input's rank ", rank));
      }
      for (int e = 0; e < n; ++e) labels.push_back(kEllipsis + ellipsis_rank - n + e);
      c += 2;
      continue;
    }
    const char ch = term[c];
    if (!std::isalpha(static_cast<unsigned char>(ch))) ctx.fail(concat("the equation has the character '", ch, "'"));
    labels.push_back(ch);
  }
  return labels;
}

EinsumSpec einsum_spec(const OpContext &ctx) {
  std::string eq;
  for (char c : ctx.node().attr_string("equation", "")) {
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  }
  if (eq.empty()) ctx.fail("the equation attribute is required");
  const auto arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms{""};
  for (char c : lhs) {
    if (c == ',')
      terms.emplace_back();
    else
      terms.back() += c;
  }
  if (static_cast<int>(terms.size()) != ctx.num_inputs())
    ctx.fail(concat("the equation has ", terms.size(), " input terms for ", ctx.num_inputs(), " inputs"));
  // The ellipsis covers the most dimensions any input gives it; inputs broadcast against each other.
  int ellipsis_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    int letters = 0;
    for (char ch : terms[i]) letters += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
    if (terms[i].find("...") != std::string::npos)
      ellipsis_rank = std::max(ellipsis_rank, ctx.in(static_cast<int>(i)).rank() - letters);
  }
  EinsumSpec s;
  std::map<int, int> count;
  bool any_ellipsis = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    const TensorType &t = ctx.in(static_cast<int>(i));
    bool has_ellipsis;
    std::vector<int> labels = einsum_term(ctx, terms[i], t.rank(), ellipsis_rank, &has_ellipsis);
    any_ellipsis = any_ellipsis || has_ellipsis;
    if (static_cast<int>(labels.size()) != t.rank())
      ctx.fail(concat("the term '", terms[i], "' has ", labels.size(), " labels for input ", i, " of rank ", t.rank()));
    for (size_t a = 0; a < labels.size(); ++a) {
      const int l = labels[a];
      const int64_t n = t.shape[a];
      auto it = s.extent.find(l);
      if (it == s.extent.end()) {
        s.extent[l] = n;
      } else if (it->second != n) {
        // Ellipsis dimensions broadcast; letters must agree.
        if (l >= kEllipsis && (it->second == 1 || n == 1))
          it->second = std::max(it->second, n);
        else
          ctx.fail(concat("the extents ", it->second, " and ", n, " of label '",
                          l >= kEllipsis ? std::string("...") : std::string(1, static_cast<char>(l)), "' differ"));
      }
      if (l < kEllipsis) ++count[l];
    }
    s.inputs.push_back(labels);
  }
  if (arrow != std::string::npos) {
    bool has_ellipsis;
    s.output = einsum_term(ctx, eq.substr(arrow + 2), -1, ellipsis_rank, &has_ellipsis);
    std::vector<int> seen;
    for (int l : s.output) {
      if (l < kEllipsis && !count.count(l))
        ctx.fail(concat("the output label '", static_cast<char>(l), "' is not in any input"));
      if (std::find(seen.begin(), seen.end(), l) != seen.end())
        ctx.fail(concat("the output label '", static_cast<char>(l), "' is given twice"));
      seen.push_back(l);
    }
  } else {
    // Implicit output: the ellipsis dimensions, then the labels used once, in alphabetical order.
    if (any_ellipsis) {
      for (int e = 0; e < ellipsis_rank; ++e) s.output.push_back(kEllipsis + e);
    }
    for (const auto &[l, n] : count) {
      if (n == 1) s.output.push_back(l);
    }
  }
  return s;
}

void einsum_op() {
  OpDef d;
  d.name = "Einsum";
  d.max_inputs = 1 << 16;
  d.infer = [](const OpContext &ctx) {
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      if (ctx.in(i).dtype != ctx.in(0).dtype) ctx.fail(concat("inputs 0 and ", i, " have different dtypes"));
    }
    EinsumSpec s = einsum_spec(ctx);
    TensorType t{ctx.in(0).dtype, {}};
    for (int l : s.output) t.shape.push_back(s.extent.at(l));
    return std::vector<TensorType>{t};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    std::vector<te::Tensor> in;
    for (int i = 0; i < ctx.num_inputs(); ++i) in.push_back(add_input(k, ctx, i));
    EinsumSpec s = einsum_spec(ctx);
    const DataType dt = ctx.in(0).dtype, acc = acc_type(dt);
    std::vector<int64_t> shape;
    for (int l : s.output) shape.push_back(s.extent.at(l));
    // Labels missing from the output are summed over.
    std::vector<int> summed;
    for (const auto &labels : s.inputs) {
      for (int l : labels) {
        if (std::find(s.output.begin(), s.output.end(), l) == s.output.end() &&
            std::find(summed.begin(), summed.end(), l) == summed.end())
          summed.push_back(l);
      }
    }
    std::vector<te::IterVar> raxes;
    for (int l : summed) {
      raxes.push_back(te::reduce_axis(
          i32(s.extent.at(l)), l >= kEllipsis ? concat("e", l - kEllipsis) : std::string(1, static_cast<char>(l))));
    }
    te::Tensor sum = compute(
        shape,
        [&](const Index &i) {
          std::map<int, Expr> var;
          for (size_t a = 0; a < s.output.size(); ++a) var[s.output[a]] = i[a];
          for (size_t a = 0; a < summed.size(); ++a) var[summed[a]] = raxes[a]->var;
          Expr product;
          for (size_t t = 0; t < in.size(); ++t) {
            const auto &ts = ctx.in(static_cast<int>(t)).shape;
            Index idx;
            for (size_t a = 0; a < ts.size(); ++a) {
              const int l = s.inputs[t][a];
              idx.push_back(ts[a] == 1 && s.extent.at(l) != 1 ? i32(0) : var.at(l));
            }
            Expr v = ir::cast(acc, at(in[t], static_cast<int>(ts.size()), idx));
            product = product.defined() ? product * v : v;
          }
          return raxes.empty() ? ir::cast(dt, product) : te::sum(product, raxes);
        },
        "einsum");
    // A sum accumulated in a wider type is narrowed in a compute of its own.
    const int orank = static_cast<int>(shape.size());
    k.outputs.push_back(
        sum.dtype() == dt ? sum
                          : compute(
                                shape, [&](const Index &i) { return ir::cast(dt, at(sum, orank, i)); }, "einsum_cast"));
    return k;
  };
  register_op(std::move(d));
}

// --- QuantizeLinear(x, scale, zero_point?) and DequantizeLinear(x, scale, zero_point?) {axis}:
// per tensor (a one-element scale) or per axis (a 1-D scale along `axis`) ---

// Whether the scale applies per axis; checks the scale's and the zero point's shapes.
bool quant_per_axis(const OpContext &ctx, int64_t *axis) {
  const TensorType &x = ctx.in(0), &scale = ctx.in(1);
  if (ctx.has_input(2) && ctx.in(2).shape != scale.shape)
    ctx.fail(concat("the zero point ", ctx.in(2).str(), " and the scale ", scale.str(), " have different shapes"));
  if (scale.numel() == 1 && scale.rank() <= 1) return false;
  if (scale.rank() != 1) ctx.fail(concat("the scale must be a scalar or 1-D, got ", scale.str()));
  *axis = ctx.axis(ctx.node().attr_int("axis", 1), x.rank());
  if (x.shape[static_cast<size_t>(*axis)] != scale.shape[0])
    ctx.fail(concat("the scale has ", scale.shape[0], " values for axis ", *axis, " of ", x.str()));
  return true;
}

void quantize_op(bool quantize) {
  OpDef d;
  d.name = quantize ? "QuantizeLinear" : "DequantizeLinear";
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.infer = [quantize](const OpContext &ctx) {
    require_float(ctx, 1);
    int64_t axis = 0;
    quant_per_axis(ctx, &axis);
    if (quantize) {
      const DataType q = ctx.has_input(2) ? ctx.in(2).dtype : ir::UInt(8);
      if (q != ir::UInt(8) && q != ir::Int(8)) ctx.fail(concat("quantizes to uint8 or int8, not ", dtype_name(q)));
      if (!ctx.in(0).dtype.is_float() && ctx.in(0).dtype != ir::Int(32))
        ctx.fail(concat("input 0 must be float or int32, got ", dtype_name(ctx.in(0).dtype)));
      return std::vector<TensorType>{TensorType{q, ctx.in(0).shape}};
    }
    const DataType q = ctx.in(0).dtype;
    if (q != ir::UInt(8) && q != ir::Int(8) && q != ir::Int(32))
      ctx.fail(concat("dequantizes uint8, int8 or int32, not ", dtype_name(q)));
    if (ctx.has_input(2) && ctx.in(2).dtype != q) ctx.fail("the zero point and input 0 have different dtypes");
    return std::vector<TensorType>{TensorType{ctx.in(1).dtype, ctx.in(0).shape}};
  };
  d.kernel = [quantize](const OpContext &ctx) {
    Kernel k;
    te::Tensor x = add_input(k, ctx, 0, "x");
    te::Tensor scale = add_input(k, ctx, 1, "scale");
    te::Tensor zp;
    if (ctx.has_input(2)) zp = add_input(k, ctx, 2, "zero_point");
    int64_t axis = 0;
    const bool per_axis = quant_per_axis(ctx, &axis);
    const int rank = ctx.in(0).rank();
    const DataType xdt = ctx.in(0).dtype;
    const DataType fdt = quantize ? (xdt == ir::Float(64) ? ir::Float(64) : ir::Float(32)) : acc_type(ctx.in(1).dtype);
    const DataType out = quantize ? (zp.defined() ? ctx.in(2).dtype : ir::UInt(8)) : ctx.in(1).dtype;
    auto param = [&](const te::Tensor &t, const Index &i) {
      return ir::cast(fdt, t(per_axis ? i[static_cast<size_t>(axis)] : i32(0)));
    };
    k.outputs.push_back(compute(
        ctx.in(0).shape,
        [&](const Index &i) {
          Expr v = ir::cast(fdt, at(x, rank, i));
          Expr z = zp.defined() ? param(zp, i) : ir::make_zero(fdt);
          if (!quantize) return ir::cast(out, (v - z) * param(scale, i));
          Expr q = ir::nearbyint(v / param(scale, i)) + z;
          const double lo = out == ir::UInt(8) ? 0 : -128, hi = out == ir::UInt(8) ? 255 : 127;
          q = ir::min(ir::max(q, ir::make_const(fdt, lo)), ir::make_const(fdt, hi));
          return ir::cast(out, q);
        },
        quantize ? "quantize" : "dequantize"));
    return k;
  };
  register_op(std::move(d));
}

// --- DynamicQuantizeLinear(x): the uint8 quantization of x whose scale and zero point map
// [min(x, 0), max(x, 0)] onto [0, 255]; outputs y, y_scale, y_zero_point ---

void dynamic_quantize_op() {
  OpDef d;
  d.name = "DynamicQuantizeLinear";
  d.min_outputs = d.max_outputs = 3;
  d.infer = [](const OpContext &ctx) {
    if (ctx.in(0).dtype != ir::Float(32))
      ctx.fail(concat("input 0 must be float32, got ", dtype_name(ctx.in(0).dtype)));
    if (ctx.in(0).numel() == 0) ctx.fail("cannot quantize an empty tensor: its range is undefined");
    return std::vector<TensorType>{TensorType{ir::UInt(8), ctx.in(0).shape}, TensorType{ir::Float(32), {}},
                                   TensorType{ir::UInt(8), {}}};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    te::Tensor x = add_input(k, ctx, 0, "x");
    const auto shape = ctx.in(0).shape;
    const int rank = ctx.in(0).rank();
    const DataType f = ir::Float(32);
    auto over_all = [&](bool is_max) {
      std::vector<te::IterVar> r;
      Index s;
      for (size_t a = 0; a < shape.size(); ++a) {
        r.push_back(te::reduce_axis(i32(shape[a]), concat("r", a)));
        s.push_back(r.back()->var);
      }
      return compute(
          {}, [&](const Index &) { return is_max ? te::max(at(x, rank, s), r) : te::min(at(x, rank, s), r); },
          is_max ? "x_max" : "x_min");
    };
    te::Tensor lo = over_all(false), hi = over_all(true);
    auto clamp_u8 = [&](const Expr &v) { return ir::min(ir::max(v, ir::make_zero(f)), ir::make_const(f, 255.0)); };
    te::Tensor scale = compute(
        {},
        [&](const Index &) {
          return (ir::max(at(hi, 0, {}), ir::make_zero(f)) - ir::min(at(lo, 0, {}), ir::make_zero(f))) /
                 ir::make_const(f, 255.0);
        },
        "scale");
    te::Tensor zp = compute(
        {},
        [&](const Index &) {
          return ir::nearbyint(clamp_u8(-ir::min(at(lo, 0, {}), ir::make_zero(f)) / at(scale, 0, {})));
        },
        "zero_point");
    k.outputs.push_back(compute(
        shape,
        [&](const Index &i) {
          return ir::cast(ir::UInt(8), clamp_u8(ir::nearbyint(at(x, rank, i) / at(scale, 0, {})) + at(zp, 0, {})));
        },
        "y"));
    k.outputs.push_back(compute(
        {}, [&](const Index &) { return at(scale, 0, {}); }, "y_scale"));
    k.outputs.push_back(compute(
        {}, [&](const Index &) { return ir::cast(ir::UInt(8), at(zp, 0, {})); }, "y_zero_point"));
    return k;
  };
  register_op(std::move(d));
}

// --- ScatterElements(data, indices, updates) and ScatterND(data, indices, updates) {reduction}:
// each output element is data's, combined with the updates whose index is that element's (the
// last of them for reduction "none") ---

enum class ScatterKind { None, Add, Mul, Max, Min };

ScatterKind scatter_kind(const OpContext &ctx) {
  const std::string r = ctx.node().attr_string("reduction", "none");
  if (r == "none") return ScatterKind::None;
  if (r == "add") return ScatterKind::Add;
  if (r == "mul") return ScatterKind::Mul;
  if (r == "max") return ScatterKind::Max;
  if (r == "min") return ScatterKind::Min;
  ctx.fail(concat("unknown reduction '", r, "'"));
}

// For output element i and update position u (a point of the update positions' grid): whether the
// update there goes to i, and the update (read in bounds even when it does not match).
struct ScatterCandidate {
  Expr match;
  Expr update;
};
using ScatterCandidateFn = std::function<ScatterCandidate(const Index &i, const Index &u)>;

// The scatter of updates over a grid of update positions of extents `grid` into `data` (shape ds).
te::Tensor scatter(ScatterKind kind, const te::Tensor &data, const std::vector<int64_t> &ds,
                   const std::vector<int64_t> &grid, const ScatterCandidateFn &candidate, const std::string &name) {
  int64_t positions = 1;
  for (int64_t n : grid) positions *= n;
  if (positions == 0)
    return compute(
        ds, [&](const Index &i) { return data(i); }, name);
  auto make_axes = [&](const char *p) {
    std::vector<te::IterVar> r;
    for (size_t a = 0; a < grid.size(); ++a) r.push_back(te::reduce_axis(i32(grid[a]), concat(p, a)));
    return r;
  };
  auto vars = [](const std::vector<te::IterVar> &r) {
    Index u;
    for (const auto &v : r) u.push_back(v->var);
    return u;
  };
  const DataType dt = data.dtype();
  auto combine = [&](const Expr &base, const ScatterCandidate &c) {
    switch (kind) {
      case ScatterKind::Add:
        return base + ir::select(c.match, c.update, ir::make_zero(dt));
      case ScatterKind::Mul:
        return base * ir::select(c.match, c.update, ir::make_one(dt));
      case ScatterKind::Max:
        return ir::select(c.match, ir::max(base, c.update), base);
      case ScatterKind::Min:
        return ir::select(c.match, ir::min(base, c.update), base);
      case ScatterKind::None:
        break;
    }
    return ir::select(c.match, c.update, base);
  };
  if (grid.empty())
    return compute(
        ds, [&](const Index &i) { return combine(data(i), candidate(i, {})); }, name);
  if (kind == ScatterKind::None) {
    // The flat number of the last matching position (or -1), then its update.
    auto flat = [&](const Index &u) {
      Expr f = i32(0);
      for (size_t a = 0; a < grid.size(); ++a) f = f * i32(grid[a]) + u[a];
      return f;
    };
    te::Tensor last = compute(
        ds,
        [&](const Index &i) {
          auto r = make_axes("u");
          Index u = vars(r);
          return te::max(ir::select(candidate(i, u).match, flat(u), i32(-1)), r);
        },
        name + "_last");
    return compute(
        ds,
        [&](const Index &i) {
          Expr p = last(i);
          Expr rest = ir::max(p, i32(0));
          Index u(grid.size());
          for (size_t a = grid.size(); a-- > 0;) {
            u[a] = ir::floormod(rest, i32(grid[a]));
            rest = ir::floordiv(rest, i32(grid[a]));
          }
          return ir::if_then_else(p >= i32(0), candidate(i, u).update, data(i));
        },
        name);
  }
  te::Tensor reduced = compute(
      ds,
      [&](const Index &i) {
        auto r = make_axes("u");
        ScatterCandidate c = candidate(i, vars(r));
        switch (kind) {
          case ScatterKind::Add:
            return te::sum(ir::select(c.match, c.update, ir::make_zero(dt)), r);
          case ScatterKind::Mul:
            return te::prod(ir::select(c.match, c.update, ir::make_one(dt)), r);
          case ScatterKind::Max:
            return te::max(ir::select(c.match, c.update, ir::min_value(dt)), r);
          case ScatterKind::Min:
            return te::min(ir::select(c.match, c.update, ir::max_value(dt)), r);
          case ScatterKind::None:
            break;
        }
        return Expr();
      },
      name + "_updates");
  return compute(
      ds,
      [&](const Index &i) {
        Expr v = reduced(i);
        switch (kind) {
          case ScatterKind::Add:
            return data(i) + v;
          case ScatterKind::Mul:
            return data(i) * v;
          case ScatterKind::Max:
            return ir::max(data(i), v);
          case ScatterKind::Min:
            return ir::min(data(i), v);
          case ScatterKind::None:
            break;
        }
        return v;
      },
      name);
}

void scatter_elements_op() {
  OpDef d;
  d.name = "ScatterElements";
  d.min_inputs = d.max_inputs = 3;
  d.infer = [](const OpContext &ctx) {
    const TensorType &data = ctx.in(0), &idx = ctx.in(1), &upd = ctx.in(2);
    require_int(ctx, 1);
    if (data.rank() == 0) ctx.fail("cannot scatter into a scalar");
    if (idx.rank() != data.rank()) ctx.fail(concat("indices ", idx.str(), " and data ", data.str(), " differ in rank"));
    if (upd.shape != idx.shape || upd.dtype != data.dtype)
      ctx.fail(concat("updates ", upd.str(), " must be ", TensorType{data.dtype, idx.shape}.str()));
    const int64_t axis = ctx.axis(ctx.node().attr_int("axis", 0), data.rank());
    for (int64_t a = 0; a < data.rank(); ++a) {
      if (a != axis && idx.shape[static_cast<size_t>(a)] > data.shape[static_cast<size_t>(a)])
        ctx.fail(concat("indices ", idx.str(), " are larger than data ", data.str(), " on axis ", a));
    }
    scatter_kind(ctx);
    return std::vector<TensorType>{data};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    te::Tensor data = add_input(k, ctx, 0, "data");
    te::Tensor indices = add_input(k, ctx, 1, "indices");
    te::Tensor updates = add_input(k, ctx, 2, "updates");
    const auto ds = ctx.in(0).shape, is = ctx.in(1).shape;
    const size_t axis = static_cast<size_t>(ctx.axis(ctx.node().attr_int("axis", 0), ctx.in(0).rank()));
    // The candidates for output element i: the positions of the indices equal to i except along
    // the axis; one exists only where i is inside the indices' shape.
    auto candidate = [&](const Index &i, const Index &u) {
      Index j = i;
      Expr inside = ir::const_true();
      for (size_t a = 0; a < ds.size(); ++a) {
        if (a == axis) {
          j[a] = u[0];
        } else if (is[a] < ds[a]) {
          inside = inside && i[a] < i32(is[a]);
          j[a] = ir::min(i[a], i32(is[a] - 1));
        }
      }
      return ScatterCandidate{inside && wrap_index(indices(j), ds[axis]) == i[axis], updates(j)};
    };
    const int64_t grid = ctx.in(1).numel() == 0 ? 0 : is[axis];
    k.outputs.push_back(scatter(scatter_kind(ctx), data, ds, {grid}, candidate, "scatter_elements"));
    return k;
  };
  register_op(std::move(d));
}

void scatter_nd_op() {
  OpDef d;
  d.name = "ScatterND";
  d.min_inputs = d.max_inputs = 3;
  d.infer = [](const OpContext &ctx) {
    const TensorType &data = ctx.in(0), &idx = ctx.in(1), &upd = ctx.in(2);
    require_int(ctx, 1);
    if (data.rank() == 0) ctx.fail("cannot scatter into a scalar");
    if (idx.rank() == 0) ctx.fail("indices must have rank 1 or more");
    const int64_t kk = idx.shape.back();
    if (kk < 1 || kk > data.rank())
      ctx.fail(concat("the last axis of indices ", idx.str(), " must be in [1, ", data.rank(), "]"));
    std::vector<int64_t> want(idx.shape.begin(), idx.shape.end() - 1);
    want.insert(want.end(), data.shape.begin() + kk, data.shape.end());
    if (upd.shape != want || upd.dtype != data.dtype)
      ctx.fail(concat("updates ", upd.str(), " must be ", TensorType{data.dtype, want}.str()));
    scatter_kind(ctx);
    return std::vector<TensorType>{data};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    te::Tensor data = add_input(k, ctx, 0, "data");
    te::Tensor indices = add_input(k, ctx, 1, "indices");
    te::Tensor updates = add_input(k, ctx, 2, "updates");
    const auto ds = ctx.in(0).shape, is = ctx.in(1).shape;
    const size_t kk = static_cast<size_t>(is.back());
    std::vector<int64_t> grid(is.begin(), is.end() - 1);
    // Update position u writes the slice data[indices[u]]: it matches i when indices[u] is i's
    // first kk coordinates.
    auto candidate = [&](const Index &i, const Index &u) {
      Expr match = ir::const_true();
      for (size_t c = 0; c < kk; ++c) {
        Index q = u;
        q.push_back(i32(static_cast<int64_t>(c)));
        match = match && wrap_index(indices(q), ds[c]) == i[c];
      }
      Index s = u;
      s.insert(s.end(), i.begin() + static_cast<std::ptrdiff_t>(kk), i.end());
      return ScatterCandidate{match, at(updates, ctx.in(2).rank(), s)};
    };
    if (ctx.in(1).numel() == 0) grid.assign(1, 0);
    k.outputs.push_back(scatter(scatter_kind(ctx), data, ds, grid, candidate, "scatter_nd"));
    return k;
  };
  register_op(std::move(d));
}

// --- OneHot(indices, depth, values) {axis}: values[1] where the index (negative counts from depth)
// is the position along the new axis, values[0] elsewhere ---

int64_t one_hot_depth(const OpContext &ctx) {
  if (ctx.in(1).numel() != 1) ctx.fail(concat("depth must be a scalar, got ", ctx.in(1).str()));
  const double depth = ctx.const_floats(1).at(0);
  if (!(depth >= 1) || depth > 1e9) ctx.fail(concat("depth ", depth, " is not a positive count"));
  return static_cast<int64_t>(depth);
}

void one_hot_op() {
  OpDef d;
  d.name = "OneHot";
  d.min_inputs = d.max_inputs = 3;
  d.const_inputs = {1};
  auto shape_of = [](const OpContext &ctx, int64_t *axis) {
    const int64_t rank = ctx.in(0).rank() + 1;
    *axis = ctx.axis(ctx.node().attr_int("axis", -1), rank);
    std::vector<int64_t> s = ctx.in(0).shape;
    s.insert(s.begin() + *axis, one_hot_depth(ctx));
    return s;
  };
  d.infer = [shape_of](const OpContext &ctx) {
    if (ctx.in(2).rank() != 1 || ctx.in(2).numel() != 2)
      ctx.fail(concat("values must have two elements (off, on), got ", ctx.in(2).str()));
    int64_t axis;
    return std::vector<TensorType>{TensorType{ctx.in(2).dtype, shape_of(ctx, &axis)}};
  };
  d.kernel = [shape_of](const OpContext &ctx) {
    Kernel k;
    te::Tensor indices = add_input(k, ctx, 0, "indices");
    te::Tensor values = add_input(k, ctx, 2, "values");
    int64_t axis;
    const std::vector<int64_t> shape = shape_of(ctx, &axis);
    const int64_t depth = one_hot_depth(ctx);
    const int irank = ctx.in(0).rank();
    k.outputs.push_back(compute(
        shape,
        [&](const Index &i) {
          Index src = i;
          src.erase(src.begin() + axis);
          Expr j = ir::cast(ir::Int(64), at(indices, irank, src));
          j = ir::select(j < ir::make_const(ir::Int(64), int64_t{0}), j + ir::make_const(ir::Int(64), depth), j);
          Expr hot = j == ir::cast(ir::Int(64), i[static_cast<size_t>(axis)]);
          return ir::select(hot, values(i32(1)), values(i32(0)));
        },
        "one_hot"));
    return k;
  };
  register_op(std::move(d));
}

// --- EyeLike(x) {k, dtype}: ones on the k-th diagonal of a matrix of x's shape ---

void eye_like_op() {
  OpDef d;
  d.name = "EyeLike";
  d.infer = [](const OpContext &ctx) {
    if (ctx.in(0).rank() != 2) ctx.fail(concat("needs a rank-2 input, got ", ctx.in(0).str()));
    return std::vector<TensorType>{TensorType{attr_dtype(ctx, "dtype", ctx.in(0).dtype), ctx.in(0).shape}};
  };
  d.evaluate = [](const OpContext &ctx) {
    const auto &s = ctx.in(0).shape;
    const int64_t diag = ctx.node().attr_int("k", 0), cols = s[1];
    return std::vector<deploy::Tensor>{fill_tensor(ctx, attr_dtype(ctx, "dtype", ctx.in(0).dtype), s,
                                                   [&](int64_t e) { return e % cols - e / cols == diag ? 1.0 : 0.0; })};
  };
  register_op(std::move(d));
}

// --- GatherND(data, indices) {batch_dims}: output[b..., q..., rest...] =
// data[b..., indices[b..., q..., :], rest...] ---

void gather_nd_op() {
  OpDef d;
  d.name = "GatherND";
  d.min_inputs = d.max_inputs = 2;
  auto shape_of = [](const OpContext &ctx) {
    const TensorType &data = ctx.in(0), &idx = ctx.in(1);
    require_int(ctx, 1);
    const int64_t b = ctx.node().attr_int("batch_dims", 0);
    if (idx.rank() < 1 || data.rank() < 1) ctx.fail("data and indices must have rank 1 or more");
    if (b < 0 || b >= std::min(data.rank(), idx.rank()))
      ctx.fail(concat("batch_dims ", b, " must be smaller than the ranks of data and indices"));
    const int64_t kk = idx.shape.back();
    if (kk < 1 || kk > data.rank() - b)
      ctx.fail(concat("the last axis of indices ", idx.str(), " must be in [1, ", data.rank() - b, "]"));
    for (int64_t a = 0; a < b; ++a) {
      if (data.shape[static_cast<size_t>(a)] != idx.shape[static_cast<size_t>(a)])
        ctx.fail(concat("the batch axes of data ", data.str(), " and indices ", idx.str(), " differ"));
    }
    std::vector<int64_t> s(idx.shape.begin(), idx.shape.end() - 1);
    s.insert(s.end(), data.shape.begin() + b + kk, data.shape.end());
    return s;
  };
  d.infer = [shape_of](const OpContext &ctx) {
    return std::vector<TensorType>{TensorType{ctx.in(0).dtype, shape_of(ctx)}};
  };
  d.kernel = [shape_of](const OpContext &ctx) {
    Kernel k;
    te::Tensor data = add_input(k, ctx, 0, "data");
    te::Tensor indices = add_input(k, ctx, 1, "indices");
    const auto ds = ctx.in(0).shape, is = ctx.in(1).shape;
    const size_t b = static_cast<size_t>(ctx.node().attr_int("batch_dims", 0));
    const size_t kk = static_cast<size_t>(is.back()), q = is.size() - 1;
    k.outputs.push_back(compute(
        shape_of(ctx),
        [&](const Index &i) {
          Index src(i.begin(), i.begin() + static_cast<std::ptrdiff_t>(b));
          for (size_t c = 0; c < kk; ++c) {
            Index qi(i.begin(), i.begin() + static_cast<std::ptrdiff_t>(q));
            qi.push_back(i32(static_cast<int64_t>(c)));
            src.push_back(clamp_index(wrap_index(indices(qi), ds[b + c]), ds[b + c]));
          }
          src.insert(src.end(), i.begin() + static_cast<std::ptrdiff_t>(q), i.end());
          return at(data, static_cast<int>(ds.size()), src);
        },
        "gather_nd"));
    return k;
  };
  register_op(std::move(d));
}

// --- MeanVarianceNormalization(x) {axes = [0, 2, 3]}: (x - mean) / (std + 1e-9) over the axes ---

std::vector<int64_t> norm_axes(const OpContext &ctx, std::vector<int64_t> axes) {
  for (auto &a : axes) a = ctx.axis(a, ctx.in(0).rank());
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) ctx.fail("an axis is given twice");
  return axes;
}

// Reductions over `axes` that keep the input's rank (extent 1 on the reduced axes).
struct AxesReduction {
  std::vector<int64_t> in, axes, kept;  // input shape, reduced axes, reduced shape
  int64_t count = 1;

  AxesReduction(std::vector<int64_t> shape, std::vector<int64_t> ax)
      : in(std::move(shape)), axes(std::move(ax)), kept(in) {
    for (int64_t a : axes) {
      count *= in[static_cast<size_t>(a)];
      kept[static_cast<size_t>(a)] = 1;
    }
  }
  // The reduction of f(element index) over the axes, at the reduced index i.
  Expr reduce(const Index &i, const std::function<Expr(const Index &)> &f,
              const std::function<Expr(Expr, std::vector<te::IterVar>)> &op) const {
    std::vector<te::IterVar> r;
    Index s = i;
    for (int64_t a : axes) {
      r.push_back(te::reduce_axis(i32(in[static_cast<size_t>(a)]), concat("r", a)));
      s[static_cast<size_t>(a)] = r.back()->var;
    }
    return op(f(s), r);
  }
  Index reduced_index(const Index &i) const {
    Index s = i;
    for (int64_t a : axes) s[static_cast<size_t>(a)] = i32(0);
    return s;
  }
};

Expr sum_of(Expr v, std::vector<te::IterVar> r) { return te::sum(std::move(v), std::move(r)); }

void mean_variance_normalization_op() {
  OpDef d;
  d.name = "MeanVarianceNormalization";
  d.infer = [](const OpContext &ctx) {
    require_float(ctx, 0);
    norm_axes(ctx, ctx.node().attr_ints("axes", {0, 2, 3}));
    return std::vector<TensorType>{ctx.in(0)};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    te::Tensor x = add_input(k, ctx, 0, "x");
    const DataType dt = ctx.in(0).dtype, acc = acc_type(dt);
    const int rank = ctx.in(0).rank();
    AxesReduction red(ctx.in(0).shape, norm_axes(ctx, ctx.node().attr_ints("axes", {0, 2, 3})));
    const Expr n = ir::make_const(acc, static_cast<double>(std::max<int64_t>(red.count, 1)));
    auto xv = [&](const Index &s) { return ir::cast(acc, at(x, rank, s)); };
    // Sums over the axes (a reduction is a compute of its own), then the normalization.
    te::Tensor sum = compute(
        red.kept, [&](const Index &i) { return red.reduce(i, xv, sum_of); }, "mvn_sum");
    auto square = [&](const Index &s) { return xv(s) * xv(s); };
    te::Tensor sq = compute(
        red.kept, [&](const Index &i) { return red.reduce(i, square, sum_of); }, "mvn_square_sum");
    k.outputs.push_back(compute(
        ctx.in(0).shape,
        [&](const Index &i) {
          const Index r = red.reduced_index(i);
          Expr m = at(sum, rank, r) / n;
          Expr var = ir::max(at(sq, rank, r) / n - m * m, ir::make_zero(acc));
          return ir::cast(dt, (xv(i) - m) / (ir::sqrt(var) + ir::make_const(acc, 1e-9)));
        },
        "mvn"));
    return k;
  };
  register_op(std::move(d));
}

// --- LpNormalization(x) {axis = -1, p = 2}: x divided by its L1 or L2 norm along the axis (a zero
// norm leaves the zeros) ---

void lp_normalization_op() {
  OpDef d;
  d.name = "LpNormalization";
  d.infer = [](const OpContext &ctx) {
    require_float(ctx, 0);
    if (ctx.in(0).rank() == 0) ctx.fail("needs an input of rank 1 or more");
    ctx.axis(ctx.node().attr_int("axis", -1), ctx.in(0).rank());
    const int64_t p = ctx.node().attr_int("p", 2);
    if (p != 1 && p != 2) ctx.fail(concat("p must be 1 or 2, got ", p));
    return std::vector<TensorType>{ctx.in(0)};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    te::Tensor x = add_input(k, ctx, 0, "x");
    const DataType dt = ctx.in(0).dtype, acc = acc_type(dt);
    const int rank = ctx.in(0).rank();
    const bool l1 = ctx.node().attr_int("p", 2) == 1;
    AxesReduction red(ctx.in(0).shape, {ctx.axis(ctx.node().attr_int("axis", -1), rank)});
    auto xv = [&](const Index &s) { return ir::cast(acc, at(x, rank, s)); };
    auto term = [&](const Index &s) { return l1 ? ir::abs(xv(s)) : xv(s) * xv(s); };
    te::Tensor norm = compute(
        red.kept, [&](const Index &i) { return red.reduce(i, term, sum_of); }, "lp_norm");
    k.outputs.push_back(compute(
        ctx.in(0).shape,
        [&](const Index &i) {
          Expr nv = at(norm, rank, red.reduced_index(i));
          if (!l1) nv = ir::sqrt(nv);
          return ir::cast(dt, ir::select(nv == ir::make_zero(acc), xv(i), xv(i) / nv));
        },
        "lp_normalization"));
    return k;
  };
  register_op(std::move(d));
}

// --- HannWindow, HammingWindow, BlackmanWindow(size) {periodic = 1, output_datatype}: the
// generalized cosine window sum_k (-1)^k a_k cos(2 pi k n / N), N = size (periodic) or size - 1 ---

constexpr double kPi = 3.14159265358979323846;

void window_op(const std::string &name, std::vector<double> coefficients) {
  OpDef d;
  d.name = name;
  d.const_inputs = {0};
  auto size_of = [](const OpContext &ctx) {
    if (ctx.in(0).numel() != 1 || !ctx.in(0).dtype.is_integer_like())
      ctx.fail(concat("size must be an integer scalar, got ", ctx.in(0).str()));
    const int64_t n = ctx.const_ints(0).at(0);
    if (n < 0 || n > (int64_t{1} << 30)) ctx.fail(concat("size ", n, " is out of range"));
    return n;
  };
  d.infer = [size_of](const OpContext &ctx) {
    return std::vector<TensorType>{TensorType{attr_dtype(ctx, "output_datatype", ir::Float(32)), {size_of(ctx)}}};
  };
  d.evaluate = [size_of, coefficients](const OpContext &ctx) {
    const int64_t size = size_of(ctx);
    const bool periodic = ctx.node().attr_int("periodic", 1) != 0;
    const double period = static_cast<double>(periodic ? size : size - 1);
    const DataType dt = attr_dtype(ctx, "output_datatype", ir::Float(32));
    return std::vector<deploy::Tensor>{fill_tensor(ctx, dt, {size}, [&](int64_t n) {
      if (period == 0) return 1.0;
      double v = 0, sign = 1;
      for (size_t k = 0; k < coefficients.size(); ++k, sign = -sign)
        v += sign * coefficients[k] * std::cos(2 * kPi * static_cast<double>(k) * static_cast<double>(n) / period);
      return v;
    })};
  };
  register_op(std::move(d));
}

}  // namespace

void register_extra_ops() {
  loss_op("NegativeLogLikelihoodLoss", false);
  loss_op("SoftmaxCrossEntropyLoss", true);
  einsum_op();
  quantize_op(true);
  quantize_op(false);
  dynamic_quantize_op();
  scatter_elements_op();
  scatter_nd_op();
  one_hot_op();
  eye_like_op();
  gather_nd_op();
  mean_variance_normalization_op();
  lp_normalization_op();
  window_op("HannWindow", {0.5, 0.5});
  window_op("HammingWindow", {25.0 / 46.0, 21.0 / 46.0});
  window_op("BlackmanWindow", {0.42, 0.5, 0.08});
}

}  // namespace kiln::graph::detail
