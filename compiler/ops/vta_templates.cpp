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
  auto model = target.target.value("model");
  return model ? kiln::vta::VtaConfig::parse(*model) : kiln::vta::VtaConfig{};
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

}  // namespace

void register_vta_templates(Registry &r) { r.add(dense_template()); }

}  // namespace kiln::ops
