// Templates for injective and reduction operators on x86, and the generic injective schedule:
//   elemwise.x86   a chain of elementwise ops (the epilogue descriptors) on one tensor;
//   broadcast.x86  a binary op with numpy broadcasting (add, subtract, multiply, divide, maximum,
//                  minimum), then an epilogue;
//   reduce.x86     sum, mean, max, min or prod over some axes (keepdims optional), then an epilogue.
// Schedule: intermediate elementwise stages inlined; the output's trailing loops fused into rows
// along which every input is read contiguously or not at all (all loops for a plain chain, the
// loops after the channel when an op reads a per-channel input), a row split by a block of vector
// lanes, the rest parallel and the block vectorized. Reductions over the innermost data dimension keep vector
// partial results (rfactor); reductions over outer dimensions vectorize the innermost kept one.
#include <algorithm>
#include <limits>

#include "compiler/ir/op.h"
#include "compiler/ops/generic_schedule.h"
#include "compiler/ops/templates.h"

namespace kiln::ops {

using autotune::Config;
using autotune::ConfigSpace;
using autotune::SplitPolicy;
using contracts::Json;
using namespace detail;
using namespace ir;

void inline_intermediate_stages(te::Schedule &s) {
  for (const auto &st : s.stages()) {
    const auto *c = dynamic_cast<const te::ComputeOpNode *>(st->op.get());
    if (!c || c->is_reduction() || st->is_output || st->attach_type != te::AttachType::Root) continue;
    te::Stage(st.get()).compute_inline();
  }
}

void schedule_injective(te::Schedule &s, const te::Tensor &out, int64_t block) {
  inline_intermediate_stages(s);
  schedule_injective_stage(s, out, std::max<int64_t>(block, 1));
}

void schedule_injective(te::Schedule &s, const te::Tensor &out, const Target &target) {
  schedule_injective(s, out, 4 * static_cast<int64_t>(target.lanes(out.dtype())));
}

int64_t row_reduction_width(int64_t len, int64_t block, int64_t max_accumulators) {
  block = std::max<int64_t>(1, block);
  // Independent accumulators: as many vectors as fit in the row, at most four (an add's latency
  // over its throughput on the cores Kiln targets).
  const int64_t accumulators = std::clamp<int64_t>(len / (4 * block), 1, std::clamp<int64_t>(max_accumulators, 1, 4));
  return block * accumulators;
}

void schedule_row_reduction(te::Schedule &s, const te::Tensor &t, te::Stage at, const te::IterVar &par, int64_t block,
                            bool interleave_rows, int64_t max_accumulators) {
  te::Stage st = s[t];
  const auto *op = dynamic_cast<const te::ComputeOpNode *>(st->op.get());
  IterVar k = st.reduce_axis(0);
  int64_t len = 1;
  for (const IterVar &r : op->reduce_axis) len *= as_const_int(r->dom.extent).value_or(1);
  if (op->reduce_axis.size() > 1) {
    std::vector<IterVar> red;
    for (size_t i = 0; i < op->reduce_axis.size(); ++i) red.push_back(st.reduce_axis(i));
    st.fuse(red, &k);
  }
  int64_t width = row_reduction_width(len, block, max_accumulators);
  IterVar ko, ki;
  st.split(k, static_cast<int>(width), &ko, &ki);
  const int nd = t.ndim();
  // With interleave_rows, the loops over the rows go inside the reduction loop (and unrolled): one
  // loop body updates every row's accumulators, whose chains then overlap.
  auto order = [nd, interleave_rows](te::Stage &stage, const IterVar &red, const IterVar *vec) {
    std::vector<IterVar> o = {red};
    if (interleave_rows) {
      for (int d = 0; d < nd; ++d) o.push_back(stage.axis(static_cast<size_t>(d)));
    }
    if (vec) o.push_back(*vec);
    stage.reorder(o);
    if (interleave_rows) {
      for (int d = 0; d < nd; ++d) stage.unroll(stage.axis(static_cast<size_t>(d)));
    }
  };
  te::Tensor rf = s.rfactor(t, ki, nd);
  te::Stage R = s[rf];
  if (par.defined()) R.compute_at(at, par);
  IterVar rv = R.axis(static_cast<size_t>(nd));
  order(R, R.reduce_axis(0), &rv);
  R.vectorize(rv);
  // The tree: each level adds the upper half of the partial results to the lower half.
  while (width > 2 && width % 2 == 0) {
    IterVar ho, hi;
    st.split(st.reduce_axis(0), static_cast<int>(width / 2), &ho, &hi);
    te::Tensor half = s.rfactor(t, hi, nd);
    te::Stage H = s[half];
    if (par.defined()) H.compute_at(at, par);
    IterVar hv = H.axis(static_cast<size_t>(nd));
    order(H, H.reduce_axis(0), &hv);
    H.unroll(H.reduce_axis(0));
    H.vectorize(hv);
    width /= 2;
  }
  if (par.defined()) st.compute_at(at, par);
  if (interleave_rows && nd > 0) order(st, st.reduce_axis(0), nullptr);
  st.unroll(st.reduce_axis(0));
}

Expr sum_from_negative_zero(Expr source, std::vector<te::IterVar> axis) {
  static const te::Reducer reducer([](Expr a, Expr b) { return a + b; },
                                   [](DataType t) { return t.is_float() ? make_const(t, -0.0) : make_zero(t); });
  return reducer(std::move(source), std::move(axis));
}

Expr negative_infinity_or_lowest(DataType t) {
  return t.is_float() ? make_const(t, -std::numeric_limits<double>::infinity()) : min_value(t);
}

Expr max_from_negative_infinity(Expr source, std::vector<te::IterVar> axis) {
  static const te::Reducer reducer([](Expr a, Expr b) { return ir::max(a, b); }, negative_infinity_or_lowest);
  return reducer(std::move(source), std::move(axis));
}

Expr min_from_positive_infinity(Expr source, std::vector<te::IterVar> axis) {
  static const te::Reducer reducer(
      [](Expr a, Expr b) { return ir::min(a, b); },
      [](DataType t) { return t.is_float() ? make_const(t, std::numeric_limits<double>::infinity()) : max_value(t); });
  return reducer(std::move(source), std::move(axis));
}

namespace {

// Vector blocks for a run of `n` elements: 1, 2, 4, 8 and 16 vectors, no longer than n (or n
// itself when it is shorter than a vector).
void define_block(ConfigSpace &s, const std::string &name, int64_t n, int64_t lanes) {
  std::vector<std::vector<int64_t>> c;
  for (int64_t v = 1; v <= 16; v *= 2) {
    if (lanes * v <= n) c.push_back({lanes * v});
  }
  if (c.empty()) c.push_back({n});
  s.define_split(name, n, 2, SplitPolicy::candidate(c));
}

Config default_block(const ConfigSpace &s, const std::string &name, int64_t n, int64_t lanes) {
  int64_t b = std::min(n, lanes * 4);
  const auto &k = s.knob(name);
  // The largest candidate not above four vectors.
  Json best = k.entities.front();
  for (const auto &e : k.entities) {
    if (e[1].as_int() <= b) best = e;
  }
  return s.from_values({{name, best}});
}

// --- elemwise ---

struct Elemwise {
  TensorArg data;
  int64_t axis = 1;
  Json epilogue;
};

Elemwise parse_elemwise(const std::string &tmpl, const Json &args) {
  check_keys(tmpl, args, {"data", "axis", "epilogue"});
  Elemwise e;
  e.data = tensor_arg(tmpl, args, "data", -1);
  const int64_t rank = static_cast<int64_t>(e.data.shape.size());
  e.axis = int_arg(tmpl, args, "axis", rank > 1 ? 1 : 0);
  if (e.axis < -rank || e.axis >= rank) bad_args(tmpl, "axis is out of range");
  if (e.axis < 0) e.axis += rank;
  e.epilogue = canonical_epilogue(args.get_or("epilogue", Json::array()), e.data.dtype, "workload " + tmpl);
  if (e.epilogue.size() == 0) bad_args(tmpl, "the op chain (\"epilogue\") is empty");
  return e;
}

// The first axis of a row: every axis when no op reads a per-channel input; else the axes after
// the channel (at least the innermost one), so that the channel is fixed along a row or is the
// row itself.
int elemwise_first_inner(const Elemwise &e) {
  bool per_channel = false;
  for (size_t i = 0; i < e.epilogue.size(); ++i) {
    const std::string op = e.epilogue[i]["op"].as_string();
    per_channel = per_channel || op == "bias_add" || op == "prelu";
  }
  if (!per_channel) return 0;
  const int64_t rank = static_cast<int64_t>(e.data.shape.size());
  return static_cast<int>(std::min(e.axis + 1, rank - 1));
}

int64_t row_length(const std::vector<int64_t> &shape, int first_inner) {
  int64_t n = 1;
  for (size_t d = static_cast<size_t>(std::max(first_inner, 0)); d < shape.size(); ++d) n *= shape[d];
  return n;
}

// --- broadcast ---

struct Broadcast {
  TensorArg lhs, rhs;
  std::string op;
  std::vector<int64_t> shape;
  Json epilogue;
  // Axes from here on are fused into rows (see parse_broadcast).
  int first_inner = 0;
};

Broadcast parse_broadcast(const std::string &tmpl, const Json &args) {
  check_keys(tmpl, args, {"lhs", "rhs", "op", "epilogue"});
  Broadcast b;
  b.lhs = tensor_arg(tmpl, args, "lhs", -1);
  b.rhs = tensor_arg(tmpl, args, "rhs", -1);
  if (b.lhs.dtype != b.rhs.dtype) bad_args(tmpl, "lhs and rhs must have the same dtype");
  b.op = string_arg(tmpl, args, "op", "add");
  static const std::vector<std::string> ops = {"add", "subtract", "multiply", "divide", "maximum", "minimum"};
  if (std::find(ops.begin(), ops.end(), b.op) == ops.end()) {
    bad_args(tmpl, "unknown op '" + b.op + "' (add, subtract, multiply, divide, maximum, minimum)");
  }
  const size_t rank = std::max(b.lhs.shape.size(), b.rhs.shape.size());
  for (size_t i = 0; i < rank; ++i) {
    auto dim = [&](const TensorArg &t) {
      size_t off = rank - t.shape.size();
      return i < off ? int64_t{1} : t.shape[i - off];
    };
    int64_t l = dim(b.lhs), r = dim(b.rhs);
    if (l != r && l != 1 && r != 1) {
      bad_args(tmpl, "shapes do not broadcast: dimension " + std::to_string(i) + " is " + std::to_string(l) + " and " +
                         std::to_string(r));
    }
    b.shape.push_back(std::max(l, r));
  }
  // The trailing axes along which each operand is either read contiguously or not at all.
  auto broadcast_at = [&](const TensorArg &t, size_t d) {
    const size_t off = rank - t.shape.size();
    return d < off || t.shape[d - off] == 1;
  };
  b.first_inner = static_cast<int>(rank) - 1;
  while (b.first_inner > 0) {
    const size_t d = static_cast<size_t>(b.first_inner - 1), last = rank - 1;
    const bool same = b.shape[d] == 1 || (broadcast_at(b.lhs, d) == broadcast_at(b.lhs, last) &&
                                          broadcast_at(b.rhs, d) == broadcast_at(b.rhs, last));
    if (!same) break;
    --b.first_inner;
  }
  b.epilogue = canonical_epilogue(args.get_or("epilogue", Json::array()), b.lhs.dtype, "workload " + tmpl);
  return b;
}

// --- reduce ---

struct Reduce {
  TensorArg data;
  std::vector<int64_t> axes;  // sorted, unique
  bool keepdims = false;
  std::string op;
  Json epilogue;

