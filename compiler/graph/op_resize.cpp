// Resize(X, roi?, scales?, sizes?) {mode, coordinate_transformation_mode, nearest_mode,
// cubic_coeff_a, exclude_outside, extrapolation_value}: nearest, N-linear and N-cubic resampling
// of any axes. Upsample and Resize-10 are converted to this form.
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

struct ResizeSpec {
  std::vector<int64_t> out;
  std::vector<double> scale;  // per axis, as the coordinate transform uses it
  std::vector<double> roi;    // starts then ends, for tf_crop_and_resize
};

ResizeSpec resize_spec(const OpContext &ctx) {
  const auto &in = ctx.in(0).shape;
  const size_t rank = in.size();
  ResizeSpec s;
  std::vector<double> scales = ctx.has_input(2) ? ctx.const_floats(2) : std::vector<double>{};
  std::vector<int64_t> sizes = ctx.has_input(3) ? ctx.const_ints(3) : std::vector<int64_t>{};
  if (!scales.empty() && !sizes.empty()) ctx.fail("scales and sizes are both given");
  if (scales.empty() && sizes.empty()) ctx.fail("neither scales nor sizes is given");
  if (!sizes.empty()) {
    if (sizes.size() != rank) ctx.fail(concat("sizes has ", sizes.size(), " entries for rank ", rank));
    for (size_t a = 0; a < rank; ++a) {
      if (sizes[a] <= 0) ctx.fail("sizes must be positive");
      s.out.push_back(sizes[a]);
      s.scale.push_back(static_cast<double>(sizes[a]) / static_cast<double>(in[a]));
    }
  } else {
    if (scales.size() != rank) ctx.fail(concat("scales has ", scales.size(), " entries for rank ", rank));
    for (size_t a = 0; a < rank; ++a) {
      if (!(scales[a] > 0) || !std::isfinite(scales[a]) || scales[a] > 1e6)
        ctx.fail("scales must be positive and finite");
      const double o = std::floor(static_cast<double>(in[a]) * scales[a]);
      if (o < 1 || o > 1e9) ctx.fail(concat("axis ", a, " would have ", o, " elements"));
      s.out.push_back(static_cast<int64_t>(o));
      s.scale.push_back(scales[a]);
    }
  }
  if (ctx.has_input(1) && ctx.input(1).is_constant()) s.roi = ctx.const_floats(1);
  return s;
}

}  // namespace

