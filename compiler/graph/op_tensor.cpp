// Shapes and data movement: Reshape, Flatten, Squeeze, Unsqueeze (views), Shape, Size,
// ConstantOfShape, Range (evaluated at compile time), Transpose, Concat, Split, Slice, Gather,
// GatherElements, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, Trilu.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "compiler/graph/op_def.h"
#include "compiler/graph/op_families.h"
#include "compiler/ir/deploy_dtype.h"
#include "compiler/ir/op.h"

namespace kiln::graph::detail {

using ::kiln::detail::concat;

namespace {

using ir::DataType;
using ir::Expr;

deploy::Tensor int64_tensor(const std::vector<int64_t> &shape, const std::vector<int64_t> &values) {
  deploy::Tensor t = deploy::Tensor::empty(shape, deploy::DType::of<int64_t>());
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

// A view op: output 0 shares input 0's data.
void view_op(const std::string &name, int max_inputs, std::vector<int> const_inputs,
             std::function<std::vector<int64_t>(const OpContext &)> shape) {
  OpDef d;
  d.name = name;
  d.max_inputs = max_inputs;
  d.const_inputs = std::move(const_inputs);
  d.view = true;
  d.infer = [shape](const OpContext &ctx) {
    std::vector<int64_t> s = shape(ctx);
    TensorType t{ctx.in(0).dtype, s};
    if (t.numel() != ctx.in(0).numel())
      ctx.fail(concat("cannot view ", ctx.in(0).str(), " as ", t.str(), ": the element counts differ"));
    return std::vector<TensorType>{t};
  };
  register_op(std::move(d));
}

std::vector<int64_t> sorted_axes(const OpContext &ctx, std::vector<int64_t> axes, int64_t rank) {
  for (auto &a : axes) a = ctx.axis(a, rank);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) ctx.fail("an axis is given twice");
  return axes;
}

// Slice parameters, normalized: for each axis of the input, start, step and output extent.
struct SliceSpec {
  std::vector<int64_t> start, step, extent;
};

SliceSpec slice_spec(const OpContext &ctx) {
  const auto &shape = ctx.in(0).shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> starts = ctx.const_ints(1), ends = ctx.const_ints(2);
  std::vector<int64_t> axes, steps;
  if (ctx.has_input(3)) {
    axes = ctx.const_ints(3);
  } else {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (ctx.has_input(4))
    steps = ctx.const_ints(4);
  else
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    ctx.fail("starts, ends, axes and steps must have the same length");
  SliceSpec s;
  s.start.assign(static_cast<size_t>(rank), 0);
  s.step.assign(static_cast<size_t>(rank), 1);
  s.extent = shape;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t a = ctx.axis(axes[k], rank);
    if (seen[static_cast<size_t>(a)]) ctx.fail(concat("axis ", a, " is sliced twice"));
    seen[static_cast<size_t>(a)] = true;
    const int64_t dim = shape[static_cast<size_t>(a)];
    const int64_t step = steps[k];
    if (step == 0) ctx.fail("a step of 0");
    int64_t st = starts[k], en = ends[k];
    if (st < 0) st += dim;
    if (en < 0) en += dim;
    int64_t extent;
    if (step > 0) {
      st = std::clamp<int64_t>(st, 0, dim);
      en = std::clamp<int64_t>(en, 0, dim);
      extent = en > st ? (en - st + step - 1) / step : 0;
    } else {
      st = std::clamp<int64_t>(st, -1, dim - 1);
      en = std::clamp<int64_t>(en, -1, dim - 1);
      extent = st > en ? (st - en + (-step) - 1) / (-step) : 0;
    }
    s.start[static_cast<size_t>(a)] = st;
    s.step[static_cast<size_t>(a)] = step;
    s.extent[static_cast<size_t>(a)] = extent;
  }
  return s;
}

std::vector<int64_t> pad_amounts(const OpContext &ctx) {
  const int64_t rank = ctx.in(0).rank();
  std::vector<int64_t> pads = ctx.const_ints(1);
  std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
  if (ctx.has_input(3)) {
    std::vector<int64_t> axes = ctx.const_ints(3);
    if (pads.size() != 2 * axes.size()) ctx.fail("pads must have two values per axis");
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = ctx.axis(axes[k], rank);
      full[static_cast<size_t>(a)] = pads[k];
      full[static_cast<size_t>(a + rank)] = pads[k + axes.size()];
    }
  } else {
    if (static_cast<int64_t>(pads.size()) != 2 * rank) ctx.fail(concat("pads must have ", 2 * rank, " values"));
    full = pads;
  }
  return full;
}

std::vector<int64_t> expand_shape(const OpContext &ctx) {
  std::vector<int64_t> target = ctx.const_ints(1);
  return broadcast_shapes(ctx, {ctx.in(0).shape, target});
}

}  // namespace

