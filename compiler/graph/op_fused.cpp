// Kiln's own fused ops, made by the fusion pass (passes/fuse_epilogues.cpp); frontends never
// produce them:
//   FusedDense(x[M,K], w[N,K], bias[N]?, extra...) {epilogue}
//       x w^T (+ bias over the columns) with an epilogue chain: the dense_pack.x86 template;
//       with {bn, n} (set by passes/prepack_dense.cpp) w is the weight packed once as
//       [ceil(n/bn), K, bn] (the last block zero-padded), the template's prepacked layout;
//   FusedMatMul(a[B,M,K], b[B|1,K,N] or, with transpose_b = 1, b[B|1,N,K], extra...) {epilogue,
//       transpose_b}: the batch_matmul.x86 template;
//   FusedElementwise(inputs...) {subgraph}: a group of elementwise ops computed as one kernel;
//   FusedInjective(inputs...) {subgraph}: a group of elementwise, broadcast and injective ops
//       (Transpose, Slice, Pad, Gather, ...) computed as one kernel, each member's compute built by
//       its own op's kernel function; a view member (Reshape, ...) reads its input in row-major
//       order at its shape; a LayoutTransform to or from NCHW, the last member only, is
//       layout_transform.x86's compute of the rest, scheduled as that template's default.
// The epilogue is a JSON list of compiler/ops/epilogue.h descriptors; descriptors that read a tensor
// take the extra inputs in order.
//
// The subgraph of FusedInjective is a JSON object {"nodes": [...]}, in topological order; the last
// node's output is the node's output. Each node is {"op", "attrs", "in"}: "attrs" an object of
// attribute_json() values, "in" one operand per input of the member: {"i": k} (input k of the fused
// node), {"n": j} (the output of member j < this one), {"k": {"dtype", "shape", "data"}} (an integer
// constant the member reads at compile time: Slice's starts, Pad's pads) or null (absent).
//
// The subgraph of FusedElementwise is a JSON object {"nodes": [...]}, in topological order; the
// last node's output is the node's output. Each node is {"op", "in", "shape", "dtype"} (and "to"
// for Cast); an operand in "in" is {"i": k} (input k of the fused node), {"n": j} (the output of
// subgraph node j < this one) or {"c": value} (a scalar constant, of the dtype of the node's first
// tensor operand; bool for Where's condition). The ops and their operand counts: arity() below.
#include <algorithm>

#include "compiler/ir/deploy_dtype.h"

#include "compiler/graph/op_def.h"
#include "compiler/graph/op_families.h"
#include "compiler/ir/op.h"
#include "compiler/ops/generic_schedule.h"