void register_resize_ops() {
  OpDef d;
  d.name = "Resize";
  d.max_inputs = 4;
  d.const_inputs = {1, 2, 3};
  d.infer = [](const OpContext &ctx) {
    const std::string mode = ctx.node().attr_string("mode", "nearest");
    if (mode != "nearest" && mode != "linear" && mode != "cubic") ctx.fail(concat("unknown mode '", mode, "'"));
    const std::string ct = ctx.node().attr_string("coordinate_transformation_mode", "half_pixel");
    if (ct != "half_pixel" && ct != "pytorch_half_pixel" && ct != "align_corners" && ct != "asymmetric" &&
        ct != "tf_half_pixel_for_nn" && ct != "tf_crop_and_resize")
      ctx.fail(concat("unknown coordinate_transformation_mode '", ct, "'"));
    const std::string nm = ctx.node().attr_string("nearest_mode", "round_prefer_floor");
    if (nm != "round_prefer_floor" && nm != "round_prefer_ceil" && nm != "floor" && nm != "ceil")
      ctx.fail(concat("unknown nearest_mode '", nm, "'"));
    if (ctx.in(0).rank() == 0) ctx.fail("cannot resize a scalar");
    ResizeSpec s = resize_spec(ctx);
    if (ct == "tf_crop_and_resize" && s.roi.size() != 2 * s.out.size())
      ctx.fail("tf_crop_and_resize needs a roi of 2 x rank values");
    TensorType t = ctx.in(0);
    t.shape = s.out;
    if (t.numel() > (int64_t{1} << 31)) ctx.fail(concat("the output ", t.str(), " is too large"));
    return std::vector<TensorType>{t};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    te::Tensor x = add_input(k, ctx, 0, "x");
    const auto in = ctx.in(0).shape;
    const size_t rank = in.size();
    ResizeSpec s = resize_spec(ctx);
    const Node &n = ctx.node();
    const std::string mode = n.attr_string("mode", "nearest");
    const std::string ct = n.attr_string("coordinate_transformation_mode", "half_pixel");
    const std::string nm = n.attr_string("nearest_mode", "round_prefer_floor");
    const double a_coef = n.attr_float("cubic_coeff_a", -0.75);
    const bool exclude = n.attr_int("exclude_outside", 0) != 0;
    const double extrap = n.attr_float("extrapolation_value", 0.0);
    const DataType dt = ctx.in(0).dtype;
    const DataType f = ir::Float(dt.is_float() && dt.bits() == 64 ? 64 : 32);
    auto fc = [&](double v) { return ir::make_const(f, v); };
    std::vector<size_t> axes;
    for (size_t a = 0; a < rank; ++a) {
      if (s.out[a] != in[a] || s.scale[a] != 1.0 || ct == "tf_crop_and_resize") axes.push_back(a);
    }
    k.outputs.push_back(compute(
        s.out,
        [&](const std::vector<Expr> &i) {
          // The source coordinate of each resized axis.
          std::vector<Expr> coord(rank);
          Expr outside = ir::const_false();
          for (size_t a : axes) {
            Expr xo = ir::cast(f, i[a]);
            const double sc = s.scale[a];
            // The output length as the coordinate transforms use it: in x scale, not rounded.
            const double lin = static_cast<double>(in[a]), lout = lin * sc;
            Expr c;
            if (ct == "half_pixel") {
              c = (xo + fc(0.5)) / fc(sc) - fc(0.5);
            } else if (ct == "pytorch_half_pixel") {
              c = s.out[a] > 1 ? (xo + fc(0.5)) / fc(sc) - fc(0.5) : fc(0.0);
            } else if (ct == "align_corners") {
              c = s.out[a] == 1 ? fc(0.0) : xo * fc((lin - 1) / (lout - 1));
            } else if (ct == "asymmetric") {
              c = xo / fc(sc);
            } else if (ct == "tf_half_pixel_for_nn") {
              c = (xo + fc(0.5)) / fc(sc);
            } else {
              const double st = s.roi[a], en = s.roi[a + rank];
              c = s.out[a] > 1 ? fc(st * (lin - 1)) + xo * fc((en - st) * (lin - 1) / (lout - 1))
                               : fc(0.5 * (st + en) * (lin - 1));
              outside = outside || c < fc(0.0) || c > fc(lin - 1);
            }
            coord[a] = c;
          }
          auto clampi = [&](Expr v, size_t a) { return ir::min(ir::max(v, i32(0)), i32(in[a] - 1)); };
          auto load = [&](const std::vector<Expr> &src) { return ir::cast(f, x(src)); };
          Expr result;
          if (mode == "nearest") {
            std::vector<Expr> src = i;
            for (size_t a : axes) {
              Expr c = coord[a];
              Expr r;
              if (nm == "floor") {
                r = ir::floor(c);
              } else if (nm == "ceil") {
                r = ir::ceil(c);
              } else {
                Expr fl = ir::floor(c);
                Expr half = c - fl == fc(0.5);
                r = ir::select(half, nm == "round_prefer_floor" ? fl : fl + fc(1.0), ir::floor(c + fc(0.5)));
              }
              src[a] = clampi(ir::cast(ir::Int(32), r), a);
            }
            result = load(src);
          } else {
            // Taps per axis: 2 (linear) or 4 (cubic), with their weights.
            struct Tap {
              Expr index, weight;
            };
            std::vector<std::vector<Tap>> taps;
            for (size_t a : axes) {
              std::vector<Tap> t;
              Expr c = coord[a];
              if (mode == "linear") {
                Expr cl =
                    ct == "tf_crop_and_resize" ? c : ir::min(ir::max(c, fc(0.0)), fc(static_cast<double>(in[a] - 1)));
                Expr x0 = ir::floor(cl);
                Expr w = cl - x0;
                Expr i0 = ir::cast(ir::Int(32), x0);
                t.push_back({clampi(i0, a), fc(1.0) - w});
                t.push_back({clampi(i0 + i32(1), a), w});
              } else {
                Expr x0 = ir::floor(c);
                Expr tt = c - x0;
                Expr i0 = ir::cast(ir::Int(32), x0);
                const double A = a_coef;
                auto w_far = [&](Expr d) {  // |d| in [1, 2]
                  return ((fc(A) * d - fc(5 * A)) * d + fc(8 * A)) * d - fc(4 * A);
                };
                auto w_near = [&](Expr d) {  // |d| in [0, 1]
                  return ((fc(A + 2) * d - fc(A + 3)) * d) * d + fc(1.0);
                };
                std::vector<Expr> ws{w_far(tt + fc(1.0)), w_near(tt), w_near(fc(1.0) - tt), w_far(fc(2.0) - tt)};
                std::vector<Expr> idx{i0 - i32(1), i0, i0 + i32(1), i0 + i32(2)};
                if (exclude) {
                  Expr sum = fc(0.0);
                  for (int q = 0; q < 4; ++q) {
                    ws[static_cast<size_t>(q)] =
                        ir::select(idx[static_cast<size_t>(q)] >= i32(0) && idx[static_cast<size_t>(q)] < i32(in[a]),
                                   ws[static_cast<size_t>(q)], fc(0.0));
                    sum = sum + ws[static_cast<size_t>(q)];
                  }
                  for (auto &w : ws) w = w / sum;
                }
                for (int q = 0; q < 4; ++q)
                  t.push_back({clampi(idx[static_cast<size_t>(q)], a), ws[static_cast<size_t>(q)]});
              }
              taps.push_back(std::move(t));
            }
            // Sum over every combination of taps.
            std::vector<size_t> pick(axes.size(), 0);
            Expr acc = fc(0.0);
            while (true) {
              std::vector<Expr> src = i;
              Expr w = fc(1.0);
              for (size_t j = 0; j < axes.size(); ++j) {
                src[axes[j]] = taps[j][pick[j]].index;
                w = w * taps[j][pick[j]].weight;
              }
              acc = acc + w * load(src);
              size_t j = 0;
              while (j < axes.size() && ++pick[j] == taps[j].size()) pick[j++] = 0;
              if (j == axes.size()) break;
            }
            result = acc;
          }
          if (ct == "tf_crop_and_resize") result = ir::select(outside, fc(extrap), result);
          if (!dt.is_float()) {
            Expr r = mode == "nearest" ? result : ir::nearbyint(result);
            r = ir::min(ir::max(r, ir::cast(f, ir::min_value(dt))), ir::cast(f, ir::max_value(dt)));
            return ir::cast(dt, r);
          }
          return ir::cast(dt, result);
        },
        "resize"));
    return k;
  };
  register_op(std::move(d));
}

}  // namespace kiln::graph::detail