  std::vector<int64_t> out_shape() const {
    std::vector<int64_t> s;
    for (size_t d = 0; d < data.shape.size(); ++d) {
      bool red = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
      if (!red)
        s.push_back(data.shape[d]);
      else if (keepdims)
        s.push_back(1);
    }
    if (s.empty()) s.push_back(1);
    return s;
  }
  bool innermost_reduced() const { return axes.back() == static_cast<int64_t>(data.shape.size()) - 1; }
  int64_t reduced_size() const {
    int64_t n = 1;
    for (int64_t a : axes) n *= data.shape[static_cast<size_t>(a)];
    return n;
  }
};

Reduce parse_reduce(const std::string &tmpl, const Json &args) {
  check_keys(tmpl, args, {"data", "axes", "keepdims", "op", "epilogue"});
  Reduce r;
  r.data = tensor_arg(tmpl, args, "data", -1);
  const int64_t rank = static_cast<int64_t>(r.data.shape.size());
  const Json *a = args.find("axes");
  if (!a) {
    for (int64_t d = 0; d < rank; ++d) r.axes.push_back(d);
  } else {
    r.axes = a->is_int() ? std::vector<int64_t>{a->as_int()}
                         : ints_arg(tmpl, args, "axes", a->is_array() ? a->size() : 1, {});
  }
  if (r.axes.empty()) bad_args(tmpl, "axes must not be empty");
  for (auto &x : r.axes) {
    if (x < -rank || x >= rank) bad_args(tmpl, "axes are out of range");
    if (x < 0) x += rank;
  }
  std::sort(r.axes.begin(), r.axes.end());
  if (std::adjacent_find(r.axes.begin(), r.axes.end()) != r.axes.end()) bad_args(tmpl, "an axis is listed twice");
  r.keepdims = bool_arg(tmpl, args, "keepdims", false);
  r.op = string_arg(tmpl, args, "op", "sum");
  if (r.op != "sum" && r.op != "mean" && r.op != "max" && r.op != "min" && r.op != "prod") {
    bad_args(tmpl, "unknown reduction '" + r.op + "' (sum, mean, max, min, prod)");
  }
  if (r.op == "mean" && !r.data.dtype.is_float()) bad_args(tmpl, "mean needs float data");
  r.epilogue = canonical_epilogue(args.get_or("epilogue", Json::array()), r.data.dtype, "workload " + tmpl);
  return r;
}

Compute reduce_compute(const Reduce &r) {
  Compute c;
  te::Tensor x = te::placeholder(r.data.shape_exprs(), r.data.dtype, "data");
  c.inputs = {x};
  std::vector<te::IterVar> rax;
  for (int64_t a : r.axes) {
    rax.push_back(
        te::reduce_axis(Expr(static_cast<int>(r.data.shape[static_cast<size_t>(a)])), "k" + std::to_string(a)));
  }
  std::vector<Expr> shape;
  for (int64_t d : r.out_shape()) shape.push_back(Expr(static_cast<int>(d)));
  const Reduce q = r;
  auto body = [=](const std::vector<Var> &i) {
    std::vector<Expr> idx;
    size_t o = 0, k = 0;
    for (size_t d = 0; d < q.data.shape.size(); ++d) {
      bool red = k < q.axes.size() && q.axes[k] == static_cast<int64_t>(d);
      if (red) {
        idx.push_back(rax[k++]->var);
        if (q.keepdims) ++o;
      } else {
        idx.push_back(i[o++]);
      }
    }
    Expr v = x(idx);
    // From -inf and +inf (float): the max of values that are all -inf is -inf, as numpy's.
    if (q.op == "max") return max_from_negative_infinity(v, rax);
    if (q.op == "min") return min_from_positive_infinity(v, rax);
    if (q.op == "prod") return te::prod(v, rax);
    return sum_from_negative_zero(v, rax);
  };
  te::Tensor red =
      te::compute(shape, te::FCompute(body), "reduce_" + (r.op == "mean" ? std::string("sum") : r.op), "reduce");
  c.parts["anchor"] = red;
  te::Tensor res = red;
  if (r.op == "mean") {
    Expr inv = make_const(r.data.dtype, 1.0 / static_cast<double>(r.reduced_size()));
    res = te::compute(shape, te::FCompute([=](const std::vector<Var> &i) { return red(exprs(i)) * inv; }),
                      "reduce_mean", "elemwise");
    c.parts["mean"] = res;
  }
  const int64_t ch_axis = shape.size() > 1 ? 1 : 0;
  ChannelMap ch{r.out_shape()[static_cast<size_t>(ch_axis)],
                [ch_axis](const std::vector<Var> &i) { return Expr(i[static_cast<size_t>(ch_axis)]); }};
  c.epilogue = build_epilogue(res, r.epilogue, ch, &c.inputs);
  c.outputs = {c.epilogue.empty() ? res : c.epilogue.back()};
  c.attrs["innermost_reduced"] = r.innermost_reduced() ? 1 : 0;
  return c;
}

void schedule_reduce(te::Schedule &s, const Compute &c, const Config &cfg) {
  inline_epilogue(s, c);
  OutputAndAcc oa;
  if (c.has_part("mean")) {
    if (!c.epilogue.empty()) s[c.part("mean")].compute_inline();
    oa = {c.outputs[0], c.part("anchor")};
  } else {
    oa = prepare_anchor(s, c);
  }
  te::Stage O = s[oa.out];
  const int nd = oa.out.ndim();
  const int64_t block = cfg.split("tile")[1];
  std::vector<IterVar> all;
  for (int d = 0; d < nd; ++d) all.push_back(O.axis(static_cast<size_t>(d)));
  if (c.attrs.at("innermost_reduced")) {
    // One output element per iteration of a parallel loop; the reduction keeps `block` vector
    // partial results.
    IterVar par;
    O.fuse(all, &par);
    O.parallel(par);
    schedule_row_reduction(s, oa.acc, O, par, block);
  } else {
    // The innermost kept dimension is vectorized; the reduction runs outside it.
    IterVar io, ii;
    O.split(all.back(), static_cast<int>(block), &io, &ii);
    std::vector<IterVar> outer(all.begin(), all.end() - 1);
    outer.push_back(io);
    IterVar par;
    O.fuse(outer, &par);
    O.parallel(par);
    O.vectorize(ii);
    te::Stage A = s[oa.acc];
    A.compute_at(O, par);
    const auto *op = dynamic_cast<const te::ComputeOpNode *>(A->op.get());
    std::vector<IterVar> order;
    for (size_t i = 0; i < op->reduce_axis.size(); ++i) order.push_back(A.reduce_axis(i));
    order.push_back(A.axis(static_cast<size_t>(nd - 1)));
    A.reorder(order);
    A.vectorize(A.axis(static_cast<size_t>(nd - 1)));
  }
}

}  // namespace

void register_injective_templates(Registry &r) {
  {
    Template t;
    t.name = "elemwise.x86";
    t.version = 2;
    t.summary = "a chain of elementwise ops (epilogue descriptors) on one tensor";
    t.arguments = {tensor_spec("data", -1, "the input"),
                   {"axis", "int", "1 (0 for rank 1)", "the channel axis a bias_add indexes"},
                   {"epilogue", "list of epilogue ops (see the epilogue format)", "", "the ops, at least one"}};
    t.example = Json::object({{"data", Json::object({{"shape", Json::array_of(std::vector<int64_t>{8, 128})}})},
                              {"epilogue", Json::array({epilogue::relu()})}});
    const std::string name = t.name;
    t.canonicalize = [name](const Json &a) {
      Elemwise e = parse_elemwise(name, a);
      return Json::object({{"data", tensor_json(e.data)}, {"axis", e.axis}, {"epilogue", e.epilogue}});
    };
    t.flop = [name](const Json &a) {
      Elemwise e = parse_elemwise(name, a);
      return epilogue_flop(e.epilogue, static_cast<double>(e.data.numel()));
    };
    t.define_space = [name](ConfigSpace &s, const Json &a, const Target &tg) {
      Elemwise e = parse_elemwise(name, a);
      define_block(s, "tile", row_length(e.data.shape, elemwise_first_inner(e)), tg.lanes(e.data.dtype));
    };
    t.default_config = [name](const ConfigSpace &s, const Json &a, const Target &tg) {
      Elemwise e = parse_elemwise(name, a);
      return default_block(s, "tile", row_length(e.data.shape, elemwise_first_inner(e)), tg.lanes(e.data.dtype));
    };
    t.compute = [name](const Json &a, const Config &) {
      Elemwise e = parse_elemwise(name, a);
      Compute c;
      te::Tensor x = te::placeholder(e.data.shape_exprs(), e.data.dtype, "data");
      c.inputs = {x};
      const size_t ax = static_cast<size_t>(e.axis);
      ChannelMap ch{e.data.shape[ax], [ax](const std::vector<Var> &i) { return Expr(i[ax]); }};
      c.epilogue = build_epilogue(x, e.epilogue, ch, &c.inputs);
      c.parts["anchor"] = c.epilogue.front();
      c.outputs = {c.epilogue.back()};
      c.attrs["first_inner"] = elemwise_first_inner(e);
      return c;
    };
    t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
      for (size_t i = 0; i + 1 < c.epilogue.size(); ++i) s[c.epilogue[i]].compute_inline();
      schedule_rows(s, c.outputs[0], static_cast<int>(c.attrs.at("first_inner")), cfg.split("tile")[1]);
    };
    r.add(std::move(t));
  }
  {
    Template t;
    t.name = "broadcast.x86";
    t.version = 2;
    t.summary = "a binary op with numpy broadcasting, then an epilogue";
    t.arguments = {tensor_spec("lhs", -1, "the left operand"),
                   tensor_spec("rhs", -1, "the right operand, of lhs's dtype; shapes broadcast as numpy's"),
                   {"op", "\"add\" | \"subtract\" | \"multiply\" | \"divide\" | \"maximum\" | \"minimum\"", "\"add\"",
                    "the binary op"},
                   epilogue_spec()};
    t.example = Json::object({{"lhs", Json::object({{"shape", Json::array_of(std::vector<int64_t>{8, 128})}})},
                              {"rhs", Json::object({{"shape", Json::array_of(std::vector<int64_t>{128})}})}});
    const std::string name = t.name;
    t.canonicalize = [name](const Json &a) {
      Broadcast b = parse_broadcast(name, a);
      return Json::object(
          {{"lhs", tensor_json(b.lhs)}, {"rhs", tensor_json(b.rhs)}, {"op", b.op}, {"epilogue", b.epilogue}});
    };
    t.flop = [name](const Json &a) {
      Broadcast b = parse_broadcast(name, a);
      double n = 1;
      for (int64_t d : b.shape) n *= static_cast<double>(d);
      return n + epilogue_flop(b.epilogue, n);
    };
    t.define_space = [name](ConfigSpace &s, const Json &a, const Target &tg) {
      Broadcast b = parse_broadcast(name, a);
      define_block(s, "tile", row_length(b.shape, b.first_inner), tg.lanes(b.lhs.dtype));
    };
    t.default_config = [name](const ConfigSpace &s, const Json &a, const Target &tg) {
      Broadcast b = parse_broadcast(name, a);
      return default_block(s, "tile", row_length(b.shape, b.first_inner), tg.lanes(b.lhs.dtype));
    };
    t.compute = [name](const Json &a, const Config &) {
      Broadcast b = parse_broadcast(name, a);
      Compute c;
      te::Tensor l = te::placeholder(b.lhs.shape_exprs(), b.lhs.dtype, "lhs");
      te::Tensor rr = te::placeholder(b.rhs.shape_exprs(), b.rhs.dtype, "rhs");
      c.inputs = {l, rr};
      std::vector<Expr> shape;
      for (int64_t d : b.shape) shape.push_back(Expr(static_cast<int>(d)));
      const size_t rank = b.shape.size();
      auto index = [rank](const TensorArg &t, const std::vector<Var> &i) {
        std::vector<Expr> idx;
        const size_t off = rank - t.shape.size();
        for (size_t d = 0; d < t.shape.size(); ++d) idx.push_back(t.shape[d] == 1 ? Expr(0) : Expr(i[d + off]));
        return idx;
      };
      const std::string op = b.op;
      const TensorArg la = b.lhs, ra = b.rhs;
      te::Tensor out = te::compute(shape, te::FCompute([=](const std::vector<Var> &i) {
                                     Expr x = l(index(la, i)), y = rr(index(ra, i));
                                     if (op == "add") return x + y;
                                     if (op == "subtract") return x - y;
                                     if (op == "multiply") return x * y;
                                     if (op == "divide") return x / y;
                                     if (op == "maximum") return ir::max(x, y);
                                     return ir::min(x, y);
                                   }),
                                   op, "broadcast");
      c.parts["anchor"] = out;
      c.attrs["first_inner"] = b.first_inner;
      ChannelMap ch{b.shape[rank > 1 ? 1 : 0], [rank](const std::vector<Var> &i) { return Expr(i[rank > 1 ? 1 : 0]); }};
      c.epilogue = build_epilogue(out, b.epilogue, ch, &c.inputs);
      c.outputs = {c.epilogue.empty() ? out : c.epilogue.back()};
      return c;
    };
    t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
      // Rows of the trailing axes along which each operand is read with a stride of 0 or 1,
      // split by the block and vectorized; the rest fused and parallel.
      for (size_t i = 0; i + 1 < c.epilogue.size(); ++i) s[c.epilogue[i]].compute_inline();
      if (!c.epilogue.empty()) s[c.part("anchor")].compute_inline();
      schedule_rows(s, c.outputs[0], static_cast<int>(c.attrs.at("first_inner")), cfg.split("tile")[1]);
    };
    r.add(std::move(t));
  }
  {
    Template t;
    t.name = "reduce.x86";
    // Version 2: sums start from -0.0 (sum_from_negative_zero); version 3: max and min start from
    // -inf and +inf.
    t.version = 3;
    t.summary = "sum/mean/max/min/prod over axes, then an epilogue";
    t.arguments = {tensor_spec("data", -1, "the input"),
                   {"axes", "int or [int, ...]", "every axis", "the axes reduced; negative counts from the end"},
                   {"keepdims", "bool", "false", "keep the reduced axes with extent 1"},
                   {"op", "\"sum\" | \"mean\" | \"max\" | \"min\" | \"prod\"", "\"sum\"", "the reduction"},
                   epilogue_spec()};
    t.example =
        Json::object({{"data", Json::object({{"shape", Json::array_of(std::vector<int64_t>{8, 128})}})}, {"axes", 1}});
    const std::string name = t.name;
    t.canonicalize = [name](const Json &a) {
      Reduce rd = parse_reduce(name, a);
      return Json::object({{"data", tensor_json(rd.data)},
                           {"axes", Json::array_of(rd.axes)},
                           {"keepdims", rd.keepdims},
                           {"op", rd.op},
                           {"epilogue", rd.epilogue}});
    };
    t.flop = [name](const Json &a) {
      Reduce rd = parse_reduce(name, a);
      double out = 1;
      for (int64_t d : rd.out_shape()) out *= static_cast<double>(d);
      return static_cast<double>(rd.data.numel()) + epilogue_flop(rd.epilogue, out);
    };
    t.define_space = [name](ConfigSpace &s, const Json &a, const Target &tg) {
      Reduce rd = parse_reduce(name, a);
      const int64_t n = rd.innermost_reduced() ? rd.reduced_size() : rd.out_shape().back();
      define_block(s, "tile", n, tg.lanes(rd.data.dtype));
    };
    t.default_config = [name](const ConfigSpace &s, const Json &a, const Target &tg) {
      Reduce rd = parse_reduce(name, a);
      const int64_t n = rd.innermost_reduced() ? rd.reduced_size() : rd.out_shape().back();
      return default_block(s, "tile", n, tg.lanes(rd.data.dtype));
    };
    t.compute = [name](const Json &a, const Config &) { return reduce_compute(parse_reduce(name, a)); };
    t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
      schedule_reduce(s, c, cfg);
    };
    r.add(std::move(t));
  }
}

}  // namespace kiln::ops
