// Kiln's own fused ops, made by the fusion pass (passes/fuse_epilogues.cpp); frontends never
// produce them:
//   FusedDense(x[M,K], w[N,K], bias[N]?, extra...) {epilogue}
//       x w^T (+ bias over the columns) with an epilogue chain: the dense_pack.x86 template;
//       with {bn, n} (set by passes/prepack_dense.cpp) w is the weight packed once as
//       [ceil(n/bn), K, bn] (the last block zero-padded), the template's prepacked layout;
//   FusedMatMul(a[B,M,K], b[B|1,K,N] or, with transpose_b = 1, b[B|1,N,K], extra...) {epilogue,
//       transpose_b}: the batch_matmul.x86 template;
//   FusedElementwise(inputs...) {subgraph}: a group of elementwise ops computed as one kernel.
// The epilogue is a JSON list of compiler/ops/epilogue.h descriptors; descriptors that read a tensor
// take the extra inputs in order.
//
// The subgraph of FusedElementwise is a JSON object {"nodes": [...]}, in topological order; the
// last node's output is the node's output. Each node is {"op", "in", "shape", "dtype"} (and "to"
// for Cast); an operand in "in" is {"i": k} (input k of the fused node), {"n": j} (the output of
// subgraph node j < this one) or {"c": value} (a scalar constant, of the dtype of the node's first
// tensor operand; bool for Where's condition). The ops and their operand counts: arity() below.
#include <algorithm>

#include "compiler/graph/op_def.h"
#include "compiler/graph/op_families.h"
#include "compiler/ir/op.h"

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

}  // namespace

int fused_elementwise_arity(const std::string &op) { return arity(op); }

void register_fused_ops() {
  fused_dense();
  fused_matmul();
  fused_elementwise();
}

}  // namespace kiln::graph::detail