void register_tensor_ops() {
  // --- views ---
  view_op("Reshape", 2, {1}, [](const OpContext &ctx) {
    std::vector<int64_t> s = ctx.const_ints(1);
    const auto &in = ctx.in(0).shape;
    const bool allowzero = ctx.node().attr_int("allowzero", 0) != 0;
    int infer_at = -1;
    int64_t known = 1;
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] == 0 && !allowzero) {
        if (k >= in.size()) ctx.fail(concat("shape entry ", k, " is 0 (copy) but the input has rank ", in.size()));
        s[k] = in[k];
      }
      if (s[k] == -1) {
        if (infer_at >= 0) ctx.fail("more than one -1 in the shape");
        infer_at = static_cast<int>(k);
        continue;
      }
      if (s[k] < 0) ctx.fail(concat("shape entry ", s[k], " is negative"));
      known *= s[k];
    }
    if (infer_at >= 0) {
      const int64_t total = ctx.in(0).numel();
      if (known == 0 || total % known != 0)
        ctx.fail(concat("cannot reshape ", ctx.in(0).str(), ": ", total, " elements do not divide by ", known));
      s[static_cast<size_t>(infer_at)] = total / known;
    }
    return s;
  });
  view_op("Flatten", 1, {}, [](const OpContext &ctx) {
    const auto &in = ctx.in(0).shape;
    const int64_t rank = static_cast<int64_t>(in.size());
    int64_t axis = ctx.node().attr_int("axis", 1);
    if (axis < -rank || axis > rank) ctx.fail(concat("axis ", axis, " is out of range for rank ", rank));
    if (axis < 0) axis += rank;
    int64_t a = 1, b = 1;
    for (int64_t k = 0; k < rank; ++k) (k < axis ? a : b) *= in[static_cast<size_t>(k)];
    return std::vector<int64_t>{a, b};
  });
  view_op("Squeeze", 2, {1}, [](const OpContext &ctx) {
    const auto &in = ctx.in(0).shape;
    const int64_t rank = static_cast<int64_t>(in.size());
    std::vector<int64_t> out;
    if (!ctx.has_input(1)) {
      for (int64_t d : in) {
        if (d != 1) out.push_back(d);
      }
      return out;
    }
    std::vector<int64_t> axes = sorted_axes(ctx, ctx.const_ints(1), rank);
    for (int64_t k = 0; k < rank; ++k) {
      if (std::binary_search(axes.begin(), axes.end(), k)) {
        if (in[static_cast<size_t>(k)] != 1)
          ctx.fail(concat("cannot squeeze axis ", k, " of ", ctx.in(0).str(), ": its extent is not 1"));
        continue;
      }
      out.push_back(in[static_cast<size_t>(k)]);
    }
    return out;
  });
  view_op("Unsqueeze", 2, {1}, [](const OpContext &ctx) {
    const auto &in = ctx.in(0).shape;
    std::vector<int64_t> axes_in = ctx.const_ints(1);
    const int64_t rank = static_cast<int64_t>(in.size() + axes_in.size());
    std::vector<int64_t> axes = sorted_axes(ctx, axes_in, rank);
    std::vector<int64_t> out;
    size_t j = 0;
    for (int64_t k = 0; k < rank; ++k) {
      if (std::binary_search(axes.begin(), axes.end(), k))
        out.push_back(1);
      else
        out.push_back(in[j++]);
    }
    return out;
  });

  // --- evaluated at compile time ---
  {
    OpDef d;
    d.name = "Shape";
    d.infer = [](const OpContext &ctx) {
      const int64_t rank = ctx.in(0).rank();
      int64_t start = ctx.node().attr_int("start", 0), end = ctx.node().attr_int("end", rank);
      if (start < 0) start += rank;
      if (end < 0) end += rank;
      start = std::clamp<int64_t>(start, 0, rank);
      end = std::clamp<int64_t>(end, 0, rank);
      return std::vector<TensorType>{TensorType{ir::Int(64), {std::max<int64_t>(end - start, 0)}}};
    };
    d.evaluate = [](const OpContext &ctx) {
      const auto &s = ctx.in(0).shape;
      const int64_t rank = static_cast<int64_t>(s.size());
      int64_t start = ctx.node().attr_int("start", 0), end = ctx.node().attr_int("end", rank);
      if (start < 0) start += rank;
      if (end < 0) end += rank;
      start = std::clamp<int64_t>(start, 0, rank);
      end = std::clamp<int64_t>(end, 0, rank);
      std::vector<int64_t> v(s.begin() + start, s.begin() + std::max(start, end));
      return std::vector<deploy::Tensor>{int64_tensor({static_cast<int64_t>(v.size())}, v)};
    };
    register_op(std::move(d));
  }
  {
    OpDef d;
    d.name = "Size";
    d.infer = [](const OpContext &) { return std::vector<TensorType>{TensorType{ir::Int(64), {}}}; };
    d.evaluate = [](const OpContext &ctx) {
      return std::vector<deploy::Tensor>{int64_tensor({}, {ctx.in(0).numel()})};
    };
    register_op(std::move(d));
  }
  {
    OpDef d;
    d.name = "ConstantOfShape";
    d.const_inputs = {0};
    d.infer = [](const OpContext &ctx) {
      std::vector<int64_t> s = ctx.const_ints(0);
      for (int64_t x : s) {
        if (x < 0) ctx.fail(concat("shape entry ", x, " is negative"));
      }
      DataType dt = ir::Float(32);
      if (ctx.node().has_attr("value")) {
        const auto &a = ctx.node().attrs.at("value");
        if (a.kind != Attribute::Kind::Tensor || a.tensor.numel() != 1) ctx.fail("value must be a one-element tensor");
        dt = ir::to_ir_type(a.tensor.dtype());
      }
      TensorType t{dt, s};
      if (t.nbytes() > (int64_t{1} << 32)) ctx.fail(concat("the output ", t.str(), " is larger than 4 GiB"));
      return std::vector<TensorType>{t};
    };
    d.evaluate = [](const OpContext &ctx) {
      std::vector<int64_t> s = ctx.const_ints(0);
      deploy::Tensor fill;
      if (ctx.node().has_attr("value")) {
        fill = ctx.node().attrs.at("value").tensor;
      } else {
        fill = deploy::Tensor::empty({1}, deploy::DType::of<float>());
        *fill.data_as<float>() = 0.0f;
      }
      deploy::Tensor out = deploy::Tensor::empty(s, fill.dtype());
      const size_t b = fill.dtype().bytes();
      auto *dst = static_cast<uint8_t *>(out.data());
      for (int64_t k = 0; k < out.numel(); ++k) std::memcpy(dst + static_cast<size_t>(k) * b, fill.data(), b);
      return std::vector<deploy::Tensor>{out};
    };
    register_op(std::move(d));
  }
  {
    OpDef d;
    d.name = "Range";
    d.min_inputs = d.max_inputs = 3;
    d.const_inputs = {0, 1, 2};
    auto count = [](const OpContext &ctx) {
      const double start = ctx.const_floats(0).at(0), limit = ctx.const_floats(1).at(0),
                   delta = ctx.const_floats(2).at(0);
      if (delta == 0) ctx.fail("delta is 0");
      const double n = std::ceil((limit - start) / delta);
      if (!(n < 1e9)) ctx.fail("the range has more than 10^9 elements");
      return static_cast<int64_t>(std::max(n, 0.0));
    };
    d.infer = [count](const OpContext &ctx) {
      for (int i = 0; i < 3; ++i) {
        if (ctx.in(i).numel() != 1) ctx.fail(concat("input ", i, " must be a scalar"));
      }
      return std::vector<TensorType>{TensorType{ctx.in(0).dtype, {count(ctx)}}};
    };
    d.evaluate = [count](const OpContext &ctx) {
      const int64_t n = count(ctx);
      const DataType dt = ctx.in(0).dtype;
      deploy::Tensor out = deploy::Tensor::empty({n}, ir::to_deploy_dtype(dt));
      if (dt.is_float()) {
        const double start = ctx.const_floats(0)[0], delta = ctx.const_floats(2)[0];
        for (int64_t k = 0; k < n; ++k) {
          const double v = start + static_cast<double>(k) * delta;
          if (dt.bits() == 64)
            out.data_as<double>()[k] = v;
          else if (dt.bits() == 32)
            out.data_as<float>()[k] = static_cast<float>(v);
          else
            ctx.fail("float16 ranges are not supported");
        }
      } else {
        const int64_t start = ctx.const_ints(0)[0], delta = ctx.const_ints(2)[0];
        for (int64_t k = 0; k < n; ++k) {
          const int64_t v = start + k * delta;
          if (dt.bits() == 64)
            out.data_as<int64_t>()[k] = v;
          else if (dt.bits() == 32)
            out.data_as<int32_t>()[k] = static_cast<int32_t>(v);
          else if (dt.bits() == 16)
            out.data_as<int16_t>()[k] = static_cast<int16_t>(v);
          else
            ctx.fail(concat("ranges of ", dtype_name(dt), " are not supported"));
        }
      }
      return std::vector<deploy::Tensor>{out};
    };
    register_op(std::move(d));
  }

  // --- data movement kernels ---
  {
    OpDef d;
    d.name = "Transpose";
    auto perm_of = [](const OpContext &ctx) {
      const int64_t rank = ctx.in(0).rank();
      std::vector<int64_t> perm = ctx.node().attr_ints("perm");
      if (perm.empty()) {
        for (int64_t k = rank - 1; k >= 0; --k) perm.push_back(k);
      }
      if (static_cast<int64_t>(perm.size()) != rank)
        ctx.fail(concat("perm has ", perm.size(), " entries for rank ", rank));
      for (auto &p : perm) p = ctx.axis(p, rank);
      std::vector<int64_t> sorted = perm;
      std::sort(sorted.begin(), sorted.end());
      if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
        std::string text;
        for (int64_t p : ctx.node().attr_ints("perm")) text += concat(text.empty() ? "" : ",", p);
        ctx.fail(concat("perm [", text, "] is not a permutation: an axis is given twice"));
      }
      return perm;
    };
    d.infer = [perm_of](const OpContext &ctx) {
      auto perm = perm_of(ctx);
      TensorType t{ctx.in(0).dtype, {}};
      for (int64_t p : perm) t.shape.push_back(ctx.in(0).shape[static_cast<size_t>(p)]);
      return std::vector<TensorType>{t};
    };
    d.kernel = [perm_of](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      auto perm = perm_of(ctx);
      std::vector<int64_t> shape;
      for (int64_t p : perm) shape.push_back(ctx.in(0).shape[static_cast<size_t>(p)]);
      const int rank = ctx.in(0).rank();
      k.outputs.push_back(compute(
          shape,
          [&](const std::vector<Expr> &i) {
            std::vector<Expr> src(static_cast<size_t>(rank));
            for (size_t a = 0; a < perm.size(); ++a) src[static_cast<size_t>(perm[a])] = i[a];
            return at(x, rank, src);
          },
          "transpose"));
      return k;
    };
    register_op(std::move(d));
  }
  {
    OpDef d;
    d.name = "Concat";
    d.max_inputs = 1 << 16;
    d.infer = [](const OpContext &ctx) {
      const TensorType &first = ctx.in(0);
      if (first.rank() == 0) ctx.fail("cannot concatenate scalars");
      const int64_t axis = ctx.axis(ctx.node().attr_int("axis", 0), first.rank());
      TensorType out = first;
      out.shape[static_cast<size_t>(axis)] = 0;
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        const TensorType &t = ctx.in(i);
        if (t.dtype != first.dtype || t.rank() != first.rank())
          ctx.fail(concat("input ", i, " is ", t.str(), ", input 0 is ", first.str()));
        for (int64_t a = 0; a < t.rank(); ++a) {
          if (a != axis && t.shape[static_cast<size_t>(a)] != first.shape[static_cast<size_t>(a)])
            ctx.fail(
                concat("input ", i, " is ", t.str(), ", input 0 is ", first.str(), ": they differ off axis ", axis));
        }
        out.shape[static_cast<size_t>(axis)] += t.shape[static_cast<size_t>(axis)];
      }
      return std::vector<TensorType>{out};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      const int rank = ctx.in(0).rank();
      const int64_t axis = ctx.axis(ctx.node().attr_int("axis", 0), rank);
      std::vector<te::Tensor> in;
      std::vector<int64_t> offsets;
      int64_t total = 0;
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        const int64_t ext = ctx.in(i).shape[static_cast<size_t>(axis)];
        if (ext == 0) continue;
        in.push_back(add_input(k, ctx, i));
        offsets.push_back(total);
        total += ext;
      }
      std::vector<int64_t> shape = ctx.in(0).shape;
      shape[static_cast<size_t>(axis)] = total;
      k.outputs.push_back(compute(
          shape,
          [&](const std::vector<Expr> &i) {
            // The last input whose offset is <= i[axis].
            Expr r;
            for (size_t j = 0; j < in.size(); ++j) {
              std::vector<Expr> idx = i;
              idx[static_cast<size_t>(axis)] = i[static_cast<size_t>(axis)] - i32(offsets[j]);
              Expr v = in[j](idx);
              r = r.defined() ? ir::if_then_else(i[static_cast<size_t>(axis)] >= i32(offsets[j]), v, r) : v;
            }
            return r;
          },
          "concat"));
      return k;
    };
    register_op(std::move(d));
  }
  {
    // Split(x, split?) {axis, num_outputs}: equal parts when split is absent.
    OpDef d;
    d.name = "Split";
    d.max_inputs = 2;
    d.const_inputs = {1};
    d.max_outputs = 1 << 16;
    auto sizes_of = [](const OpContext &ctx) {
      const int64_t rank = ctx.in(0).rank();
      const int64_t axis = ctx.axis(ctx.node().attr_int("axis", 0), rank);
      const int64_t dim = ctx.in(0).shape[static_cast<size_t>(axis)];
      std::vector<int64_t> sizes;
      if (ctx.has_input(1)) {
        sizes = ctx.const_ints(1);
        int64_t sum = 0;
        for (int64_t s : sizes) {
          if (s < 0) ctx.fail("a negative split size");
          sum += s;
        }
        if (sum != dim) ctx.fail(concat("split sizes add up to ", sum, ", the axis has ", dim));
        if (static_cast<int>(sizes.size()) != ctx.num_outputs())
          ctx.fail(concat(sizes.size(), " split sizes for ", ctx.num_outputs(), " outputs"));
      } else {
        const int64_t n = ctx.num_outputs();
        const int64_t part = (dim + n - 1) / n;
        for (int64_t k = 0; k < n; ++k) sizes.push_back(std::max<int64_t>(0, std::min(part, dim - k * part)));
      }
      return std::make_pair(axis, sizes);
    };
    d.infer = [sizes_of](const OpContext &ctx) {
      auto [axis, sizes] = sizes_of(ctx);
      std::vector<TensorType> out;
      for (int64_t s : sizes) {
        TensorType t = ctx.in(0);
        t.shape[static_cast<size_t>(axis)] = s;
        out.push_back(t);
      }
      return out;
    };
    d.kernel = [sizes_of](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      auto [axis, sizes] = sizes_of(ctx);
      int64_t off = 0;
      for (size_t o = 0; o < sizes.size(); ++o) {
        std::vector<int64_t> shape = ctx.in(0).shape;
        shape[static_cast<size_t>(axis)] = sizes[o];
        const int64_t base = off;
        const size_t ax = static_cast<size_t>(axis);
        k.outputs.push_back(compute(
            shape,
            [&](const std::vector<Expr> &i) {
              std::vector<Expr> idx = i;
              idx[ax] = i[ax] + i32(base);
              return x(idx);
            },
            concat("split", o)));
        off += sizes[o];
      }
      return k;
    };
    register_op(std::move(d));
  }
  {
    OpDef d;
    d.name = "Slice";
    d.min_inputs = 3;
    d.max_inputs = 5;
    d.const_inputs = {1, 2, 3, 4};
    d.infer = [](const OpContext &ctx) {
      return std::vector<TensorType>{TensorType{ctx.in(0).dtype, slice_spec(ctx).extent}};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      SliceSpec s = slice_spec(ctx);
      k.outputs.push_back(compute(
          s.extent,
          [&](const std::vector<Expr> &i) {
            std::vector<Expr> idx;
            for (size_t a = 0; a < i.size(); ++a) idx.push_back(i32(s.start[a]) + i[a] * i32(s.step[a]));
            return x(idx);
          },
          "slice"));
      return k;
    };
    register_op(std::move(d));
  }
  {
    OpDef d;
    d.name = "Gather";
    d.min_inputs = d.max_inputs = 2;
    d.infer = [](const OpContext &ctx) {
      const auto &data = ctx.in(0);
      if (data.rank() == 0) ctx.fail("cannot gather from a scalar");
      if (!ctx.in(1).dtype.is_int()) ctx.fail("indices must be int32 or int64");
      const int64_t axis = ctx.axis(ctx.node().attr_int("axis", 0), data.rank());
      // Constant indices are checked here; the kernel clamps the ones known only at run time.
      if (ctx.input(1).is_constant()) {
        const int64_t extent = data.shape[static_cast<size_t>(axis)];
        for (int64_t i : ctx.const_ints(1)) {
          if (i < -extent || i >= extent)
            ctx.fail(concat("index ", i, " is out of range for axis ", axis, " of extent ", extent));
        }
      }
      TensorType t{data.dtype, {}};
      for (int64_t a = 0; a < axis; ++a) t.shape.push_back(data.shape[static_cast<size_t>(a)]);
      for (int64_t s : ctx.in(1).shape) t.shape.push_back(s);
      for (int64_t a = axis + 1; a < data.rank(); ++a) t.shape.push_back(data.shape[static_cast<size_t>(a)]);
      return std::vector<TensorType>{t};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor data = add_input(k, ctx, 0, "data");
      te::Tensor idx = add_input(k, ctx, 1, "indices");
      const auto &ds = ctx.in(0).shape;
      const int64_t rank = static_cast<int64_t>(ds.size());
      const int64_t axis = ctx.axis(ctx.node().attr_int("axis", 0), rank);
      const int qrank = ctx.in(1).rank();
      std::vector<int64_t> shape;
      for (int64_t a = 0; a < axis; ++a) shape.push_back(ds[static_cast<size_t>(a)]);
      for (int64_t s : ctx.in(1).shape) shape.push_back(s);
      for (int64_t a = axis + 1; a < rank; ++a) shape.push_back(ds[static_cast<size_t>(a)]);
      const int64_t dim = ds[static_cast<size_t>(axis)];
      k.outputs.push_back(compute(
          shape,
          [&](const std::vector<Expr> &i) {
            std::vector<Expr> q(i.begin() + axis, i.begin() + axis + qrank);
            Expr j = ir::cast(ir::Int(32), at(idx, qrank, q));
            j = ir::select(j < i32(0), j + i32(dim), j);
            j = ir::min(ir::max(j, i32(0)), i32(dim - 1));
            std::vector<Expr> src(i.begin(), i.begin() + axis);
            src.push_back(j);
            for (size_t a = static_cast<size_t>(axis + qrank); a < i.size(); ++a) src.push_back(i[a]);
            return data(src);
          },
          "gather"));
      return k;
    };
    register_op(std::move(d));
  }
  {
    OpDef d;
    d.name = "GatherElements";
    d.min_inputs = d.max_inputs = 2;
    d.infer = [](const OpContext &ctx) {
      if (ctx.in(0).rank() != ctx.in(1).rank()) ctx.fail("data and indices must have the same rank");
      if (ctx.in(0).rank() == 0) ctx.fail("cannot gather from a scalar");
      ctx.axis(ctx.node().attr_int("axis", 0), ctx.in(0).rank());
      return std::vector<TensorType>{TensorType{ctx.in(0).dtype, ctx.in(1).shape}};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor data = add_input(k, ctx, 0, "data");
      te::Tensor idx = add_input(k, ctx, 1, "indices");
      const int64_t axis = ctx.axis(ctx.node().attr_int("axis", 0), ctx.in(0).rank());
      const int64_t dim = ctx.in(0).shape[static_cast<size_t>(axis)];
      k.outputs.push_back(compute(
          ctx.in(1).shape,
          [&](const std::vector<Expr> &i) {
            Expr j = ir::cast(ir::Int(32), idx(i));
            j = ir::select(j < i32(0), j + i32(dim), j);
            j = ir::min(ir::max(j, i32(0)), i32(dim - 1));
            std::vector<Expr> src = i;
            src[static_cast<size_t>(axis)] = j;
            return data(src);
          },
          "gather_elements"));
      return k;
    };
    register_op(std::move(d));
  }
  {
    OpDef d;
    d.name = "Expand";
    d.min_inputs = d.max_inputs = 2;
    d.const_inputs = {1};
    d.infer = [](const OpContext &ctx) {
      return std::vector<TensorType>{TensorType{ctx.in(0).dtype, expand_shape(ctx)}};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      const auto in = ctx.in(0).shape;
      k.outputs.push_back(compute(
          expand_shape(ctx),
          [&](const std::vector<Expr> &i) { return at(x, static_cast<int>(in.size()), broadcast_index(in, i)); },
          "expand"));
      return k;
    };
    register_op(std::move(d));
  }
  {
    OpDef d;
    d.name = "Tile";
    d.min_inputs = d.max_inputs = 2;
    d.const_inputs = {1};
    auto shape_of = [](const OpContext &ctx) {
      std::vector<int64_t> reps = ctx.const_ints(1);
      if (static_cast<int>(reps.size()) != ctx.in(0).rank())
        ctx.fail(concat("repeats has ", reps.size(), " entries for rank ", ctx.in(0).rank()));
      std::vector<int64_t> s = ctx.in(0).shape;
      for (size_t a = 0; a < s.size(); ++a) {
        if (reps[a] < 0) ctx.fail("a negative repeat");
        s[a] *= reps[a];
      }
      return s;
    };
    d.infer = [shape_of](const OpContext &ctx) {
      return std::vector<TensorType>{TensorType{ctx.in(0).dtype, shape_of(ctx)}};
    };
    d.kernel = [shape_of](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      const auto in = ctx.in(0).shape;
      k.outputs.push_back(compute(
          shape_of(ctx),
          [&](const std::vector<Expr> &i) {
            std::vector<Expr> src;
            for (size_t a = 0; a < i.size(); ++a) src.push_back(ir::floormod(i[a], i32(in[a])));
            return x(src);
          },
          "tile"));
      return k;
    };
    register_op(std::move(d));
  }
  {
    // Pad(x, pads, constant_value?, axes?) {mode: constant | reflect | edge}
    OpDef d;
    d.name = "Pad";
    d.min_inputs = 2;
    d.max_inputs = 4;
    d.const_inputs = {1, 3};
    d.infer = [](const OpContext &ctx) {
      auto pads = pad_amounts(ctx);
      const std::string mode = ctx.node().attr_string("mode", "constant");
      if (mode != "constant" && mode != "reflect" && mode != "edge") ctx.fail(concat("unknown mode '", mode, "'"));
      TensorType t = ctx.in(0);
      const size_t rank = t.shape.size();
      for (size_t a = 0; a < rank; ++a) {
        t.shape[a] += pads[a] + pads[a + rank];
        if (t.shape[a] < 0) ctx.fail(concat("the pads leave axis ", a, " with a negative extent"));
        if (mode == "reflect" && (pads[a] >= ctx.in(0).shape[a] || pads[a + rank] >= ctx.in(0).shape[a]) &&
            (pads[a] > 0 || pads[a + rank] > 0))
          ctx.fail(concat("reflect padding of axis ", a, " must be smaller than its extent"));
      }
      if (ctx.has_input(2) && ctx.in(2).numel() != 1) ctx.fail("constant_value must be a scalar");
      return std::vector<TensorType>{t};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      te::Tensor cv;
      if (ctx.has_input(2)) cv = add_input(k, ctx, 2, "value");
      auto pads = pad_amounts(ctx);
      const std::string mode = ctx.node().attr_string("mode", "constant");
      const auto in = ctx.in(0).shape;
      const size_t rank = in.size();
      std::vector<int64_t> shape = in;
      for (size_t a = 0; a < rank; ++a) shape[a] += pads[a] + pads[a + rank];
      const DataType dt = ctx.in(0).dtype;
      k.outputs.push_back(compute(
          shape,
          [&](const std::vector<Expr> &i) {
            std::vector<Expr> src;
            Expr inside = ir::const_true();
            for (size_t a = 0; a < rank; ++a) {
              Expr j = i[a] - i32(pads[a]);
              const int64_t n = in[a];
              if (mode == "constant") {
                inside = inside && j >= i32(0) && j < i32(n);
                src.push_back(ir::min(ir::max(j, i32(0)), i32(std::max<int64_t>(n - 1, 0))));
              } else if (mode == "edge") {
                src.push_back(ir::min(ir::max(j, i32(0)), i32(n - 1)));
              } else {
                // reflect: -1 -> 1, n -> n - 2.
                Expr r = ir::select(j < i32(0), -j, j);
                r = ir::select(r >= i32(n), i32(2 * (n - 1)) - r, r);
                src.push_back(n == 1 ? i32(0) : r);
              }
            }
            Expr v = rank == 0 ? at(x, 0, {}) : x(src);
            if (mode != "constant") return v;
            Expr c = cv.defined() ? cv(i32(0)) : ir::make_zero(dt);
            return ir::if_then_else(inside, v, c);
          },
          "pad"));
      return k;
    };
    register_op(std::move(d));
  }
  // DepthToSpace / SpaceToDepth on NCHW.
  {
    OpDef d;
    d.name = "DepthToSpace";
    d.infer = [](const OpContext &ctx) {
      const auto &s = ctx.in(0).shape;
      const int64_t b = ctx.node().attr_int("blocksize", 0);
      if (s.size() != 4) ctx.fail("needs a rank-4 NCHW input");
      if (b <= 0 || s[1] % (b * b) != 0) ctx.fail(concat("blocksize ", b, " does not divide the channels ", s[1]));
      const std::string mode = ctx.node().attr_string("mode", "DCR");
      if (mode != "DCR" && mode != "CRD") ctx.fail(concat("unknown mode '", mode, "'"));
      return std::vector<TensorType>{TensorType{ctx.in(0).dtype, {s[0], s[1] / (b * b), s[2] * b, s[3] * b}}};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      const auto &s = ctx.in(0).shape;
      const int64_t b = ctx.node().attr_int("blocksize", 0);
      const int64_t c = s[1] / (b * b);
      const bool dcr = ctx.node().attr_string("mode", "DCR") == "DCR";
      k.outputs.push_back(compute(
          {s[0], c, s[2] * b, s[3] * b},
          [&](const std::vector<Expr> &i) {
            Expr h = ir::floordiv(i[2], i32(b)), bh = ir::floormod(i[2], i32(b));
            Expr w = ir::floordiv(i[3], i32(b)), bw = ir::floormod(i[3], i32(b));
            Expr ch = dcr ? (bh * i32(b) + bw) * i32(c) + i[1] : i[1] * i32(b * b) + bh * i32(b) + bw;
            return x(i[0], ch, h, w);
          },
          "depth_to_space"));
      return k;
    };
    register_op(std::move(d));
  }
  {
    OpDef d;
    d.name = "SpaceToDepth";
    d.infer = [](const OpContext &ctx) {
      const auto &s = ctx.in(0).shape;
      const int64_t b = ctx.node().attr_int("blocksize", 0);
      if (s.size() != 4) ctx.fail("needs a rank-4 NCHW input");
      if (b <= 0 || s[2] % b != 0 || s[3] % b != 0) ctx.fail(concat("blocksize ", b, " does not divide H and W"));
      return std::vector<TensorType>{TensorType{ctx.in(0).dtype, {s[0], s[1] * b * b, s[2] / b, s[3] / b}}};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      const auto &s = ctx.in(0).shape;
      const int64_t b = ctx.node().attr_int("blocksize", 0);
      const int64_t c = s[1];
      k.outputs.push_back(compute(
          {s[0], c * b * b, s[2] / b, s[3] / b},
          [&](const std::vector<Expr> &i) {
            Expr blk = ir::floordiv(i[1], i32(c)), ch = ir::floormod(i[1], i32(c));
            Expr bh = ir::floordiv(blk, i32(b)), bw = ir::floormod(blk, i32(b));
            return x(i[0], ch, i[2] * i32(b) + bh, i[3] * i32(b) + bw);
          },
          "space_to_depth"));
      return k;
    };
    register_op(std::move(d));
  }
  {
    // Trilu(x, k?) {upper}
    OpDef d;
    d.name = "Trilu";
    d.max_inputs = 2;
    d.const_inputs = {1};
    d.infer = [](const OpContext &ctx) {
      if (ctx.in(0).rank() < 2) ctx.fail("needs rank 2 or more");
      return std::vector<TensorType>{ctx.in(0)};
    };
    d.kernel = [](const OpContext &ctx) {
      Kernel k;
      te::Tensor x = add_input(k, ctx, 0, "x");
      const int64_t diag = ctx.has_input(1) ? ctx.const_ints(1).at(0) : 0;
      const bool upper = ctx.node().attr_int("upper", 1) != 0;
      const size_t r = static_cast<size_t>(ctx.in(0).rank());
      k.outputs.push_back(compute(
          ctx.in(0).shape,
          [&](const std::vector<Expr> &i) {
            Expr d = i[r - 1] - i[r - 2];
            Expr keep = upper ? d >= i32(diag) : d <= i32(diag);
            return ir::select(keep, x(i), ir::make_zero(x.dtype()));
          },
          "trilu"));
      return k;
    };
    register_op(std::move(d));
  }
}

}  // namespace kiln::graph::detail
