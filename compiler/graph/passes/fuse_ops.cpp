#include "compiler/graph/passes/fuse_ops.h"

#include <map>
#include <set>
#include <string>

#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/match_util.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"
#include "compiler/ops/epilogue.h"

namespace kiln::graph::passes {

using contracts::Json;

std::vector<size_t> immediate_post_dominators(const Graph &g) {
  const size_t count = g.nodes().size(), exit = count;
  const std::vector<std::vector<size_t>> readers = value_readers(g);
  std::vector<bool> is_output(g.values().size(), false);
  for (ValueId o : g.outputs()) is_output[static_cast<size_t>(o)] = true;
  std::vector<size_t> ipdom(count + 1, exit), depth(count + 1, 0);
  auto lca = [&](size_t a, size_t b) {
    while (a != b) {
      if (depth[a] < depth[b]) std::swap(a, b);
      a = ipdom[a];
    }
    return a;
  };
  // Nodes are in topological order: every successor of node k comes after it.
  for (size_t k = count; k-- > 0;) {
    std::optional<size_t> p;
    bool any_reader = false;
    for (ValueId o : g.nodes()[k].outputs) {
      if (o == kNoValue) continue;
      if (is_output[static_cast<size_t>(o)]) p = exit;
      for (size_t r : readers[static_cast<size_t>(o)]) {
        any_reader = true;
        p = p ? lca(*p, r) : r;
      }
    }
    if (!any_reader) p = exit;
    ipdom[k] = *p;
    depth[k] = depth[*p] + 1;
  }
  ipdom.resize(count);
  return ipdom;
}

namespace {

Json call(const std::string &f, std::vector<Json> args) {
  Json a = Json::array();
  for (auto &x : args) a.push_back(std::move(x));
  return Json::object({{"args", a}, {"op", f}});
}

// Node `n` as an expression of its operands' expressions, or nullopt when the language lacks it.
std::optional<Json> node_expr(const Graph &g, const Node &n, const std::vector<Json> &a) {
  static const std::map<std::string, std::string> unary = {
      {"Relu", "relu"},   {"Sigmoid", "sigmoid"}, {"Tanh", "tanh"}, {"Exp", "exp"}, {"Log", "log"},
      {"Sqrt", "sqrt"},   {"Erf", "erf"},         {"Neg", "neg"},   {"Abs", "abs"}, {"Reciprocal", "reciprocal"},
      {"Floor", "floor"}, {"Ceil", "ceil"},       {"Identity", ""}};
  static const std::map<std::string, std::string> binary = {
      {"Add", "add"}, {"Sub", "sub"}, {"Mul", "mul"}, {"Div", "div"}, {"Pow", "pow"}, {"Max", "max"}, {"Min", "min"}};
  auto u = unary.find(n.op);
  if (u != unary.end() && a.size() == 1) return u->second.empty() ? a[0] : call(u->second, {a[0]});
  auto b = binary.find(n.op);
  if (b != binary.end() && a.size() == 2) return call(b->second, {a[0], a[1]});
  if (n.op == "Clip") {
    Json v = a[0];
    if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) v = call("max", {v, a[1]});
    if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) v = call("min", {v, a[2]});
    return v;
  }
  if (n.op == "LeakyRelu" && a.size() == 1)
    return call("where", {call("greater_equal", {a[0], Json(0.0)}), a[0],
                          call("mul", {a[0], Json(n.attr_float("alpha", 0.01))})});
  if (n.op == "HardSigmoid" && a.size() == 1)
    return call("max", {call("min", {call("add", {call("mul", {a[0], Json(n.attr_float("alpha", 0.2))}),
                                                  Json(n.attr_float("beta", 0.5))}),
                                     Json(1.0)}),
                        Json(0.0)});
  if (n.op == "HardSwish" && a.size() == 1)
    return call("mul",
                {a[0], call("div", {call("min", {call("max", {call("add", {a[0], Json(3.0)}), Json(0.0)}), Json(6.0)}),
                                    Json(6.0)})});
  (void)g;
  return std::nullopt;
}

// The channel count of a constant that broadcasts over axis `axis` of `t` only ([C], [C,1,1],
// [1,C,1,1], ... aligned to the right), or 0.
int64_t per_channel(const Value &v, const TensorType &t, int axis) {
  if (!v.is_constant() || v.type.dtype != t.dtype || v.type.rank() > t.rank() || axis < 0) return 0;
  const int off = t.rank() - v.type.rank();
  for (int d = 0; d < v.type.rank(); ++d) {
    const int64_t e = v.type.shape[static_cast<size_t>(d)];
    if (d + off == axis ? e != t.shape[static_cast<size_t>(axis)] : e != 1) return 0;
  }
  return axis >= off ? t.shape[static_cast<size_t>(axis)] : 0;
}