namespace kiln::graph::detail {

using ::kiln::detail::concat;

namespace {

using contracts::Json;
using ir::DataType;
using ir::Expr;

// The weight as the template's workload names it: [N, K] (a packed weight's logical shape).
TensorType dense_weight(const OpContext &ctx) {
  const auto &x = ctx.in(0), &w = ctx.in(1);
  const int64_t bn = ctx.node().attr_int("bn", 0);
  if (bn == 0) return w;
  const int64_t n = ctx.node().attr_int("n", 0);
  if (bn < 0 || n < 1 || bn > n) ctx.fail(concat("a packed weight needs 1 <= bn <= n, got bn ", bn, ", n ", n));
  if (w.rank() != 3 || w.shape[0] != (n + bn - 1) / bn || w.shape[2] != bn || x.rank() != 2 || w.shape[1] != x.shape[1])
    ctx.fail(
        concat("the packed weight ", w.str(), " is not [ceil(n/bn), K, bn] for n ", n, ", bn ", bn, ", x ", x.str()));
  return TensorType{w.dtype, {n, w.shape[1]}};
}

TensorType dense_type(const OpContext &ctx) {
  const auto &x = ctx.in(0);
  const TensorType w = dense_weight(ctx);
  if (x.rank() != 2 || w.rank() != 2 || x.dtype != ir::Float(32) || w.dtype != ir::Float(32))
    ctx.fail(concat("needs float32 x[M,K] and w[N,K], got ", x.str(), " and ", w.str()));
  if (x.shape[1] != w.shape[1]) ctx.fail(concat("inner dimensions differ: ", x.str(), " x ", w.str(), "^T"));
  if (ctx.has_input(2) && (ctx.in(2).rank() != 1 || ctx.in(2).shape[0] != w.shape[0] || ctx.in(2).dtype != x.dtype))
    ctx.fail(concat("the bias ", ctx.in(2).str(), " does not match ", w.shape[0], " output columns"));
  return TensorType{x.dtype, {x.shape[0], w.shape[0]}};
}

void fused_dense() {
  OpDef d;
  d.name = "FusedDense";
  d.internal = true;
  d.min_inputs = 2;
  d.max_inputs = 64;
  d.infer = [](const OpContext &ctx) {
    TensorType t = dense_type(ctx);
    check_epilogue_inputs(ctx, 3, t);
    return std::vector<TensorType>{t};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    k.template_name = "dense_pack.x86";
    Json epi = Json::array();
    if (ctx.has_input(2)) epi.push_back(Json::object({{"op", "bias_add"}}));
    const Json list = fused_epilogue(ctx);
    for (size_t j = 0; j < list.size(); ++j) epi.push_back(list[j]);
    k.template_args = Json::object({{"data", tensor_json(ctx.in(0))},
                                    {"weight", tensor_json(dense_weight(ctx))},
                                    {"out_dtype", "float32"},
                                    {"epilogue", epi}});
    if (const int64_t bn = ctx.node().attr_int("bn", 0); bn > 0) {
      k.template_args.set("prepacked", true);
      k.template_args.set("bn", bn);
    }
    k.input_map = {0, 1};
    for (int i = 2; i < ctx.num_inputs(); ++i) {
      if (ctx.has_input(i)) k.input_map.push_back(i);
    }
    return k;
  };
  d.flops = [](const OpContext &ctx) {
    return 2.0 * static_cast<double>(dense_type(ctx).numel()) * static_cast<double>(ctx.in(0).shape[1]);
  };
  register_op(std::move(d));
}

TensorType batch_matmul_type(const OpContext &ctx) {
  const auto &a = ctx.in(0), &b = ctx.in(1);
  if (a.rank() != 3 || b.rank() != 3 || a.dtype != ir::Float(32) || b.dtype != ir::Float(32))
    ctx.fail(concat("needs float32 a[B,M,K] and b of rank 3, got ", a.str(), " and ", b.str()));
  const bool tb = ctx.node().attr_int("transpose_b", 0) != 0;
  if (b.shape[0] != a.shape[0] && b.shape[0] != 1)
    ctx.fail(concat("the batch of ", b.str(), " is not that of ", a.str(), " or 1"));
  const int64_t kb = tb ? b.shape[2] : b.shape[1], n = tb ? b.shape[1] : b.shape[2];
  if (kb != a.shape[2]) ctx.fail(concat("inner dimensions differ: ", a.str(), " x ", b.str()));
  return TensorType{a.dtype, {a.shape[0], a.shape[1], n}};
}

void fused_matmul() {
  OpDef d;
  d.name = "FusedMatMul";
  d.internal = true;
  d.min_inputs = 2;
  d.max_inputs = 64;
  d.infer = [](const OpContext &ctx) {
    TensorType t = batch_matmul_type(ctx);
    check_epilogue_inputs(ctx, 2, t);
    return std::vector<TensorType>{t};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    k.template_name = "batch_matmul.x86";
    k.template_args = Json::object({{"a", tensor_json(ctx.in(0))},
                                    {"b", tensor_json(ctx.in(1))},
                                    {"transpose_b", ctx.node().attr_int("transpose_b", 0) != 0},
                                    {"out_dtype", "float32"},
                                    {"epilogue", fused_epilogue(ctx)}});
    for (int i = 0; i < ctx.num_inputs(); ++i) k.input_map.push_back(i);
    return k;
  };
  d.flops = [](const OpContext &ctx) {
    return 2.0 * static_cast<double>(batch_matmul_type(ctx).numel()) * static_cast<double>(ctx.in(0).shape[2]);
  };
  register_op(std::move(d));
}

// --- FusedElementwise ---

Json subgraph_nodes(const OpContext &ctx) {
  Json sub;
  try {
    sub = Json::parse(ctx.node().attr_string("subgraph", ""));
  } catch (const std::exception &e) {
    ctx.fail(concat("subgraph is not JSON: ", e.what()));
  }
  const Json *nodes = sub.is_object() ? sub.find("nodes") : nullptr;
  if (!nodes || !nodes->is_array() || nodes->size() == 0)
    ctx.fail("subgraph must be an object with a non-empty list \"nodes\"");
  return *nodes;
}

int arity(const std::string &op) {
  static const std::map<std::string, int> a = {{"Add", 2},     {"Sub", 2},  {"Mul", 2},        {"Div", 2},  {"Pow", 2},
                                               {"Max", 2},     {"Min", 2},  {"Where", 3},      {"Sqrt", 1}, {"Erf", 1},
                                               {"Exp", 1},     {"Log", 1},  {"Neg", 1},        {"Abs", 1},  {"Relu", 1},
                                               {"Sigmoid", 1}, {"Tanh", 1}, {"Reciprocal", 1}, {"Cast", 1}};
  auto it = a.find(op);
  return it == a.end() ? -1 : it->second;
}

// The operand dtypes each op accepts is checked by the pass (it fuses nodes the op table accepted);
// here the subgraph is checked for what building the kernel relies on.
struct SubNode {
  std::string op;
  Json in;
  std::vector<int64_t> shape;
  DataType dtype;
};

std::vector<SubNode> parse_subgraph(const OpContext &ctx) {
  const Json nodes = subgraph_nodes(ctx);
  std::vector<SubNode> out;
  for (size_t j = 0; j < nodes.size(); ++j) {
    const Json &n = nodes[j];
    SubNode s;
    s.op = n.get_or("op", Json("")).as_string();
    const int ar = arity(s.op);
    if (ar < 0) ctx.fail(concat("subgraph node ", j, ": op '", s.op, "' does not fuse"));
    s.in = n.get_or("in", Json::array());
    if (!s.in.is_array() || static_cast<int>(s.in.size()) != ar)
      ctx.fail(concat("subgraph node ", j, " (", s.op, ") needs ", ar, " operands"));
    for (size_t o = 0; o < s.in.size(); ++o) {
      const Json &r = s.in[o];
      const Json *i = r.is_object() ? r.find("i") : nullptr;
      const Json *p = r.is_object() ? r.find("n") : nullptr;
      const Json *c = r.is_object() ? r.find("c") : nullptr;
      if (i && (!i->is_int() || i->as_int() < 0 || i->as_int() >= ctx.num_inputs()))
        ctx.fail(concat("subgraph node ", j, ": input reference out of range"));
      if (p && (!p->is_int() || p->as_int() < 0 || p->as_int() >= static_cast<int64_t>(j)))
        ctx.fail(concat("subgraph node ", j, ": node reference is not to an earlier node"));
      if (c && !c->is_number()) ctx.fail(concat("subgraph node ", j, ": constant is not a number"));
      if (!i && !p && !c) ctx.fail(concat("subgraph node ", j, ": operand is not {\"i\"}, {\"n\"} or {\"c\"}"));
    }
    s.shape = n.get_or("shape", Json::array()).as_int_vector();
    // Every tensor operand broadcasts to the node's shape (the kernel reads it at broadcast indices).
    for (size_t o = 0; o < s.in.size(); ++o) {
      const Json &r = s.in[o];
      std::vector<int64_t> from;
      if (const Json *i = r.find("i")) {
        from = ctx.in(static_cast<int>(i->as_int())).shape;
      } else if (const Json *p = r.find("n")) {
        from = out[static_cast<size_t>(p->as_int())].shape;
      }
      bool fits = from.size() <= s.shape.size();
      for (size_t d = 0; fits && d < from.size(); ++d) {
        const int64_t want = s.shape[s.shape.size() - from.size() + d];
        fits = from[d] == want || from[d] == 1;
      }
      if (!fits) ctx.fail(concat("subgraph node ", j, ": operand ", o, " does not broadcast to its shape"));
    }
    auto dt = dtype_from_name(n.get_or("dtype", Json("")).as_string());
    if (!dt) ctx.fail(concat("subgraph node ", j, ": unknown dtype"));
    s.dtype = *dt;
    if (s.op == "Cast" && n.get_or("dtype", Json("")).as_string() != n.get_or("to", Json("")).as_string())
      ctx.fail(concat("subgraph node ", j, ": Cast's dtype must be its \"to\""));
    out.push_back(std::move(s));
  }
  return out;
}

// The expression of one subgraph op on its operands; `dt` is the output dtype.
Expr apply(const std::string &op, std::vector<Expr> a, DataType dt) {
  auto fc = [&](double v) { return ir::make_const(a[0].type(), v); };
  if (op == "Add") return a[0] + a[1];
  if (op == "Sub") return a[0] - a[1];
  if (op == "Mul") return a[0] * a[1];
  if (op == "Div") return dt.is_float() ? a[0] / a[1] : ir::truncdiv(a[0], a[1]);
  if (op == "Pow") return ir::pow(a[0], a[1].type() == dt ? a[1] : ir::cast(dt, a[1]));
  if (op == "Max") return ir::max(a[0], a[1]);
  if (op == "Min") return ir::min(a[0], a[1]);
  if (op == "Where") return ir::select(a[0], a[1], a[2]);
  if (op == "Sqrt") return ir::sqrt(a[0]);
  if (op == "Erf") return ir::erf(a[0]);
  if (op == "Exp") return ir::exp(a[0]);
  if (op == "Log") return ir::log(a[0]);
  if (op == "Neg") return -a[0];
  if (op == "Abs") return ir::abs(a[0]);
  if (op == "Relu") return ir::max(a[0], ir::make_const(a[0].type(), int64_t{0}));
  if (op == "Sigmoid") return ir::sigmoid(a[0]);
  if (op == "Tanh") return ir::tanh(a[0]);
  if (op == "Reciprocal") return fc(1.0) / a[0];
  // Cast (between numeric dtypes; the pass fuses no cast to bool or from float16 to float64).
  return ir::cast(dt, a[0]);
}

void fused_elementwise() {
  OpDef d;
  d.name = "FusedElementwise";
  d.internal = true;
  d.min_inputs = 1;
  d.max_inputs = 64;
  d.infer = [](const OpContext &ctx) {
    std::vector<SubNode> nodes = parse_subgraph(ctx);
    return std::vector<TensorType>{TensorType{nodes.back().dtype, nodes.back().shape}};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    std::vector<SubNode> nodes = parse_subgraph(ctx);
    std::vector<te::Tensor> ins;
    for (int i = 0; i < ctx.num_inputs(); ++i) ins.push_back(add_input(k, ctx, i, concat("x", i)));
    std::vector<te::Tensor> vals;
    for (size_t j = 0; j < nodes.size(); ++j) {
      const SubNode &s = nodes[j];
      // Operands read at the output index broadcast to their shapes; a constant takes the dtype of
      // the tensor operands (the first one).
      te::Tensor t = compute(
          s.shape,
          [&](const std::vector<Expr> &idx) {
            std::vector<Expr> ops(s.in.size());
            std::optional<DataType> like;
            for (size_t o = 0; o < s.in.size(); ++o) {
              const Json &r = s.in[o];
              if (const Json *i = r.find("i")) {
                const size_t x = static_cast<size_t>(i->as_int());
                const auto &sh = ctx.in(static_cast<int>(x)).shape;
                ops[o] = at(ins[x], static_cast<int>(sh.size()), broadcast_index(sh, idx));
              } else if (const Json *p = r.find("n")) {
                const size_t x = static_cast<size_t>(p->as_int());
                const auto &sh = nodes[x].shape;
                ops[o] = at(vals[x], static_cast<int>(sh.size()), broadcast_index(sh, idx));
              }
              if (ops[o].defined() && !like && !(s.op == "Where" && o == 0)) like = ops[o].type();
            }
            for (size_t o = 0; o < s.in.size(); ++o) {
              if (ops[o].defined()) continue;
              const DataType ct = s.op == "Where" && o == 0 ? ir::Bool() : like.value_or(s.dtype);
              ops[o] = ir::make_const(ct, s.in[o]["c"].as_double());
            }
            return apply(s.op, ops, s.dtype);
          },
          concat("fused_", j, "_", s.op));
      vals.push_back(t);
    }
    k.outputs.push_back(vals.back());
    return k;
  };
  register_op(std::move(d));
}

// --- FusedInjective ---

Attribute attribute_of(const OpContext &ctx, const std::string &key, const Json &j) {
  const Json *v = nullptr;
  if (j.is_object() && j.size() == 1) {
    if ((v = j.find("int")) && v->is_int()) return Attribute::of_int(v->as_int());
    if ((v = j.find("float")) && v->is_number()) return Attribute::of_float(v->as_double());
    if ((v = j.find("string")) && v->is_string()) return Attribute::of_string(v->as_string());
    if ((v = j.find("ints")) && v->is_array()) return Attribute::of_ints(v->as_int_vector());
    if ((v = j.find("floats")) && v->is_array()) {
      std::vector<double> f;
      for (const Json &x : v->as_array()) f.push_back(x.as_double());
      return Attribute::of_floats(f);
    }
    if ((v = j.find("strings")) && v->is_array()) {
      std::vector<std::string> f;
      for (const Json &x : v->as_array()) f.push_back(x.as_string());
      return Attribute::of_strings(f);
    }
  }
  ctx.fail(concat("subgraph attribute '", key, "' is not one of {int, float, string, ints, floats, strings}"));
}

// An integer constant of the subgraph ({"dtype", "shape", "data"}).
deploy::Tensor constant_of(const OpContext &ctx, const Json &j) {
  const std::string dt = j.get_or("dtype", Json("")).as_string();
  const std::vector<int64_t> shape = j.get_or("shape", Json::array()).as_int_vector();
  const std::vector<int64_t> data = j.get_or("data", Json::array()).as_int_vector();
  int64_t numel = 1;
  for (int64_t e : shape) numel *= e;
  if ((dt != "int64" && dt != "int32") || numel != static_cast<int64_t>(data.size()))
    ctx.fail("a subgraph constant must be int64 or int32 data of its shape");
  deploy::Tensor t =
      deploy::Tensor::empty(shape, dt == "int64" ? deploy::DType::of<int64_t>() : deploy::DType::of<int32_t>());
  for (size_t e = 0; e < data.size(); ++e) {
    if (dt == "int64") {
      t.data_as<int64_t>()[e] = data[e];
    } else {
      t.data_as<int32_t>()[e] = static_cast<int32_t>(data[e]);
    }
  }
  return t;
}

// The subgraph as a graph: the fused node's inputs as its values 0 .. n-1 (constants where they
// are), then the members, each checked by its op's own inference.
Graph injective_subgraph(const OpContext &ctx) {
  const Json nodes = subgraph_nodes(ctx);
  Graph sub;
  std::vector<ValueId> ins;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Value &v = ctx.input(i);
    ins.push_back(v.is_constant() ? sub.add_constant(concat("x", i), v.constant)
                                  : sub.add_input(concat("x", i), v.type));
  }
  std::vector<ValueId> outs;
  for (size_t j = 0; j < nodes.size(); ++j) {
    const Json &n = nodes[j];
    Node m;
    m.op = n.get_or("op", Json("")).as_string();
    m.name = concat(ctx.node().name, "/", j, "_", m.op);
    m.outputs = {kNoValue};
    const OpDef *def = find_op(m.op);
    if (!def || def->evaluate || (!def->view && !def->kernel))
      ctx.fail(concat("subgraph node ", j, ": op '", m.op, "' builds no kernel"));
    const Json attrs = n.get_or("attrs", Json::object());
    if (!attrs.is_object()) ctx.fail(concat("subgraph node ", j, ": attrs is not an object"));
    for (const auto &[key, a] : attrs.as_object()) m.attrs[key] = attribute_of(ctx, key, a);
    const Json in = n.get_or("in", Json::array());
    if (!in.is_array()) ctx.fail(concat("subgraph node ", j, ": in is not a list"));
    for (size_t o = 0; o < in.size(); ++o) {
      const Json &r = in[o];
      const Json *i = r.is_object() ? r.find("i") : nullptr;
      const Json *p = r.is_object() ? r.find("n") : nullptr;
      const Json *c = r.is_object() ? r.find("k") : nullptr;
      if (r.is_null()) {
        m.inputs.push_back(kNoValue);
      } else if (i && i->is_int() && i->as_int() >= 0 && i->as_int() < ctx.num_inputs()) {
        m.inputs.push_back(ins[static_cast<size_t>(i->as_int())]);
      } else if (p && p->is_int() && p->as_int() >= 0 && p->as_int() < static_cast<int64_t>(j)) {
        m.inputs.push_back(outs[static_cast<size_t>(p->as_int())]);
      } else if (c && c->is_object()) {
        m.inputs.push_back(sub.add_constant(concat("k", j, "_", o), constant_of(ctx, *c)));
      } else {
        ctx.fail(concat("subgraph node ", j, ": operand ", o, " is not {\"i\"}, {\"n\"}, {\"k\"} or null"));
      }
    }
    const std::vector<TensorType> types = infer_types(sub, m);
    if (types.size() != 1) ctx.fail(concat("subgraph node ", j, " (", m.op, ") must have one output"));
    outs.push_back(sub.add_node(m, {m.name}, types)[0]);
  }
  return sub;
}

void fused_injective() {
  OpDef d;
  d.name = "FusedInjective";
  d.internal = true;
  d.min_inputs = 1;
  d.max_inputs = 64;
  d.infer = [](const OpContext &ctx) {
    const Graph sub = injective_subgraph(ctx);
    return std::vector<TensorType>{sub.value(sub.nodes().back().outputs[0]).type};
  };
  d.kernel = [](const OpContext &ctx) {
    Kernel k;
    const Graph sub = injective_subgraph(ctx);
    std::vector<te::Tensor> outs(sub.nodes().size()), placeholders(static_cast<size_t>(ctx.num_inputs()));
    for (size_t j = 0; j < sub.nodes().size(); ++j) {
      const Node &m = sub.nodes()[j];
      OpContext mctx(sub, m);
      const OpContext::InputBinding bind = [&](int i) {
        const ValueId v = m.inputs[static_cast<size_t>(i)];
        const Value &val = sub.value(v);
        if (val.producer >= 0) return outs[static_cast<size_t>(val.producer)];
        // Values 0 .. n-1 of the subgraph are the fused node's inputs; any other value a member reads
        // as a tensor is a compile-time constant of the subgraph, which only const_inputs may be.
        if (v < 0 || v >= ctx.num_inputs())
          ctx.fail(concat("subgraph node ", j, " (", m.op, "): operand ", i,
                          " is a {\"k\"} constant but the op reads it as a tensor"));
        const size_t x = static_cast<size_t>(v);
        if (!placeholders[x].defined()) placeholders[x] = add_input(k, ctx, static_cast<int>(x), val.name);
        return placeholders[x];
      };
      if (find_op(m.op)->view) {
        // A view inside the group: its input's elements in row-major order at its own shape.
        const te::Tensor in = bind(0);
        const std::vector<int64_t> &is = sub.value(m.inputs[0]).type.shape, &os = sub.value(m.outputs[0]).type.shape;
        outs[j] = compute(
            os,
            [&](const std::vector<Expr> &idx) {
              Expr flat = i32(0);
              for (size_t a = 0; a < os.size(); ++a) flat = flat * i32(os[a]) + idx[a];
              std::vector<Expr> src(is.size());
              for (size_t a = is.size(); a-- > 0;) {
                src[a] = ir::floormod(flat, i32(is[a]));
                flat = ir::floordiv(flat, i32(is[a]));
              }
              return at(in, static_cast<int>(is.size()), src);
            },
            concat("view_", j));
        continue;
      }
      if (m.op == kLayoutTransformOp) {
        // The group's root (fuse_injective puts it nowhere else): layout_transform.x86's compute of
        // the group's data, which the executor schedules as that template does.
        if (j + 1 != sub.nodes().size())
          ctx.fail(concat("subgraph node ", j, " (", m.op, ") must be the subgraph's last node"));
        try {
          outs[j] = ops::layout_transform(bind(0), m.attr_int("src_block", 0), m.attr_int("dst_block", 0));
        } catch (const UserError &e) {
          ctx.fail(concat("subgraph node ", j, " (", m.op, "): ", e.what()));
        }
        k.layout_transform_output = true;
        continue;
      }
      mctx.bind_inputs(&bind);
      const Kernel mk = find_op(m.op)->kernel(mctx);
      if (!mk.template_name.empty() || mk.outputs.size() != 1)
        ctx.fail(concat("subgraph node ", j, " (", m.op, ") is not one tensor-expression compute"));
      outs[j] = mk.outputs[0];
    }
    k.outputs.push_back(outs.back());
    return k;
  };
  register_op(std::move(d));
}

}  // namespace

int fused_elementwise_arity(const std::string &op) { return arity(op); }

std::optional<Json> injective_attribute_json(const Attribute &a) {
  using K = Attribute::Kind;
  switch (a.kind) {
    case K::Int:
      return Json::object({{"int", a.i}});
    case K::Float:
      return Json::object({{"float", a.f}});
    case K::String:
      return Json::object({{"string", a.s}});
    case K::Ints:
      return Json::object({{"ints", Json::array_of(a.ints)}});
    case K::Floats:
      return Json::object({{"floats", Json::array_of(a.floats)}});
    case K::Strings:
      return Json::object({{"strings", Json::array_of(a.strings)}});
    case K::Tensor:
      break;
  }
  return std::nullopt;
}

void register_fused_ops() {
  fused_dense();
  fused_matmul();
  fused_elementwise();
  fused_injective();
}

}  // namespace kiln::graph::detail
