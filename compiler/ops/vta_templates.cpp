// The VTA templates: int8 operators over the accelerator's packed layouts, scheduled for the VTA
// code generator (compiler/codegen/vta/vta_codegen.h): on-chip buffers in the VTA scopes, DMA
// stages computed at the reduction tile, the GEMM block tensorized, the epilogue on the ALU, and
// virtual threads for latency hiding.
//
// dense_int8.vta: data [N/b][K/16][b][16], weight [M/16][K/16][16 m][16 k] (int8), output
// [N/b][M/16][b][16] (int8) = clip((data . weight^T) >> shift, lo, hi). Knobs: tile_b, tile_co,
// tile_ci (2-way splits of the batch, output and input blocks), b_nthread and oc_nthread (virtual
// threads over batch and output tiles). Constraints keep the tiles within the on-chip buffers.
#include "compiler/codegen/vta/vta_codegen.h"
#include "compiler/ir/op.h"
#include "compiler/ops/templates.h"
#include "deploy/vta/config.h"

namespace kiln::ops {

using autotune::Config;
using autotune::ConfigSpace;
using contracts::Json;
using namespace ir;
using namespace detail;

namespace {

constexpr const char *kDense = "dense_int8.vta";

// The VTA configuration a target names (-model, default the reference design).
kiln::vta::VtaConfig vta_config(const Target &target) {
  if (target.target.kind() != "vta") return kiln::vta::VtaConfig{};
  return codegen::vta::vta_target_config(target.str());
}

struct Epilogue {
  int shift = 8;
  bool clip = true;
  int lo = 0, hi = 127;
};

Epilogue epilogue_args(const std::string &tmpl, const Json &a) {
  Epilogue e;
  e.shift = static_cast<int>(int_arg(tmpl, a, "shift", 8));
  if (e.shift < 0 || e.shift > 31) bad_args(tmpl, "shift must be in [0, 31]");
  if (a.contains("clip") && a.at("clip").is_bool()) {
    e.clip = a.at("clip").as_bool();
  } else {
    auto c = ints_arg(tmpl, a, "clip", 2, {0, 127});
    e.lo = static_cast<int>(c[0]);
    e.hi = static_cast<int>(c[1]);
    if (e.lo > e.hi || e.lo < -128 || e.hi > 127) bad_args(tmpl, "clip must be [lo, hi] within [-128, 127]");
  }
  return e;
}

Json epilogue_json(const Epilogue &e) {
  Json j = Json::object({{"shift", Json(int64_t{e.shift})}});
  if (e.clip) {
    j.set("clip", Json::array_of(std::vector<int64_t>{e.lo, e.hi}));
  } else {
    j.set("clip", Json(false));
  }
  return j;
}

// The epilogue stages over an int32 accumulator tensor: >> shift, max lo, min hi, cast to int8.
// Returns the stages (the last one is the output).
std::vector<te::Tensor> epilogue_stages(const te::Tensor &acc, const Epilogue &e, const std::string &name) {
  std::vector<te::Tensor> st;
  te::Tensor cur = acc;
  const auto shape = acc.shape();
  auto stage = [&](const std::string &n, std::function<Expr(Expr)> f) {
    te::Tensor in = cur;
    cur = te::compute(
        shape,
        [in, f](const std::vector<Var> &i) {
          std::vector<Expr> idx(i.begin(), i.end());
          return f(in(idx));
        },
        n);
    st.push_back(cur);
  };
  if (e.shift > 0)
    stage(name + ".shr", [&e](Expr x) { return floordiv(x, make_const(Int(32), int64_t{1} << e.shift)); });
  if (e.clip) {
    stage(name + ".max", [&e](Expr x) { return max(x, make_const(Int(32), int64_t{e.lo})); });
    stage(name + ".min", [&e](Expr x) { return min(x, make_const(Int(32), int64_t{e.hi})); });
  }
  stage(name, [](Expr x) { return cast(Int(8), x); });
  return st;
}

struct Dense {
  TensorArg data, weight;
  Epilogue ep;
  int64_t nb() const { return data.shape[0]; }
  int64_t kb() const { return data.shape[1]; }
  int64_t mb() const { return weight.shape[0]; }
};

Dense parse_dense(const Json &a) {
  check_keys(kDense, a, {"data", "weight", "shift", "clip"});
  Dense d;
  d.data = tensor_arg(kDense, a, "data", 4);
  d.weight = tensor_arg(kDense, a, "weight", 4);
  d.ep = epilogue_args(kDense, a);
  if (d.data.dtype != Int(8) || d.weight.dtype != Int(8)) bad_args(kDense, "data and weight must be int8");
  if (d.weight.shape[1] != d.data.shape[1] || d.weight.shape[2] != d.weight.shape[3] ||
      d.data.shape[3] != d.weight.shape[3]) {
    bad_args(kDense, "data [N/b][K/B][b][B] and weight [M/B][K/B][B][B] do not match");
  }
  return d;
}

// The buffer shares of a tile, in elements: inputs, weights, accumulators.
bool dense_fits(const kiln::vta::VtaConfig &vc, int64_t tb, int64_t tco, int64_t tci, int64_t threads) {
  return tb * tci * threads <= vc.inp_depth() && tco * tci * threads <= vc.wgt_depth() &&
         tb * tco * threads <= vc.acc_depth();
}

void schedule_dense(te::Schedule &s, const Compute &c, const Config &cfg, const Target &target) {
  const kiln::vta::VtaConfig vc = vta_config(target);
  const te::Tensor &data = c.inputs[0], &weight = c.inputs[1];
  const te::Tensor &acc = c.part("anchor"), &out = c.outputs[0];
  te::Stage so = s[out], sc = s[acc];
  sc.set_scope(codegen::vta::kAccScope);
  for (const te::Tensor &t : c.epilogue) {
    if (t.op() != out.op()) s[t].set_scope(codegen::vta::kAccScope);
  }
  // Output tiles: bo.outer, co.outer, [threads], bo.inner, co.inner, bi, ci.
  const int64_t tb = cfg.split("tile_b").back(), tco = cfg.split("tile_co").back();
  const int64_t bt = cfg.choice_int("b_nthread"), ot = cfg.choice_int("oc_nthread");
  IterVar bo_o, bo_i, co_o, co_i;
  so.split(so.axis(0), tb, &bo_o, &bo_i);
  so.split(so.axis(1), tco, &co_o, &co_i);
  std::vector<IterVar> order;
  IterVar bt_v, ot_v, at;
  if (bt > 1) so.split_nparts(bo_o, bt, &bt_v, &bo_o);
  if (ot > 1) so.split_nparts(co_o, ot, &ot_v, &co_o);
  order = {bo_o, co_o};
  if (bt > 1) order.push_back(bt_v);
  if (ot > 1) order.push_back(ot_v);
  at = order.back();
  order.insert(order.end(), {bo_i, co_i, so.axis(2), so.axis(3)});
  so.reorder(order);
  if (bt > 1) so.bind(bt_v, "vthread");
  if (ot > 1) so.bind(ot_v, "vthread");
  so.pragma(bo_i, "dma_copy");
  sc.compute_at(so, at);
  for (const te::Tensor &t : c.epilogue) {
    if (t.op() == out.op()) continue;
    s[t].compute_at(so, at);
    s[t].pragma(s[t].axis(0), "alu");
  }
  // The GEMM: ko.outer, bo, co, ko.inner, then the tensorized block (bi, ci, ki).
  const int64_t tci = cfg.split("tile_ci").back();
  IterVar ko_o, ko_i;
  sc.split(sc.reduce_axis(0), tci, &ko_o, &ko_i);
  sc.reorder({ko_o, sc.axis(0), sc.axis(1), ko_i, sc.axis(2), sc.axis(3), sc.reduce_axis(1)});
  sc.tensorize(sc.axis(2), codegen::vta::gemm_intrin(vc));
  te::Tensor db = s.cache_read(data, codegen::vta::kInpScope, {acc.op()});
  te::Tensor wb = s.cache_read(weight, codegen::vta::kWgtScope, {acc.op()});
  for (const te::Tensor &b : {db, wb}) {
    s[b].compute_at(sc, ko_o);
    s[b].pragma(s[b].axis(0), "dma_copy");
  }
}

Template dense_template() {
  Template t;
  t.name = kDense;
  t.version = 1;
  t.summary = "int8 dense on VTA over packed layouts: data[N/b,K/16,b,16] . weight[M/16,K/16,16,16]^T, >>, clip";
  t.arguments = {tensor_spec("data", 4, "int8 [N/b][K/16][b][16] (b: the GEMM core's batch)"),
                 tensor_spec("weight", 4, "int8 [M/16][K/16][16][16]"),
                 {"shift", "int", "8", "arithmetic right shift of the int32 sums"},
                 {"clip", "[int, int] | false", "[0, 127]", "clip bounds of the shifted sums, or false for none"}};
  auto shape = [](std::vector<int64_t> s) {
    return Json::object({{"shape", Json::array_of(s)}, {"dtype", Json("int8")}});
  };
  t.example = Json::object({{"data", shape({4, 1, 1, 16})}, {"weight", shape({4, 1, 16, 16})}});
  t.canonicalize = [](const Json &a) {
    Dense d = parse_dense(a);
    Json j = epilogue_json(d.ep);
    j.set("data", tensor_json(d.data));
    j.set("weight", tensor_json(d.weight));
    return j;
  };
  t.flop = [](const Json &a) {
    Dense d = parse_dense(a);
    return 2.0 * static_cast<double>(d.data.numel()) * static_cast<double>(d.mb() * d.weight.shape[2]);
  };
  t.define_space = [](ConfigSpace &s, const Json &a, const Target &tg) {
    Dense d = parse_dense(a);
    const kiln::vta::VtaConfig vc = vta_config(tg);
    s.define_split("tile_b", d.nb(), 2);
    s.define_split("tile_co", d.mb(), 2);
    s.define_split("tile_ci", d.kb(), 2);
    s.define_choice("b_nthread", {1, 2});
    s.define_choice("oc_nthread", {1, 2});
    const int64_t nb = d.nb(), mb = d.mb();
    s.add_constraint("threads divide the tiles", {"tile_b", "tile_co", "b_nthread", "oc_nthread"},
                     [nb, mb](const Config &c) {
                       return (nb / c.split("tile_b").back()) % c.choice_int("b_nthread") == 0 &&
                              (mb / c.split("tile_co").back()) % c.choice_int("oc_nthread") == 0;
                     });
    s.add_constraint("tiles fit the on-chip buffers", {"tile_b", "tile_co", "tile_ci", "b_nthread", "oc_nthread"},
                     [vc](const Config &c) {
                       return dense_fits(vc, c.split("tile_b").back(), c.split("tile_co").back(),
                                         c.split("tile_ci").back(),
                                         c.choice_int("b_nthread") * c.choice_int("oc_nthread"));
                     });
  };
  t.default_config = [](const ConfigSpace &s, const Json &, const Target &) {
    // The largest tiles that fit, preferring two virtual threads over the output channels.
    Config best;
    double best_score = -1;
    s.for_each_valid([&](const Config &c) {
      const double score = static_cast<double>(c.split("tile_b").back() * c.split("tile_co").back()) *
                               static_cast<double>(c.split("tile_ci").back()) * 4 +
                           (c.choice_int("oc_nthread") == 2 ? 2 : 0) + (c.choice_int("b_nthread") == 1 ? 1 : 0);
      if (score > best_score) best = c, best_score = score;
      return true;
    });
    if (!best.defined()) throw OpError(std::string(kDense) + ": no config fits the on-chip buffers");
    return best;
  };
  t.compute = [](const Json &a, const Config &) {
    Dense d = parse_dense(a);
    te::Tensor data = te::placeholder(d.data.shape_exprs(), Int(8), "data");
    te::Tensor weight = te::placeholder(d.weight.shape_exprs(), Int(8), "weight");
    te::IterVar ko = te::reduce_axis(d.kb(), "ko"), ki = te::reduce_axis(d.data.shape[3], "ki");
    te::Tensor acc = te::compute(
        {d.nb(), d.mb(), d.data.shape[2], d.weight.shape[2]},
        [&](Var bo, Var co, Var bi, Var ci) {
          return te::sum(cast(Int(32), data(bo, ko, bi, ki)) * cast(Int(32), weight(co, ko, ci, ki)), {ko, ki});
        },
        "dense");
    Compute c;
    c.inputs = {data, weight};
    c.parts["anchor"] = acc;
    c.epilogue = epilogue_stages(acc, d.ep, "dense.out");
    c.outputs = {c.epilogue.back()};
    return c;
  };
  t.schedule = schedule_dense;
  return t;
}

// --- conv2d_nchw_int8.vta ---

constexpr const char *kConv = "conv2d_nchw_int8.vta";

struct Conv {
  TensorArg data, kernel;
  bool bias = false;
  int64_t stride = 1, pad = 0;
  Epilogue ep;
  int64_t n() const { return data.shape[0]; }
  int64_t icb() const { return data.shape[1]; }
  int64_t h() const { return data.shape[2]; }
  int64_t w() const { return data.shape[3]; }
  int64_t ocb() const { return kernel.shape[0]; }
  int64_t k() const { return kernel.shape[2]; }
  int64_t oh() const { return (h() + 2 * pad - k()) / stride + 1; }
  int64_t ow() const { return (w() + 2 * pad - k()) / stride + 1; }
};

Conv parse_conv(const Json &a) {
  check_keys(kConv, a, {"data", "kernel", "bias", "strides", "padding", "shift", "clip"});
  Conv c;
  c.data = tensor_arg(kConv, a, "data", 6);
  c.kernel = tensor_arg(kConv, a, "kernel", 6);
  c.bias = bool_arg(kConv, a, "bias", false);
  c.stride = int_arg(kConv, a, "strides", 1);
  c.pad = int_arg(kConv, a, "padding", 0);
  c.ep = epilogue_args(kConv, a);
  if (c.data.dtype != Int(8) || c.kernel.dtype != Int(8)) bad_args(kConv, "data and kernel must be int8");
  const auto &d = c.data.shape, &k = c.kernel.shape;
  if (k[1] != d[1] || k[2] != k[3] || k[4] != d[5] || k[5] != d[5]) {
    bad_args(kConv, "data [N/b][C/B][H][W][b][B] and kernel [O/B][C/B][K][K][B][B] do not match");
  }
  if (c.stride < 1 || c.pad < 0 || c.pad > 15) bad_args(kConv, "strides must be >= 1 and padding in [0, 15]");
  if (c.h() + 2 * c.pad < c.k() || c.w() + 2 * c.pad < c.k()) bad_args(kConv, "the kernel is larger than the input");
  return c;
}

// The on-chip elements one tile of a config takes: inputs, weights, accumulators.
struct ConvTile {
  int64_t inp, wgt, acc, uops;
};
ConvTile conv_tile(const Conv &c, const Config &cfg) {
  const int64_t tb = cfg.split("tile_b").back(), tco = cfg.split("tile_co").back();
  const int64_t th = cfg.split("tile_h").back(), tw = cfg.split("tile_w").back();
  const int64_t tci = cfg.split("tile_ci").back();
  const int64_t threads = cfg.choice_int("oc_nthread") * cfg.choice_int("h_nthread");
  const int64_t ih = (th - 1) * c.stride + c.k(), iw = (tw - 1) * c.stride + c.k();
  return {tb * tci * ih * iw * threads, tco * tci * c.k() * c.k() * threads,
          (tb * tco * th * tw + (c.bias ? tco : 0)) * threads, tci * c.k() * c.k() * tw * tb};
}

void schedule_conv(te::Schedule &s, const Compute &c, const Config &cfg, const Target &target) {
  const kiln::vta::VtaConfig vc = vta_config(target);
  const te::Tensor &data = c.inputs[0], &kernel = c.inputs[1];
  const te::Tensor &acc = c.part("anchor"), &out = c.outputs[0];
  te::Stage so = s[out], sc = s[acc];
  sc.set_scope(codegen::vta::kAccScope);
  for (const te::Tensor &t : c.epilogue) {
    if (t.op() != out.op()) s[t].set_scope(codegen::vta::kAccScope);
  }
  // Output tiles: b.o, h.o, co.o, w.o, [threads], b.i, co.i, h.i, w.i, bi, ci.
  const int64_t ht = cfg.choice_int("h_nthread"), ot = cfg.choice_int("oc_nthread");
  IterVar b_o, b_i, co_o, co_i, h_o, h_i, w_o, w_i, ht_v, ot_v;
  so.split(so.axis(0), cfg.split("tile_b").back(), &b_o, &b_i);
  so.split(so.axis(1), cfg.split("tile_co").back(), &co_o, &co_i);
  so.split(so.axis(2), cfg.split("tile_h").back(), &h_o, &h_i);
  so.split(so.axis(3), cfg.split("tile_w").back(), &w_o, &w_i);
  if (ht > 1) so.split_nparts(h_o, ht, &ht_v, &h_o);
  if (ot > 1) so.split_nparts(co_o, ot, &ot_v, &co_o);
  std::vector<IterVar> order = {b_o, h_o, co_o, w_o};
  if (ht > 1) order.push_back(ht_v);
  if (ot > 1) order.push_back(ot_v);
  const IterVar at = order.back();
  order.insert(order.end(), {b_i, co_i, h_i, w_i, so.axis(4), so.axis(5)});
  so.reorder(order);
  if (ht > 1) so.bind(ht_v, "vthread");
  if (ot > 1) so.bind(ot_v, "vthread");
  so.pragma(b_i, "dma_copy");
  sc.compute_at(so, at);
  for (const te::Tensor &t : c.epilogue) {
    if (t.op() == out.op()) continue;
    s[t].compute_at(so, at);
    s[t].pragma(s[t].axis(0), "alu");
  }
  // The convolution: ic.o.outer, then b, co, h (folded into the GEMM's loops), ic.o.inner, kh,
  // kw, w, and the tensorized block (bi, ci, ic.i).
  IterVar ko_o, ko_i;
  sc.split(sc.reduce_axis(0), cfg.split("tile_ci").back(), &ko_o, &ko_i);
  sc.reorder({ko_o, sc.axis(0), sc.axis(1), sc.axis(2), ko_i, sc.reduce_axis(1), sc.reduce_axis(2), sc.axis(3),
              sc.axis(4), sc.axis(5), sc.reduce_axis(3)});
  sc.tensorize(sc.axis(4), codegen::vta::gemm_intrin(vc));
  te::Tensor src = data;
  if (c.has_part("pad")) {
    s[c.part("pad")].compute_inline();
    src = c.part("pad");
  }
  te::Tensor db = s.cache_read(src, codegen::vta::kInpScope, {acc.op()});
  te::Tensor kb = s.cache_read(kernel, codegen::vta::kWgtScope, {acc.op()});
  for (const te::Tensor &b : {db, kb}) {
    s[b].compute_at(sc, ko_o);
    s[b].pragma(s[b].axis(0), "dma_copy");
  }
  if (c.inputs.size() > 2) {
    te::Tensor bb = s.cache_read(c.inputs[2], codegen::vta::kAccScope, {c.part("bias_add").op()});
    s[bb].compute_at(so, at);
    s[bb].pragma(s[bb].axis(0), "dma_copy");
  }
}

Template conv_template() {
  Template t;
  t.name = kConv;
  t.version = 1;
  t.summary = "int8 conv2d on VTA over packed layouts (NCHW1n16c, OIHW16o16i): >> shift, + bias, clip";
  t.arguments = {tensor_spec("data", 6, "int8 [N/b][C/16][H][W][b][16]"),
                 tensor_spec("kernel", 6, "int8 [O/16][C/16][K][K][16 o][16 c]"),
                 {"bias", "bool", "false", "an int32 bias [O/16][16] added after the shift"},
                 {"strides", "int", "1", "stride of both spatial axes"},
                 {"padding", "int", "0", "zero padding on each side of both spatial axes (0..15)"},
                 {"shift", "int", "8", "arithmetic right shift of the int32 sums"},
                 {"clip", "[int, int] | false", "[0, 127]", "clip bounds, or false for none"}};
  auto shape = [](std::vector<int64_t> s) {
    return Json::object({{"shape", Json::array_of(s)}, {"dtype", Json("int8")}});
  };
  t.example = Json::object({{"data", shape({1, 4, 8, 8, 1, 16})},
                            {"kernel", shape({4, 4, 3, 3, 16, 16})},
                            {"padding", Json(int64_t{1})},
                            {"bias", Json(true)}});
  t.canonicalize = [](const Json &a) {
    Conv c = parse_conv(a);
    Json j = epilogue_json(c.ep);
    j.set("data", tensor_json(c.data));
    j.set("kernel", tensor_json(c.kernel));
    j.set("bias", Json(c.bias));
    j.set("strides", Json(c.stride));
    j.set("padding", Json(c.pad));
    return j;
  };
  t.flop = [](const Json &a) {
    Conv c = parse_conv(a);
    return 2.0 * static_cast<double>(c.n() * c.data.shape[4] * c.ocb() * 16 * c.oh() * c.ow()) *
           static_cast<double>(c.icb() * 16 * c.k() * c.k());
  };
  t.define_space = [](ConfigSpace &s, const Json &a, const Target &tg) {
    Conv c = parse_conv(a);
    const kiln::vta::VtaConfig vc = vta_config(tg);
    s.define_split("tile_b", c.n(), 2);
    s.define_split("tile_co", c.ocb(), 2);
    s.define_split("tile_h", c.oh(), 2);
    s.define_split("tile_w", c.ow(), 2);
    s.define_split("tile_ci", c.icb(), 2);
    s.define_choice("oc_nthread", {1, 2});
    s.define_choice("h_nthread", {1, 2});
    const int64_t ocb = c.ocb(), oh = c.oh();
    s.add_constraint("threads divide the tiles", {"tile_co", "tile_h", "oc_nthread", "h_nthread"},
                     [ocb, oh](const Config &k) {
                       return (ocb / k.split("tile_co").back()) % k.choice_int("oc_nthread") == 0 &&
                              (oh / k.split("tile_h").back()) % k.choice_int("h_nthread") == 0;
                     });
    s.add_constraint("tiles fit the on-chip buffers",
                     {"tile_b", "tile_co", "tile_h", "tile_w", "tile_ci", "oc_nthread", "h_nthread"},
                     [c, vc](const Config &k) {
                       const ConvTile t = conv_tile(c, k);
                       return t.inp <= vc.inp_depth() && t.wgt <= vc.wgt_depth() && t.acc <= vc.acc_depth() &&
                              t.uops <= vc.uop_depth() / 2;
                     });
  };
  t.default_config = [](const ConfigSpace &s, const Json &a, const Target &) {
    // Two virtual threads over the output channels (one loads while the other computes), each with
    // the tile of the most MACs that fits its half of the buffers, whole rows preferred (fewer DMA
    // rows); one thread where two do not fit.
    Conv c = parse_conv(a);
    Config best;
    double best_score = -1;
    s.for_each_valid([&](const Config &k) {
      const int64_t threads = k.choice_int("oc_nthread") * k.choice_int("h_nthread");
      if (threads > 2 || k.choice_int("h_nthread") > 1) return true;
      const double macs = static_cast<double>(k.split("tile_b").back() * k.split("tile_co").back() *
                                              k.split("tile_h").back() * k.split("tile_w").back()) *
                          static_cast<double>(k.split("tile_ci").back());
      const double score = macs + (k.split("tile_w").back() == c.ow() ? 1e12 : 0) + (threads == 2 ? 1e13 : 0);
      if (score > best_score) best = k, best_score = score;
      return true;
    });
    if (!best.defined()) throw OpError(std::string(kConv) + ": no config fits the on-chip buffers");
    return best;
  };
  t.compute = [](const Json &a, const Config &) {
    Conv cv = parse_conv(a);
    te::Tensor data = te::placeholder(cv.data.shape_exprs(), Int(8), "data");
    te::Tensor kernel = te::placeholder(cv.kernel.shape_exprs(), Int(8), "kernel");
    Compute c;
    c.inputs = {data, kernel};
    te::Tensor src = pad(data, {0, 0, cv.pad, cv.pad, 0, 0}, {0, 0, cv.pad, cv.pad, 0, 0}, "data.pad");
    if (src.op() != data.op()) c.parts["pad"] = src;
    te::IterVar ic = te::reduce_axis(cv.icb(), "ic"), kh = te::reduce_axis(cv.k(), "kh"),
                kw = te::reduce_axis(cv.k(), "kw"), ii = te::reduce_axis(cv.data.shape[5], "ii");
    const int64_t st = cv.stride;
    te::Tensor acc = te::compute(
        {cv.n(), cv.ocb(), cv.oh(), cv.ow(), cv.data.shape[4], cv.kernel.shape[4]},
        te::FCompute([&](const std::vector<Var> &i) {
          Expr x = src({i[0], ic, i[2] * static_cast<int>(st) + kh, i[3] * static_cast<int>(st) + kw, i[4], ii});
          return te::sum(cast(Int(32), x) * cast(Int(32), kernel({i[1], ic, kh, kw, i[5], ii})), {ic, kh, kw, ii});
        }),
        "conv");
    c.parts["anchor"] = acc;
    Epilogue ep = cv.ep;
    std::vector<te::Tensor> st_list;
    te::Tensor cur = acc;
    if (ep.shift > 0) {
      Epilogue only_shift = ep;
      only_shift.clip = false;
      auto s1 = epilogue_stages(acc, only_shift, "conv.out");
      cur = s1[0];
      st_list.push_back(cur);
    }
    if (cv.bias) {
      te::Tensor bias = te::placeholder({cv.ocb(), cv.kernel.shape[4]}, Int(32), "bias");
      c.inputs.push_back(bias);
      te::Tensor in = cur;
      cur = te::compute(in.shape(), te::FCompute([in, bias](const std::vector<Var> &i) {
                          return in({i[0], i[1], i[2], i[3], i[4], i[5]}) + bias({i[1], i[5]});
                        }),
                        "conv.out.bias");
      c.parts["bias_add"] = cur;
      st_list.push_back(cur);
    }
    Epilogue rest = ep;
    rest.shift = 0;
    auto tail = epilogue_stages(cur, rest, "conv.out");
    st_list.insert(st_list.end(), tail.begin(), tail.end());
    c.epilogue = st_list;
    c.outputs = {st_list.back()};
    return c;
  };
  t.schedule = schedule_conv;
  return t;
}

}  // namespace

void register_vta_templates(Registry &r) {
  r.add(dense_template());
  r.add(conv_template());
}

}  // namespace kiln::ops