Json substitute(const Json &e, const Json &x, int64_t offset) {
  if (e.is_string()) return x;
  if (e.is_object() && e.contains("input")) return Json::object({{"input", e["input"].as_int() + offset}});
  if (!e.is_object()) return e;
  Json args = Json::array();
  for (const auto &a : e["args"].as_array()) args.push_back(substitute(a, x, offset));
  return Json::object({{"args", args}, {"op", e["op"]}});
}

}  // namespace

std::optional<Json> compose_exprs(const Json &first, const Json &second) {
  Json kinds = Json::array();
  for (const auto &k : first["inputs"].as_array()) kinds.push_back(k);
  for (const auto &k : second["inputs"].as_array()) kinds.push_back(k);
  const Json e = substitute(second["expr"], first["expr"], static_cast<int64_t>(first["inputs"].size()));
  if (ops::expr_node_count(e) > ops::kMaxExprNodes) return std::nullopt;
  return Json::object({{"expr", e}, {"inputs", kinds}, {"op", "expr"}});
}

std::vector<std::vector<size_t>> value_readers(const Graph &g) {
  std::vector<std::vector<size_t>> readers(g.values().size());
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    for (ValueId i : g.nodes()[k].inputs) {
      if (i != kNoValue) readers[static_cast<size_t>(i)].push_back(k);
    }
  }
  return readers;
}

std::optional<std::vector<size_t>> post_dominated_region(const Graph &g,
                                                         const std::vector<std::vector<size_t>> &readers,
                                                         const std::vector<ValueId> &from, size_t ipdom,
                                                         const std::function<bool(size_t)> &accept, size_t max_nodes) {
  if (ipdom >= g.nodes().size() || !accept(ipdom)) return std::nullopt;
  std::set<size_t> region{ipdom};
  std::vector<ValueId> work;
  for (ValueId v : from) {
    if (v != kNoValue) work.push_back(v);
  }
  while (!work.empty()) {
    const ValueId v = work.back();
    work.pop_back();
    for (size_t r : readers[static_cast<size_t>(v)]) {
      if (r == ipdom || region.count(r)) continue;
      if (r > ipdom || !accept(r)) return std::nullopt;
      region.insert(r);
      if (region.size() > max_nodes) return std::nullopt;
      for (ValueId o : g.nodes()[r].outputs) {
        if (o != kNoValue) work.push_back(o);
      }
    }
  }
  return std::vector<size_t>(region.begin(), region.end());
}

FusionGroups post_dominator_groups(const Graph &g, const std::function<bool(size_t)> &fusable,
                                   const std::function<bool(size_t)> &can_start, size_t max_nodes,
                                   const std::function<bool(const std::set<size_t> &)> &fits) {
  const size_t count = g.nodes().size();
  const std::vector<size_t> ipdom = immediate_post_dominators(g);
  const std::vector<std::vector<size_t>> readers = value_readers(g);
  FusionGroups out;
  out.group_of.assign(count, -1);
  for (size_t k = count; k-- > 0;) {
    const size_t d = ipdom[k];
    if (fusable(k) && d < count && out.group_of[d] >= 0) {
      const int id = out.group_of[d];
      std::set<size_t> &members = out.groups[static_cast<size_t>(id)];
      const auto region = post_dominated_region(
          g, readers, g.nodes()[k].outputs, d, [&](size_t r) { return out.group_of[r] == id; }, max_nodes);
      if (region && members.size() < max_nodes) {
        std::set<size_t> bigger = members;
        bigger.insert(k);
        if (fits(bigger)) {
          members = std::move(bigger);
          out.group_of[k] = id;
          continue;
        }
      }
    }
    if (!can_start(k)) continue;
    out.group_of[k] = static_cast<int>(out.groups.size());
    out.groups.push_back({k});
  }
  return out;
}

std::optional<std::vector<int64_t>> broadcast_shape(const std::vector<int64_t> &in, const std::vector<int64_t> &out,
                                                    const std::vector<int64_t> &anchor) {
  if (in.size() > out.size()) return std::nullopt;
  // `in` aligned to the right of `out`, its missing leading axes 1.
  std::vector<int64_t> aligned(out.size() - in.size(), 1);
  aligned.insert(aligned.end(), in.begin(), in.end());
  for (size_t d = 0; d < out.size(); ++d)
    if (aligned[d] != 1 && aligned[d] != out[d]) return std::nullopt;
  std::vector<int64_t> dims;
  size_t d = 0;
  for (int64_t a : anchor) {
    // The run of `out`'s axes that make anchor axis a (axes of extent 1 join the run before them).
    int64_t p = 1, q = 1;
    while (d < out.size() && (p < a || out[d] == 1) && p * out[d] <= a) {
      p *= out[d];
      q *= aligned[d];
      ++d;
    }
    if (p != a || (q != 1 && q != a)) return std::nullopt;
    dims.push_back(q);
  }
  for (; d < out.size(); ++d)
    if (out[d] != 1) return std::nullopt;
  return dims;
}

std::optional<ExprRegion> elementwise_region(const Graph &g, ValueId x, size_t ipdom, int channel_axis,
                                             const std::vector<int64_t> &anchor_shape, const std::vector<bool> &taken,
                                             size_t max_nodes, size_t max_extras) {
  const size_t count = g.nodes().size();
  if (ipdom >= count || taken[ipdom]) return std::nullopt;
  const TensorType t = g.value(x).type;
  if (!t.dtype.is_float() || t.dtype.is_float16()) return std::nullopt;
  // The region: nodes reachable from x, stopping at the post-dominator.
  const std::optional<std::vector<size_t>> region = post_dominated_region(
      g, value_readers(g), {x}, ipdom, [&](size_t r) { return !taken[r]; }, max_nodes);
  if (!region) return std::nullopt;
  ExprRegion out;
  std::map<ValueId, Json> expr_of;  // region values (and x) -> expression
  std::map<ValueId, int> input_of;
  expr_of[x] = Json("x");
  Json kinds = Json::array();
  for (size_t k : *region) {
    const Node &n = g.nodes()[k];
    if (n.outputs.size() != 1 || g.value(n.outputs[0]).type != t) return std::nullopt;
    const OpPattern p = op_pattern(n.op);
    if (p != OpPattern::kElemWise && p != OpPattern::kBroadcast) return std::nullopt;
    std::vector<Json> args;
    for (ValueId v : n.inputs) {
      if (v == kNoValue) {
        args.emplace_back();
        continue;
      }
      auto e = expr_of.find(v);
      if (e != expr_of.end()) {
        args.push_back(e->second);
        continue;
      }
      if (std::optional<double> c = scalar_constant(g, v)) {
        args.emplace_back(*c);
        continue;
      }
      auto in = input_of.find(v);
      if (in == input_of.end()) {
        const Value &val = g.value(v);
        bool full = val.type == t;
        const bool channel = !full && per_channel(val, t, channel_axis) != 0;
        std::vector<int64_t> dims;
        if (!full && !channel) {
          // Any other tensor that broadcasts to the output: read at the anchor's index, its
          // broadcast axes at 0 (a whole tensor in another shape of the same elements is full).
          if (val.type.dtype != t.dtype) return std::nullopt;
          std::optional<std::vector<int64_t>> b = broadcast_shape(val.type.shape, t.shape, anchor_shape);
          if (!b) return std::nullopt;
          full = *b == anchor_shape;
          if (!full) dims = *b;
        }
        in = input_of.emplace(v, static_cast<int>(out.extras.size())).first;
        out.extras.push_back(v);
        out.per_channel.push_back(channel);
        out.broadcast.push_back(dims);
        kinds.push_back(full ? Json("full") : channel ? Json("channel") : ops::epilogue::broadcast_input(dims));
        if (out.extras.size() > max_extras) return std::nullopt;
      }
      args.push_back(Json::object({{"input", in->second}}));
    }
    std::optional<Json> e = node_expr(g, n, args);
    if (!e || ops::expr_node_count(*e) > ops::kMaxExprNodes) return std::nullopt;
    expr_of[n.outputs[0]] = *e;
    out.nodes.push_back(k);
  }
  out.descriptor = Json::object({{"expr", expr_of.at(g.nodes()[ipdom].outputs[0])}, {"inputs", kinds}, {"op", "expr"}});
  try {
    out.descriptor = ops::canonical_epilogue(Json::array({out.descriptor}), t.dtype, "fusion")[0];
  } catch (const UserError &) {
    return std::nullopt;
  }
  return out;
}

GroupSubgraph::GroupSubgraph(const Graph &g, Rewriter &rw, const std::string &op, const std::string &name)
    : g_(g), rw_(rw) {
  fused_.op = op;
  fused_.name = name;
}

std::optional<Json> GroupSubgraph::member(ValueId v) const {
  const int32_t p = g_.value(v).producer;
  auto it = p >= 0 ? node_index_.find(static_cast<size_t>(p)) : node_index_.end();
  if (it == node_index_.end()) return std::nullopt;
  return Json::object({{"n", it->second}});
}

Json GroupSubgraph::input(ValueId v) {
  auto [it, added] = input_index_.emplace(v, static_cast<int>(fused_.inputs.size()));
  if (added) fused_.inputs.push_back(rw_.map(v));
  return Json::object({{"i", it->second}});
}

void GroupSubgraph::add(size_t m, Json desc) {
  nodes_.push_back(std::move(desc));
  node_index_[m] = static_cast<int>(node_index_.size());
}

void GroupSubgraph::finish(size_t root) {
  fused_.attrs["subgraph"] = Attribute::of_string(Json::object({{"nodes", nodes_}}).dump());
  const ValueId out = g_.nodes()[root].outputs[0];
  rw_.set(out, rw_.add(fused_, {g_.value(out).name})[0]);
}

}  // namespace kiln::graph::passes
